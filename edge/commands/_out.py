"""Checks of an output directory before a command spends time on the work it will write there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from edge.errors import EdgeError


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


def check_writable_dir(out: str | Path, flag: str = "--out") -> None:
    """Raise EdgeError unless ``out`` is (or can be created as) a writable directory. Creates
    nothing: a probe file or directory is made in ``out`` or its nearest existing parent and removed."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise EdgeError(f"{flag} {p}: exists and is not a directory; choose another {flag}")
    anchor = p if p.exists() else next((q for q in p.parents if q.exists()), Path("."))
    if not anchor.is_dir():
        raise EdgeError(f"{flag} {p}: {anchor} is a file, not a directory; choose another {flag}")
    try:
        probe = tempfile.mkdtemp(prefix=".edge-write-probe-", dir=anchor)
        os.rmdir(probe)
    except OSError as err:
        where = "" if anchor == p else f" ({anchor} is where it would be created)"
        raise EdgeError(f"{flag} {p}: not writable{where}: {err.strerror}; choose another {flag}") from None


def foreign_entries(out: str | Path) -> list[str]:
    """The names in ``out`` that are someone else's: all but hidden files, the commands' own temporary
    files (``*.tmp``, ``*.tmp.*``) and empty folders left by an interrupted write; [] if ``out`` is no folder."""
    p = Path(out)
    if not p.is_dir():
        return []
    return sorted(x.name for x in p.iterdir()
                  if not x.name.startswith(".") and not x.name.endswith(".tmp") and ".tmp." not in x.name
                  and not (x.is_dir() and not any(x.iterdir())))


def check_writable_file(out: str | Path, flag: str = "--out", replace: bool = False) -> None:
    """Raise EdgeError unless ``out`` can be written as a file (a result JSON): not a directory; an
    existing file writable in place, else (or with ``replace``: a writer that renames a temporary file
    over it) its nearest existing parent a writable directory. Creates nothing (checked before the work)."""
    p = Path(out)
    if p.is_dir():
        raise EdgeError(f"{flag} {p}: is a directory; give a file path (e.g. {p / 'result.json'})")
    if not replace and p.exists():
        if os.access(p, os.W_OK):
            return
        raise EdgeError(f"{flag} {p}: not writable; choose another {flag}")
    try:
        check_writable_dir(p.parent, flag=flag)
    except EdgeError as e:
        why = str(e).split(": ", 1)[-1]
        raise EdgeError(f"{flag} {p}: its folder {p.parent}: {why}") from None
