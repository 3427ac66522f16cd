"""Checkpoints and exports are verified against their recorded sha256 before they are loaded, and
loading never writes into a checkpoint directory (the onnxruntime export goes to a cache)."""

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from edge.backends import make_backend
from edge.errors import EdgeError
from edge.export import ensure_export, export_onnx
from edge.vla.checkpoint import load_model, read_payload
from edge.vla.verify import VerificationError, verify_checkpoint, verify_export

SHIPPED = Path(__file__).resolve().parents[3] / "edge" / "vla" / "checkpoints" / "stack"


@pytest.fixture
def ckpt(tiny_ckpt, tmp_path):
    """A private copy of the tiny checkpoint (model.pt + manifest.json)."""
    src, _ = tiny_ckpt
    dst = tmp_path / "ckpt"
    dst.mkdir()
    for name in ("model.pt", "manifest.json"):
        shutil.copy2(src / name, dst / name)
    return dst


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edit_manifest(ckpt: Path, change) -> None:
    m = json.loads((ckpt / "manifest.json").read_text())
    change(m)
    (ckpt / "manifest.json").write_text(json.dumps(m, indent=2))


def flip_tensor_byte(model_pt: Path) -> None:
    """Flip one byte inside the largest tensor's data (the file still unpickles: only weights change)."""
    with zipfile.ZipFile(model_pt) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    blob = bytearray(model_pt.read_bytes())
    name_len, extra_len = (int.from_bytes(blob[info.header_offset + o: info.header_offset + o + 2], "little")
                           for o in (26, 28))
    pos = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    blob[pos] ^= 0x01
    model_pt.write_bytes(bytes(blob))


def test_training_records_every_weight_file_and_the_checkpoint_verifies(ckpt):
    manifest = json.loads((ckpt / "manifest.json").read_text())
    assert manifest["files"] == {"model.pt": sha(ckpt / "model.pt")} == {"model.pt": manifest["model"]["sha256"]}
    assert verify_checkpoint(ckpt / "model.pt")["files"] == manifest["files"]
    load_model(ckpt)


def test_shipped_checkpoint_verifies():
    manifest = verify_checkpoint(SHIPPED / "model.pt")
    assert manifest["files"] == {"model.pt": manifest["model"]["sha256"]}


def test_flipped_byte_is_refused_unless_verify_is_off(ckpt):
    expected = sha(ckpt / "model.pt")
    flip_tensor_byte(ckpt / "model.pt")
    actual = sha(ckpt / "model.pt")
    with pytest.raises(VerificationError) as err:
        load_model(ckpt)
    msg = str(err.value)
    assert str(ckpt / "model.pt") in msg and expected[:12] in msg and actual[:12] in msg
    assert "--no-verify" in msg
    with pytest.raises(VerificationError):
        make_backend("torch", ckpt)
    with pytest.raises(VerificationError):
        make_backend("onnxruntime", ckpt)
    load_model(ckpt, verify=False)  # the weights changed, the file still loads
    make_backend("torch", ckpt, verify=False)


def test_wrong_hash_in_the_manifest_is_refused(ckpt):
    edit_manifest(ckpt, lambda m: m["files"].update({"model.pt": "0" * 64}))
    with pytest.raises(VerificationError, match=r"does not match manifest.json \(000000000000"):
        read_payload(ckpt)
    assert isinstance(VerificationError("x"), EdgeError)  # printed by the CLI without a traceback
    load_model(ckpt, verify=False)


def test_invalid_or_missing_manifest_is_refused(ckpt):
    (ckpt / "manifest.json").write_text('{"files": {"model.pt": ')
    with pytest.raises(VerificationError, match=r"manifest.json: not valid JSON.*--no-verify"):
        load_model(ckpt)
    load_model(ckpt, verify=False)
    (ckpt / "manifest.json").unlink()
    with pytest.raises(VerificationError, match="no manifest.json"):
        load_model(ckpt)


def test_missing_listed_file_or_unlisted_model_is_refused(ckpt):
    edit_manifest(ckpt, lambda m: m["files"].update({"encoder.onnx": "a" * 64}))
    with pytest.raises(VerificationError, match=r"encoder.onnx: listed in .*manifest.json but missing"):
        load_model(ckpt)
    edit_manifest(ckpt, lambda m: m.update(files={"other.pt": sha(ckpt / "model.pt")}))
    with pytest.raises(VerificationError, match="model.pt: not listed in"):
        load_model(ckpt)
    edit_manifest(ckpt, lambda m: m.update(files={"model.pt": sha(ckpt / "model.pt"), "../x.pt": "a" * 64}))
    with pytest.raises(VerificationError, match="bad entry"):
        load_model(ckpt)


def test_manifest_without_a_files_table_is_verified_through_its_model_hash(ckpt):
    edit_manifest(ckpt, lambda m: m.pop("files"))  # written before the table existed
    load_model(ckpt)
    flip_tensor_byte(ckpt / "model.pt")
    with pytest.raises(VerificationError, match="does not match"):
        load_model(ckpt)


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(directory).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*"))}


def test_onnxruntime_loading_never_writes_into_the_checkpoint(ckpt, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    before = snapshot(ckpt)
    backend = make_backend("onnxruntime", ckpt)
    assert snapshot(ckpt) == before
    export = backend.export_dir
    assert export.parent == tmp_path / "cache" / "onnx" and export.name.startswith(sha(ckpt / "model.pt"))
    verify_export(export)
    stamp = snapshot(export)
    assert make_backend("onnxruntime", ckpt).export_dir == export and snapshot(export) == stamp  # reused
    # a damaged cached export is not used: it is exported again
    (export / "encoder.onnx").write_bytes((export / "encoder.onnx").read_bytes() + b"\0")
    assert ensure_export(ckpt) == export
    verify_export(export)
    assert snapshot(ckpt) == before


def test_export_directory_is_verified_before_use(ckpt, tmp_path):
    out = tmp_path / "export"
    meta = export_onnx(ckpt, out)
    assert set(meta["file_sha256"]) == set(meta["files"].values())
    make_backend("onnxruntime", out)
    m = json.loads((out / "metadata.json").read_text())
    m["file_sha256"]["denoise_step.onnx"] = "f" * 64
    (out / "metadata.json").write_text(json.dumps(m))
    with pytest.raises(VerificationError, match=r"denoise_step.onnx: sha256 .* does not match metadata.json"):
        make_backend("onnxruntime", out)
    make_backend("onnxruntime", out, verify=False)
