"""edge.atomic: whole-or-nothing writes, fsynced before and after the rename."""

import json
import os
import stat

import pytest
import torch

from edge import atomic
from tests._damage import flip_a_stored_byte


def test_writers_replace_the_file_whole(tmp_path):
    p = tmp_path / "m.json"
    p.write_text("old")
    atomic.write_json(p, {"a": 1})
    assert json.loads(p.read_text()) == {"a": 1} and p.read_text().startswith("{\n  ")  # indent 2 by default
    atomic.write_torch(tmp_path / "w.pt", {"x": torch.arange(3)})
    assert torch.equal(torch.load(tmp_path / "w.pt", weights_only=True)["x"], torch.arange(3))
    atomic.write_text(tmp_path / "t.txt", "é\n")
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "é\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.json", "t.txt", "w.pt"]  # no temp file left


def test_a_writer_that_fails_leaves_the_old_file_and_no_temp_file(tmp_path):
    p = tmp_path / "state.pt"
    atomic.write_torch(p, {"step": 1})

    def half_then_fail(f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # a kill mid-write

    with pytest.raises(KeyboardInterrupt):
        atomic.write_with(p, half_then_fail)
    assert torch.load(p, weights_only=True) == {"step": 1}
    assert [x.name for x in tmp_path.iterdir()] == ["state.pt"]
    with pytest.raises(TypeError):  # a write that fails after its temp file was opened: the same
        atomic.write_with(tmp_path / "m.json", lambda f: f.write("text, not bytes"))
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "m.json.tmp").exists()


def test_the_file_is_synced_before_the_rename_and_its_directory_after(tmp_path, sync_calls):
    atomic.write_json(tmp_path / "summary.json", {})
    assert sync_calls == [("fsync", "file"), ("replace", "summary.json"), ("fsync", "dir")]


def test_a_torch_file_has_the_bytes_of_a_direct_save(tmp_path):
    obj = {"config": {"k": 5}, "state_dict": {"w": torch.ones(2, 3)}}
    torch.save(obj, tmp_path / "direct.pt")
    (tmp_path / "a").mkdir()
    atomic.write_torch(tmp_path / "a" / "direct.pt", obj)  # torch names the archive's records after the file
    assert (tmp_path / "a" / "direct.pt").read_bytes() == (tmp_path / "direct.pt").read_bytes()
    assert [x.name for x in (tmp_path / "a").iterdir()] == ["direct.pt"]


def test_a_torch_file_is_synced_before_the_rename_and_a_failed_save_leaves_the_old_one(tmp_path, monkeypatch):
    p = tmp_path / "train_state.pt"
    (tmp_path / ".train_state.pt.tmp").write_text("a killed writer's leftover, not even a folder")
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(
        "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b)))
    atomic.write_torch(p, {"step": 1})
    assert calls == ["file", "replace", "dir"]
    assert [x.name for x in tmp_path.iterdir()] == ["train_state.pt"]

    class Unpicklable:
        def __reduce__(self):
            raise KeyboardInterrupt  # a kill mid-save

    with pytest.raises(KeyboardInterrupt):
        atomic.write_torch(p, {"step": 2, "x": Unpicklable()})
    assert torch.load(p, weights_only=True) == {"step": 1}
    assert [x.name for x in tmp_path.iterdir()] == ["train_state.pt"]


def test_a_symlinked_target_stays_a_link_and_a_replaced_file_keeps_its_permissions(tmp_path):
    real = tmp_path / "store" / "manifest.json"
    real.parent.mkdir()
    real.write_text("{}")
    real.chmod(0o640)
    link = tmp_path / "manifest.json"
    link.symlink_to(real)
    atomic.write_json(link, {"a": 1})
    assert link.is_symlink() and json.loads(real.read_text()) == {"a": 1}
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    w = tmp_path / "w.pt"
    atomic.write_torch(w, {"step": 1})
    w.chmod(0o600)
    atomic.write_torch(w, {"step": 2})
    assert stat.S_IMODE(w.stat().st_mode) == 0o600 and torch.load(w, weights_only=True) == {"step": 2}



def test_a_torch_file_whose_bytes_changed_on_disk_is_refused(tmp_path):
    from edge.errors import EdgeError

    p = tmp_path / "train_state.pt"
    atomic.write_torch(p, {"w": torch.arange(4096.0)})
    atomic.verify_torch_file(p)
    flip_a_stored_byte(p)  # inside the tensor's bytes
    assert torch.load(p, weights_only=True)["w"].shape == (4096,)  # torch reads it without noticing
    with pytest.raises(EdgeError, match=r"--resume: .*train_state.pt: its bytes changed on disk.*train_state/data/0"):
        atomic.verify_torch_file(p, flag="--resume:")
    with pytest.raises(ValueError, match="its bytes changed on disk"):
        atomic.verify_torch_file(p, ValueError)
    atomic.verify_torch_file(tmp_path / "missing.pt")  # no file, or no zip archive: the loader's to say
    (tmp_path / "junk.pt").write_bytes(b"junk")
    atomic.verify_torch_file(tmp_path / "junk.pt")
    legacy = tmp_path / "legacy.pt"  # torch's pre-zip format: no CRCs, read unchecked
    torch.save({"w": torch.arange(4.0)}, legacy, _use_new_zipfile_serialization=False)
    atomic.verify_torch_file(legacy)
    whole = tmp_path / "whole.pt"
    atomic.write_torch(whole, {"w": torch.arange(4096.0)})
    cut = tmp_path / "cut.pt"  # a copy cut short: torch.load's own error would be a traceback
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(EdgeError, match=r"cut.pt: its bytes changed on disk after it was saved \(not a whole torch archive"):
        atomic.verify_torch_file(cut)
    torch.serialization.set_crc32_options(False)  # an archive saved without CRCs: nothing to compare
    try:
        torch.save({"w": torch.arange(4096.0)}, tmp_path / "nocrc.pt")
    finally:
        torch.serialization.set_crc32_options(True)
    atomic.verify_torch_file(tmp_path / "nocrc.pt")
