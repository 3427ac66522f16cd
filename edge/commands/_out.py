"""Checks of an output directory before a command spends time on the work it will write there."""

from __future__ import annotations

from pathlib import Path

from edge.errors import EdgeError
from edge.writable import check_writable_dir, check_writable_file  # noqa: F401 - re-exported


def make_default_run_dir(prefix: str = "") -> tuple[Path, Path]:
    """``runs/<prefix><YYYYmmdd-HHMMSS>``, or ``-2``, ``-3``, ... after it: made here, not only looked
    for, so two commands started in the same second never share one. Returns (the directory, the topmost
    folder made: ``runs`` itself if it did not exist)."""
    import time

    base = Path(f"runs/{prefix}{time.strftime('%Y%m%d-%H%M%S')}")
    out, i = base, 1
    while True:
        created = next((q for q in reversed((out, *out.parents)) if not q.exists()), out)
        try:
            out.mkdir(parents=True)
            return out, created
        except FileExistsError:
            i += 1
            out = base.with_name(f"{base.name}-{i}")
        except OSError as err:
            raise EdgeError(f"cannot create the run directory {out} ({err.strerror}); give one with --out") from None


def foreign_entries(out: str | Path) -> list[str]:
    """The names in ``out`` that are someone else's: all but hidden files, the commands' own temporary
    files (``*.tmp``, ``*.tmp.*``) and empty folders left by an interrupted write; [] if ``out`` is no folder."""
    p = Path(out)
    if not p.is_dir():
        return []
    return sorted(x.name for x in p.iterdir()
                  if not x.name.startswith(".") and not x.name.endswith(".tmp") and ".tmp." not in x.name
                  and not (x.is_dir() and not any(x.iterdir())))
