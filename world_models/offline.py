"""A world model fitted offline to logged episodes, as a start for training (``RunConfig.init_from``).

Logged transitions (a robot's logs, or here the simulator under a hand-written explorer) can teach
the dynamics and rewards before the agent acts: :func:`fit_offline` trains a run configuration's
transformer from scratch with the learner's next-state loss (and, with ``reward``, its reward loss)
on windows of the learner's length; :func:`save_offline` writes it as a verified run directory that
``edge train world-model --set init_from=DIR`` starts from. The policy and value heads stay
untrained (they are learned from the agent's own search).

An episode is a dict: ``states`` (T+1, N, D) float32 in the run's observation space (oracle slots
through the run's map, or the frozen encoder's slots), ``actions`` (T,) int, ``rewards`` (T,) float,
``success`` bool.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np

from edge import atomic


def as_tokens(model, z):
    """(…, N, D) slot states as the model's state tokens: unchanged for COMET, one token of N·D for a
    flat model (the learner's view of its replay)."""
    return z.reshape(*z.shape[:-2], model.cfg.tokens, model.cfg.state_dim)


def episodes_sha256(episodes: list[dict]) -> str:
    """A digest of the episodes' states, actions and rewards (what a fit reads)."""
    h = hashlib.sha256()
    for e in episodes:
        for key in ("states", "actions", "rewards"):
            h.update(np.ascontiguousarray(e[key]).tobytes())
    return h.hexdigest()


def fit_offline(cfg, train: list[dict], val: list[dict], updates: int, seed: int = 0, reward: bool = False,
                log=None):
    """``cfg.model``'s transformer trained from scratch on ``train`` episodes for ``updates`` updates
    (the learner's batch, optimiser, gradient clip, window ``context + unroll + 1 + td_steps`` with
    left padding; the next-state loss is the squared error over the slots of the acted steps; with
    ``reward`` plus the learner's cross-entropy to the two-hot reward, weights ``w_obs`` and
    ``w_rew``). Every 250 updates the loss on 8 fixed batches of ``val`` picks the checkpoint
    returned (with ``reward`` that loss is dominated by the reward term, so the summary gives the
    next-state term of that checkpoint apart). Returns ``(model in eval mode, summary)``."""
    import torch

    from world_models.learner import dynamics_losses
    from world_models.replay import Episode, Replay
    from world_models.token_model import TokenWorldModel

    if updates < 1:
        raise ValueError(f"updates={updates!r}: must be >= 1")
    if not train or not val:
        raise ValueError(f"{len(train)} training and {len(val)} validation episodes: need at least one of each")
    if cfg.obs == "pixels":
        raise ValueError("obs='pixels': the offline fit reads slot states (oracle or encoder slots), not frames")
    want = (cfg.model.num_slots, cfg.model.slot_dim)
    bad = [np.shape(e["states"]) for e in (*train, *val) if np.shape(e["states"])[1:] != want]
    if bad:
        raise ValueError(f"states of shape {bad[0]} per episode; the model reads (T+1, {want[0]}, {want[1]}) "
                         "(model.num_slots, model.slot_dim)")
    lc, c = cfg.learner, cfg.planner.context
    window, pad = c + lc.unroll + 1 + lc.td_steps, c + lc.unroll
    n_act = cfg.model.num_actions

    def buffer(eps: list[dict]) -> Replay:
        rp = Replay(10**9)
        for e in eps:
            T = len(e["actions"])
            rp.add(Episode(states=np.asarray(e["states"], np.float32), actions=e["actions"], rewards=e["rewards"],
                           policies=np.full((T, n_act), 1 / n_act, np.float32),
                           root_values=np.zeros(T, np.float32), terminated=e["success"]))
        return rp

    def loss_of(model, b: dict):
        z = as_tokens(model, torch.as_tensor(b["states"]))
        n_in = window - 1
        out = model(z[:, :n_in], torch.as_tensor(b["actions"][:, :n_in]), torch.as_tensor(b["valid"][:, :n_in]),
                    heads="none")
        loss, l_rew = dynamics_losses(out, z[:, 1:n_in + 1], torch.as_tensor(b["acted"][:, :n_in]),
                                      torch.as_tensor(b["rewards"][:, :n_in]), model.support)
        return (lc.w_obs * loss + lc.w_rew * l_rew if reward else loss), loss

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = TokenWorldModel(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=lc.lr, weight_decay=lc.weight_decay)
    rp, rv = buffer(train), buffer(val)
    vrng = np.random.default_rng(seed + 1)
    val_batches = [rv.sample(vrng, 64, window, pad) for _ in range(8)]
    best, best_state, best_at, best_obs = float("inf"), None, 0, float("nan")
    for u in range(1, updates + 1):
        loss = loss_of(model, rp.sample(rng, lc.batch, window, pad))[0]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), lc.grad_clip)
        opt.step()
        if u % 250 == 0 or u == updates:
            with torch.no_grad():
                parts = np.array([[float(x) for x in loss_of(model, b)] for b in val_batches])
            v, v_obs = parts.mean(0)
            if v < best:
                best, best_state, best_at, best_obs = v, copy.deepcopy(model.state_dict()), u, v_obs
            if log:
                log(f"  offline fit: update {u}/{updates}, validation loss {v:.4g} (next state {v_obs:.3e})")
    if best_state is None:
        raise ValueError(f"the validation loss was never finite in {updates} updates (last {v!r}); "
                         "check the states for NaN or lower the learning rate")
    model.load_state_dict(best_state)
    return model.eval(), {"updates": updates, "seed": seed, "best_update": best_at, "validation_loss": float(f"{best:.4g}"),
                          "validation_next_state_loss": float(f"{best_obs:.4g}"),
                          "train_transitions": rp.transitions, "reward_loss": reward}


def next_state_predictions(model, context: int, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """(T, N, D): the model's next state for each acted step of one episode (``states`` (T+1, N, D),
    ``actions`` (T,)), each from its own window of the last ``context`` + 1 states, left-padded as
    the planner sees them at the start of an episode."""
    import torch

    z = torch.as_tensor(np.asarray(states, np.float32))
    T, c = len(actions), context
    win = torch.zeros(T, c + 1, *z.shape[1:])
    act = torch.zeros(T, c + 1, dtype=torch.int64)
    val = torch.zeros(T, c + 1, dtype=torch.bool)
    for t in range(T):
        lo = max(0, t - c)
        n = t - lo + 1
        win[t, -n:], val[t, -n:] = z[lo:t + 1], True
        act[t, -n:] = torch.as_tensor(np.asarray(actions[lo:t + 1], np.int64))
    with torch.no_grad():
        nxt = model(as_tokens(model, win), act, val, heads="none")["next_z"][:, -1]
    return nxt.reshape(T, *z.shape[1:]).numpy()


def save_offline(out: Path, cfg, model, info: dict, command: str, data_sha256: str, config_run: str,
                 script: Path) -> None:
    """Write an offline-fitted model as a world-model run directory (``model.pt`` with the
    configuration it was built from, ``manifest.json`` with command, seed, data hash, git revision,
    metrics, the fitting script's sha256 and the file's sha256), loadable by
    :func:`world_models.policy.load_world_model` and usable as ``init_from``."""

    from edge.digest import sha256_file
    from edge.vla.manifest import git_revision
    from world_models.train import MANIFEST_FILE, MODEL_FILE, to_dict

    out = Path(out)
    if (out / MODEL_FILE).exists():
        raise FileExistsError(f"{out}: a model is already there; choose a new directory")
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_torch(out / MODEL_FILE, {"config": to_dict(cfg), "model": model.state_dict()})
    files = {MODEL_FILE: sha256_file(out / MODEL_FILE)}
    if cfg.obs == "slots":  # the encoder its slots came from, verified when the run is loaded as a policy
        from world_models.train import encoder_weights_file

        files["encoder"] = sha256_file(encoder_weights_file(cfg.encoder))
    manifest = {"kind": "edge-world-model", "command": command, "seed": cfg.seed, "config": to_dict(cfg),
                "git": git_revision(), "script_sha256": sha256_file(Path(script)), "data_sha256": data_sha256,
                "metrics": info, "config_from": {"run": str(config_run),
                                                 "model_sha256": sha256_file(Path(config_run) / MODEL_FILE)},
                "note": "offline: dynamics (and rewards) fitted to collected transitions with the config_from run's "
                        "model, planner and learner settings (its env_steps and the like do not apply); "
                        "policy and value untrained",
                "files": files}
    atomic.write_text(out / MANIFEST_FILE, json.dumps(manifest, indent=2) + "\n")
