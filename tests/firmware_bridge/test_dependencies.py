"""firmware_bridge needs only the stdlib and pyserial; the C codec only memcpy/memset.

Project-internal edges are checked for every package by tests/test_layering.py.
"""

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "firmware_bridge"
ALLOWED_THIRD_PARTY = {"serial"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_project_or_heavy_imports():
    offenders = {}
    for path in sorted(PKG.rglob("*.py")):
        bad = {
            name
            for name in _imports(path)
            if name != "firmware_bridge"
            and name not in sys.stdlib_module_names
            and name not in ALLOWED_THIRD_PARTY
        }
        if bad:
            offenders[str(path.relative_to(PKG.parent))] = sorted(bad)
    assert not offenders, (
        f"firmware_bridge must import only stdlib + pyserial: {offenders}"
    )


def test_c_codec_uses_no_libc_beyond_memcpy_memset():
    src = (PKG / "c" / "edge_frame.c").read_text() + (
        PKG / "c" / "edge_frame.h"
    ).read_text()
    includes = {
        line.split()[1] for line in src.splitlines() if line.startswith("#include")
    }
    assert includes <= {"<stddef.h>", "<stdint.h>", "<string.h>", '"edge_frame.h"'}, (
        includes
    )
    for forbidden in ("malloc", "free(", "printf", "sprintf", "strlen", "abort("):
        assert forbidden not in src, forbidden
