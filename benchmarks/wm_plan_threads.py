"""The world-model planner in the runtime loop with one torch thread against torch's own thread count.

    python benchmarks/wm_plan_threads.py --episodes 50 --seed 420000 --load idle \
        --out benchmarks/results/wm_plan_threads_idle.json

Two arms of ``edge run --policy comet --task reach`` (its defaults: async, a decision every tick,
the workspace mask, the 40 ms deadline, the search on ONNX Runtime), each over the same ``--episodes`` seeds, on the virtual clock with each
decision's measured time charged, in blocks of ``--block`` episodes that alternate between the
arms (AB, BA, ...), so the machine's drift falls on both alike:

* ``threads1``: ``policy.comet.plan_threads=1`` (``edge run``'s default): the planner sets torch to
  one intra-op thread, process-wide, as the VLA's ``backend.threads`` does.
* ``threads_torch``: ``policy.comet.plan_threads=0``: torch keeps the thread count it starts with
  (one per core; ``edge run``'s planner before the setting existed).

Per arm (:func:`benchmarks.wm_lookahead.arm_stats`): decision p50 / p99 (ms), the search's
simulations per decision and the decisions its deadline cut, moves per tick, starved ticks,
successes; paired per seed: successes (exact McNemar). ``--load`` only labels the JSON with what
else ran on the machine (the script starts no load). Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions


def planner_counts(run_dir: Path) -> dict:
    """Simulations per decision and the decisions a deadline cut, from ``episodes.jsonl``."""
    eps = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines() if x.strip()]
    decisions = sum(int(e.get("planner_decisions") or 0) for e in eps)
    sims = sum(int(e.get("planner_simulations") or 0) for e in eps)
    return {"decisions": decisions, "simulations_per_decision": round(sims / decisions, 3) if decisions else None,
            "cut_by_deadline": sum(int(e.get("planner_cut") or 0) for e in eps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-model", default="", metavar="DIR",
                    help="a reach3 world-model directory from `edge train world-model` (default: the shipped comet_reach3)")
    ap.add_argument("--episodes", type=whole(2, 100_000), default=50, help="episodes per arm (seeds SEED .. SEED+N-1, paired)")
    ap.add_argument("--seed", type=whole(0), default=420000, help="first episode seed")
    ap.add_argument("--block", type=whole(1, 100_000), default=10, help="episodes per block; the arms alternate block by block")
    ap.add_argument("--load", default="idle", help="what else ran on the machine, recorded in the JSON (e.g. idle, "
                                                   "'two training processes')")
    ap.add_argument("--runs-dir", default="", help="where the two arms' run directories go (must not exist; "
                                                   "default: a new temporary directory)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_plan_threads.json", help="JSON written")
    args = ap.parse_args(argv)
    if args.world_model and not (Path(args.world_model) / "model.pt").is_file():
        ap.error(f"--world-model {args.world_model}: no model.pt there (a directory from `edge train world-model`)")
    import tempfile

    runs = Path(args.runs_dir) if args.runs_dir else Path(tempfile.mkdtemp(prefix="wm_plan_threads_")) / "runs"
    if runs.exists():
        ap.error(f"--runs-dir {runs}: exists; give a new directory (two runs never mix)")
    import torch

    from benchmarks.wm_lookahead import arm_stats, p50_ratio
    from edge.profiler.profile import ProfileConfig, make_arm, session_config
    from edge.runtime.config import apply_settings
    from edge.runtime.session import run_session
    from edge.stats import paired, wilson
    from edge.vla.manifest import git_revision

    own_threads = torch.get_num_threads()  # torch's own count, before any planner sets it
    pc = ProfileConfig(task="reach", sim="mujoco", episodes=args.episodes, seed=args.seed, latency="measured",
                       world_model=args.world_model)
    arm = make_arm("comet-ahead+mask@40", "onnxruntime")  # edge run --policy comet's defaults
    arms = {"threads1": 1, "threads_torch": 0}
    res: dict = {"benchmark": "wm_plan_threads", "machine": machine_info(), "load": args.load,
                 "command": shlex.join(["python", *sys.argv]), "git": git_revision(), "versions": package_versions(),
                 "world_model": args.world_model or "(the shipped comet_reach3)", "torch_own_threads": own_threads,
                 "seeds": [args.seed, args.seed + args.episodes - 1], "block": args.block,
                 "latency": "measured (charged, virtual clock)", "arms": {}}
    wall = dict.fromkeys(arms, 0.0)
    for b, done in enumerate(range(0, args.episodes, args.block)):
        total = min(done + args.block, args.episodes)
        for name in (list(arms) if b % 2 == 0 else list(arms)[::-1]):
            torch.set_num_threads(own_threads)  # what the process starts with; plan_threads=1 sets its own
            cfg = apply_settings(session_config(pc, arm, args.seed, total),
                                 [("policy.comet.plan_threads", arms[name])])
            t0 = time.perf_counter()
            run_session(cfg, runs / name, progress=not args.no_progress, resume=done > 0)
            wall[name] += time.perf_counter() - t0
    for name in arms:
        st = arm_stats(runs / name)
        st["planner"].update(planner_counts(runs / name))
        st["success_rate"] = round(st["successes"] / st["episodes"], 4)
        st["success_wilson95"] = [round(x, 4) for x in wilson(st["successes"], st["episodes"])]
        res["arms"][name] = {"plan_threads": arms[name], "wall_s": round(wall[name], 1), **st}
    a, b = res["arms"]["threads1"], res["arms"]["threads_torch"]
    if a["per_episode"]["seed"] != b["per_episode"]["seed"]:
        print("error: the two arms ran different seeds", file=sys.stderr)
        return 2
    pr = paired(a["per_episode"]["success"], b["per_episode"]["success"])
    only_a, only_b = pr["only_a"], pr["only_b"]
    res["success_paired"] = {"only_threads1": only_a, "only_threads_torch": only_b,
                             "mcnemar_exact_p": round(pr["mcnemar_p"], 6)}
    res["decision_p50_ratio_torch_over_1"] = p50_ratio(b, a)
    for k, v in res["arms"].items():
        print(f"{k:14s} decision p50 / p99 {v['decision_ms']['p50']} / {v['decision_ms']['p99']} ms  simulations per "
              f"decision {v['planner']['simulations_per_decision']}  cut {v['planner']['cut_by_deadline']} of "
              f"{v['planner']['decisions']}  moves/tick {v['moves_per_tick']:.3f}  starved {v['starved']}  successes "
              f"{v['successes']}/{v['episodes']}")
    print(f"success only threads1 {only_a}, only threads_torch {only_b}, McNemar p {res['success_paired']['mcnemar_exact_p']}; "
          f"decision p50 ratio torch/1 {res['decision_p50_ratio_torch_over_1']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
