"""Checks that an output path can be written, made before a command or script spends time on the work
it will write there (they create nothing). Core code and the commands share them (``edge.commands._out``
re-exports them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from edge.errors import EdgeError


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
