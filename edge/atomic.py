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


def write_torch(path: str | Path, obj: Any) -> Path:
    """``torch.save(obj, path)`` written whole or not at all: the same bytes as a direct save (torch
    names the archive's records after the file, so the temporary file keeps the name, in a hidden
    folder beside it). :func:`verify_torch_file` checks it when read."""
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


def verify_torch_file(path: str | Path, error: type[Exception] | None = None, flag: str = "") -> None:
    """Refuse a torch file whose bytes changed on disk after it was saved (a failing disk, an edit, a
    cut copy): ``torch.load`` reads a flipped byte inside a tensor without noticing, but the zip archive
    ``torch.save`` writes keeps a CRC32 of every record, which this checks (about 0.3 s per 100 MB).
    Raises ``error`` (default :class:`edge.errors.EdgeError`) naming the file (after ``flag``, where
    given). Passes unchecked: no such file (the loader says so), a file that is no zip archive (torch's
    pre-1.6 format, or not a torch file: the loader says what it is), and an archive saved without CRCs
    (``torch.serialization.set_crc32_options(False)``)."""
    import zipfile

    if error is None:
        from edge.errors import EdgeError as error
    p = Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError:
        return
    if head != b"PK\x03\x04":  # torch's own test for its zip format
        return
    try:
        with zipfile.ZipFile(p) as z:
            if not any(i.CRC for i in z.infolist() if i.file_size):  # saved without CRCs: nothing to compare
                return
            bad = z.testzip()
        why = None if bad is None else f"the CRC32 torch stored for {bad} does not match"
    except Exception as err:  # noqa: BLE001 - a truncated or damaged archive, whatever zipfile makes of it
        why = f"not a whole torch archive: {type(err).__name__}: {err}"
    if why is not None:
        raise error(f"{flag + ' ' if flag else ''}{p}: its bytes changed on disk after it was saved ({why}; a "
                    "damaged disk, an edit or a copy cut short), so it is not read; restore the file or make "
                    "it again")
