"""benchmarks/wm_contact_ceiling.py: measures on known answers, episodes and features, the regressor, a tiny run."""

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark
from tests._damage import flip_a_stored_byte

cc = load_benchmark("wm_contact_ceiling")


def test_measures_on_known_answers():
    rng = np.random.default_rng(0)
    real = rng.normal(0, 1.0, (400, 2))
    real[:100] *= 0.05  # 100 steps shorter than 2 mm (no contact): |step| ~ 0.06 cm
    near = np.ones(400, bool)
    exact = cc.measures(real.copy(), real, near)
    assert exact["contact_steps"] == int((np.linalg.norm(real, axis=1) > 0.2).sum())
    assert exact["length_ratio_median_at_contact"] == 1.0 and exact["cosine_median_at_contact"] == 1.0
    assert exact["r2_near"] == 1.0 and exact["calibration_slope_near"] == 1.0 == exact["pred_on_real_slope_near"]
    half = cc.measures(0.5 * real, real, near)  # a shrunken prediction: length 0.5, calibration slope 2
    assert half["length_ratio_median_at_contact"] == 0.5 and half["cosine_median_at_contact"] == 1.0
    assert half["calibration_slope_near"] == 2.0 and half["pred_on_real_slope_near"] == 0.5
    assert half["r2_near"] == pytest.approx(0.75, abs=1e-3)
    # the mean given a coin flip: a step of 1 cm half the time, predicted 0.5 cm every time
    coin = np.zeros((400, 2))
    coin[::2, 0] = 1.0
    m = cc.measures(np.tile([0.5, 0.0], (400, 1)), coin, near)
    assert m["length_ratio_median_at_contact"] == 0.5  # looks short at contact ...
    assert m["calibration_slope_near"] == 1.0  # ... yet it is the calibrated mean
    assert m["r2_near"] == pytest.approx(0.5, abs=1e-3)
    some = cc.measures(real, real, np.zeros(400, bool))
    assert some["near_steps"] == 0 and "r2_near" not in some


def test_collected_episodes_are_reproducible_and_consistent():
    from world_models.object_env import _CENTER_M, _SCALE_M

    a, b = cc.collect_episode(830_000_000, 0.5), cc.collect_episode(830_000_000, 0.5)
    np.testing.assert_array_equal(a["feats"], b["feats"])
    np.testing.assert_array_equal(a["actions"], b["actions"])
    T = len(a["actions"])
    assert a["feats"].shape == (T + 1, 5, 12) and a["red"].shape == a["tcp"].shape == (T + 1, 2)
    np.testing.assert_allclose(a["feats"][:, 2, :2] * _SCALE_M[:2] + _CENTER_M[:2], a["red"], atol=1e-5)
    np.testing.assert_allclose(a["feats"][:, 0, :2] * _SCALE_M[:2] + _CENTER_M[:2], a["tcp"], atol=1e-5)
    assert 0.0 <= a["eps"] <= 0.5 and (a["success"] or T == 60)
    x_pose, x_ctl = cc.features(a, "pose"), cc.features(a, "control")
    assert x_pose.shape == (T, 15 + 3 + 4 + 8) and x_ctl.shape == (T, x_pose.shape[1] + 2 + 6)
    np.testing.assert_array_equal(x_ctl[:, :x_pose.shape[1]], x_pose)
    np.testing.assert_allclose(x_pose[:, 15:18], a["feats"][:-1, 2, :3] - a["feats"][:-1, 0, :3], atol=1e-6)
    assert (x_pose[:, 22:30].argmax(1) == a["actions"]).all()
    np.testing.assert_allclose(cc.targets(a), 100 * np.diff(a["red"], axis=0), atol=1e-4)
    with pytest.raises(ValueError, match="feature set"):
        cc.features(a, "pixels")


def test_regressor_learns_a_nonlinear_step():
    """A step that is 1 cm along x only where the input's first coordinate is positive (contact-like)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3000, 4)).astype(np.float32)
    y = np.c_[(x[:, 0] > 0).astype(np.float32), np.zeros(len(x), np.float32)]
    predict, info = cc.fit_mlp(x[:2500], y[:2500], x[2500:2800], y[2500:2800], hidden=64, max_updates=2000)
    m = cc.measures(predict(x[2800:]), y[2800:], np.ones(200, bool))
    assert info["best_update"] <= info["updates"] == 2000
    assert m["r2_near"] > 0.9 and 0.8 < m["length_ratio_median_at_contact"] < 1.2


def test_token_steps_read_the_last_block_with_its_own_action():
    """A stand-in model that moves the red cube 1 cm along the last block's action: the predicted steps
    are those directions, so windows, actions and the oracle map's inverse line up."""
    import torch

    from world_models.object_env import _SCALE_M
    from world_models.observer import oracle_map

    proj = oracle_map(8, 16, 3)
    dirs = np.array([[np.cos(a * np.pi / 4), np.sin(a * np.pi / 4)] for a in range(8)])

    def model(win, act, val, heads="none"):
        assert val[:, -1].all() and heads == "none"
        shift = np.zeros(win.shape)
        step = np.c_[0.01 * dirs[act[:, -1].numpy()], np.zeros(len(act))] / _SCALE_M  # (T, 3)
        shift[:, -1, 2] = step @ proj[:3]
        return {"next_z": win + torch.as_tensor(shift, dtype=torch.float32)}

    from world_models.train import tiny

    model.cfg = replace(tiny().model, num_slots=5, slot_dim=16)  # COMET: one token per slot
    e = cc.collect_episode(840_000_001, 0.5)
    e["actions"] = np.arange(len(e["actions"])) % 8
    got = cc.token_steps(model, proj, 4, [e])[0]
    np.testing.assert_allclose(got, dirs[e["actions"]], atol=1e-3)


def test_cli_on_a_tiny_oracle_push3_run(tmp_path, capsys):
    from world_models.object_env import ObjectTaskConfig
    from world_models.train import Trainer, tiny

    run = tmp_path / "wm"
    cfg = tiny(env=ObjectTaskConfig(task="push3", image_size=32, max_steps=6), env_steps=12,
               model=replace(tiny().model, num_slots=5))
    Trainer(cfg, run, progress=False).run()
    test = [cc.collect_episode(840_000_000, 0.5)]
    steps = cc.world_model_steps(run, test)
    assert steps[0].shape == (len(test[0]["actions"]), 2) and np.isfinite(steps[0]).all()
    out = tmp_path / "c.json"
    assert cc.main(["--train-episodes", "6", "--test-episodes", "2", "--sizes", "150", "--max-updates", "10",
                    "--features", "pose", "--agents", f"tiny={run}", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["data"]["train_episodes"] == 6 and len(res["data"]["train_sha256"]) == 64
    assert list(res["regressors"]) == ["pose_150"] and res["regressors"]["pose_150"]["updates"] == 10
    assert res["world_models"]["tiny"]["steps"] == res["data"]["test_transitions"]
    # the data-or-model arms: the token model on collected data and on the run's replay, the regressor on it
    eps, seed = cc.replay_episodes(run)
    assert seed == cfg.seed and len(eps) == 2 and all(len(e["actions"]) == 6 for e in eps)
    np.testing.assert_allclose(eps[0]["feats"][..., 7], 1.0, atol=1e-4)  # the bias feature, decoded
    out2 = tmp_path / "c2.json"
    assert cc.main(["--train-episodes", "6", "--test-episodes", "2", "--features", "--token-config", str(run),
                    "--token-sizes", "150", "--token-updates", "3", "4", "--replay-runs", f"r={run}",
                    "--max-updates", "10", "--out", str(out2)]) == 0
    res = json.loads(out2.read_text())
    assert res["regressors"] == {} and res["replay_regressors"]["r"]["transitions"] == 12
    tok = res["token_models"]
    assert set(tok) == {"collected_150", "replay_r"} and tok["collected_150"]["updates"] == 3
    assert tok["replay_r"]["updates"] == 4 and tok["replay_r"]["steps"] == res["data"]["test_transitions"]
    # an offline model with rewards, saved as a run the agents' search loads (policy and value untrained)
    saved = tmp_path / "offline"
    assert cc.main(["--train-episodes", "6", "--test-episodes", "2", "--features", "--token-config", str(run),
                    "--token-sizes", "150", "--token-updates", "3", "--token-reward", "--save-token", str(saved),
                    "--out", str(out2)]) == 0
    from world_models.sim_search import load_oracle_agent

    scfg, _, _ = load_oracle_agent(saved)  # verifies model.pt against the manifest
    manifest = json.loads((saved / "manifest.json").read_text())
    assert scfg == cfg and manifest["metrics"]["reward_loss"] is True and len(manifest["data_sha256"]) == 64
    with pytest.raises(SystemExit):  # never over an existing model
        cc.main(["--train-episodes", "6", "--test-episodes", "2", "--features", "--token-config", str(run),
                 "--token-sizes", "150", "--token-updates", "3", "--save-token", str(saved), "--out", str(out2)])
    capsys.readouterr()
    for bad in (["--features", "pixels"], ["--test-seed", "830000001"], ["--agents", "x"],
                ["--agents", f"x={tmp_path}"], ["--sizes", "10"], ["--token-sizes", "100"],
                ["--token-config", str(run), "--token-sizes", "100", "--token-updates", "1", "2"],
                ["--replay-runs", f"r={tmp_path}"], ["--token-reward"],
                ["--token-config", str(run), "--token-sizes", "100000", "200000", "--token-updates", "1", "1"]):
        with pytest.raises(SystemExit):
            cc.main(["--train-episodes", "6", "--test-episodes", "2", "--out", str(out), *bad])
    err = capsys.readouterr().err  # sizes the data cannot cover are refused before anything is fitted
    assert "as another size is" in err and "pose: fit on" not in err
    state = run / "train_state.pt"  # a replay whose bytes changed on disk: refused before any collection
    flip_a_stored_byte(state)
    with pytest.raises(SystemExit) as e:
        cc.main(["--train-episodes", "6", "--test-episodes", "2", "--replay-runs", f"r={run}", "--out", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "its bytes changed on disk" in err and "collecting" not in err


def test_a_run_of_another_task_setting_is_refused(tmp_path, capsys):
    from edge.errors import EdgeError
    from world_models.object_env import ObjectTaskConfig
    from world_models.train import Trainer, tiny

    run = tmp_path / "wm"
    cfg = tiny(env=ObjectTaskConfig(task="push3", image_size=32, max_steps=6, distractors=1), env_steps=12,
               model=replace(tiny().model, num_slots=4))
    Trainer(cfg, run, progress=False).run()
    with pytest.raises(EdgeError, match="distractors"):
        cc.load_oracle_run(run)
    for flag in ("--agents", "--replay-runs"):  # refused before any episode is collected
        with pytest.raises(SystemExit) as e:
            cc.main(["--train-episodes", "6", "--test-episodes", "2", flag, f"x={run}", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"{flag} {run}: trained with task settings" in err and "collecting" not in err
    with pytest.raises(SystemExit):
        cc.main(["--token-config", str(run), "--token-sizes", "150", "--token-updates", "3", "--out", str(tmp_path / "o")])
    assert "--token-config" in capsys.readouterr().err


def test_explorers_play_what_they_say():
    """Sticky random actions repeat as often as ``hold`` says; play moves cubes without knowing the goal;
    the scripted default is unchanged by the option (the same episode as without it)."""
    n_same = n = 0
    for seed in range(830_000_000, 830_000_003):
        e = cc.collect_episode(seed, 0.5, explorer="sticky", hold=0.9)
        assert len(e["actions"]) == 60 and not e["success"]
        n_same += int((e["actions"][1:] == e["actions"][:-1]).sum())
        n += len(e["actions"]) - 1
    # kept with p = 0.9, plus a redraw that repeats by chance (1/8): 0.9125 expected over 177 pairs
    assert 0.84 < n_same / n < 0.97
    p = cc.collect_episode(830_000_001, 0.2, eps_min=0.2, explorer="play", play_segment=20)
    q = cc.collect_episode(830_000_001, 0.2, eps_min=0.2, explorer="play", play_segment=20)
    np.testing.assert_array_equal(p["actions"], q["actions"])
    cubes = p["feats"][:, 2:, :2]
    assert np.abs(np.diff(cubes, axis=0)).max() > 0.01  # some cube was pushed
    np.testing.assert_array_equal(cc.collect_episode(830_000_000, 0.5)["actions"],
                                  cc.collect_episode(830_000_000, 0.5, explorer="scripted", hold=0.5)["actions"])
    with pytest.raises(ValueError, match="explorer"):
        cc.collect_episode(830_000_000, 0.5, explorer="curious")


def test_cli_refuses_bad_explorer_settings(capsys):
    for argv, key in ((["--explorer", "sticky", "--eps-max", "0.3"], "--eps-min / --eps-max"),
                      (["--hold", "1.0"], "--hold 1.0"), (["--play-segment", "0.5"], "--play-segment 0.5")):
        with pytest.raises(SystemExit) as exc:
            cc.main(argv)
        assert exc.value.code == 2 and key in capsys.readouterr().err


def test_a_flat_model_is_fitted_and_read_through_its_one_token(tmp_path):
    """The monolithic model over the same slots (one token of N·D): the offline fit and the contact
    reading view its states as the learner does, and a flat stand-in that moves the red cube reads as
    the same steps as the slot one."""
    import torch

    from world_models.object_env import ObjectTaskConfig, _SCALE_M
    from world_models.observer import oracle_map
    from world_models.train import Trainer, tiny

    run = tmp_path / "flat"
    cfg = tiny(env=ObjectTaskConfig(task="push3", image_size=32, max_steps=6), env_steps=12,
               model=replace(tiny().model, num_slots=5, kind="flat_slots"))
    Trainer(cfg, run, progress=False).run()
    test = [cc.collect_episode(840_000_000, 0.5)]
    steps = cc.world_model_steps(run, test)
    assert steps[0].shape == (len(test[0]["actions"]), 2) and np.isfinite(steps[0]).all()
    out, saved = tmp_path / "f.json", tmp_path / "offline_flat"
    assert cc.main(["--train-episodes", "6", "--test-episodes", "2", "--features", "--token-config", str(run),
                    "--token-sizes", "150", "--token-updates", "3", "--token-reward", "--save-token", str(saved),
                    "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["token_models"]["collected_150"]["updates"] == 3
    assert json.loads((saved / "manifest.json").read_text())["config"]["model"]["kind"] == "flat_slots"

    proj = oracle_map(8, 16, 3)
    dirs = np.array([[np.cos(a * np.pi / 4), np.sin(a * np.pi / 4)] for a in range(8)])

    class Flat:
        cfg = replace(tiny().model, num_slots=5, slot_dim=16, kind="flat_slots")

        def __call__(self, win, act, val, heads="none"):
            assert win.shape[-2:] == (1, 5 * 16)  # one token per step
            shift = np.zeros((*win.shape[:-2], 5, 16))
            step = np.c_[0.01 * dirs[act[:, -1].numpy()], np.zeros(len(act))] / _SCALE_M
            shift[:, -1, 2] = step @ proj[:3]
            return {"next_z": win + torch.as_tensor(shift.reshape(win.shape), dtype=torch.float32)}

    e = cc.collect_episode(840_000_001, 0.5)
    e["actions"] = np.arange(len(e["actions"])) % 8
    np.testing.assert_allclose(cc.token_steps(Flat(), proj, 4, [e])[0], dirs[e["actions"]], atol=1e-3)
