"""Whole-or-nothing file writes that also survive a power cut.

Each writer puts the bytes in a temporary file beside the target, fsyncs it, renames it over the
target and fsyncs the directory, so a reader finds either the old file or the new one, never a torn
one — also after the machine lost power between the write and the next checkpoint. A writer that
fails removes its temporary file and leaves the target as it was.

Checkpoints, resume states, manifests and run summaries go through here. One writer per target:
the temporary name is fixed (a killed writer's leftover is replaced by the next write).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # a platform without directory handles (the rename itself is still atomic)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _target(path: str | Path) -> Path:
    """The file a write lands in: a symlink's target (the link stays a link)."""
    p = Path(path)
    return p.resolve() if p.is_symlink() else p


def _keep_mode(tmp: Path, p: Path) -> None:
    """The replacement keeps the replaced file's permissions."""
    try:
        os.chmod(tmp, stat.S_IMODE(p.stat().st_mode))
    except FileNotFoundError:
        pass


def write_with(path: str | Path, write: Callable[[IO[bytes]], Any]) -> Path:
    """Write ``path`` whole or not at all: ``write(f)`` fills a binary temp file beside it."""
    p = _target(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _keep_mode(tmp, p)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(p.parent)
    return p


def write_bytes(path: str | Path, data: bytes) -> Path:
    return write_with(path, lambda f: f.write(data))


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, data: Any, **dumps: Any) -> Path:
    """``json.dumps(data, **dumps)`` (default ``indent=2``) written whole or not at all."""
    return write_text(path, json.dumps(data, **{"indent": 2, **dumps}))


def write_torch(path: str | Path, obj: Any, before_commit: Callable[[Path], Any] | None = None) -> Path:
    """``torch.save(obj, path)`` written whole or not at all: the same bytes as a direct save (torch
    names the archive's records after the file, so the temporary file keeps the name, in a hidden
    folder beside it). ``before_commit(tmp)`` runs on the finished temporary file before the rename."""
    import torch

    p = _target(path)
    work = p.with_name(f".{p.name}.tmp")
    if work.is_dir() and not work.is_symlink():
        shutil.rmtree(work)  # a killed writer's
    else:
        work.unlink(missing_ok=True)
    work.mkdir()
    tmp = work / p.name
    try:
        torch.save(obj, tmp)
        _keep_mode(tmp, p)
        if before_commit is not None:
            before_commit(tmp)
        commit(tmp, p)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return p


def commit(tmp: str | Path, path: str | Path) -> Path:
    """Rename the finished file ``tmp`` over ``path`` durably: ``tmp`` fsynced first, the folder after."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(Path(path).parent)
    return Path(path)


# -- resume states with a sha256 record -------------------------------------------------------------
# A torn file cannot happen (above), but torch.load reads a file whose bytes changed on disk since the
# save (a failing disk, an edit) without noticing. Resume states keep a record NAME.sha256 beside them.
# The record is written before the state's rename listing both the old and the new hash, and after it
# listing the new one, so a kill at any point leaves a state that its record accepts.


def sha256_of(path: str | Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest_record(path: str | Path) -> Path:
    """The sha256 record beside a resume state: ``NAME.sha256``."""
    p = _target(path)
    return p.with_name(p.name + ".sha256")


def _recorded(rec: Path) -> list[str] | None:
    try:
        got = json.loads(rec.read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [h for h in got if isinstance(h, str)] if isinstance(got, list) else None


def write_torch_checked(path: str | Path, obj: Any) -> Path:
    """:func:`write_torch` plus the sha256 record that :func:`verify_checked` reads."""
    p = _target(path)
    rec = digest_record(p)
    new: list[str] = []

    def both(tmp: Path) -> None:
        new.append(sha256_of(tmp))
        old = _recorded(rec) if rec.is_file() else None
        if old is None or len(old) != 1:  # no record yet, or a killed write's two: read the file itself
            old = [sha256_of(p)] if p.is_file() else []
        if old:  # (a first save killed before its record leaves a state that passes unchecked)
            write_json(rec, {"sha256": [*old, *new]})

    write_torch(p, obj, before_commit=both)
    write_json(rec, {"sha256": new})
    return p


def verify_checked(path: str | Path) -> None:
    """Refuse (:class:`edge.errors.EdgeError`) a resume state whose bytes are not those saved, by its
    sha256 record; a state without a record (saved before records were kept) passes unchecked."""
    p = _target(path)
    rec = digest_record(p)
    if not rec.exists():
        return
    want = _recorded(rec)
    from edge.errors import EdgeError

    if not want:
        raise EdgeError(f"{rec}: not a sha256 record (expected {{\"sha256\": [...]}}); it cannot check {p.name}. "
                        f"Delete {rec.name} to resume from {p.name} unchecked")
    if sha256_of(p) not in want:
        raise EdgeError(f"{p}: its bytes changed on disk after it was saved (sha256 does not match {rec.name}: "
                        "a damaged disk or an edit), so resuming from it would continue from damaged weights. "
                        f"Start the run again, or restore the file; if {p.name} was replaced on purpose, "
                        f"delete {rec.name} to resume from it unchecked")
