"""How far the arm's TCP moves per planner move: in the runtime loop (run directories of
``benchmarks/wm_lookahead.py``) against the world model's own training env.

    python benchmarks/wm_motion_gap.py --runs /tmp/wm_lookahead_runs/sync /tmp/wm_lookahead_runs/async \\
        --train-env 60 --seed 400000 --out benchmarks/results/wm_motion_gap.json

For each run directory, from ``ticks.jsonl``: the TCP's xy displacement (``ee_pos_m``) from each tick
that executed a move to the next tick, split by what was done to the move: nothing, the safety
layer's acceleration cap or workspace clip, or only the simulated arm's own clip of its TCP target
into ``sim.env.TARGET_BOX_M`` (``sim_clip``: the tick's ``sent`` differs from its ``command``; runs
recorded before the sim driver reported that clip count such moves as clean — ``sim_clips_recorded``
says which). For the training env (``ObjectTaskEnv``: one move per step,
no safety layer): the same displacement per step with the shipped planner acting (16 simulations,
or ``--simulations``) and with uniform-random moves, ``--train-env`` episodes of the task's length
from seeds ``--seed ..``. Means in cm with 95 % bootstrap intervals over episodes.

Both are also split by the TCP's horizontal distance from the arm's base axis where the move starts
(``--reach-bins``, m; ``by_reach``), the runtime's moves also by whether they start within 1 cm of
a wall of the simulated arm's own box (``by_sim_wall``: x, y of ``sim.env.TARGET_BOX_M``; for runs
recorded before its clips were reported), and ``--reach-sweep N`` drives the training env's arm from its
start pose with the same move N times along each outward direction (+x, ±45°), recording the step
against that distance: how far a 2 cm move carries the TCP as the arm stretches out. Writes JSON
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

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions

CLASSES = ("clean", "accel_cap", "workspace_clip", "sim_clip")


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


def sim_clipped(tick: dict) -> bool:
    """Whether the simulated arm clipped the tick's move itself: what its driver ``sent`` differs in
    x, y from the safety layer's ``command`` (runs recorded before the driver reported it: never)."""
    sent, command = tick.get("sent"), tick.get("command")
    return sent is not None and command is not None and not np.allclose(sent[:2], command[:2], rtol=0.0, atol=1e-7)


def _reach_bin(xy: np.ndarray, bins: tuple[float, ...]) -> str:
    """The ``--reach-bins`` interval holding the horizontal distance of ``xy`` from the base axis."""
    r = float(np.hypot(*xy))
    edges = (0.0, *bins, float("inf"))
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if lo <= r < hi:
            return f"{lo:.2f}-{hi:.2f}" if hi != float("inf") else f">={lo:.2f}"
    raise AssertionError(r)


def _by_reach(per: dict[str, dict[int, list[float]]], rng: np.random.Generator) -> dict:
    """Per reach bin: the summary and the bin's share of all the steps."""
    total = sum(len(v) for d in per.values() for v in d.values())
    return {b: {**_summary(d, rng), "share": round(sum(len(v) for v in d.values()) / total, 4) if total else None}
            for b, d in sorted(per.items())}


def runtime_steps(run_dir: Path, rng: np.random.Generator, first_moves: int = 0, episodes: int = 0,
                  bins: tuple[float, ...] = (0.5, 0.6, 0.7)) -> dict:
    """TCP xy step after each executed move of a run, by what the safety layer did to it (a move
    both capped and clipped counts as capped); only each episode's first ``first_moves`` moves and
    the run's first ``episodes`` episodes when given (0: all)."""
    by: dict[str, dict[int, list[float]]] = {c: defaultdict(list) for c in ("all", *CLASSES)}
    reach: dict[str, dict[str, dict[int, list[float]]]] = {c: defaultdict(lambda: defaultdict(list))
                                                          for c in ("all", "clean")}
    wall: dict[str, dict[int, list[float]]] = {w: defaultdict(list) for w in ("near", "away")}
    from sim.env import TARGET_BOX_M

    box_lo, box_hi = np.array([b[0] for b in TARGET_BOX_M[:2]]), np.array([b[1] for b in TARGET_BOX_M[:2]])
    prev, acts = None, 0
    moves: dict[int, int] = defaultdict(int)  # moves measured so far per episode
    first_ep = None
    with open(run_dir / "ticks.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            try:
                t = json.loads(line)
            except json.JSONDecodeError as err:
                if not line.endswith("\n"):  # a killed run's cut last line
                    break
                raise ValueError(f"{run_dir / 'ticks.jsonl'}:{i}: not a JSON record ({err})") from None
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
                cls = ("accel_cap" if "accel_cap" in ivs else "workspace_clip" if "workspace_clip" in ivs
                       else "sim_clip" if sim_clipped(prev) else "clean")
                by["all"][t["ep"]].append(step)
                by[cls][t["ep"]].append(step)
                b = _reach_bin(np.asarray(prev["ee_pos_m"][:2]), bins)
                reach["all"][b][t["ep"]].append(step)
                if cls == "clean":
                    reach["clean"][b][t["ep"]].append(step)
                    xy = np.asarray(prev["ee_pos_m"][:2])
                    gap = min(float((xy - box_lo).min()), float((box_hi - xy).min()))
                    wall["near" if gap < 0.01 else "away"][t["ep"]].append(step)
            prev = t
    if acts and not by["all"]:
        raise ValueError(f"{run_dir}/ticks.jsonl: moves but no TCP positions (ee_pos_m) in its tick records; "
                         "a run recorded by an older version? record it again")
    recorded = False
    eps_file = run_dir / "episodes.jsonl"
    if eps_file.is_file():
        with open(eps_file, encoding="utf-8") as f:
            recorded = any("sim_workspace_clips" in json.loads(line) for line in f if line.strip())
    total = sum(len(v) for v in by["all"].values())
    return {**{c: _summary(v, rng) for c, v in by.items()},
            "shares": {c: round(sum(len(v) for v in by[c].values()) / total, 4) if total else None for c in CLASSES},
            "sim_clips_recorded": recorded,
            "clean_by_sim_wall": {w: {**_summary(v, rng), "share": round(sum(len(x) for x in v.values()) / max(1, sum(
                len(x) for d in wall.values() for x in d.values())), 4)} for w, v in wall.items()},
            "by_reach": {c: _by_reach(v, rng) for c, v in reach.items()}}


def train_env_steps(world_model: str, episodes: int, seed: int, simulations: int, rng: np.random.Generator,
                    progress: bool, bins: tuple[float, ...] = (0.5, 0.6, 0.7)) -> dict:
    """TCP xy step per step in the training env, the planner acting and uniform-random moves."""
    from tqdm import tqdm

    from world_models.object_env import ObjectTaskEnv
    from world_models.policy import SHIPPED, WorldModelPolicy

    pol = WorldModelPolicy(world_model or str(SHIPPED), simulations=simulations, seed=seed)
    env = ObjectTaskEnv(pol.cfg.env)
    moves = np.random.default_rng(seed)
    out: dict[str, dict[int, list[float]]] = {"planner": defaultdict(list), "random": defaultdict(list)}
    reach: dict[str, dict[str, dict[int, list[float]]]] = {k: defaultdict(lambda: defaultdict(list)) for k in out}
    clipped = {k: defaultdict(list) for k in out}  # per step: 1.0 where the env clipped the target
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
                    n_clips = env.env.clip_counts["workspace"]
                    obs, _, success, truncated, _ = env.step(a)
                    clipped[kind][ep].append(float(env.env.clip_counts["workspace"] > n_clips))
                    p1 = env.env.tcp_pose()[0][:2].copy()
                    out[kind][ep].append(float(np.hypot(*(p1 - p0))))
                    reach[kind][_reach_bin(p0, bins)][ep].append(out[kind][ep][-1])
                    p0 = p1
                    if success or truncated:
                        break
    finally:
        env.close()
    return {**{k: _summary(v, rng) for k, v in out.items()},
            "sim_clip_share": {k: (lambda s: {"share": None if s["mean_cm"] is None else round(s["mean_cm"] / 100, 4),
                                              "ci95": None if s["ci95_cm"] is None else [round(c / 100, 4) for c in s["ci95_cm"]]})
                               (_summary(v, rng)) for k, v in clipped.items()},
            "by_reach": {k: _by_reach(v, rng) for k, v in reach.items()}}


def reach_sweep(world_model: str, moves: int, seed: int) -> dict:
    """From the training env's start pose, the same discrete move ``moves`` times along each outward
    direction (+x, +45°, -45°): per move the TCP's distance from the base axis where it starts, the
    xy step, and whether the env clipped the target to its box."""
    from world_models.object_env import ObjectTaskEnv
    from world_models.policy import SHIPPED, load_world_model

    env = ObjectTaskEnv(load_world_model(world_model or str(SHIPPED))[0].env)
    out = {}
    try:
        for name, action in (("+x", 0), ("+45deg", 1), ("-45deg", 7)):
            env.reset(seed=seed)
            rows = []
            p0 = env.env.tcp_pose()[0][:2].copy()
            for _ in range(moves):
                clips = env.env.clip_counts["workspace"]
                env.step(action)
                p1 = env.env.tcp_pose()[0][:2].copy()
                rows.append({"reach_m": round(float(np.hypot(*p0)), 4), "step_cm": round(float(np.hypot(*(p1 - p0))) * 100, 3),
                             "clipped": env.env.clip_counts["workspace"] > clips})
                p0 = p1
            out[name] = rows
    finally:
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="*", default=[], metavar="DIR", help="run directories (ticks.jsonl) to read")
    ap.add_argument("--train-env", type=int, default=60, metavar="N", help="training-env episodes (0: none)")
    ap.add_argument("--first-moves", type=int, default=0, metavar="N",
                    help="runs: only each episode's first N moves (0: all), e.g. a training episode's length")
    ap.add_argument("--max-episodes", type=int, default=0, metavar="N",
                    help="runs: only each run's first N episodes (0: all), e.g. the training env's seeds")
    ap.add_argument("--reach-bins", type=float, nargs="+", default=[0.5, 0.6, 0.7], metavar="M",
                    help="edges (m, increasing) of the TCP's distance from the base axis for the by_reach split")
    ap.add_argument("--reach-sweep", type=int, default=0, metavar="N",
                    help="training env: N equal moves outward along +x, +45 and -45 degrees from the start pose (0: none)")
    ap.add_argument("--seed", type=whole(0), default=400000, help="first training-env episode seed")
    ap.add_argument("--simulations", type=int, default=0, help="the planner's simulations (0 = the model's own)")
    ap.add_argument("--world-model", default="", metavar="DIR", help="default: the shipped comet_push3")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_motion_gap.json")
    args = ap.parse_args(argv)
    for d in args.runs:
        if not (Path(d) / "ticks.jsonl").is_file():
            ap.error(f"--runs {d}: no ticks.jsonl there (a run directory of edge run / wm_lookahead.py)")
    if args.first_moves < 0 or args.max_episodes < 0:
        ap.error(f"--first-moves {args.first_moves} / --max-episodes {args.max_episodes}: must be >= 0 (0: all)")
    if args.train_env < 0 or (args.train_env == 0 and not args.runs and not args.reach_sweep):
        ap.error(f"--train-env {args.train_env}: must be >= 0, and > 0 without --runs or --reach-sweep")
    if args.simulations < 0:
        ap.error(f"--simulations {args.simulations}: must be >= 0 (0: the model's own)")
    if args.world_model:
        from edge.errors import EdgeError
        from world_models.policy import load_world_model

        try:
            load_world_model(args.world_model)
        except (EdgeError, OSError, ValueError) as err:
            ap.error(f"--world-model {args.world_model}: {err}")
    if args.reach_sweep < 0:
        ap.error(f"--reach-sweep {args.reach_sweep}: must be >= 0 (0: none)")
    bins = tuple(args.reach_bins)
    if any(b <= 0 for b in bins) or any(a >= b for a, b in zip(bins, bins[1:])):
        ap.error(f"--reach-bins {' '.join(map(str, bins))}: must be positive and increasing")
    import torch

    from edge.vla.manifest import git_revision

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    res: dict = {"benchmark": "wm_motion_gap", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
                 "git": git_revision(), "versions": package_versions(), "first_moves": args.first_moves,
                 "max_episodes": args.max_episodes, "reach_bins": list(bins), "runtime": {}, "train_env": None,
                 "reach_sweep": None}
    for d in args.runs:
        try:
            res["runtime"][d] = runtime_steps(Path(d), rng, args.first_moves, args.max_episodes, bins)
        except ValueError as err:
            print(f"error: --runs {err}", file=sys.stderr)
            return 2
        print(d, {c: v["mean_cm"] for c, v in res["runtime"][d].items() if c in ("all", *CLASSES)})
        print("  shares", res["runtime"][d]["shares"], "sim clips recorded:", res["runtime"][d]["sim_clips_recorded"])
        print("  clean moves by reach", {b: (v["mean_cm"], v["share"]) for b, v in res["runtime"][d]["by_reach"]["clean"].items()})
        print("  clean moves by the sim's wall", {w: (v["mean_cm"], v["share"]) for w, v in res["runtime"][d]["clean_by_sim_wall"].items()})
    if args.train_env:
        res["train_env"] = {"episodes": args.train_env, "seeds": [args.seed, args.seed + args.train_env - 1],
                            **train_env_steps(args.world_model, args.train_env, args.seed, args.simulations, rng,
                                              not args.no_progress, bins)}
        print("training env", {k: res["train_env"][k]["mean_cm"] for k in ("planner", "random")},
              "sim clip share", res["train_env"]["sim_clip_share"])
        for k in ("planner", "random"):
            print(f"  {k} by reach", {b: (v["mean_cm"], v["share"]) for b, v in res["train_env"]["by_reach"][k].items()})
    if args.reach_sweep:
        res["reach_sweep"] = reach_sweep(args.world_model, args.reach_sweep, args.seed)
        for name, rows in res["reach_sweep"].items():
            print("sweep", name, [(r["reach_m"], r["step_cm"]) for r in rows])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
