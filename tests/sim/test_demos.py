import numpy as np
import pytest

from edge.cli import main
from sim import demos


def test_record_resume_and_atomicity(tmp_path, capsys):
    out = tmp_path / "d"
    args = ["data", "record", "--task", "pick_place", "--episodes", "2", "--image-size", "32", "--out", str(out)]
    assert main(args) == 0
    first = sorted(p.name for p in (out / "episodes").glob("*.npz"))
    assert len(first) == 2
    # a crash mid-write leaves only a .tmp file, which is not data and is cleaned on resume
    (out / "episodes" / "ep_0000002.npz.tmp").write_bytes(b"partial")
    assert demos.done_seeds(out) == {0, 1}
    args[5] = "3"
    assert main(args) == 0
    assert demos.done_seeds(out) == {0, 1, 2}
    assert not list((out / "episodes").glob("*.tmp"))
    ep = demos.read_episode(out / "episodes" / "ep_0000002.npz")
    t = len(ep["action"])
    assert ep["front"].shape == (t, 32, 32, 3) and ep["proprio"].shape == (t, 22)
    assert ep["phase"].shape == (t,) and ep["success"] and "white" in ep["instruction"]
    assert len(demos.dataset_hash(out)) == 64
    meta = demos.read_meta(out)
    assert meta["action_layout"][0] == "dx_m" and meta["phases"][2] == "grasp"


def test_refuses_to_mix_datasets(tmp_path):
    out = tmp_path / "d"
    demos.prepare_dir(out, {"task": "stack", "sim": "mujoco"})
    with pytest.raises(ValueError, match="task"):
        demos.prepare_dir(out, {"task": "push", "sim": "mujoco"})


def test_write_rejects_ragged_episode(tmp_path):
    demos.prepare_dir(tmp_path, {"task": "stack"})
    bad = {"front": np.zeros((3, 8, 8, 3), np.uint8), "proprio": np.zeros((2, 22)), "action": np.zeros((3, 5)),
           "phase": np.zeros(3), "instruction": "x", "success": True, "seed": 0}
    with pytest.raises(ValueError, match="differ in length"):
        demos.write_episode(tmp_path, 0, bad)


def test_files_are_synced_before_the_rename_and_their_folder_after_and_a_failed_write_leaves_no_temp(
        tmp_path, sync_calls):
    from sim.demos import _atomic_write_bytes

    _atomic_write_bytes(tmp_path / "meta.json", lambda fh: fh.write(b"{}"))
    assert sync_calls == [("fsync", "file"), ("replace", "meta.json"), ("fsync", "dir")]

    def fails(fh):
        fh.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        _atomic_write_bytes(tmp_path / "meta.json", fails)
    assert (tmp_path / "meta.json").read_bytes() == b"{}" and sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]
