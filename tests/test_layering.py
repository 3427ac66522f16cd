"""DESIGN.md layering: parse every module's imports and fail on a forbidden edge."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("edge", "adapters", "world_models", "drivers", "sim", "firmware_bridge")
# importer package -> project packages it must not import
FORBIDDEN = {
    "sim": {"edge", "adapters", "world_models", "drivers", "firmware_bridge"},
    "firmware_bridge": {"edge", "adapters", "world_models", "drivers", "sim"},
    "edge": {"adapters", "world_models", "drivers"},  # edge core; the CLI/app layer is exempt
    "adapters": {"drivers", "world_models"},
    "world_models": {"drivers", "adapters"},
    "drivers": {"adapters", "world_models"},
}
# The one exception to FORBIDDEN: sim may import the numpy-only leaf module edge.kinematics (the shared
# FK/IK), and nothing else from edge; test_the_kinematics_leaf_imports_only_stdlib_and_numpy keeps it a leaf.
ALLOWED_MODULES = {"sim": {"edge.kinematics"}}
COMPOSITION = ("edge/cli.py", "edge/commands/", "edge/runtime/", "edge/hil/",  # where concrete classes are wired
               "edge/profiler/profile.py")  # runs sessions for `edge profile`
# The CLI's commands parse flags and call the app layer: hardware wiring (drivers, the firmware bridge)
# happens in edge/runtime/ and edge/hil/, never in a command module.
COMMANDS_FORBIDDEN = {"drivers", "firmware_bridge"}


def imported_packages(path: Path, allowed: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """Project packages a file imports, not counting imports of exactly the modules in ``allowed``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names if a.name not in allowed}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module not in allowed:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


def violations(root: Path = ROOT) -> list[str]:
    bad = []
    for pkg, forbidden in FORBIDDEN.items():
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(COMPOSITION):
                continue
            for target in imported_packages(path, ALLOWED_MODULES.get(pkg, set())) & forbidden:
                bad.append(f"{rel} imports {target}")
    return bad


def test_no_forbidden_imports():
    assert violations() == []


def test_checker_catches_a_forbidden_edge(tmp_path):
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "bad.py").write_text("from edge.config import cfg\n")
    assert violations(tmp_path) == ["sim/bad.py imports edge"]


def test_sim_may_import_edge_kinematics_and_nothing_else_from_edge(tmp_path):
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "ok.py").write_text("import edge.kinematics\nfrom edge.kinematics import SerialChain\n")
    assert violations(tmp_path) == []
    (tmp_path / "sim" / "bad.py").write_text("from edge import kinematics\nimport edge.kinematics.x\n")
    (tmp_path / "sim" / "bad2.py").write_text("from edge.kinematics import SerialChain\nfrom edge.robot_spec import x\n")
    assert violations(tmp_path) == ["sim/bad.py imports edge", "sim/bad2.py imports edge"]
    (tmp_path / "firmware_bridge").mkdir()  # the exception is for sim only
    (tmp_path / "firmware_bridge" / "bad.py").write_text("from edge.kinematics import SerialChain\n")
    assert violations(tmp_path)[-1] == "firmware_bridge/bad.py imports edge"


def test_the_kinematics_leaf_imports_only_stdlib_and_numpy():
    """sim may import edge.kinematics (ALLOWED_MODULES), so it and the edge/__init__.py that importing it
    runs must stay leaves: standard library and numpy only, nothing from the project."""
    import sys

    for rel in ALLOWED_MODULES["sim"]:
        path = ROOT / (rel.replace(".", "/") + ".py")
        assert path.is_file(), path
        for file in (path, ROOT / "edge" / "__init__.py"):
            tree = ast.parse(file.read_text(), filename=str(file))
            assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level], f"{file}: relative import"
            tops = {m.split(".")[0] for m in imported_modules(file)}
            extra = {t for t in tops if t not in sys.stdlib_module_names and t not in ("__future__", "numpy")}
            assert not extra, f"{file.relative_to(ROOT)} imports {sorted(extra)}; it must import only stdlib + numpy"


CORE_FORBIDDEN_MODULES = ("edge.commands", "edge.runtime", "edge.cli")  # the app layer sits above the core


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, including ``importlib.import_module("x.y")`` with a literal."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def core_violations(root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / "edge").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(COMPOSITION):
            continue
        for mod in imported_modules(path):
            top = mod.split(".")[0]
            if mod.startswith(CORE_FORBIDDEN_MODULES) or top in FORBIDDEN["edge"] | {"sim"} and not rel.startswith(TRAINING):
                bad.append(f"{rel} imports {mod}")
    return bad


# training code inside edge/ that may use the simulator (DESIGN: training may import sim/)
TRAINING = ("edge/training/",)  # the VLA training package: data, rollouts, synthetic demos, trainer


def test_the_on_robot_core_imports_no_app_layer_and_no_simulator():
    assert core_violations() == []


def command_violations(root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / "edge" / "commands").rglob("*.py")):
        for mod in imported_modules(path):
            if mod.split(".")[0] in COMMANDS_FORBIDDEN:
                bad.append(f"{path.relative_to(root).as_posix()} imports {mod}")
    return bad


def test_commands_wire_no_hardware_themselves():
    assert command_violations() == []


def test_command_checker_catches_a_driver_import_also_by_import_module(tmp_path):
    (tmp_path / "edge" / "commands").mkdir(parents=True)
    (tmp_path / "edge" / "commands" / "ok.py").write_text("from edge.runtime.session import run_session\n")
    (tmp_path / "edge" / "commands" / "bad.py").write_text(
        "import importlib\nfrom drivers.sim_arm import SimArmDriver\nimportlib.import_module('firmware_bridge.link')\n")
    assert sorted(command_violations(tmp_path)) == ["edge/commands/bad.py imports drivers.sim_arm",
                                                    "edge/commands/bad.py imports firmware_bridge.link"]


def test_checker_catches_import_module_with_a_literal(tmp_path):
    (tmp_path / "edge").mkdir()
    (tmp_path / "edge" / "bad.py").write_text("import importlib\nimportlib.import_module('sim.env')\n")
    assert core_violations(tmp_path) == ["edge/bad.py imports sim.env"]
