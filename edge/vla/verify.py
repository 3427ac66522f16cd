"""Verify checkpoints and ONNX exports against the sha256 hashes recorded when they were written.

A checkpoint directory's ``manifest.json`` (written by ``edge train vla``) carries a table::

    "files": {"model.pt": "<sha256 hex>"}

and an export directory's ``metadata.json`` (``edge export``) a table ``"file_sha256"`` of its ONNX
graphs. Before anything is loaded, every listed file must exist and hash to its recorded value, and
the file being loaded must be listed. A mismatch, a missing listed file, a missing or unreadable
manifest raise :class:`VerificationError` (an :class:`~edge.errors.EdgeError`) that names the file,
the expected and the actual hash prefix, and the way out: ``verify=False`` (``--no-verify`` on the
command line) loads the files anyway.

Manifests written before the ``files`` table existed are verified through their ``model.sha256``.
This module imports neither torch nor onnxruntime.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from edge.digest import sha256_file
from edge.errors import EdgeError

METADATA_FILE = "metadata.json"  # an export's metadata (edge.export writes it)

MANIFEST_FILE = "manifest.json"
FILES_KEY = "files"            # manifest.json: {name: sha256} of the checkpoint's weight files
EXPORT_FILES_KEY = "file_sha256"  # export metadata.json: {name: sha256} of the ONNX graphs
NO_VERIFY_HINT = "pass --no-verify (verify=False in the API) to load it anyway"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class VerificationError(EdgeError):
    """A checkpoint or export does not match the hashes recorded for it (or they cannot be read)."""




def file_table(directory: str | Path, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``{name: sha256}`` of files in ``directory`` (what a manifest records)."""
    d = Path(directory)
    return {name: sha256_file(d / name) for name in names}


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from ``path`` or a :class:`VerificationError` saying what is wrong with it."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise VerificationError(f"{path.parent}: no {path.name}, so the {what} cannot be verified; "
                                f"{NO_VERIFY_HINT}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise VerificationError(f"{path}: not valid JSON ({err}); the {what} cannot be verified — "
                                f"restore the file, or {NO_VERIFY_HINT}") from None
    if not isinstance(data, dict):
        raise VerificationError(f"{path}: expected a JSON object, found {type(data).__name__}; "
                                f"restore the file, or {NO_VERIFY_HINT}")
    return data


def check_files(directory: Path, table: Any, source: Path, must_list: tuple[str, ...] = ()) -> None:
    """Every file in ``table`` ({name: sha256}, names relative to ``directory``) exists and matches;
    every name in ``must_list`` is in the table."""
    if not isinstance(table, dict) or not table:
        raise VerificationError(f"{source}: no file hashes to verify against; re-create it with this "
                                f"build, or {NO_VERIFY_HINT}")
    for name in must_list:
        if name not in table:
            raise VerificationError(f"{directory / name}: not listed in {source} (lists "
                                    f"{sorted(table)}), so it cannot be verified; {NO_VERIFY_HINT}")
    for name, expected in table.items():
        rel = Path(str(name))
        if rel.is_absolute() or ".." in rel.parts or not isinstance(expected, str) \
                or not _HEX64.fullmatch(expected):
            raise VerificationError(f"{source}: bad entry {name!r}: {expected!r} (expected a file "
                                    f"name inside {directory} and a sha256 hex digest); {NO_VERIFY_HINT}")
    for name, expected in table.items():
        path = directory / name
        if not path.is_file():
            raise VerificationError(f"{path}: listed in {source} but missing; restore it (copy the "
                                    f"whole directory), or {NO_VERIFY_HINT}")
        actual = sha256_file(path)
        if actual != expected:
            raise VerificationError(
                f"{path}: sha256 {actual[:12]}… does not match {source.name} ({expected[:12]}…): the "
                f"file is corrupt or was changed after it was written; restore it (re-download, "
                f"re-train or re-export), or {NO_VERIFY_HINT}")


def manifest_table(manifest: dict[str, Any]) -> Any:
    """The manifest's ``{name: sha256}`` table; older manifests: ``{model.file: model.sha256}``."""
    if FILES_KEY in manifest:
        return manifest[FILES_KEY]
    model = manifest.get("model")
    if isinstance(model, dict) and model.get("file") and model.get("sha256"):
        return {model["file"]: model["sha256"]}
    return None


def verify_checkpoint(model_file: str | Path) -> dict[str, Any]:
    """Check a checkpoint's ``model.pt`` (and every other listed file) against the
    ``manifest.json`` beside it; returns the manifest. Raises :class:`VerificationError`."""
    model_file = Path(model_file)
    directory = model_file.parent
    manifest_path = directory / MANIFEST_FILE
    manifest = read_json(manifest_path, f"checkpoint {model_file}")
    check_files(directory, manifest_table(manifest), manifest_path, must_list=(model_file.name,))
    return manifest


def verify_export(export_dir: str | Path, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check an ``edge export`` directory's ONNX graphs against its ``metadata.json``; returns the
    metadata. Raises :class:`VerificationError`."""

    d = Path(export_dir)
    meta = metadata if metadata is not None else read_json(d / METADATA_FILE, f"export {d}")
    graphs = tuple(str(f) for f in (meta.get("files") or {}).values())
    check_files(d, meta.get(EXPORT_FILES_KEY), d / METADATA_FILE, must_list=graphs)
    return meta
