"""How far the arm's TCP moves per planner move: in the runtime loop (run directories of
``benchmarks/wm_lookahead.py``) against the world model's own training env.

    python benchmarks/wm_motion_gap.py --runs /tmp/wm_lookahead_runs/sync /tmp/wm_lookahead_runs/async \\
        --train-env 60 --seed 400000 --out benchmarks/results/wm_motion_gap.json

For each run directory, from ``ticks.jsonl``: the TCP's xy displacement (``ee_pos_m``) from each tick
that executed a move to the next tick, split by what the safety layer did to the move (nothing, the
acceleration cap, the workspace clip). For the training env (``ObjectTaskEnv``: one move per step,
no safety layer): the same displacement per step with the shipped planner acting (16 simulations,
or ``--simulations``) and with uniform-random moves, ``--train-env`` episodes of the task's length
from seeds ``--seed ..``. Means in cm with 95 % bootstrap intervals over episodes. Writes JSON
(machine, command, versions, git revision).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.telemetry import machine_info, package_versions

CLASSES = ("clean", "accel_cap", "workspace_clip")


def _summary(per_ep: dict[int, list[float]], rng: np.random.Generator) -> dict:
    """Mean step (cm) over all steps, and a 95 % bootstrap interval resampling episodes."""
    eps = [np.asarray(v) for v in per_ep.values() if len(v)]
    if not eps:
        return {"steps": 0, "mean_cm": None, "ci95_cm": None}
    allv = np.concatenate(eps)
    idx = rng.integers(0, len(eps), (2000, len(eps)))
    sums = np.array([e.sum() for e in eps])
    counts = np.array([len(e) for e in eps])
    boots = sums[idx].sum(1) / counts[idx].sum(1)
    return {"steps": int(allv.size), "episodes": len(eps), "mean_cm": round(float(allv.mean()) * 100, 3),
            "ci95_cm": [round(float(np.percentile(boots, 2.5)) * 100, 3), round(float(np.percentile(boots, 97.5)) * 100, 3)]}


def runtime_steps(run_dir: Path, rng: np.random.Generator, first_moves: int = 0, episodes: int = 0) -> dict:
    """TCP xy step after each executed move of a run, by what the safety layer did to it (a move
    both capped and clipped counts as capped); only each episode's first ``first_moves`` moves and
    the run's first ``episodes`` episodes when given (0: all)."""
    by: dict[str, dict[int, list[float]]] = {c: defaultdict(list) for c in ("all", *CLASSES)}
    prev, acts = None, 0
    moves: dict[int, int] = defaultdict(int)  # moves measured so far per episode
    first_ep = None
    with open(run_dir / "ticks.jsonl", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            acts += t.get("kind") == "act"
            first_ep = t["ep"] if first_ep is None else first_ep
            if episodes and t["ep"] - first_ep >= episodes:
                break
            if (prev is not None and prev["ep"] == t["ep"] and prev["kind"] == "act"
                    and prev.get("ee_pos_m") and t.get("ee_pos_m")
                    and not (first_moves and moves[t["ep"]] >= first_moves)):
                moves[t["ep"]] += 1
                step = float(np.hypot(*(np.asarray(t["ee_pos_m"][:2]) - np.asarray(prev["ee_pos_m"][:2]))))
                ivs = {k for k, _ in (prev.get("interventions") or ())}
                cls = "accel_cap" if "accel_cap" in ivs else ("workspace_clip" if "workspace_clip" in ivs else "clean")
                by["all"][t["ep"]].append(step)
                by[cls][t["ep"]].append(step)
            prev = t
    if acts and not by["all"]:
        raise ValueError(f"{run_dir}/ticks.jsonl: moves but no TCP positions (ee_pos_m) in its tick records; "
                         "a run recorded by an older version? record it again")
    return {c: _summary(v, rng) for c, v in by.items()}


def train_env_steps(world_model: str, episodes: int, seed: int, simulations: int, rng: np.random.Generator,
                    progress: bool) -> dict:
    """TCP xy step per step in the training env, the planner acting and uniform-random moves."""
    from tqdm import tqdm

    from world_models.object_env import ObjectTaskEnv
    from world_models.policy import SHIPPED, WorldModelPolicy

    pol = WorldModelPolicy(world_model or str(SHIPPED), simulations=simulations, seed=seed)
    env = ObjectTaskEnv(pol.cfg.env)
    moves = np.random.default_rng(seed)
    out: dict[str, dict[int, list[float]]] = {"planner": defaultdict(list), "random": defaultdict(list)}
    try:
        for ep in tqdm(range(episodes), desc="training env", disable=not progress):
            for kind in out:
                obs, _ = env.reset(seed=seed + ep)
                pol.reset()
                executed = None
                p0 = env.env.tcp_pose()[0][:2].copy()
                for _ in range(env.cfg.steps):
                    if kind == "random":
                        a = int(moves.integers(8))
                    else:
                        a, _ = pol.encode_query({"front": obs["frame"]}, None, executed, 0)
                        executed = (pol.sample(a, None, 1)[0],)
                    obs, _, success, truncated, _ = env.step(a)
                    p1 = env.env.tcp_pose()[0][:2].copy()
                    out[kind][ep].append(float(np.hypot(*(p1 - p0))))
                    p0 = p1
                    if success or truncated:
                        break
    finally:
        env.close()
    return {k: _summary(v, rng) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="*", default=[], metavar="DIR", help="run directories (ticks.jsonl) to read")
    ap.add_argument("--train-env", type=int, default=60, metavar="N", help="training-env episodes (0: none)")
    ap.add_argument("--first-moves", type=int, default=0, metavar="N",
                    help="runs: only each episode's first N moves (0: all), e.g. a training episode's length")
    ap.add_argument("--max-episodes", type=int, default=0, metavar="N",
                    help="runs: only each run's first N episodes (0: all), e.g. the training env's seeds")
    ap.add_argument("--seed", type=int, default=400000, help="first training-env episode seed")
    ap.add_argument("--simulations", type=int, default=0, help="the planner's simulations (0 = the model's own)")
    ap.add_argument("--world-model", default="", metavar="DIR", help="default: the shipped comet_push3")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/wm_motion_gap.json")
    args = ap.parse_args(argv)
    for d in args.runs:
        if not (Path(d) / "ticks.jsonl").is_file():
            ap.error(f"--runs {d}: no ticks.jsonl there (a run directory of edge run / wm_lookahead.py)")
    if args.first_moves < 0 or args.max_episodes < 0:
        ap.error(f"--first-moves {args.first_moves} / --max-episodes {args.max_episodes}: must be >= 0 (0: all)")
    if args.train_env < 0 or (args.train_env == 0 and not args.runs):
        ap.error(f"--train-env {args.train_env}: must be >= 0, and > 0 without --runs")
    import torch

    from edge.vla.manifest import git_revision

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    res: dict = {"benchmark": "wm_motion_gap", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
                 "git": git_revision(), "versions": package_versions(), "first_moves": args.first_moves,
                 "max_episodes": args.max_episodes, "runtime": {}, "train_env": None}
    for d in args.runs:
        try:
            res["runtime"][d] = runtime_steps(Path(d), rng, args.first_moves, args.max_episodes)
        except ValueError as err:
            print(f"error: --runs {err}", file=sys.stderr)
            return 2
        print(d, {c: v["mean_cm"] for c, v in res["runtime"][d].items()})
    if args.train_env:
        res["train_env"] = {"episodes": args.train_env, "seeds": [args.seed, args.seed + args.train_env - 1],
                            **train_env_steps(args.world_model, args.train_env, args.seed, args.simulations, rng,
                                              not args.no_progress)}
        print("training env", {k: res["train_env"][k]["mean_cm"] for k in ("planner", "random")})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
