"""The world models' planner with a perfect model: tree search with the simulator itself.

A model-based agent needs two things right: the model (what an action does) and a value for
what lies beyond the search's horizon. This script gives the planner the first for free: the
same search code and settings as the agents (Gumbel MuZero or pUCT, γ = 0.97), but every node
expanded by restoring a snapshot of the simulator and stepping it
(``world_models/sim_search.py``), with the task's own reward and termination, a uniform prior and
a leaf value of 0 (no learned value). What it scores is what lookahead alone achieves with that
budget; where a learned agent scores far less, its model or value is what is missing.

An arm is ``TASK:SEARCH:SIMULATIONS[:EPISODES]`` (episodes default ``--episodes``); every arm
plays seeds ``--seed0``, ``--seed0 + 1``, ... without search noise (deterministic per seed), so
arms of the same task pair episode by episode (exact McNemar p on their common seeds)::

    python benchmarks/wm_sim_search.py --arms reach3:gumbel:16 push3:gumbel:16 push3:muzero:16 \\
        push3:gumbel:64 push3:gumbel:256:50 --episodes 100 --jobs 2 \\
        --out benchmarks/results/wm_sim_search.json

Writes JSON with the machine, command and per-episode results (success, steps, simulator steps
searched, decision time p50 / p99, deepest node).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import combinations
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from edge.errors import EdgeError
from edge.stats import paired, percentiles, wilson
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision

TASKS = ("push3", "reach3")
SEARCHES = ("gumbel", "muzero")


def parse_arm(spec: str, episodes: int) -> dict:
    """``TASK:SEARCH:SIMULATIONS[:EPISODES]`` -> dict (clear errors name the spec)."""
    parts = spec.split(":")
    if len(parts) not in (3, 4):
        raise EdgeError(f"--arms {spec!r}: expected TASK:SEARCH:SIMULATIONS[:EPISODES], e.g. push3:gumbel:16")
    task, search = parts[0], parts[1]
    if task not in TASKS:
        raise EdgeError(f"--arms {spec!r}: task {task!r} is not one of {TASKS}")
    if search not in SEARCHES:
        raise EdgeError(f"--arms {spec!r}: search {search!r} is not one of {SEARCHES}")
    try:
        sims = int(parts[2])
        n = int(parts[3]) if len(parts) == 4 else episodes
    except ValueError:
        raise EdgeError(f"--arms {spec!r}: simulations and episodes must be integers") from None
    if not 1 <= sims <= 1000:
        raise EdgeError(f"--arms {spec!r}: simulations={sims} is out of range; allowed [1, 1000]")
    if n < 1:
        raise EdgeError(f"--arms {spec!r}: episodes={n} must be at least 1")
    return {"name": f"{task}:{search}:{sims}", "task": task, "search": search, "simulations": sims, "episodes": n}


_ENVS: dict = {}  # per worker process: one env per task


def _episode(job: tuple[str, str, int, int]) -> dict:
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
    from world_models.planner import PlannerConfig
    from world_models.sim_search import play_episode

    task, search, sims, seed = job
    if task not in _ENVS:
        _ENVS[task] = ObjectTaskEnv(ObjectTaskConfig(task=task))
    cfg = PlannerConfig(search=search, num_simulations=sims, max_considered=8)
    return play_episode(_ENVS[task], seed, cfg)


def summarise(arm: dict, episodes: list[dict]) -> dict:
    succ = [e["success"] for e in episodes]
    k, n = sum(succ), len(succ)
    decide = [s for e in episodes for s in e["decide_s"]]
    depth = [d for e in episodes for d in e["max_depth"]]
    done = [e["steps"] for e in episodes if e["success"]]
    return {**arm, "successes": k, "success": k / n, "wilson95": list(wilson(k, n)),
            "steps_to_success_p25_p50_p75": list(percentiles(done, (25, 50, 75))) if done else None,
            "decide_ms_p50_p99": [round(1e3 * x, 2) for x in percentiles(decide, (50, 99))],
            "search_sim_steps_per_decision": round(sum(e["search_sim_steps"] for e in episodes) / len(decide), 2),
            "max_depth_p50_max": [float(np.median(depth)), int(max(depth))],
            "per_episode_seed": [e["seed"] for e in episodes], "per_episode_success": succ,
            "per_episode_steps": [e["steps"] for e in episodes]}


def pair_arms(arms: list[dict]) -> list[dict]:
    """Every two arms of the same task on their common seeds (the first min(n_a, n_b) episodes)."""
    out = []
    for a, b in combinations(arms, 2):
        if a["task"] != b["task"]:
            continue
        n = min(a["episodes"], b["episodes"])
        out.append({"a": a["name"], "b": b["name"],
                    **paired(a["per_episode_success"][:n], b["per_episode_success"][:n])})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", nargs="+", required=True, help="TASK:SEARCH:SIMULATIONS[:EPISODES], e.g. push3:gumbel:16")
    ap.add_argument("--episodes", type=int, default=100, help="episodes per arm unless the arm names its own")
    ap.add_argument("--seed0", type=int, default=800_000_000, help="first episode seed (every arm plays the same)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (episodes run in parallel)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/wm_sim_search.json"))
    args = ap.parse_args(argv)
    if args.episodes < 1:
        raise EdgeError(f"--episodes={args.episodes} must be at least 1")
    if not 1 <= args.jobs <= 64:
        raise EdgeError(f"--jobs={args.jobs} is out of range; allowed [1, 64]")
    arms = [parse_arm(s, args.episodes) for s in args.arms]
    names = [a["name"] for a in arms]
    if len(set(names)) != len(names):
        raise EdgeError(f"--arms names an arm twice: {names}")
    jobs = [(a["task"], a["search"], a["simulations"], args.seed0 + i) for a in arms for i in range(a["episodes"])]
    t0 = time.perf_counter()
    results: list[dict] = []
    tty = sys.stderr.isatty()
    if args.jobs == 1:
        it = map(_episode, jobs)
        pool = None
    else:
        pool = ProcessPoolExecutor(args.jobs)
        it = pool.map(_episode, jobs)
    try:
        for j, r in zip(jobs, it):
            results.append(r)
            done = len(results)
            if tty or done % 10 == 0 or done == len(jobs):
                print(f"{done}/{len(jobs)} episodes ({j[0]}:{j[1]}:{j[2]}), {time.perf_counter() - t0:.0f} s",
                      end="\r" if tty else "\n", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    out_arms, i = [], 0
    for a in arms:
        out_arms.append(summarise(a, results[i:i + a["episodes"]]))
        i += a["episodes"]
    res = {"machine": machine_info(), "git": git_revision(), "command": " ".join(sys.argv),
           "settings": {**vars(args), "out": str(args.out)}, "wall_s": round(time.perf_counter() - t0, 1),
           "arms": out_arms, "pairs": pair_arms(out_arms)}
    for a in out_arms:
        lo, hi = a["wilson95"]
        print(f"{a['name']}: {a['successes']}/{a['episodes']} = {a['success']:.2f} [{lo:.2f}, {hi:.2f}], "
              f"decision p50 {a['decide_ms_p50_p99'][0]} ms, depth p50/max {a['max_depth_p50_max']}")
    for p in res["pairs"]:
        print(f"{p['a']} vs {p['b']}: {p['successes_a']} vs {p['successes_b']} of {p['episodes']} "
              f"({p['only_a']} / {p['only_b']} discordant, McNemar p = {p['mcnemar_p']:.2g})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EdgeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
