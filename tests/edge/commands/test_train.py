"""`edge train slot-encoder` / `pixel-encoder`: the frames they collect (policy, reuse of files already there)."""

import json

import numpy as np

from edge.cli import main


def _meta(path) -> dict:
    with np.load(path) as z:
        return json.loads(str(z["meta"]))


def test_slot_encoder_trains_on_object_play_frames_and_keeps_random_held_out_frames(tmp_path, capsys):
    out = tmp_path / "se"
    args = ["train", "slot-encoder", "--preset", "tiny", "--out", str(out), "--frames", "40", "--eval-frames", "20",
            "--steps", "1", "--policy", "play"]
    assert main(args) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]  # one readable line, not the metrics' JSON
    metrics = json.loads((out / "metrics.json").read_text())
    assert last.startswith(f"slot encoder: {out} (step 1); on {metrics['eval_episodes']} held-out episodes: FG-ARI ")
    assert f"slot identity {metrics['identity_rate_attn']:.3f} / " in last and last.endswith("metrics.json")
    assert _meta(out / "data_train.npz")["policy"] == "play"
    assert "policy" not in _meta(out / "data_eval.npz")  # held-out frames: uniform random actions
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data_hash"] == _meta(out / "data_train.npz")["data_hash"]
    assert "commit" in manifest["git"]  # the same provenance key as the VLA's and the world models' manifests
    capsys.readouterr()
    assert main([*args[:-2], "--steps", "2", "--policy", "play"]) == 2  # run again without --resume: refused
    assert "already holds a slot-encoder training run (train_state.pt); pass --resume" in capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["step"] == 1  # untouched
    assert main([*args[:-2], "--steps", "2", "--policy", "play", "--resume"]) == 0  # files reused, resumed
    assert json.loads((out / "metrics.json").read_text())["step"] == 2
    fresh = tmp_path / "fresh"
    assert main([*args[:5], str(fresh), *args[6:], "--resume"]) == 2  # nothing there to continue
    assert "holds no slot-encoder training run to continue" in capsys.readouterr().err and not fresh.exists()


def test_frames_already_there_with_other_settings_are_refused_by_name(tmp_path, capsys):
    out = tmp_path / "se"
    base = ["train", "slot-encoder", "--preset", "tiny", "--out", str(out), "--eval-frames", "20", "--steps", "1"]
    assert main([*base, "--frames", "40"]) == 0
    capsys.readouterr()
    base = [*base, "--resume"]  # the run there continues; the frames it was collected with must match
    assert main([*base, "--frames", "40", "--policy", "play"]) == 2
    err = capsys.readouterr().err
    assert "data_train.npz was collected with other settings" in err and "'policy': ('random', 'play')" in err
    assert main([*base, "--frames", "48"]) == 2
    assert "'n_frames': (40, 48)" in capsys.readouterr().err
    assert main([*base, "--frames", "40", "--data-seed", "5"]) == 2
    assert "'seed': (1, 5)" in capsys.readouterr().err


def test_slot_encoder_with_four_channels_collects_rgbd_frames_and_keeps_weights(tmp_path, capsys):
    out = tmp_path / "se"
    base = ["train", "slot-encoder", "--preset", "tiny", "--out", str(out), "--frames", "40", "--eval-frames", "20",
            "--keep-every", "1", "--threads", "1"]
    assert main([*base, "--steps", "2", "--set", "in_channels=4"]) == 0
    for name in ("data_train.npz", "data_eval.npz"):
        assert _meta(out / name)["depth"]["near_m"] == 0.6
        with np.load(out / name) as z:
            assert z["frames"].shape[-1] == 4
    assert sorted(p.name for p in out.glob("weights_*.pt")) == ["weights_000001.pt", "weights_000002.pt"]
    assert json.loads((out / "manifest.json").read_text())["config"]["in_channels"] == 4
    capsys.readouterr()
    assert main([*base, "--steps", "3", "--resume"]) == 2  # RGB asked for where RGB-D frames lie: refused by name
    assert "'depth': ({'near_m': 0.6, 'far_m': 1.0}, None)" in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text())["depth"] == {"near_m": 0.6, "far_m": 1.0}
    assert main([*base, "--steps", "3", "--set", "in_channels=4", "--keep-every", "-1", "--resume"]) == 2
    assert "--keep-every -1" in capsys.readouterr().err


def test_world_model_without_progress_bar_still_prints_a_line_per_evaluation(tmp_path, capsys):
    out = tmp_path / "wm"
    assert main(["train", "world-model", "--preset", "tiny", "--obs", "oracle", "--out", str(out), "--no-progress"]) == 0
    cap = capsys.readouterr()
    curve = [json.loads(x) for x in (out / "curve.jsonl").read_text().splitlines()]
    lines = [x for x in cap.err.splitlines() if x.startswith("[comet] step ")]
    assert len(lines) == len(curve) >= 2
    assert lines[-1].startswith(f"[comet] step {curve[-1]['env_steps']}: success {curve[-1]['success']:.2f}")
    assert "step/s" not in cap.err  # no progress bar
    assert cap.out.startswith(f"world model: {out} (comet, ")


def test_pixel_encoder_resumes_only_when_asked(tmp_path, capsys):
    out = tmp_path / "pe"
    assert main(["train", "pixel-encoder", "--out", str(out), "--resume"]) == 2
    assert "--resume: " in capsys.readouterr().err and not out.exists()
    out.mkdir()
    (out / "train_state.pt").write_bytes(b"")  # another run's state: nothing is collected or trained over it
    assert main(["train", "pixel-encoder", "--out", str(out)]) == 2
    assert "already holds a pixel-encoder training run" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["train_state.pt"]
