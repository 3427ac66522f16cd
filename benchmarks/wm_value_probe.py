"""What a trained agent's value does to one step of search over the true simulator.

The simulator's search scores 32 of 100 on push3 with leaf value 0, and 4-11 with a trained
agent's value at the leaves (``benchmarks/wm_sim_search.py``, cell ``simulator_learned_value``).
This script looks at the one-step part of that search. Along episodes of the scripted push policy
(``world_models/scripted.py``; states near and at the cube), each of the 8 actions is stepped on
the simulator from the same state (``world_models.sim_search.probe_leaf_values``), giving its
shaped reward r and the agent's value V of the child. One step of the search weighs
``r + γ·V`` (γ·V is 0 after a success); with no learned value it weighs r alone. Per agent, over
all probed states, with every quantity centred within its state (only the differences between the
8 actions steer a search):

* ``slope``: the least-squares slope of γ·V on r. Near −1 the value cancels the shaped reward's
  differences (potential-based shaping leaves the ranking of a policy's own action values
  unchanged, so a value fitted to a policy that rarely succeeds can undo the shaping); near 0 it
  leaves them.
* ``corr``: their correlation; ``residual_over_reward``: the spread of γ·V not explained by r,
  relative to the spread of r; ``residual_over_signal``: the same relative to what is left of r's
  differences in r + γ·V, |1 + slope| times r's spread (above 1: the value's variation unrelated
  to r outweighs the reward's signal).
* ``slope_median_per_state``: the median over states of each state's own slope (the pooled
  figures weight a state by its reward spread squared, so contact states weigh most).
* ``q_over_reward``: the spread of r + γ·V relative to that of r; ``gamma_value_spread_median``
  and ``reward_spread_median``: the median over states of max − min over the 8 actions.
* ``agree_scripted``: how often the best one-step action by r + γ·V, and by r alone, is the one the
  scripted policy takes (a competent push, for context).

Each also for contact states (some action moves the cube more than 2 mm) and free states.
Writes JSON with the machine, command and per-agent results::

    python benchmarks/wm_value_probe.py --agents s0=runs/wm_bench_push3_oracle_6k/push3_oracle_s0 \\
        --episodes 20 --out benchmarks/results/wm_value_probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from edge.argtypes import whole, writable_path
from edge.errors import EdgeError
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision

MOVED_M = 0.002  # a state is a contact state if some action moves the red cube further than this


def summarise(rows: list[dict], gamma: float) -> dict:
    """Within-state statistics of γ·V against r over probed states (see the module docstring)."""
    if not rows:
        return {"states": 0}
    r = np.stack([x["reward"] for x in rows])  # (S, A)
    y = gamma * (1.0 - np.stack([x["success"] for x in rows]).astype(float)) * np.stack([x["value"] for x in rows])
    act = np.array([x["action"] for x in rows])
    rc, yc = r - r.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    sxx, syy, sxy = float((rc * rc).sum()), float((yc * yc).sum()), float((rc * yc).sum())
    if sxx == 0:
        return {"states": len(rows), "slope": None}
    slope = sxy / sxx
    q = rc + yc
    resid = float(np.sqrt(((yc - slope * rc) ** 2).sum() / sxx))
    per_state = [(a * b).sum() / (a * a).sum() for a, b in zip(rc, yc) if (a * a).sum() > 0]
    return {"states": len(rows), "slope": round(slope, 3),
            "slope_median_per_state": round(float(np.median(per_state)), 3),
            "corr": round(sxy / np.sqrt(sxx * syy), 3) if syy > 0 else None,
            "residual_over_reward": round(resid, 3),
            "residual_over_signal": round(resid / abs(1 + slope), 3) if slope != -1 else None,
            "q_over_reward": round(float(np.sqrt((q * q).sum() / sxx)), 3),
            "reward_spread_median": round(float(np.median(np.ptp(r, 1))), 4),
            "gamma_value_spread_median": round(float(np.median(np.ptp(y, 1))), 4),
            "agree_scripted_with_value": round(float((np.argmax(r + y, 1) == act).mean()), 3),
            "agree_scripted_reward_only": round(float((np.argmax(r, 1) == act).mean()), 3)}


def parse_agent(spec: str) -> tuple[str, str, float]:
    """``[LABEL=]RUN_DIR`` of an oracle-slot agent -> (label, path, its search's γ); clear errors
    name the spec."""
    from world_models.sim_search import load_oracle_agent

    label, _, path = spec.rpartition("=")
    try:
        cfg, _, _ = load_oracle_agent(path)
    except EdgeError as e:
        raise EdgeError(f"--agents {spec!r}: {e}") from None
    return label or Path(path).name, path, cfg.planner.gamma


def _run(job: tuple[str, tuple[int, ...]]) -> list[dict]:
    import torch

    from world_models.object_env import ObjectTaskEnv
    from world_models.scripted import scripted_action
    from world_models.sim_search import load_oracle_agent, probe_leaf_values

    torch.set_num_threads(1)
    path, seeds = job
    cfg, planner, obs = load_oracle_agent(path)
    env = ObjectTaskEnv(cfg.env)
    try:
        rows = []
        for s in seeds:
            rows += [{**x, "seed": s} for x in probe_leaf_values(env, s, planner, obs, scripted_action)]
        return rows
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", nargs="+", required=True, metavar="[LABEL=]RUN_DIR", help="oracle-slot agents")
    ap.add_argument("--episodes", type=int, default=20, help="scripted-policy episodes probed per agent")
    ap.add_argument("--seed0", type=whole(0), default=820_000_000, help="first episode seed (every agent probes the same)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (one agent each)")
    ap.add_argument("--out", type=writable_path, default="benchmarks/results/wm_value_probe.json")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        raise EdgeError(f"--episodes={args.episodes} must be at least 1")
    if not 1 <= args.jobs <= 64:
        raise EdgeError(f"--jobs={args.jobs} is out of range; allowed [1, 64]")
    agents = [parse_agent(s) for s in args.agents]
    labels = [a[0] for a in agents]
    if len(set(labels)) != len(labels):
        raise EdgeError(f"--agents names a label twice: {labels}")

    seeds = tuple(args.seed0 + i for i in range(args.episodes))
    t0, git = time.perf_counter(), git_revision()
    jobs = [(path, seeds) for _, path, _ in agents]
    if args.jobs == 1:
        results = list(map(_run, jobs))
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_run, jobs))
    out = {}
    for (label, path, gamma), rows in zip(agents, results):
        contact = [x for x in rows if x["cube_moved_m"].max() > MOVED_M]
        free = [x for x in rows if x["cube_moved_m"].max() <= MOVED_M]
        out[label] = {"path": path, "gamma": gamma, "all": summarise(rows, gamma),
                      "contact": summarise(contact, gamma), "free": summarise(free, gamma)}
        a = out[label]["all"]
        if a["slope"] is None:
            print(f"{label}: {a['states']} states, the rewards do not differ between actions", file=sys.stderr)
            continue
        print(f"{label}: {a['states']} states, slope {a['slope']} (per-state median {a['slope_median_per_state']}), "
              f"corr {a['corr']}, residual/r {a['residual_over_reward']} (over the signal "
              f"{a['residual_over_signal']}), (r+γV)/r {a['q_over_reward']}, agrees with the scripted push "
              f"{a['agree_scripted_with_value']} (r alone {a['agree_scripted_reward_only']})", file=sys.stderr)
    cmd = ["python", "benchmarks/wm_value_probe.py", *(argv if argv is not None else sys.argv[1:])]
    res = {"machine": machine_info(), "git": git, "command": " ".join(cmd),
           "settings": {**vars(args), "out": str(args.out)}, "wall_s": round(time.perf_counter() - t0, 1),
           "agents": out}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EdgeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
