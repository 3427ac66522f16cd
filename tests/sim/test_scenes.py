"""Scene datasets for the scene locator: `edge data scenes` writes first frames + object positions."""

import json

import numpy as np
import pytest

from edge.cli import main
from sim.scenes import load_scenes, scenes_hash


def test_cli_records_first_frames_with_the_task_objects_positions(tmp_path):
    import sim

    out = tmp_path / "scenes"
    assert main(["data", "scenes", "--task", "stack", "--episodes", "4", "--seed", "123", "--out", str(out)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["count"] == 4 and meta["task"] == "stack" and meta["roles"] == ["moved", "base"]
    sc = load_scenes(out, task="stack", image_hw=(96, 96))
    assert sc["front"].shape == (4, 96, 96, 3) and sc["front"].dtype == np.uint8
    # the same seed draws the same scene: moved block = order[1], its base = order[0]
    env = sim.make_env(task="stack", sim="mujoco")
    try:
        obs, info = env.reset(seed=125)
        order = env.unwrapped.spec_task.order
        np.testing.assert_allclose(sc["objects"][2, :3], info["object_poses"][order[1]][:3], atol=1e-6)
        np.testing.assert_allclose(sc["objects"][2, 3:], info["object_poses"][order[0]][:3], atol=1e-6)
        assert sc["instruction"][2] == obs["instruction"]
        np.testing.assert_array_equal(sc["front"][2], obs["front"])
    finally:
        env.close()
    assert len(scenes_hash([out])) == 64


def test_bad_scene_directories_are_refused_with_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="edge data scenes"):
        load_scenes(tmp_path / "missing")
    from edge.training.vla.synthetic import write_synthetic_scenes

    d = write_synthetic_scenes(tmp_path / "s", count=3)
    with pytest.raises(ValueError, match="not 'push'"):
        load_scenes(d, task="push")
    with pytest.raises(ValueError, match="--image-size 64"):
        load_scenes(d, image_hw=(64, 64))
