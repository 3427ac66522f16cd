"""Diagnostics of a trained world model on held-out episodes: open-loop prediction error and relevance.

* :func:`prediction_error` — from every step t of held-out episodes (the greedy planner acting),
  the model rolls the state forward open-loop with the real actions (its own predictions appended,
  as in the search) and is compared with the real states at t+1..t+h. Reported as MSE relative
  to the variance of the real states (1 = no better than predicting the mean), per horizon.
  For the pixel model the "real" state is its own encoder's latent of the real frame.
* :func:`relevance_by_entity` — the object-causal heads' mean relevance p (policy, value) per
  entity: in oracle mode slot k is entity k (robot, goal, target, distractors); with encoder slots
  each slot is assigned, per frame, the entity whose segment its attention mask covers most.
"""

from __future__ import annotations

import numpy as np
import torch

from world_models.object_env import ObjectTaskEnv
from world_models.observer import Observer
from world_models.planner import History, Planner

ENTITY_NAMES = ("robot", "goal", "target", "distractor")


def _rollouts(cfg, model, encoder, episodes: int, seed0: int) -> list[dict]:
    env_cfg = cfg.env.__class__(**{**cfg.env.__dict__, "segmentation": cfg.obs == "slots"})
    env = ObjectTaskEnv(env_cfg)
    obs_er = Observer.for_run(cfg, 1, encoder)
    planner = Planner(model, cfg.planner)
    rng = np.random.default_rng(seed0)
    out = []
    for e in range(episodes):
        o, _ = env.reset(seed=seed0 + e)
        s = obs_er.observe([o], np.ones(1, bool))
        h = History(1, cfg.planner.context, obs_er.state_shape, obs_er.dtype)
        h.reset(0, s[0])
        owners = [_owners(encoder, obs_er, o)] if cfg.obs == "slots" else []
        states, actions = [s[0]], []
        while True:
            a = int(planner.plan(h, rng, explore=False).action[0])
            o, _, term, trunc, _ = env.step(a)
            s = obs_er.observe([o], np.zeros(1, bool))
            h.push(0, a, s[0])
            states.append(s[0])
            actions.append(a)
            if cfg.obs == "slots":
                owners.append(_owners(encoder, obs_er, o))
            if term or trunc:
                break
        out.append({"states": np.stack(states), "actions": np.asarray(actions), "owners": owners})
    env.close()
    return out


@torch.no_grad()
def prediction_error(cfg, model, encoder=None, episodes: int = 8, horizons: tuple[int, ...] = (1, 5),
                     seed0: int = 950_000_000, rollouts: list[dict] | None = None) -> dict:
    """{"h1": relative MSE, "h5": ...} over held-out episodes (see module docstring)."""
    planner = Planner(model, cfg.planner)
    eps = rollouts or _rollouts(cfg, model, encoder, episodes, seed0)
    c = cfg.planner.context
    errs: dict[int, list[float]] = {h: [] for h in horizons}
    all_z = []
    for ep in eps:
        z = planner.to_z(torch.as_tensor(ep["states"]).unsqueeze(0))[0]  # (T+1, N, Dz)
        all_z.append(z.reshape(len(z), -1))
        T = len(ep["actions"])
        for t in range(T):
            lo = max(0, t - c)
            win = torch.zeros(1, c + 1, *z.shape[1:])
            act = torch.zeros(1, c + 1, dtype=torch.int64)
            val = torch.zeros(1, c + 1, dtype=torch.bool)
            n = t - lo + 1
            win[0, -n:], val[0, -n:] = z[lo:t + 1], True
            act[0, -n:-1] = torch.as_tensor(ep["actions"][lo:t])
            for k in range(1, max(horizons) + 1):
                if t + k > T:
                    break
                act[0, -1] = int(ep["actions"][t + k - 1])
                nxt = model(win, act, val, heads="none")["next_z"][0, -1]
                if k in errs:
                    errs[k].append(float(((nxt - z[t + k]) ** 2).mean()))
                win = torch.cat([win[:, 1:], nxt[None, None]], 1)
                act = torch.cat([act[:, 1:], torch.zeros_like(act[:, :1])], 1)
                val = torch.cat([val[:, 1:], torch.ones_like(val[:, :1])], 1)
    var = float(torch.cat(all_z).var(0).mean())
    return {f"h{h}": (float(np.mean(v)) / max(var, 1e-12) if v else None) for h, v in errs.items()}


@torch.no_grad()
def relevance_by_entity(cfg, model, encoder=None, episodes: int = 8, seed0: int = 950_000_000,
                        rollouts: list[dict] | None = None) -> dict | None:
    """{"robot": [p_policy, p_value], "goal": ..., "target": ..., "distractor": ...} or None when the
    model has no object-causal heads."""
    if not model.cfg.causal_heads:
        return None
    planner = Planner(model, cfg.planner)
    eps = rollouts or _rollouts(cfg, model, encoder, episodes, seed0)
    sums = {n: np.zeros(2) for n in ENTITY_NAMES}
    counts = dict.fromkeys(ENTITY_NAMES, 0)
    c = cfg.planner.context
    for ep in eps:
        z = planner.to_z(torch.as_tensor(ep["states"]).unsqueeze(0))[0]  # (T+1, N, Dz)
        for t in range(len(z)):  # the acting window ending at t: what the heads saw when deciding
            lo = max(0, t - c)
            n = t - lo + 1
            win = torch.zeros(1, c + 1, *z.shape[1:])
            act = torch.zeros(1, c + 1, dtype=torch.int64)
            val = torch.zeros(1, c + 1, dtype=torch.bool)
            win[0, -n:], val[0, -n:] = z[lo:t + 1], True
            act[0, -n:-1] = torch.as_tensor(ep["actions"][lo:t])
            rel = model(win, act, val, heads="last")["relevance"][0, -1]  # (N, 2)
            for k in range(rel.shape[0]):
                name = _entity_of_slot(cfg, ep, t, k)
                if name is not None:
                    sums[name] += rel[k].numpy()
                    counts[name] += 1
    return {n: (sums[n] / counts[n]).round(4).tolist() if counts[n] else None for n in ENTITY_NAMES}


@torch.no_grad()
def _owners(encoder, obs_er: Observer, o: dict) -> list[str | None]:
    """Per slot, the entity whose pixels its attention mask wins most (None: table/background).
    Uses the slots the observer just produced as the initialisation, as the rollout does."""
    from sim.backends.base import SEG_OBJECT0, SEG_ROBOT
    from world_models.slot_metrics import upsample_masks

    prev = torch.as_tensor(obs_er._prev[:1])
    _, masks = encoder.encode_masks(o["frame"][None], init_slots=prev)
    seg = o["seg"]
    win = upsample_masks(masks.numpy(), seg.shape[0])[0].argmax(0)  # (H, W) slot index per pixel
    names = {SEG_ROBOT: "robot", SEG_OBJECT0: "target", SEG_OBJECT0 + 1: "distractor", SEG_OBJECT0 + 2: "distractor",
             SEG_OBJECT0 + 3: "distractor"}
    out: list[str | None] = []
    for k in range(masks.shape[1]):
        counts = dict.fromkeys(names.values(), 0)
        for sid, n in names.items():  # several segment ids share a name (the distractors): sum them
            counts[n] += int(((win == k) & (seg == sid)).sum())
        best = max(counts, key=counts.get)
        out.append(best if counts[best] > 0 else None)
    return out


def _entity_of_slot(cfg, ep: dict, t: int, k: int) -> str | None:
    if cfg.obs == "oracle":
        return ENTITY_NAMES[min(k, 3)]
    owners = ep.get("owners") or []
    return owners[t][k] if t < len(owners) else None
