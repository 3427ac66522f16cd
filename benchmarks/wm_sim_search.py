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

``--agents`` adds, for each trained oracle-slot agent (a run directory of ``edge train
world-model --obs oracle``), arms on the same seeds with the agent's own search settings
(``--cells``; by default all of them, including the simulator with only the agent's value or
only its prior):
the agent as it acts (``agent``), its learned dynamics and rewards with a uniform prior and leaf
value 0 (``learned_dynamics``), and the simulator's dynamics, rewards and termination with its
policy prior and value (``simulator_learned_leaves``). With the simulator arm of the same search,
the four form a 2 × 2 of {learned, true} dynamics × {learned prior and value, uniform prior and
value 0}. An agent must use the task's default settings (what its oracle slots hold,
``env.oracle_state``, may differ: it changes what the agent sees, not the task) and the simulator
arms' search (8 root actions considered), so that its arms pair with theirs. An agent arm's decision time is its
batched search's time divided by the episodes in the batch::

    python benchmarks/wm_sim_search.py --arms push3:gumbel:16 --episodes 100 --jobs 2 \\
        --agents s0=runs/wm_bench_push3_oracle/push3_oracle_s0 --out /tmp/decomposition.json

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

from edge.argtypes import whole, writable_path
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


def parse_agent(spec: str) -> dict:
    """``[LABEL=]RUN_DIR`` of an oracle-slot agent -> dict (clear errors name the spec)."""
    from world_models.sim_search import load_oracle_agent

    label, _, path = spec.rpartition("=")
    label = label or Path(path).name
    try:
        cfg, _, _ = load_oracle_agent(path)
    except EdgeError as e:
        raise EdgeError(f"--agents {spec!r}: {e}") from None
    from dataclasses import asdict

    from world_models.object_env import ObjectTaskConfig

    default = ObjectTaskConfig(task=cfg.env.task, oracle_state=cfg.env.oracle_state)  # what the agent sees may differ
    if cfg.env != default or cfg.planner.max_considered != 8:
        diff = {k: v for k, v in asdict(cfg.env).items() if getattr(default, k) != v}
        raise EdgeError(f"--agents {spec!r}: trained with task settings {diff or 'as default'} and "
                        f"max_considered={cfg.planner.max_considered}; its arms pair with the simulator arms "
                        "only with the task's default settings (env.oracle_state may differ) and 8 considered "
                        "actions")
    return {"label": label, "path": path, "task": cfg.env.task, "search": cfg.planner.search,
            "simulations": cfg.planner.num_simulations}


_ENVS: dict = {}  # per worker process: envs per task
_AGENTS: dict = {}  # per worker process: loaded agents


def _envs(cfg, n: int) -> list:
    from world_models.object_env import ObjectTaskEnv

    have = _ENVS.setdefault(cfg, [])
    while len(have) < n:
        have.append(ObjectTaskEnv(cfg))
    return have[:n]


def _run_job(job: tuple) -> list[dict]:
    """("sim", task, search, simulations, seeds) or ("agent", run_dir, cell, seeds) -> episodes."""
    import torch

    from world_models.object_env import ObjectTaskConfig
    from world_models.planner import PlannerConfig

    torch.set_num_threads(1)
    if job[0] == "sim":
        from world_models.sim_search import play_episode

        _, task, search, sims, seeds = job
        cfg = PlannerConfig(search=search, num_simulations=sims, max_considered=8)
        (env,) = _envs(ObjectTaskConfig(task=task), 1)
        return [play_episode(env, seed, cfg) for seed in seeds]
    from world_models.sim_search import load_oracle_agent, play_agent_episodes

    _, path, cell, seeds = job
    if path not in _AGENTS:
        _AGENTS[path] = load_oracle_agent(path)
    cfg, planner, obs = _AGENTS[path]
    return play_agent_episodes(_envs(cfg.env, len(seeds)), list(seeds), planner, obs, cell)


def summarise(arm: dict, episodes: list[dict]) -> dict:
    succ = [e["success"] for e in episodes]
    k, n = sum(succ), len(succ)
    decide = [s for e in episodes for s in e["decide_s"]]
    depth = [d for e in episodes for d in e.get("max_depth", [])]
    done = [e["steps"] for e in episodes if e["success"]]
    return {**arm, "successes": k, "success": k / n, "wilson95": list(wilson(k, n)),
            "steps_to_success_p25_p50_p75": list(percentiles(done, (25, 50, 75))) if done else None,
            "decide_ms_p50_p99": [round(1e3 * x, 2) for x in percentiles(decide, (50, 99))],
            "search_sim_steps_per_decision": round(sum(e["search_sim_steps"] for e in episodes) / len(decide), 2),
            "max_depth_p50_max": [float(np.median(depth)), int(max(depth))] if depth else None,
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


def pool_sides(spec: str, names: list[str]) -> list[list[str]]:
    """The two sides of a ``--pool`` spec over arm names (arm names hold single colons, so the sides
    are split at the colon that leaves arm names on both)."""
    for i, ch in enumerate(spec):
        if ch != ":":
            continue
        sides = [spec[:i].split("+"), spec[i + 1:].split("+")]
        if all(n in names for side in sides for n in side):
            if len(sides[0]) != len(sides[1]):
                raise EdgeError(f"--pool {spec!r}: both sides need as many arms")
            return sides
    raise EdgeError(f"--pool {spec!r}: expected A1+A2:B1+B2 over arm names of this run ({sorted(names)})")


def pool_pairs(arms: list[dict], pools: list[str]) -> list[dict]:
    """``A1+A2:B1+B2`` pools: arms A1 and A2 (their episodes in order, concatenated) against B1 and B2
    on the same seeds, e.g. two training seeds of a method against two of its control."""
    by_name = {a["name"]: a for a in arms}
    out = []
    for spec in pools:
        sides = pool_sides(spec, list(by_name))
        xa, xb = [], []
        for na, nb in zip(*sides):
            a, b = by_name[na], by_name[nb]
            n = min(a["episodes"], b["episodes"])
            if a["per_episode_seed"][:n] != b["per_episode_seed"][:n]:
                raise EdgeError(f"--pool {spec!r}: {na} and {nb} did not play the same seeds")
            xa += a["per_episode_success"][:n]
            xb += b["per_episode_success"][:n]
        out.append({"a": "+".join(sides[0]), "b": "+".join(sides[1]), **paired(xa, xb)})
    return out


def merge(files: list[Path], pools: list[str], out: Path, command: str) -> int:
    """Arms of earlier runs of this script (same first seed) in one file, with their pairs and pools."""
    from edge.argtypes import read_json_dict

    runs = [read_json_dict(f, "--merge", "a wm_sim_search.py output", "give the JSON files this script wrote")
            for f in files]
    for f, r in zip(files, runs):
        if not isinstance(r.get("settings"), dict) or "seed0" not in r["settings"] or not isinstance(r.get("arms"), list):
            raise EdgeError(f"--merge {f}: not a wm_sim_search.py output (no settings.seed0 / arms); give the JSON "
                            "files this script wrote")
    seed0 = {r["settings"]["seed0"] for r in runs}
    if len(seed0) != 1:
        raise EdgeError(f"--merge: the runs start at different seeds {sorted(seed0)}; their arms do not pair")
    arms, reproduced = [], []
    for f, r in zip(files, runs):
        for a in r["arms"]:
            first = next((x for x in arms if x["name"] == a["name"]), None)
            if first is None:
                arms.append(a)
                continue
            # the same arm in two files (a deterministic arm rerun as a control): kept once if it is the
            # same arm (settings, agent) and played the same episodes alike (seeds, outcomes, steps);
            # only its timings may differ
            keys = {k for k in (*first, *a) if "_ms" not in k}
            differ = sorted(k for k in keys if first.get(k) != a.get(k))
            if differ:
                raise EdgeError(f"--merge: arm {a['name']} in {f} differs from the same arm in an earlier file "
                                f"({', '.join(differ[:4])}); give only one of them")
            reproduced.append({"arm": a["name"], "file": str(f), "episodes": a["episodes"]})
    res = {"machine": machine_info(), "git": git_revision(), "command": command,
           "merged_from": {str(f): {"git": r["git"], "command": r["command"], "wall_s": r["wall_s"]}
                           for f, r in zip(files, runs)},
           "arms": arms, "reproduced": reproduced, "pairs": pair_arms(arms), "pools": pool_pairs(arms, pools)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    for x in reproduced:
        print(f"{x['arm']} in {x['file']}: the same {x['episodes']} episodes as before (kept once)")
    for p in res["pools"]:
        print(f"pooled {p['a']} vs {p['b']}: {p['successes_a']} vs {p['successes_b']} of {p['episodes']} "
              f"({p['only_a']} / {p['only_b']} discordant, McNemar p = {p['mcnemar_p']:.2g})")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", nargs="*", default=[], help="TASK:SEARCH:SIMULATIONS[:EPISODES], e.g. push3:gumbel:16")
    ap.add_argument("--agents", nargs="*", default=[], metavar="[LABEL=]RUN_DIR",
                    help="oracle-slot agents: adds their agent / learned_dynamics / simulator_learned_leaves arms")
    ap.add_argument("--agent-batch", type=int, default=10, help="episodes an agent arm plays in lockstep per job")
    ap.add_argument("--cells", nargs="+", default=None, metavar="CELL",
                    help="the agent arms to play (default: all of world_models.sim_search.CELLS)")
    ap.add_argument("--episodes", type=int, default=100, help="episodes per arm unless the arm names its own")
    ap.add_argument("--seed0", type=whole(0), default=800_000_000, help="first episode seed (every arm plays the same)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (episodes run in parallel)")
    ap.add_argument("--pool", nargs="*", default=[], metavar="A1+A2:B1+B2",
                    help="also pair arms pooled over seeds, e.g. push3:x_s0:agent+push3:x_s1:agent:push3:c_s0:agent+...")
    ap.add_argument("--merge", nargs="+", type=Path, default=None, metavar="JSON",
                    help="instead of playing: put the arms of earlier runs (same --seed0) in one file with their pairs "
                         "(an arm in several files is kept once if it played the same episodes alike)")
    ap.add_argument("--out", type=writable_path, default="benchmarks/results/wm_sim_search.json")
    args = ap.parse_args(argv)
    if args.merge:
        missing = [str(f) for f in args.merge if not f.is_file()]
        if missing:
            raise EdgeError(f"--merge: no such file {missing}")
        return merge(args.merge, args.pool, args.out, " ".join(sys.argv))
    if args.episodes < 1:
        raise EdgeError(f"--episodes={args.episodes} must be at least 1")
    if not 1 <= args.jobs <= 64:
        raise EdgeError(f"--jobs={args.jobs} is out of range; allowed [1, 64]")
    if not 1 <= args.agent_batch <= 100:
        raise EdgeError(f"--agent-batch={args.agent_batch} is out of range; allowed [1, 100]")
    if not args.arms and not args.agents:
        raise EdgeError("nothing to run: name --arms, --agents or both")
    arms = [parse_arm(s, args.episodes) for s in args.arms]
    from world_models.sim_search import CELLS

    cells = args.cells or list(CELLS)
    bad = [c for c in cells if c not in CELLS]
    if bad:
        raise EdgeError(f"--cells {' '.join(bad)}: not one of {CELLS}")
    for spec in args.agents:
        ag = parse_agent(spec)
        arms += [{"name": f"{ag['task']}:{ag['label']}:{cell}", "task": ag["task"], "search": ag["search"],
                  "simulations": ag["simulations"], "episodes": args.episodes, "agent": ag["path"], "cell": cell}
                 for cell in cells]
    names = [a["name"] for a in arms]
    if len(set(names)) != len(names):
        raise EdgeError(f"--arms / --agents name an arm twice: {names}")
    for spec in args.pool:  # before playing anything
        pool_sides(spec, names)
    jobs: list[tuple[int, tuple]] = []  # (arm index, job)
    for k, a in enumerate(arms):
        seeds = [args.seed0 + i for i in range(a["episodes"])]
        if "agent" in a:
            b = args.agent_batch
            jobs += [(k, ("agent", a["agent"], a["cell"], tuple(seeds[i:i + b]))) for i in range(0, len(seeds), b)]
        else:
            jobs += [(k, ("sim", a["task"], a["search"], a["simulations"], (s,))) for s in seeds]
    t0, git = time.perf_counter(), git_revision()  # the code the run starts with
    results: list[list[dict]] = [[] for _ in arms]
    tty = sys.stderr.isatty()
    total, done = sum(a["episodes"] for a in arms), 0
    if args.jobs == 1:
        it = map(_run_job, [j for _, j in jobs])
        pool = None
    else:
        pool = ProcessPoolExecutor(args.jobs)
        it = pool.map(_run_job, [j for _, j in jobs])
    try:
        for (k, _), eps in zip(jobs, it):
            results[k] += eps
            done += len(eps)
            if tty or done % 10 == 0 or done == total:
                print(f"{done}/{total} episodes ({arms[k]['name']}), {time.perf_counter() - t0:.0f} s",
                      end="\r" if tty else "\n", file=sys.stderr, flush=True)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    out_arms = [summarise(a, results[k]) for k, a in enumerate(arms)]
    res = {"machine": machine_info(), "git": git, "command": " ".join(sys.argv),
           "settings": {**vars(args), "out": str(args.out)}, "wall_s": round(time.perf_counter() - t0, 1),
           "arms": out_arms, "pairs": pair_arms(out_arms), "pools": pool_pairs(out_arms, args.pool)}
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
