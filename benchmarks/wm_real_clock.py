"""The world-model planner on the real clock against the virtual clock, on the same seeds.

    python benchmarks/wm_real_clock.py --episodes 300 --seed 460000 --real-inference thread \
        --out benchmarks/results/wm_real_clock.json

Two arms of ``edge run --policy comet --task TASK --query-mode MODE`` (default task ``reach``, the
shipped model for it; ``--query-mode sync`` by default; ``--plan-simulations`` per decision, default the
model's own), each over the same ``--episodes`` seeds, in blocks of ``--block`` episodes that alternate
between the arms (each arm's run directory resumed block by block):

* ``virtual``: the virtual clock, each decision's measured time charged (``edge run``'s default);
* ``real``: ``--clock real``: the loop ticks in wall time; sync: the planner decides in a worker process
  (``--real-inference process``, ``edge run``'s default there) or thread (``thread``); async: inline
  (``--inference inline``: the decision is made before the tick's command, inside the tick).

Reported per arm from the run records: successes (Wilson interval), decision p50 / p99, moves per
tick, starved ticks and, for the real clock, overruns, lateness and jitter p99 (the run's summary);
paired per seed: real − virtual success (95 % bootstrap interval, exact McNemar). The real clock
runs in wall time (about 2 s an episode): keep the machine otherwise idle. The run directories stay
under ``--runs-dir``. Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions

ARMS = {"virtual": [], "real": ["--clock", "real"]}


def run_blocks(base: list[str], arms: dict[str, list[str]], episodes: int, block: int, runs: Path) -> dict[str, float] | None:
    """Each arm's ``edge run`` (``base`` + its flags) into ``runs/<arm>`` over ``episodes`` episodes, in
    blocks of ``block`` that resume the run directory; which arm goes first rotates block by block (two
    arms: they alternate), so the machine's drift falls on all. Returns each arm's wall time, or None
    after printing the command that failed."""
    names = list(arms)
    wall = dict.fromkeys(names, 0.0)
    for b, done in enumerate(range(0, episodes, block)):
        total = min(done + block, episodes)
        for name in names[b % len(names):] + names[:b % len(names)]:
            cmd = [*base, *arms[name], "--episodes", str(total), "--out", str(runs / name), *(["--resume"] if done else [])]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wall[name] += time.perf_counter() - t0
            if proc.returncode != 0:
                print(f"error: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}", file=sys.stderr)
                return None
            print(f"{name:12s} {total}/{episodes} episodes", flush=True)
    return wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="reach", choices=("reach", "push"), help="the runtime task (its shipped model)")
    ap.add_argument("--world-model", default="", metavar="DIR", help="a world-model directory (default: the task's shipped one)")
    ap.add_argument("--episodes", type=int, default=30, help="episodes per arm (seeds SEED .. SEED+N-1, paired)")
    ap.add_argument("--seed", type=whole(0), default=460000, help="first episode seed")
    ap.add_argument("--max-steps", type=whole(0, 100_000), default=0, help="simulated periods per episode (0 = the task's own): loop ticks, and on the real "
                         "clock the deadlines a late tick skipped, which the sim steps through")
    ap.add_argument("--query-mode", default="sync", choices=("sync", "async"),
                    help="the planner's mode in both arms (async on the real clock decides inline)")
    ap.add_argument("--plan-simulations", type=int, default=0,
                    help="tree-search simulations per decision in both arms (0 = the model's own)")
    ap.add_argument("--real-inference", default=None, choices=("thread", "process"),
                    help="sync: where the real clock's arm decides (a worker process, edge run's default, or a worker thread)")
    ap.add_argument("--block", type=int, default=50, help="episodes per block; the arms alternate block by block")
    ap.add_argument("--runs-dir", default="/tmp/wm_real_clock_runs", help="where the two arms' run directories go (must not exist)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_real_clock.json", help="JSON written")
    args = ap.parse_args(argv)
    if args.episodes < 2:
        ap.error(f"--episodes {args.episodes}: need >= 2 for intervals")
    if args.block < 1:
        ap.error(f"--block {args.block}: must be >= 1")
    if args.plan_simulations < 0:
        ap.error(f"--plan-simulations {args.plan_simulations}: must be >= 1 (or 0 = the model's own)")
    if args.real_inference is not None and args.query_mode == "async":
        ap.error(f"--real-inference {args.real_inference}: async on the real clock decides inline (the frame is read "
                 "before the tick's command); use --query-mode sync")
    runs = Path(args.runs_dir)
    if runs.exists():
        ap.error(f"--runs-dir {runs}: exists; give a new directory (two runs never mix)")
    from benchmarks.wm_lookahead import arm_stats
    from benchmarks.wm_runtime_reach import paired
    from edge.stats import wilson
    from edge.vla.manifest import git_revision

    git = git_revision()  # the code the runs start from
    edge = str(Path(sys.executable).with_name("edge"))
    base = [edge, "run", "--policy", "comet", "--task", args.task, "--query-mode", args.query_mode,
            "--seed", str(args.seed),
            "--set", "policy.comet.plan_threads=0"]  # torch's own thread count, as when this was written
    real_inference = "inline" if args.query_mode == "async" else (args.real_inference or "process")
    real_extra = ["--inference", real_inference]
    arms = {k: v + (real_extra if k == "real" else []) for k, v in ARMS.items()}
    if args.world_model:
        base += ["--world-model", args.world_model]
    if args.max_steps:
        base += ["--set", f"max_steps={args.max_steps}"]
    if args.plan_simulations:
        base += ["--plan-simulations", str(args.plan_simulations)]
    wall = run_blocks(base, arms, args.episodes, args.block, runs)
    if wall is None:
        return 2
    res: dict = {"benchmark": "wm_real_clock", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
                 "git": git, "versions": package_versions(), "task": args.task, "query_mode": args.query_mode,
                 "plan_simulations": args.plan_simulations or "(the model's own)",
                 "real_inference": real_inference,
                 "world_model": args.world_model or f"(the shipped model for {args.task})",
                 "seeds": [args.seed, args.seed + args.episodes - 1], "block": args.block, "arms": {}}
    won = {}
    for name in ARMS:
        st = arm_stats(runs / name)
        if st["per_episode"]["seed"] != list(range(args.seed, args.seed + args.episodes)):
            print(f"error: arm {name} ran other seeds than {args.seed}..", file=sys.stderr)
            return 2
        summary = json.loads((runs / name / "summary.json").read_text())
        won[name] = st["per_episode"]["success"]
        st["success_rate"] = round(st["successes"] / st["episodes"], 4)
        st["success_wilson95"] = [round(x, 4) for x in wilson(st["successes"], st["episodes"])]
        st["clock"] = {k: summary.get(k) for k in ("overruns", "reset_overruns", "lateness_p50_ms", "lateness_p99_ms", "jitter_p99_ms",
                                                  "tick_overhead_p50_ms", "tick_overhead_p99_ms", "sim_elapsed_periods") if k in summary}
        res["arms"][name] = {"wall_s": round(wall[name], 1), **st}
    rng = np.random.default_rng(0)
    res["paired_real_minus_virtual"] = paired(won["real"], won["virtual"], rng)
    for name, v in res["arms"].items():
        print(f"{name:8s} {v['successes']}/{v['episodes']} {v['success_wilson95']}  decision p50 / p99 "
              f"{v['decision_ms']['p50']} / {v['decision_ms']['p99']} ms  moves/tick {v['moves_per_tick']}  "
              f"moves/sim period {v['moves_per_sim_period']}  "
              f"starved {v['starved']}  {v['clock']}")
    p = res["paired_real_minus_virtual"]
    print(f"real - virtual {p['difference']:+.3f} {p['ci95']}  McNemar p {p['mcnemar_exact_p']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
