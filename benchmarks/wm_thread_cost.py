"""What the real clock's worker thread costs the planner's decisions, against the inline time the
virtual clock charges (a diagnostic).

    python benchmarks/wm_thread_cost.py --simulations 64 --episodes 50 --seed 480000 \\
        --out benchmarks/results/wm_thread_cost.json

Arms of ``edge run --policy comet --task TASK --query-mode sync --plan-simulations N`` on the same
seeds, in blocks of ``--block`` episodes that alternate between the arms (so the machine's drift
falls on all of them):

* ``virtual``: the virtual clock; the decision runs inline and its measured time is what is charged;
* ``real``: ``--clock real --inference thread``: the decision runs in a worker thread while the loop
  ticks beside it;
* ``real_pinned``: the same with the loop thread on CPU ``--loop-cpu`` (``--set loop_cpus=…``); the
  worker thread keeps the process's CPUs (``worker.cpus`` places a worker *process* only: runs before
  stop 63 also passed ``inference_cpus``, which the thread never read);
* ``real_process``: ``--inference process`` (``edge run --policy comet``'s default on the real clock,
  sync): the decision runs in a worker process (its own interpreter, so no lock shared with the loop
  thread; SCHED_BATCH, nice 5, one torch thread);
* ``real_switch5ms``: the worker thread with Python's default thread switch interval (5 ms) instead
  of the real clock's 0.5 ms (``--set loop.gil_switch_interval_s=0``);
* ``real_torch1``: the worker thread with one torch thread, as the worker process has
  (``--set worker.torch_threads=1``; a thread otherwise takes as many as the loop's).

Every arm runs with ``policy.comet.plan_threads=0`` (torch keeps its own thread count, a thread per
core, as ``edge run``'s planner did when this was written; since stop 64 its default is one thread).

``--arms`` picks which run (default: all this machine can run).

Reported per arm from the run records: the decision's compute time (``compute_s``) and its latency
p50 / p99, their p50 ratio to the virtual arm's, the compute p50 of each block of episodes, ticks per
decision, overruns, successes (context only: the seeds may have been used before). Keep the machine otherwise idle. Writes JSON (machine,
command, versions).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions


ARM_NAMES = ("virtual", "real", "real_pinned", "real_process", "real_switch5ms", "real_torch1")


def arms(loop_cpu: int) -> dict[str, list[str]]:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    others = ",".join(str(c) for c in cpus if c != loop_cpu)
    thread = ["--clock", "real", "--inference", "thread"]  # named: comet's default there is a process
    out = {"virtual": [], "real": thread}
    if others and loop_cpu in cpus:
        out["real_pinned"] = [*thread, "--set", f"loop_cpus={loop_cpu}"]
    out["real_process"] = ["--clock", "real", "--inference", "process"]
    out["real_switch5ms"] = [*thread, "--set", "loop.gil_switch_interval_s=0"]
    out["real_torch1"] = [*thread, "--set", "worker.torch_threads=1"]
    return out


def _pct(a: list[float], q: float) -> float | None:
    return round(float(np.percentile(np.asarray(a, float) * 1e3, q)), 2) if a else None  # None: no decision finished


def arm_figures(run_dir: Path, block: int = 0) -> dict:
    """One arm's figures from its run directory; ``block`` > 0 adds the compute p50 of each block of
    that many episodes (in episode order: how the arm drifted over the run)."""
    queries = [json.loads(x) for x in (run_dir / "queries.jsonl").read_text().splitlines()]
    eps = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())
    comp = [q["compute_s"] for q in queries if q.get("compute_s") is not None]
    by_block: dict[int, list[float]] = {}
    for q in queries:
        if block > 0 and q.get("compute_s") is not None:
            by_block.setdefault(int(q["ep"]) // block, []).append(q["compute_s"])
    lat = [q["latency_s"] for q in queries if q.get("latency_s") is not None]
    ticks = sum(e["ticks"] for e in eps)
    return {"episodes": len(eps), "successes": sum(bool(e.get("success")) for e in eps), "decisions": len(queries),
            "compute_ms": {"p50": _pct(comp, 50), "p99": _pct(comp, 99)},
            "latency_ms": {"p50": _pct(lat, 50), "p99": _pct(lat, 99)},
            "ticks_per_decision": round(ticks / max(len(queries), 1), 3),
            "overruns": summary.get("overruns"), "seeds": [e["seed"] for e in eps],
            # every block, None where no decision finished in it
            **({"compute_p50_ms_by_block": [_pct(by_block.get(b, []), 50) for b in range(-(-len(eps) // block))]}
               if block > 0 else {})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="reach", choices=("reach", "push"), help="the runtime task (its shipped model)")
    ap.add_argument("--world-model", default="", metavar="DIR", help="a world-model directory (default: the task's shipped one)")
    ap.add_argument("--simulations", type=int, default=64, help="tree-search simulations per decision")
    ap.add_argument("--episodes", type=int, default=50, help="episodes per arm (seeds SEED .. SEED+N-1)")
    ap.add_argument("--seed", type=whole(0), default=480000, help="first episode seed")
    ap.add_argument("--max-steps", type=whole(0, 100_000), default=0, help="simulated periods per episode (0 = the task's own)")
    ap.add_argument("--block", type=int, default=25, help="episodes per block; the arms alternate block by block")
    ap.add_argument("--arms", default="", help=f"comma-separated arms to run, of {', '.join(ARM_NAMES)} (default: "
                    "all this machine can run; real_pinned needs two CPUs); virtual always runs: the ratios are to it")
    ap.add_argument("--loop-cpu", type=whole(0), default=None,
                    help="real_pinned: the CPU of the loop thread (the worker gets the others; default 0)")
    ap.add_argument("--runs-dir", default="/tmp/wm_thread_cost_runs", help="where the arms' run directories go (must not exist)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_thread_cost.json", help="JSON written")
    args = ap.parse_args(argv)
    if args.simulations < 1:
        ap.error(f"--simulations {args.simulations}: must be >= 1")
    if args.episodes < 1 or args.block < 1:
        ap.error(f"--episodes {args.episodes} / --block {args.block}: must be >= 1")
    wanted = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in wanted if a not in ARM_NAMES]
    if unknown:
        ap.error(f"--arms {args.arms}: unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARM_NAMES)}")
    runs = Path(args.runs_dir)
    if runs.exists():
        ap.error(f"--runs-dir {runs}: exists; give a new directory (two runs never mix)")
    from edge.vla.manifest import git_revision

    git = git_revision()
    edge = str(Path(sys.executable).with_name("edge"))
    base = [edge, "run", "--policy", "comet", "--task", args.task, "--query-mode", "sync",
            "--plan-simulations", str(args.simulations), "--seed", str(args.seed),
            "--set", "policy.comet.plan_threads=0"]  # torch's own thread count, as when this was written
    if args.world_model:
        base += ["--world-model", args.world_model]
    if args.max_steps:
        base += ["--set", f"max_steps={args.max_steps}"]
    from benchmarks.wm_real_clock import run_blocks

    given_cpu, args.loop_cpu = args.loop_cpu is not None, 0 if args.loop_cpu is None else args.loop_cpu
    available = arms(args.loop_cpu)
    if given_cpu and "real_pinned" not in available:  # named, so its arm must run: not dropped silently
        ap.error(f"--loop-cpu {args.loop_cpu}: not one of this process's CPUs with another beside it "
                 f"({sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()})")
    if "real_pinned" in wanted and "real_pinned" not in available:
        ap.error(f"--arms real_pinned: needs --loop-cpu {args.loop_cpu} among this process's CPUs and another beside it")
    arm_flags = {name: flags for name, flags in available.items() if name == "virtual" or not wanted or name in wanted}
    names = list(arm_flags)
    wall = run_blocks(base, arm_flags, args.episodes, args.block, runs)
    if wall is None:
        return 2
    res: dict = {"benchmark": "wm_thread_cost", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
                 "git": git, "versions": package_versions(), "task": args.task, "simulations": args.simulations,
                 "seeds": [args.seed, args.seed + args.episodes - 1], "block": args.block,
                 "flags": arm_flags, "arms": {}}
    for name in names:
        fig = arm_figures(runs / name, args.block)
        fig["wall_s"] = round(wall[name], 1)
        res["arms"][name] = fig
    ref = res["arms"]["virtual"]["compute_ms"]["p50"]
    for name, fig in res["arms"].items():
        p50 = fig["compute_ms"]["p50"]
        fig["compute_p50_vs_virtual"] = round(p50 / ref, 3) if p50 is not None and ref else None
        print(f"{name:12s} compute p50 / p99 {fig['compute_ms']['p50']} / {fig['compute_ms']['p99']} ms "
              f"({fig['compute_p50_vs_virtual']}x)  latency p50 {fig['latency_ms']['p50']} ms  "
              f"ticks/decision {fig['ticks_per_decision']}  overruns {fig['overruns']}  "
              f"successes {fig['successes']}/{fig['episodes']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
