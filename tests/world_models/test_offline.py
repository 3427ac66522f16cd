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
        # reward 1 for action 0, else 0: a known answer for the reward head
        out.append({"states": s, "actions": a, "rewards": (a == 0).astype(np.float32), "success": False})
    return out


def _reward_error(model, e: dict, context: int) -> float:
    """Mean absolute error of the decoded reward over the first context + 1 steps of ``e``."""
    import torch

    c = context
    with torch.no_grad():
        out = model(torch.as_tensor(e["states"][:c + 1])[None], torch.as_tensor(e["actions"][:c + 1])[None],
                    torch.ones(1, c + 1, dtype=torch.bool), heads="none")
    return float(np.abs(model.support.decode(out["reward_logits"])[0].numpy() - e["rewards"][:c + 1]).mean())


def test_fit_learns_known_dynamics_and_reward():
    from world_models.token_model import TokenWorldModel

    cfg = tiny()
    train, val, test = _toy_episodes(40, 0, cfg), _toy_episodes(8, 1, cfg), _toy_episodes(8, 2, cfg)
    model, info = fit_offline(cfg, train, val, 300, seed=0, reward=True)
    assert info["updates"] == 300 and 0 < info["best_update"] <= 300 and info["train_transitions"] == 240
    assert info["seed"] == 0 and info["reward_loss"]
    err = base = 0.0
    for e in test:
        pred = next_state_predictions(model, cfg.planner.context, e["states"], e["actions"])
        assert pred.shape == e["states"][1:].shape
        err += float(((pred - e["states"][1:]) ** 2).mean())
        base += float(((e["states"][:-1] - e["states"][1:]) ** 2).mean())
    assert err < 0.3 * base  # it learned the action's effect (beside the reward), not just "no change"
    c = cfg.planner.context
    untrained = TokenWorldModel(cfg.model).eval()
    assert np.mean([_reward_error(model, e, c) for e in test]) < 0.2 < np.mean([_reward_error(untrained, e, c)
                                                                               for e in test])
    with pytest.raises(ValueError, match="updates"):
        fit_offline(cfg, train, val, 0)
    with pytest.raises(ValueError, match="validation"):
        fit_offline(cfg, train, [], 10)
    with pytest.raises(ValueError, match="num_slots"):
        fit_offline(cfg, [{**train[0], "states": train[0]["states"][:, :2]}], val, 10)
    with pytest.raises(ValueError, match="pixels"):
        fit_offline(replace(cfg, obs="pixels", model=replace(cfg.model, kind="pixels")), train, val, 10)


def test_saved_fit_is_a_verified_run_that_starts_training(tmp_path):
    cfg = tiny(env_steps=4, eval_every=4, checkpoint_every=4, eval_episodes=1)
    Trainer(cfg, tmp_path / "cfg", progress=False).run()  # the configuration run named in the manifest
    train = _toy_episodes(6, 0, cfg)
    model, info = fit_offline(cfg, train[:5], train[5:], 5)
    out = tmp_path / "fit"
    save_offline(out, cfg, model, info, "test", episodes_sha256(train), str(tmp_path / "cfg"), __file__)
    m = json.loads((out / MANIFEST_FILE).read_text())
    assert m["data_sha256"] == episodes_sha256(train) and m["metrics"]["updates"] == 5
    with pytest.raises(FileExistsError, match="already"):
        save_offline(out, cfg, model, info, "test", "x", str(tmp_path / "cfg"), __file__)
    started = Trainer(replace(cfg, init_from=str(out)), tmp_path / "run", progress=False)
    a, b = started.model.state_dict(), model.state_dict()
    assert a.keys() == b.keys() and all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
