"""Is the red cube's step at contact predictable from the oracle state? (push3, MuJoCo)

The trained world models predict a quarter to two fifths of the cube's real step at contact
(``benchmarks/wm_push_diagnosis.py``). This script asks how much of that step one step's oracle
state determines at all, with far more data than any world-model run had:

* **data**: the simulator stepped without rendering under the scripted push policy
  (``world_models/scripted.py``), each step replaced by a uniform random action with probability
  ε drawn per episode from [``--eps-min``, ``--eps-max``] (test episodes: [0, 0.5] always); an
  episode ends on success or at the task's step limit. Training episodes from ``--train-seed``, test episodes from ``--test-seed``.
  ``--explorer`` sets what plays the training episodes instead of the scripted pusher (the test
  episodes never change): ``sticky``, uniform random actions each kept for the next step with
  probability ``--hold`` (reads nothing of the state); ``play``, task-agnostic object play: push a
  cube drawn uniformly from all three towards a point 5–20 cm from it in a uniform direction, a new
  draw after a geometric number of steps (mean ``--play-segment``), each step a uniform random
  action with probability ε as above. ``play`` reads the cubes' and TCP's positions (what the
  oracle agents observe) but neither the goal nor which cube is the target.
* **regressors**: an MLP fitted to the red cube's xy step (cm) from one step's state and action, on
  the first n training transitions for each ``--sizes`` n, with the ``pose`` features (the entities'
  positions, the cube relative to the TCP and the distractors relative to the cube: what the
  default world models see, re-expressed) and the ``control`` features (also the arm's lag behind
  its commanded target and the cubes' yaw as cos 4ψ, sin 4ψ). The last 10 % of the subset's
  episodes pick the best checkpoint (early stopping); the test episodes are used only for the
  report.
* **world models** (``--agents``, oracle push3 runs): each one's next-state prediction for the acted
  action, from its own context window of the test episode's states (the run's oracle map).

Measures on the test transitions, per predictor: at contact (the real step > 2 mm) the median ratio
of predicted to real step length and the median cosine (the diagnosis's definitions); over all
steps with the TCP within ``--near-cm`` of the cube: R² of the step (xy, around 0), the calibration
slope of the real step on the predicted one (through the origin; ≈ 1 for a model that predicts the
mean step given its inputs) and the slope of the predicted on the real one.

    python benchmarks/wm_contact_ceiling.py --train-episodes 3400 --test-episodes 200 --jobs 2 \\
        --agents control_s0=runs/wm_bench_push3_oracle_6k/push3_oracle_s0 \\
        --out benchmarks/results/wm_contact_ceiling.json
"""

from __future__ import annotations

import argparse
import math
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge import atomic
from edge.argtypes import writable_file
from edge.errors import EdgeError
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision
from world_models.offline import next_state_predictions, save_offline

MOVED_M = 0.002  # a step in which the red cube moved further than this is a contact step
FEATURE_SETS = ("pose", "control")


# ---------------------------------------------------------------------------------------- data
EXPLORERS = ("scripted", "sticky", "play")


def collect_episode(seed: int, eps_max: float, distractors: int = 2, eps_min: float = 0.0,
                    explorer: str = "scripted", hold: float = 0.9, play_segment: float = 20.0) -> dict:
    """One push3 episode: ``feats`` (T+1, N, 12) control-layout oracle features (the first 8 are the
    pose layout), ``actions`` (T,), ``red`` (T+1, 2) and ``tcp`` (T+1, 2) in metres. ``explorer``:
    see the module docstring."""
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
    from world_models.scripted import ObjectPlay, scripted_action

    if explorer not in EXPLORERS:
        raise ValueError(f"explorer {explorer!r}; choose one of {EXPLORERS}")

    env = ObjectTaskEnv(ObjectTaskConfig(task="push3", distractors=distractors, oracle_state="control"))
    try:
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        eps = float(rng.uniform(eps_min, eps_max))
        feats, acts, rews, red, tcp = [env.oracle_now()], [], [], [], []

        def poses():
            red.append(env.env.backend.object_pose7("red")[:2].copy())
            tcp.append(env._tcp()[:2].copy())

        poses()
        success = False
        play = ObjectPlay(rng, eps, play_segment) if explorer == "play" else None
        prev = -1
        for _ in range(env.cfg.steps):
            if explorer == "sticky":
                a = prev if prev >= 0 and rng.random() < hold else int(rng.integers(8))
            elif play is not None:
                a = play.action(env)
            else:
                a = int(rng.integers(8)) if rng.random() < eps else scripted_action(env)
            prev = a
            r, success = env.simulate(a)
            acts.append(a)
            rews.append(r)
            feats.append(env.oracle_now())
            poses()
            if success:
                break
        return {"feats": np.stack(feats).astype(np.float32), "actions": np.asarray(acts, np.int64),
                "rewards": np.asarray(rews, np.float32), "red": np.asarray(red), "tcp": np.asarray(tcp), "eps": eps,
                "success": bool(success)}
    finally:
        env.close()


def _collect_chunk(args: tuple) -> list[dict]:
    seeds, eps_max, eps_min, kw = args
    return [collect_episode(s, eps_max, eps_min=eps_min, **kw) for s in seeds]


def collect(first_seed: int, n: int, eps_max: float, jobs: int, eps_min: float = 0.0, **explorer) -> list[dict]:
    """Episodes of seeds ``first_seed`` … ``first_seed + n - 1``; ``explorer``: :func:`collect_episode`'s
    ``explorer``, ``hold`` and ``play_segment``."""
    seeds = list(range(first_seed, first_seed + n))
    if jobs <= 1:
        return _collect_chunk((seeds, eps_max, eps_min, explorer))
    chunks = [seeds[i::jobs * 4] for i in range(jobs * 4)]
    with ProcessPoolExecutor(jobs) as pool:
        parts = list(pool.map(_collect_chunk, [(c, eps_max, eps_min, explorer) for c in chunks]))
    by_seed = {s: ep for c, part in zip(chunks, parts) for s, ep in zip(c, part)}
    return [by_seed[s] for s in seeds]


def data_hash(episodes: list[dict]) -> str:
    h = hashlib.sha256()
    for e in episodes:
        h.update(e["feats"].tobytes())
        h.update(e["actions"].tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------- features
def features(e: dict, kind: str) -> np.ndarray:
    """(T, F) regressor inputs for each step of an episode (state at t and the action a_t)."""
    if kind not in FEATURE_SETS:
        raise ValueError(f"feature set {kind!r}; choose one of {FEATURE_SETS}")
    f = e["feats"][:-1]  # (T, N, 12): robot, goal, red, distractors
    pos = f[..., :3]  # normalised positions
    parts = [pos.reshape(len(f), -1),  # every entity's position
             pos[:, 2] - pos[:, 0],  # the red cube relative to the TCP
             (pos[:, 3:, :2] - pos[:, 2:3, :2]).reshape(len(f), -1),  # distractors relative to the cube
             np.eye(8, dtype=np.float32)[e["actions"]]]
    if kind == "control":
        parts += [f[:, 0, 8:10], f[:, 2:, 10:12].reshape(len(f), -1)]  # lag; the cubes' yaw
    return np.concatenate(parts, 1).astype(np.float32)


def targets(e: dict) -> np.ndarray:
    """(T, 2) the red cube's xy step in cm."""
    return (100.0 * np.diff(e["red"], axis=0)).astype(np.float32)


def near(e: dict, near_cm: float) -> np.ndarray:
    """(T,) bool: the TCP within ``near_cm`` of the red cube (xy) at t."""
    return 100.0 * np.linalg.norm(e["red"][:-1] - e["tcp"][:-1], axis=1) < near_cm


# ---------------------------------------------------------------------------------------- regressor
def fit_mlp(x: np.ndarray, y: np.ndarray, xv: np.ndarray, yv: np.ndarray, *, hidden: int = 256,
            max_updates: int = 20000, epochs: int = 40, batch: int = 512, lr: float = 1e-3, seed: int = 0,
            log=None):
    """An MLP (3 hidden layers) fitted by squared error; returns ``(predict, info)`` with the
    checkpoint of lowest validation error (checked every 250 updates)."""
    import copy

    import torch
    from torch import nn

    torch.manual_seed(seed)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    net = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                        nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, y.shape[1]))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    xt, yt = torch.as_tensor((x - mu) / sd), torch.as_tensor(y)
    xvt, yvt = torch.as_tensor((xv - mu) / sd), torch.as_tensor(yv)
    updates = int(min(max_updates, max(2000, epochs * len(x) / batch)))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, updates)
    gen = torch.Generator().manual_seed(seed)
    best, best_state, best_at = float("inf"), None, 0
    for u in range(1, updates + 1):
        idx = torch.randint(len(xt), (min(batch, len(xt)),), generator=gen)
        loss = ((net(xt[idx]) - yt[idx]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if u % 250 == 0 or u == updates:
            with torch.no_grad():
                v = float(((net(xvt) - yvt) ** 2).mean())
            if v < best:
                best, best_state, best_at = v, copy.deepcopy(net.state_dict()), u
    net.load_state_dict(best_state)
    net.eval()
    if log:
        log(f"  {len(x)} transitions: {updates} updates, best validation MSE {best:.4f} cm² at {best_at}")

    def predict(xq: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor((xq - mu) / sd)).numpy()

    return predict, {"updates": updates, "best_update": best_at, "validation_mse_cm2": round(best, 5)}


# ---------------------------------------------------------------------------------------- world models
def token_steps(model, proj: np.ndarray, context: int, episodes: list[dict]) -> list[np.ndarray]:
    """A token world model's predicted red-cube xy step (cm) for each acted step of each episode, from
    its own context window of the episode's states (oracle features through ``proj``)."""
    from world_models.object_env import _CENTER_M, _SCALE_M

    nf = proj.shape[0]
    pinv = np.linalg.pinv(proj)
    out = []
    for e in episodes:
        states = (e["feats"][..., :nf] @ proj).astype(np.float32)  # (T+1, N, D)
        nxt = next_state_predictions(model, context, states, e["actions"])  # (T, N, D)
        red_next = (nxt[:, 2] @ pinv)[:, :2] * _SCALE_M[:2] + _CENTER_M[:2]
        out.append((100.0 * (red_next - e["red"][:-1])).astype(np.float32))
    return out


def load_oracle_run(run: str | Path):
    """(RunConfig, model, the run's oracle map) of a trained oracle push3 world model."""
    from world_models.observer import oracle_map
    from world_models.policy import load_world_model

    from dataclasses import asdict

    from world_models.object_env import ObjectTaskConfig

    cfg, model, _ = load_world_model(run)
    if cfg.obs != "oracle" or cfg.env.task != "push3":
        raise EdgeError(f"{run}: obs={cfg.obs}, task={cfg.env.task}; this needs an oracle push3 run")
    # the collected data's task: push3's defaults; what the run sees (oracle_state), its frames (never read
    # here) and its step limit (the dynamics and rewards do not depend on it) may differ
    e = cfg.env
    want = ObjectTaskConfig(task="push3", oracle_state=e.oracle_state, image_size=e.image_size, crop=e.crop,
                            segmentation=e.segmentation, max_steps=e.max_steps)
    if cfg.env != want:
        diff = {k: v for k, v in asdict(cfg.env).items() if getattr(want, k) != v}
        raise EdgeError(f"{run}: trained with task settings {diff}; the collected episodes are push3 with the "
                        "default settings, so this run's model would be read or fitted on another task")
    return cfg, model, oracle_map(len(cfg.env.oracle_layout), cfg.model.slot_dim, cfg.seed)


def world_model_steps(run: str | Path, episodes: list[dict]) -> list[np.ndarray]:
    """:func:`token_steps` of a trained oracle push3 world model (its own oracle map and context)."""
    cfg, model, proj = load_oracle_run(run)
    return token_steps(model, proj, cfg.planner.context, episodes)


def replay_episodes(run: str | Path) -> tuple[list[dict], int]:
    """A pose-oracle push3 run's replay (the agent's own play) as collected episodes (pose features
    decoded from its slots, the control features zero), and the run's seed."""
    import torch

    from world_models.object_env import _CENTER_M, _SCALE_M
    from world_models.train import STATE_FILE

    cfg, _, proj = load_oracle_run(run)
    if proj.shape[0] != 8:
        raise EdgeError(f"{run}: env.oracle_state={cfg.env.oracle_state!r}; the replay arm reads pose runs")
    atomic.verify_torch_file(Path(run) / STATE_FILE)
    eps = torch.load(Path(run) / STATE_FILE, weights_only=False)["replay"]
    out = []
    for e in eps:
        f = np.zeros((len(e.states), e.states.shape[1], 12), np.float32)
        f[..., :8] = e.states @ np.linalg.pinv(proj)
        if not np.allclose(f[..., 7], 1.0, atol=1e-3):
            raise EdgeError(f"{run}: its replay does not decode with the run's oracle map (bias feature != 1)")
        xy = f[..., :2] * _SCALE_M[:2] + _CENTER_M[:2]
        out.append({"feats": f, "actions": np.asarray(e.actions, np.int64), "red": xy[:, 2], "tcp": xy[:, 0],
                    "rewards": np.asarray(e.rewards, np.float32), "success": bool(e.terminated)})
    return out, cfg.seed


def fit_token_model(cfg, proj: np.ndarray, train: list[dict], val: list[dict], updates: int, seed: int = 0,
                    reward: bool = False, log=None):
    """:func:`world_models.offline.fit_offline` on collected episodes, their oracle features seen
    through ``proj`` (the run's oracle map)."""
    from world_models.offline import fit_offline

    def states(eps: list[dict]) -> list[dict]:
        return [{**e, "states": (e["feats"][..., :proj.shape[0]] @ proj).astype(np.float32)} for e in eps]

    return fit_offline(cfg, states(train), states(val), updates, seed=seed, reward=reward, log=log)


# ---------------------------------------------------------------------------------------- measures
def measures(pred: np.ndarray, real: np.ndarray, near_mask: np.ndarray) -> dict:
    """The report's measures of predicted vs real cube steps (cm), see the module docstring."""
    ln_r, ln_p = np.linalg.norm(real, axis=1), np.linalg.norm(pred, axis=1)
    con = ln_r > 100.0 * MOVED_M
    out = {"steps": int(len(real)), "contact_steps": int(con.sum()), "near_steps": int(near_mask.sum())}
    if con.any():
        cos = (pred[con] * real[con]).sum(1) / np.maximum(ln_p[con] * ln_r[con], 1e-12)
        out.update(length_ratio_median_at_contact=round(float(np.median(ln_p[con] / ln_r[con])), 3),
                   cosine_median_at_contact=round(float(np.median(cos)), 3),
                   mean_length_ratio_at_contact=round(float(ln_p[con].mean() / ln_r[con].mean()), 3))
    if near_mask.any():
        p, r = pred[near_mask], real[near_mask]
        out.update(r2_near=round(float(1.0 - ((p - r) ** 2).sum() / max((r ** 2).sum(), 1e-12)), 3),
                   calibration_slope_near=round(float((p * r).sum() / max((p * p).sum(), 1e-12)), 3),
                   pred_on_real_slope_near=round(float((p * r).sum() / max((r * r).sum(), 1e-12)), 3))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-episodes", type=int, default=3400, help="training episodes to collect")
    ap.add_argument("--test-episodes", type=int, default=200, help="test episodes (never used for fitting)")
    ap.add_argument("--train-seed", type=int, default=830_000_000, help="first training episode's seed")
    ap.add_argument("--test-seed", type=int, default=840_000_000, help="first test episode's seed")
    ap.add_argument("--eps-max", type=float, default=0.5,
                    help="per-episode random-action probability ~ U[--eps-min, this] (training episodes)")
    ap.add_argument("--eps-min", type=float, default=0.0, help="see --eps-max (1 with --eps-max 1: random actions only)")
    ap.add_argument("--explorer", default="scripted", choices=EXPLORERS,
                    help="what plays the training episodes: the scripted pusher (with ε), sticky random actions, "
                         "or task-agnostic object play (with ε)")
    ap.add_argument("--hold", type=float, default=0.9, help="--explorer sticky: probability of keeping the last action")
    ap.add_argument("--play-segment", type=float, default=20.0,
                    help="--explorer play: mean steps before a new cube and aim are drawn")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 6000, 20000, 60000, 200000],
                    help="training transitions per fit (the first n; capped at what was collected)")
    ap.add_argument("--features", nargs="*", default=list(FEATURE_SETS),
                    help=f"regressor feature sets, of {FEATURE_SETS} (none: no regressor on the collected data)")
    ap.add_argument("--max-updates", type=int, default=20000, help="regressor updates per fit, at most")
    ap.add_argument("--near-cm", type=float, default=8.0, help="TCP-cube distance of the near-cube measures")
    ap.add_argument("--agents", nargs="*", default=[], help="NAME=RUN oracle push3 world-model runs to read")
    ap.add_argument("--replay-runs", nargs="*", default=[],
                    help="NAME=RUN pose-oracle push3 runs: fit the regressor (pose) to the agent's own replay, "
                         "and the token model too with --token-updates")
    ap.add_argument("--token-config", default="", help="RUN whose model, context, learner settings and oracle map "
                                                       "the token-model fits on the collected data use")
    ap.add_argument("--token-sizes", type=int, nargs="*", default=[],
                    help="collected transitions per token-model fit (needs --token-config)")
    ap.add_argument("--token-updates", type=int, nargs="*", default=[],
                    help="updates per token-model fit: one per --token-sizes entry, then one for the replay runs")
    ap.add_argument("--token-reward", action="store_true",
                    help="token-model fits on the collected data also learn the reward (the learner's loss)")
    ap.add_argument("--save-token", default="", help="DIR: save the last token-model fit on the collected data "
                                                     "as a world-model run directory")
    ap.add_argument("--jobs", type=int, default=1, help="processes collecting episodes")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_contact_ceiling.json")
    args = ap.parse_args(argv)
    for key in ("train_episodes", "test_episodes", "jobs", "max_updates"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} {getattr(args, key)}: must be >= 1")
    if not 0.0 <= args.eps_min <= args.eps_max <= 1.0:
        ap.error(f"--eps-min {args.eps_min} / --eps-max {args.eps_max}: need 0 <= min <= max <= 1")
    if not 0.0 <= args.hold < 1.0:
        ap.error(f"--hold {args.hold}: need 0 <= hold < 1")
    if not (math.isfinite(args.near_cm) and args.near_cm > 0):
        ap.error(f"--near-cm {args.near_cm}: need a finite distance > 0 (cm)")
    if args.play_segment < 1.0:
        ap.error(f"--play-segment {args.play_segment}: must be >= 1 step")
    if args.explorer == "sticky" and (args.eps_min, args.eps_max) != (0.0, 0.5):
        ap.error("--eps-min / --eps-max with --explorer sticky: its actions are all random; drop them")
    if min(args.sizes) < 100:
        ap.error(f"--sizes {args.sizes}: each must be >= 100 transitions")
    bad = [f for f in args.features if f not in FEATURE_SETS]
    if bad:
        ap.error(f"--features {bad}: choose from {FEATURE_SETS}")
    if abs(args.train_seed - args.test_seed) < max(args.train_episodes, args.test_episodes):
        ap.error(f"--train-seed {args.train_seed} and --test-seed {args.test_seed}: the episode ranges overlap")
    if args.token_sizes and not args.token_config:
        ap.error("--token-sizes needs --token-config RUN")
    if (args.save_token or args.token_reward) and not args.token_sizes:
        ap.error("--save-token and --token-reward need --token-sizes (a token-model fit on the collected data)")
    if args.save_token and (Path(args.save_token) / "model.pt").exists():
        ap.error(f"--save-token {args.save_token}: a model is already there; choose a new directory")
    want_upd = len(args.token_sizes) + (1 if args.replay_runs and args.token_updates else 0)
    if args.token_updates and len(args.token_updates) != want_upd or args.token_sizes and not args.token_updates:
        ap.error(f"--token-updates {args.token_updates}: give {want_upd} (one per --token-sizes entry"
                 f"{', then one for --replay-runs' if args.replay_runs else ''})")
    if len(set(args.token_sizes)) != len(args.token_sizes):
        ap.error(f"--token-sizes {args.token_sizes}: each size once")
    if any(u < 1 for u in args.token_updates):
        ap.error(f"--token-updates {args.token_updates}: each must be >= 1")
    for key in ("agents", "replay_runs"):
        for a in getattr(args, key):
            name, sep, run = a.partition("=")
            if not sep or not name or not run:
                ap.error(f"--{key.replace('_', '-')} {a!r}: expected NAME=RUN, an `edge train world-model` directory")
            if not (Path(run) / "model.pt").is_file():
                ap.error(f"--{key.replace('_', '-')} {a!r}: {run} " + ("holds no model.pt" if Path(run).is_dir() else
                         "does not exist") + " (give an `edge train world-model` directory)")
    if args.token_config and not (Path(args.token_config) / "model.pt").is_file():
        ap.error(f"--token-config {args.token_config}: not an `edge train world-model` directory")
    # each run is read once now, so that one of another kind is refused before anything is collected
    for flag, runs in (("--agents", [a.partition("=")[2] for a in args.agents]),
                       ("--replay-runs", [a.partition("=")[2] for a in args.replay_runs]),
                       ("--token-config", [args.token_config] if args.token_config else [])):
        for run in runs:
            try:
                cfg, _, proj = load_oracle_run(run)
            except (EdgeError, ValueError, OSError) as err:
                ap.error(f"{flag} " + (str(err) if str(err).startswith(str(run)) else f"{run}: {err}"))
            if flag == "--replay-runs" and proj.shape[0] != 8:
                ap.error(f"{flag} {run}: env.oracle_state={cfg.env.oracle_state!r}; the replay arm reads pose runs")
            if flag == "--replay-runs":  # its replay is read after the collection and the fits
                from world_models.train import STATE_FILE

                try:
                    atomic.verify_torch_file(Path(run) / STATE_FILE)
                except EdgeError as err:
                    ap.error(f"{flag} {err}")
    agents = {}
    for a in args.agents:
        name, _, run = a.partition("=")
        agents[name] = run

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    log(f"collecting {args.train_episodes} training + {args.test_episodes} test episodes ({args.jobs} jobs)")
    train = collect(args.train_seed, args.train_episodes, args.eps_max, args.jobs, args.eps_min,
                    explorer=args.explorer, hold=args.hold, play_segment=args.play_segment)
    test = collect(args.test_seed, args.test_episodes, 0.5, args.jobs)  # the test episodes never change
    t_collect = time.perf_counter() - t0
    n_train = sum(len(e["actions"]) for e in train)
    real = np.concatenate([targets(e) for e in test])
    near_mask = np.concatenate([near(e, args.near_cm) for e in test])
    log(f"  {n_train} training and {len(real)} test transitions in {t_collect:.0f} s")
    res = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine_info(), "git_revision": git_revision(),
           "script_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
           "data": {"explorer": {"name": args.explorer, "hold": args.hold, "play_segment": args.play_segment},
                    "train_episodes": len(train), "train_transitions": n_train, "test_episodes": len(test),
                    "test_transitions": int(len(real)), "train_sha256": data_hash(train),
                    "test_sha256": data_hash(test), "collect_s": round(t_collect, 1),
                    "train_contact_share": round(float(np.mean(np.concatenate(
                        [np.linalg.norm(targets(e), axis=1) > 100 * MOVED_M for e in train]))), 3),
                    "test_success": round(float(np.mean([e["success"] for e in test])), 3)},
           "regressors": {}, "world_models": {}, "token_models": {}, "replay_regressors": {}}
    # episode boundaries of the training transitions, to take the first n and hold out the last 10 %
    ends = np.cumsum([len(e["actions"]) for e in train])

    def split(n: int, flag: str) -> tuple[int, int, int, int]:
        """Episodes covering n transitions, how many of them are fitted, and the transition counts."""
        k = int(np.searchsorted(ends, n)) + 1
        k_fit = max(1, min(k - 1, int(round(0.9 * k))))
        n_fit, n_end = int(ends[k_fit - 1]), int(ends[k - 1])
        if n_fit >= n_end:
            ap.error(f"{flag} {n}: too few episodes to hold some out for early stopping")
        return k, k_fit, n_fit, n_end

    # every size is checked against the collected data before anything is fitted
    for n in sorted({min(s, n_train) for s in args.sizes}) if args.features else []:
        split(n, "--sizes")
    seen: set[int] = set()
    for n in args.token_sizes:
        split(min(n, n_train), "--token-sizes")
        if min(n, n_train) in seen:
            ap.error(f"--token-sizes {n}: more than the {n_train} transitions collected, as another size is")
        seen.add(min(n, n_train))
    for kind in args.features:
        x_all = np.concatenate([features(e, kind) for e in train])
        y_all = np.concatenate([targets(e) for e in train])
        x_test = np.concatenate([features(e, kind) for e in test])
        for n in sorted({min(s, n_train) for s in args.sizes}):
            k, k_fit, n_fit, n_end = split(n, "--sizes")
            t1 = time.perf_counter()
            log(f"{kind}: fit on {n_fit} transitions, early stopping on {n_end - n_fit}")
            predict, info = fit_mlp(x_all[:n_fit], y_all[:n_fit], x_all[n_fit:n_end], y_all[n_fit:n_end],
                                    max_updates=args.max_updates, log=log)
            m = measures(predict(x_test), real, near_mask)
            res["regressors"][f"{kind}_{n}"] = {"features": kind, "transitions": n_end, "fit": n_fit, **info, **m,
                                                "wall_s": round(time.perf_counter() - t1, 1)}
            log(f"  {json.dumps(m)}")
    for name, run in agents.items():
        t1 = time.perf_counter()
        pred = np.concatenate(world_model_steps(run, test))
        res["world_models"][name] = {"run": run, **measures(pred, real, near_mask),
                                     "wall_s": round(time.perf_counter() - t1, 1)}
        log(f"{name}: {json.dumps(res['world_models'][name])}")
    if args.token_sizes:
        tcfg, _, tproj = load_oracle_run(args.token_config)
        res["token_config"] = args.token_config
        for n, upd in zip(args.token_sizes, args.token_updates):
            k, k_fit, n_fit, n_end = split(min(n, n_train), "--token-sizes")
            t1 = time.perf_counter()
            log(f"token model: fit on {n_fit} collected transitions, early stopping on {n_end - n_fit}")
            model, info = fit_token_model(tcfg, tproj, train[:k_fit], train[k_fit:k], upd,
                                          reward=args.token_reward, log=log)
            m = measures(np.concatenate(token_steps(model, tproj, tcfg.planner.context, test)), real, near_mask)
            res["token_models"][f"collected_{min(n, n_train)}"] = {"transitions": n_end, "fit": n_fit, **info, **m,
                                                                   "wall_s": round(time.perf_counter() - t1, 1)}
            log(f"  {json.dumps(m)}")
        if args.save_token:
            save_offline(Path(args.save_token), tcfg, model, {**info, **m}, res["command"],
                         data_hash(train[:k]), args.token_config, Path(__file__))
            res["saved_token_model"] = args.save_token
            log(f"saved the last token model to {args.save_token}")
    for a in args.replay_runs:
        name, _, run = a.partition("=")
        eps, seed = replay_episodes(run)
        k_fit = max(1, min(len(eps) - 1, int(round(0.9 * len(eps)))))
        t1 = time.perf_counter()
        x = np.concatenate([features(e, "pose") for e in eps])
        y = np.concatenate([targets(e) for e in eps])
        n_fit = sum(len(e["actions"]) for e in eps[:k_fit])
        log(f"{name}: regressor on the agent's replay, fit on {n_fit} transitions, early stopping on {len(x) - n_fit}")
        predict, info = fit_mlp(x[:n_fit], y[:n_fit], x[n_fit:], y[n_fit:], max_updates=args.max_updates, log=log)
        m = measures(predict(np.concatenate([features(e, "pose") for e in test])), real, near_mask)
        share = float((np.linalg.norm(y, axis=1) > 100 * MOVED_M).mean())
        res["replay_regressors"][name] = {"run": run, "transitions": int(len(x)), "fit": n_fit,
                                          "contact_share": round(share, 3), **info, **m,
                                          "wall_s": round(time.perf_counter() - t1, 1)}
        log(f"  {json.dumps(m)}")
        if args.token_updates:
            cfg, _, proj = load_oracle_run(run)
            t1 = time.perf_counter()
            log(f"{name}: token model on the agent's replay ({args.token_updates[-1]} updates)")
            model, info = fit_token_model(cfg, proj, eps[:k_fit], eps[k_fit:], args.token_updates[-1], log=log)
            m = measures(np.concatenate(token_steps(model, proj, cfg.planner.context, test)), real, near_mask)
            res["token_models"][f"replay_{name}"] = {"run": run, "transitions": int(len(x)), "fit": n_fit,
                                                     **info, **m, "wall_s": round(time.perf_counter() - t1, 1)}
            log(f"  {json.dumps(m)}")
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
