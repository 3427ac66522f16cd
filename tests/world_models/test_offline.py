"""world_models/offline.py: the offline fit learns known dynamics, saves a verified run that starts training."""

import json
from dataclasses import replace

import numpy as np
import pytest

from world_models.offline import episodes_sha256, fit_offline, next_state_predictions, save_offline
from world_models.train import MANIFEST_FILE, Trainer, tiny


def _toy_episodes(n: int, seed: int, cfg) -> list[dict]:
    """Slot 0 moves by a fixed step per action (a known answer) from the same start; the other slots
    stay put. Only the actions differ between episodes."""
    fixed = np.random.default_rng(123)
    k, d = cfg.model.num_slots, cfg.model.slot_dim
    steps = 0.3 * fixed.standard_normal((cfg.model.num_actions, d)).astype(np.float32)
    start = 0.5 * fixed.standard_normal((k, d)).astype(np.float32)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        T = 6
        s = np.zeros((T + 1, k, d), np.float32)
        s[0] = start
        a = rng.integers(cfg.model.num_actions, size=T)
        for t in range(T):
            s[t + 1] = s[t]
            s[t + 1, 0] += steps[a[t]]
        out.append({"states": s, "actions": a, "rewards": np.zeros(T, np.float32), "success": False})
    return out


def test_fit_learns_known_dynamics_and_beats_no_change():
    cfg = tiny()
    train, val, test = _toy_episodes(40, 0, cfg), _toy_episodes(8, 1, cfg), _toy_episodes(8, 2, cfg)
    model, info = fit_offline(cfg, train, val, 300, seed=0)
    assert info["updates"] == 300 and 0 < info["best_update"] <= 300 and info["train_transitions"] == 240
    err = base = 0.0
    for e in test:
        pred = next_state_predictions(model, cfg.planner.context, e["states"], e["actions"])
        assert pred.shape == e["states"][1:].shape
        err += float(((pred - e["states"][1:]) ** 2).mean())
        base += float(((e["states"][:-1] - e["states"][1:]) ** 2).mean())
    assert err < 0.1 * base  # it learned the action's effect, not just "no change"
    with pytest.raises(ValueError, match="updates"):
        fit_offline(cfg, train, val, 0)
    with pytest.raises(ValueError, match="validation"):
        fit_offline(cfg, train, [], 10)


def test_saved_fit_is_a_verified_run_that_starts_training(tmp_path):
    cfg = tiny(env_steps=4, eval_every=4, checkpoint_every=4, eval_episodes=1)
    Trainer(cfg, tmp_path / "cfg", progress=False).run()  # the configuration run named in the manifest
    train = _toy_episodes(6, 0, cfg)
    model, info = fit_offline(cfg, train[:5], train[5:], 5)
    out = tmp_path / "fit"
    save_offline(out, cfg, model, info, "test", episodes_sha256(train), str(tmp_path / "cfg"), __file__)
    m = json.loads((out / MANIFEST_FILE).read_text())
    assert m["data_sha256"] == episodes_sha256(train) and m["metrics"]["updates"] == 5
    assert episodes_sha256(train) != episodes_sha256(train[:5])
    with pytest.raises(FileExistsError, match="already"):
        save_offline(out, cfg, model, info, "test", "x", str(tmp_path / "cfg"), __file__)
    started = Trainer(replace(cfg, init_from=str(out)), tmp_path / "run", progress=False)
    for a, b in zip(started.model.state_dict().values(), model.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy())
