"""A world model over the frozen encoder's slots, fitted offline to object play (push3, MuJoCo).

Over oracle slots, agents started from a model fitted offline to ~200k transitions of task-agnostic
object play push the cube home far more often than agents that start from scratch
(``benchmarks/wm_contact_ceiling.py``, docs/world_models.md). This script does the same over what
a camera gives: the frames the run sees, encoded by its frozen slot encoder exactly as in training
(:class:`world_models.observer.Observer`: the previous frame's slots initialise the next frame's).

* **data**: push3 episodes rendered and encoded, ``--group`` episodes in lockstep per worker (the
  encoder batched over them). Training episodes (seeds from ``--train-seed``) are played by
  :class:`world_models.scripted.ObjectPlay` (task-agnostic object play; ε fixed by ``--eps``); the
  test episodes (seeds from ``--test-seed``) by the scripted pusher with ε ~ U[0, 0.5] per episode.
  Both are ``wm_contact_ceiling.py``'s episodes (``--explorer play --eps-min ε --eps-max ε`` for the
  training ones): the same seeds give the same actions and the same physics, seen here through the
  camera. ``--data FILE.npz`` keeps them: a later call with the same
  settings and encoder reads them instead of collecting again.
* **fit** (``--updates`` > 0): ``--config``'s transformer trained from scratch on the training
  episodes (the last 10 % of them pick the checkpoint) with the learner's next-state and reward
  losses (:func:`world_models.offline.fit_offline`); ``--save DIR`` writes it as a verified run
  that ``edge train world-model … --set init_from=DIR`` starts from.
* **measures**, on the test transitions: each model's one-step next-slot error (mean squared, over
  slots and dimensions) against the error of predicting no change, over all acted steps and at
  contact (the red cube moved > 2 mm); for the fitted model and for each ``--agents`` run (world
  models trained over the same encoder).
* **step probe** (``--probe-updates`` > 0): what the slots tell of the red cube's step, in the units
  of the oracle fits (``wm_contact_ceiling.py``). A reader f(s_t, s_t+1) -> the cube's xy step (cm)
  is fitted to the training episodes' real slot pairs (per slot an MLP of [s^k, s'^k − s^k] gives a
  weight logit and a step; the softmax over slots weights the steps, so slot order does not matter;
  the last 10 % of the episodes pick the checkpoint). On the test transitions it reads the real next
  slots (the **ceiling**: how much of the step the slots carry) and each model's predicted next slots
  (how much of the step the model predicts), against the true step: the median ratio of predicted to
  true step length and the median cosine at contact, defined as the oracle fits report them, and R²
  at contact (the oracle fits report R² near the cube instead, not comparable with it).

    python benchmarks/wm_offline_slots.py --config runs/wm_cfg_slots_s0 --train-episodes 3450 \\
        --test-episodes 200 --jobs 2 --data runs/wm_offline_slots_data.npz --updates 8000 \\
        --save runs/wm_offline_slots_s0 --out benchmarks/results/wm_offline_slots_fit_s0.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import writable_file
from edge.errors import EdgeError
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision
from world_models.offline import episodes_sha256

MOVED_M = 0.002  # a step in which the red cube moved further than this is a contact step
FORMAT = 1  # of the --data file


# ---------------------------------------------------------------------------------------- data
_WORKER: dict = {}


def _observer_parts(run: str):
    """(RunConfig, encoder) of a slot run, loaded once per process."""
    if run not in _WORKER:
        import torch

        from world_models.policy import load_world_model
        from world_models.train import load_encoder

        torch.set_num_threads(1)
        cfg, _, _ = load_world_model(run)
        _WORKER[run] = (cfg, load_encoder(cfg.encoder, cfg.encoder_carry_iters))
    return _WORKER[run]


def collect_group(run: str, seeds: list[int], play: bool, eps: float, segment: float) -> list[dict]:
    """Episodes of ``seeds`` in lockstep: ``states`` (T+1, K, D) the encoder's slots, ``actions``,
    ``rewards``, ``success``, ``red`` (T+1, 2) the red cube's xy (m). ``play``: object play with ε =
    ``eps``; else the scripted pusher with ε ~ U[0, 0.5] per episode (drawn from the seed)."""
    from world_models.object_env import ObjectTaskEnv
    from world_models.observer import Observer
    from world_models.scripted import ObjectPlay, scripted_action

    cfg, enc = _observer_parts(run)
    n = len(seeds)
    envs = [ObjectTaskEnv(cfg.env) for _ in range(n)]
    try:
        obs_er = Observer.for_run(cfg, n, encoder=enc)
        rngs = [np.random.default_rng(s) for s in seeds]
        if play:  # one ε draw first, as wm_contact_ceiling.py's: the same seeds play the same episodes there
            actors = [ObjectPlay(r, float(r.uniform(eps, eps)), segment).action for r in rngs]
        else:
            def scripted(r: np.random.Generator):
                e = float(r.uniform(0.0, 0.5))
                return lambda env: int(r.integers(8)) if r.random() < e else scripted_action(env)
            actors = [scripted(r) for r in rngs]
        first = [env.reset(seed=s)[0] for env, s in zip(envs, seeds)]
        s0 = obs_er.observe(first, np.ones(n, bool), np.arange(n))
        eps_out = [{"states": [s0[i]], "actions": [], "rewards": [], "success": False,
                    "red": [env.env.backend.object_pose7("red")[:2].copy()]} for i, env in enumerate(envs)]
        active = list(range(n))
        while active:
            obs_list, still = [], []
            for i in active:
                a = actors[i](envs[i])
                o, r, term, trunc, _ = envs[i].step(a)
                e = eps_out[i]
                e["actions"].append(a)
                e["rewards"].append(r)
                e["red"].append(envs[i].env.backend.object_pose7("red")[:2].copy())
                e["success"] = bool(term)
                obs_list.append(o)
                still.append(not (term or trunc))
            states = obs_er.observe(obs_list, np.zeros(len(active), bool), np.asarray(active))
            for j, i in enumerate(active):
                eps_out[i]["states"].append(states[j])
            active = [i for i, keep in zip(active, still) if keep]
        return [{"states": np.stack(e["states"]).astype(np.float32), "actions": np.asarray(e["actions"], np.int64),
                 "rewards": np.asarray(e["rewards"], np.float32), "success": e["success"],
                 "red": np.asarray(e["red"], np.float64)} for e in eps_out]
    finally:
        for env in envs:
            env.close()


def _collect_chunk(args: tuple) -> list[dict]:
    run, seeds, group, play, eps, segment = args
    out = []
    for i in range(0, len(seeds), group):
        out += collect_group(run, seeds[i:i + group], play, eps, segment)
    return out


def collect(run: str, first_seed: int, n: int, *, play: bool, eps: float, segment: float, jobs: int,
            group: int, progress=None) -> list[dict]:
    """Episodes of seeds ``first_seed`` … ``first_seed + n - 1`` in seed order (see :func:`collect_group`)."""
    seeds = list(range(first_seed, first_seed + n))
    per = 4 * group
    chunks = [seeds[i:i + per] for i in range(0, n, per)]
    work = [(run, c, group, play, eps, segment) for c in chunks]
    out: list[dict] = []
    if jobs <= 1:
        parts = map(_collect_chunk, work)
        pool = None
    else:
        pool = ProcessPoolExecutor(jobs)
        parts = pool.map(_collect_chunk, work)
    try:
        for part in parts:
            out += part
            if progress:
                progress(len(out), n)
    finally:
        if pool is not None:
            pool.shutdown()
    return out


def save_data(path: Path, meta: dict, splits: dict[str, list[dict]]) -> None:
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
    for name, eps in splits.items():
        arrays[f"{name}_lengths"] = np.array([len(e["actions"]) for e in eps], np.int64)
        arrays[f"{name}_success"] = np.array([e["success"] for e in eps], bool)
        for key in ("states", "actions", "rewards", "red"):
            arrays[f"{name}_{key}"] = np.concatenate([e[key] for e in eps])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)


def load_data(path: Path, meta: dict) -> dict[str, list[dict]]:
    """The episodes saved by :func:`save_data`; EdgeError if they were collected with other settings."""
    with np.load(path) as z:
        saved = json.loads(str(z["meta"]))
        if saved != json.loads(json.dumps(meta, sort_keys=True)):
            diff = {k: (saved.get(k), meta.get(k)) for k in set(saved) | set(meta) if saved.get(k) != meta.get(k)}
            raise EdgeError(f"--data {path}: collected with other settings (saved, now): {diff}; "
                            "give another --data file or the settings it was collected with")
        out = {}
        for name in ("train", "test"):
            lengths = z[f"{name}_lengths"]
            s0 = np.concatenate([[0], np.cumsum(lengths + 1)])
            a0 = np.concatenate([[0], np.cumsum(lengths)])
            st, ac, rw, rd, sc = (z[f"{name}_{k}"] for k in ("states", "actions", "rewards", "red", "success"))
            out[name] = [{"states": st[s0[i]:s0[i + 1]], "actions": ac[a0[i]:a0[i + 1]],
                          "rewards": rw[a0[i]:a0[i + 1]], "red": rd[s0[i]:s0[i + 1]], "success": bool(sc[i])}
                         for i in range(len(lengths))]
    return out


# ---------------------------------------------------------------------------------------- measures
def contact_mask(e: dict) -> np.ndarray:
    return np.linalg.norm(np.diff(e["red"], axis=0), axis=1) > MOVED_M


def _step_pairs(episodes: list[dict]):
    """(s_t, s_t+1, the red cube's step in cm) of every acted step, as float32 tensors."""
    import torch

    s = np.concatenate([e["states"][:-1] for e in episodes]).astype(np.float32)
    n = np.concatenate([e["states"][1:] for e in episodes]).astype(np.float32)
    r = np.concatenate([np.diff(e["red"], axis=0) for e in episodes]).astype(np.float32) * 100.0
    return torch.as_tensor(s), torch.as_tensor(n), torch.as_tensor(r)


def make_step_probe(slot_dim: int, hidden: int = 128):
    """f(s, s') (B, K, D) x 2 -> the red cube's step (B, 2) in cm; see the module docstring."""
    from torch import nn

    class StepProbe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2 * slot_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 3))

        def forward(self, s, s_next):
            import torch

            h = self.net(torch.cat([s, s_next - s], -1))  # (B, K, 3)
            return (torch.softmax(h[..., 0], -1)[..., None] * h[..., 1:]).sum(1)

    return StepProbe()


def fit_step_probe(train: list[dict], val: list[dict], updates: int, seed: int = 0, batch: int = 1024,
                   lr: float = 1e-3, log=None):
    """The step probe fitted to ``train``'s real slot pairs (Adam, MSE on the step); the state with the
    lowest ``val`` MSE, checked every 250 updates, is kept. Returns (probe, info)."""
    import copy

    import torch

    if updates < 1 or not train or not val:
        raise ValueError(f"fit_step_probe: need updates >= 1 and training and validation episodes, got {updates}, "
                         f"{len(train)} and {len(val)}")
    torch.manual_seed(seed)
    s, n, r = _step_pairs(train)
    vs, vn, vr = _step_pairs(val)
    probe = make_step_probe(s.shape[-1])
    opt = torch.optim.Adam(probe.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    best, best_state, best_at = float("inf"), None, 0

    def val_mse() -> float:
        with torch.no_grad():
            return float(torch.cat([((probe(vs[i:i + 8192], vn[i:i + 8192]) - vr[i:i + 8192]) ** 2).sum(-1)
                                    for i in range(0, len(vs), 8192)]).mean())

    for u in range(1, updates + 1):
        idx = torch.randint(len(s), (batch,), generator=gen)
        loss = ((probe(s[idx], n[idx]) - r[idx]) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if u % 250 == 0 or u == updates:
            v = val_mse()
            if v < best:
                best, best_state, best_at = v, copy.deepcopy(probe.state_dict()), u
            if log is not None and u % 1000 == 0:
                log(f"  probe update {u}: val step MSE {v:.4f} cm² (best {best:.4f} at {best_at})")
    if best_state is None:
        raise ValueError("fit_step_probe: no finite validation loss (the data holds NaN or inf)")
    probe.load_state_dict(best_state)
    return probe.eval(), {"updates": updates, "best_update": best_at, "val_mse_cm2": round(best, 5),
                          "val_mse_zero_cm2": round(float((vr ** 2).sum(-1).mean()), 5),
                          "train_transitions": len(s), "val_transitions": len(vs)}


def step_measures(pred: np.ndarray, real: np.ndarray) -> dict:
    """Predicted vs real cube steps (cm) at contact (real step > 2 mm): median length ratio, mean
    length ratio, median cosine, R² and the slope of real on predicted (≈ 1 when calibrated)."""
    ln_r, ln_p = np.linalg.norm(real, axis=1), np.linalg.norm(pred, axis=1)
    con = ln_r > 100.0 * MOVED_M
    out = {"steps": int(len(real)), "contact_steps": int(con.sum())}
    if con.any():
        p, r = pred[con], real[con]
        cos = (p * r).sum(1) / np.maximum(ln_p[con] * ln_r[con], 1e-12)
        out.update(length_ratio_median_at_contact=round(float(np.median(ln_p[con] / ln_r[con])), 3),
                   mean_length_ratio_at_contact=round(float(ln_p[con].mean() / ln_r[con].mean()), 3),
                   cosine_median_at_contact=round(float(np.median(cos)), 3),
                   r2_at_contact=round(float(1.0 - ((p - r) ** 2).sum() / max((r ** 2).sum(), 1e-12)), 3),
                   calibration_slope_at_contact=round(float((p * r).sum() / max((p * p).sum(), 1e-12)), 3))
    return out


def mask_centroids(encoder, states: np.ndarray, batch: int = 1024) -> np.ndarray:
    """(N, K, D) slots -> (N, K, D + 3): each slot with its decoder mask's centroid (x, y in pixels of
    the encoder's frame) and its share of the frame, computed from the slot alone (the frozen decoder)."""
    import torch

    x = np.asarray(states, np.float32)
    flat = x.reshape(-1, *x.shape[-2:])
    out = []
    with torch.no_grad():
        for i in range(0, len(flat), batch):
            m = encoder.decode(torch.as_tensor(flat[i:i + batch]))[2]  # (B, K, R, R), softmax over slots
            r = m.shape[-1]
            grid = (torch.arange(r, dtype=m.dtype) + 0.5) * (encoder.cfg.image_size / r)
            mass = m.sum((-1, -2)).clamp_min(1e-6)
            cx, cy = (m.sum(-2) * grid).sum(-1) / mass, (m.sum(-1) * grid).sum(-1) / mass
            out.append(torch.stack([cx, cy, mass / (r * r)], -1).numpy())
    extra = np.concatenate(out).reshape(*x.shape[:-1], 3)
    return np.concatenate([x, extra.astype(np.float32)], -1)


def probe_steps(probe, episodes: list[dict], model=None, context: int = 0, what: str = "model",
                augment=None) -> dict:
    """:func:`step_measures` of the probe reading, on ``episodes``, the real next slots (``what`` =
    "ceiling"), the current slots again ("no_change") or ``model``'s predicted next slots ("model");
    ``augment`` maps slots to what the probe reads (e.g. :func:`mask_centroids`; default: as they are)."""
    import torch

    from world_models.offline import next_state_predictions

    aug = augment or (lambda z: np.asarray(z, np.float32))
    preds, reals = [], []
    for e in episodes:
        s = torch.as_tensor(aug(e["states"][:-1]))
        if what == "ceiling":
            n = torch.as_tensor(aug(e["states"][1:]))
        elif what == "no_change":
            n = s
        else:
            n = torch.as_tensor(aug(next_state_predictions(model, context, e["states"], e["actions"])))
        with torch.no_grad():
            preds.append(probe(s, n).numpy())
        reals.append(np.diff(e["red"], axis=0) * 100.0)
    return step_measures(np.concatenate(preds), np.concatenate(reals))


def slot_errors(model, context: int, episodes: list[dict]) -> dict:
    """One-step next-slot squared error (mean over slots and dimensions) of ``model`` and of the
    no-change prediction, over all acted steps and at contact."""
    from world_models.offline import next_state_predictions

    err, base, contact = [], [], []
    for e in episodes:
        real = e["states"][1:]
        err.append(((next_state_predictions(model, context, e["states"], e["actions"]) - real) ** 2).mean((1, 2)))
        base.append(((e["states"][:-1] - real) ** 2).mean((1, 2)))
        contact.append(contact_mask(e))
    err, base, contact = np.concatenate(err), np.concatenate(base), np.concatenate(contact)
    out = {"mse": float(f"{err.mean():.4g}"), "mse_no_change": float(f"{base.mean():.4g}"),
           "ratio": round(float(err.mean() / base.mean()), 3), "steps": int(len(err)),
           "contact_steps": int(contact.sum())}
    if contact.any():  # else no contact measures (not NaN)
        out.update({"mse_contact": float(f"{err[contact].mean():.4g}"),
                    "mse_no_change_contact": float(f"{base[contact].mean():.4g}"),
                    "ratio_contact": round(float(err[contact].mean() / base[contact].mean()), 3)})
    return out


# ---------------------------------------------------------------------------------------- main
def load_slot_run(run: str, flag: str):
    """(RunConfig, model) of a push3 world-model run over a frozen slot encoder; EdgeError naming ``flag``."""
    from world_models.policy import load_world_model

    if not (Path(run) / "model.pt").is_file():
        raise EdgeError(f"{flag} {run}: not an `edge train world-model` directory (no model.pt)")
    from world_models.object_env import ObjectTaskConfig
    from world_models.train import encoder_weights_file

    cfg, model, _ = load_world_model(run)
    if cfg.obs != "slots" or cfg.env.task != "push3":
        raise EdgeError(f"{flag} {run}: obs={cfg.obs}, task={cfg.env.task}; this needs a push3 run over a slot "
                        "encoder (--obs slots)")
    # the episodes are push3's defaults (wm_contact_ceiling.py's); what the camera shows may differ
    e = cfg.env
    want = ObjectTaskConfig(task="push3", image_size=e.image_size, crop=e.crop, segmentation=e.segmentation,
                            oracle_state=e.oracle_state)
    if e != want:
        diff = {k: v for k, v in asdict(e).items() if getattr(want, k) != v}
        raise EdgeError(f"{flag} {run}: trained with task settings {diff}; the episodes here are push3 with the "
                        "default settings, so this run's model would be fitted or read on another task")
    if not encoder_weights_file(cfg.encoder).is_file():
        raise EdgeError(f"{flag} {run}: its encoder {cfg.encoder!r} is not there (run from the directory it was "
                        "trained in, or restore the encoder)")
    return cfg, model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True,
                    help="RUN over a slot encoder whose env, encoder, model and learner settings the data and fit use")
    ap.add_argument("--train-episodes", type=int, default=3450, help="object-play episodes to collect")
    ap.add_argument("--test-episodes", type=int, default=200, help="test episodes (never fitted)")
    ap.add_argument("--train-seed", type=int, default=830_000_000, help="first training episode's seed")
    ap.add_argument("--test-seed", type=int, default=840_000_000, help="first test episode's seed")
    ap.add_argument("--eps", type=float, default=0.2, help="object play: probability of a uniform random action")
    ap.add_argument("--play-segment", type=float, default=20.0, help="object play: mean steps per cube and aim")
    ap.add_argument("--jobs", type=int, default=1, help="processes collecting episodes")
    ap.add_argument("--group", type=int, default=8, help="episodes each process plays in lockstep")
    ap.add_argument("--data", default="", help="FILE.npz: read the episodes from it, or save them there")
    ap.add_argument("--updates", type=int, default=0, help="offline fit updates (0: no fit)")
    ap.add_argument("--fit-seed", type=int, default=0, help="the fit's torch and sampling seed")
    ap.add_argument("--no-reward", action="store_true", help="fit the next-state loss alone")
    ap.add_argument("--save", default="", help="DIR: save the fitted model as a world-model run (init_from)")
    ap.add_argument("--agents", nargs="*", default=[], help="NAME=RUN world models over the same encoder to read")
    ap.add_argument("--probe-updates", type=int, default=0,
                    help="fit the red cube's step probe with this many updates and read every model through it "
                         "(0: no probe)")
    ap.add_argument("--probe-centroids", action="store_true",
                    help="the probe also reads each slot's decoder-mask centroid and share of the frame (computed "
                         "from the slot by the frozen decoder)")
    ap.add_argument("--probe-episodes", type=int, default=0,
                    help="fit the probe to the first N training episodes only (0: all; to compare encoders whose "
                         "data files hold different numbers of episodes)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_offline_slots.json")
    args = ap.parse_args(argv)
    for key in ("train_episodes", "test_episodes", "jobs", "group"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} {getattr(args, key)}: must be >= 1")
    if args.train_episodes < 2:
        ap.error(f"--train-episodes {args.train_episodes}: need >= 2 (the last 10 % pick the fit's checkpoint)")
    if not 0.0 <= args.eps <= 1.0:
        ap.error(f"--eps {args.eps}: need 0 <= eps <= 1")
    if not (math.isfinite(args.play_segment) and args.play_segment >= 1.0):
        ap.error(f"--play-segment {args.play_segment}: must be a finite number >= 1 step")
    for key in ("train_seed", "test_seed", "fit_seed"):
        if getattr(args, key) < 0:
            ap.error(f"--{key.replace('_', '-')} {getattr(args, key)}: must be >= 0")
    if args.data and Path(args.data).exists() and not Path(args.data).is_file():
        ap.error(f"--data {args.data}: not a file; give the .npz file to read or write")
    if args.updates < 0:
        ap.error(f"--updates {args.updates}: must be >= 0")
    if args.probe_updates < 0:
        ap.error(f"--probe-updates {args.probe_updates}: must be >= 0")
    if args.probe_episodes < 0 or args.probe_episodes == 1:
        ap.error(f"--probe-episodes {args.probe_episodes}: must be 0 (all) or >= 2")
    if args.probe_centroids and not args.probe_updates:
        ap.error("--probe-centroids needs --probe-updates > 0 (a probe to fit)")
    if args.probe_episodes and not args.probe_updates:
        ap.error("--probe-episodes needs --probe-updates > 0 (a probe to fit)")
    if args.probe_episodes > args.train_episodes:
        ap.error(f"--probe-episodes {args.probe_episodes}: more than --train-episodes {args.train_episodes}")
    if args.save and not args.updates:
        ap.error("--save needs --updates > 0 (a fit to save)")
    if args.save and (Path(args.save) / "model.pt").exists():
        ap.error(f"--save {args.save}: a model is already there; choose a new directory")
    if abs(args.train_seed - args.test_seed) < max(args.train_episodes, args.test_episodes):
        ap.error(f"--train-seed {args.train_seed} and --test-seed {args.test_seed}: the episode ranges overlap")
    agents = {}
    for a in args.agents:
        name, sep, run = a.partition("=")
        if not sep or not name or not run:
            ap.error(f"--agents {a!r}: expected NAME=RUN")
        if name in agents:
            ap.error(f"--agents {a!r}: the name {name!r} is given twice")
        agents[name] = run
    try:
        cfg, _ = load_slot_run(args.config, "--config")
        loaded = {}
        for name, run in agents.items():
            acfg, amodel = loaded[name] = load_slot_run(run, "--agents")
            if (acfg.encoder, acfg.encoder_carry_iters, acfg.env) != (cfg.encoder, cfg.encoder_carry_iters, cfg.env):
                raise EdgeError(f"--agents {name}={run}: its encoder / tracking rounds / env settings differ from "
                                f"--config {args.config}'s; its model would be read on other slots")
    except EdgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from edge.digest import sha256_file
    from world_models.train import encoder_weights_file

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def progress(done: int, total: int) -> None:
        if not args.no_progress:
            log(f"  {done}/{total} episodes")

    meta = {"format": FORMAT, "env": asdict(cfg.env),
            "encoder_sha256": sha256_file(encoder_weights_file(cfg.encoder)),
            "encoder_carry_iters": cfg.encoder_carry_iters, "train_seed": args.train_seed,
            "train_episodes": args.train_episodes, "test_seed": args.test_seed, "test_episodes": args.test_episodes,
            "eps": args.eps, "play_segment": args.play_segment}
    t0 = time.perf_counter()
    data_path = Path(args.data) if args.data else None
    if data_path is not None and data_path.is_file():
        try:
            splits = load_data(data_path, meta)
        except EdgeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (OSError, ValueError, KeyError) as e:
            print(f"error: --data {data_path}: not a file this script wrote ({e.__class__.__name__}: {e}); "
                  "give another --data file or remove this one", file=sys.stderr)
            return 2
        log(f"read {len(splits['train'])} + {len(splits['test'])} episodes from {data_path}")
        collected = False
    else:
        log(f"collecting {args.train_episodes} object-play + {args.test_episodes} test episodes "
            f"({args.jobs} jobs, {args.group} in lockstep)")
        kw = {"eps": args.eps, "segment": args.play_segment, "jobs": args.jobs, "group": args.group,
              "progress": progress}
        splits = {"train": collect(args.config, args.train_seed, args.train_episodes, play=True, **kw),
                  "test": collect(args.config, args.test_seed, args.test_episodes, play=False, **kw)}
        if data_path is not None:
            save_data(data_path, meta, splits)
            log(f"saved the episodes to {data_path}")
        collected = True
    t_data = time.perf_counter() - t0
    train, test = splits["train"], splits["test"]
    n_train = sum(len(e["actions"]) for e in train)
    res = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine_info(), "git_revision": git_revision(),
           "script_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
           "config": args.config,
           "data": {**meta, "file": args.data, "collected_now": collected, "data_s": round(t_data, 1),
                    "train_transitions": n_train, "test_transitions": sum(len(e["actions"]) for e in test),
                    "train_sha256": episodes_sha256(train), "test_sha256": episodes_sha256(test),
                    "train_contact_share": round(float(np.mean(np.concatenate([contact_mask(e) for e in train]))), 3),
                    "test_contact_share": round(float(np.mean(np.concatenate([contact_mask(e) for e in test]))), 3),
                    "test_success": round(float(np.mean([e["success"] for e in test])), 3)},
           "fit": None, "agents": {}, "probe": None}
    log(f"  {n_train} training transitions ({res['data']['train_contact_share']:.1%} move the red cube), "
        f"{res['data']['test_transitions']} test, {t_data:.0f} s")
    k_fit = max(1, min(len(train) - 1, int(round(0.9 * len(train)))))
    probe, augment = None, None
    if args.probe_updates:
        t1 = time.perf_counter()
        pool = train[:args.probe_episodes] if args.probe_episodes else train
        k_probe = max(1, min(len(pool) - 1, int(round(0.9 * len(pool)))))
        log(f"step probe: {args.probe_updates} updates on {k_probe} episodes, checkpoint picked on {len(pool) - k_probe}")
        if args.probe_centroids:
            _, encoder = _observer_parts(args.config)
            augment = lambda z: mask_centroids(encoder, z)  # noqa: E731
            pool = [{**e, "states": augment(e["states"])} for e in pool]
        probe, info = fit_step_probe(pool[:k_probe], pool[k_probe:], args.probe_updates, seed=args.fit_seed, log=log)
        info.update(episodes=len(pool), centroids=bool(args.probe_centroids))
        res["probe"] = {**info, "ceiling": probe_steps(probe, test, what="ceiling", augment=augment),
                        "no_change": probe_steps(probe, test, what="no_change", augment=augment),
                        "wall_s": round(time.perf_counter() - t1, 1)}
        log(f"  ceiling {json.dumps(res['probe']['ceiling'])}")
    if args.updates:
        from world_models.offline import fit_offline, save_offline

        t1 = time.perf_counter()
        log(f"offline fit: {args.updates} updates on {k_fit} episodes, checkpoint picked on {len(train) - k_fit}")
        model, info = fit_offline(cfg, train[:k_fit], train[k_fit:], args.updates, seed=args.fit_seed,
                                  reward=not args.no_reward, log=log)
        m = slot_errors(model, cfg.planner.context, test)
        res["fit"] = {**info, "fit_seed": args.fit_seed, **m, "wall_s": round(time.perf_counter() - t1, 1)}
        if probe is not None:
            res["fit"]["probe_step"] = probe_steps(probe, test, model, cfg.planner.context, augment=augment)
        log(f"  {json.dumps(m)}")
        if args.save:
            save_offline(Path(args.save), cfg, model, {**info, **m}, res["command"], res["data"]["train_sha256"],
                         args.config, Path(__file__))
            res["saved"] = args.save
            log(f"saved the fitted model to {args.save}")
    for name, run in agents.items():
        acfg, amodel = loaded[name]
        res["agents"][name] = {"run": run, **slot_errors(amodel, acfg.planner.context, test)}
        if probe is not None:
            res["agents"][name]["probe_step"] = probe_steps(probe, test, amodel, acfg.planner.context,
                                                            augment=augment)
        log(f"{name}: {json.dumps(res['agents'][name])}")
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
