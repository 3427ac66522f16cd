"""The world-model planner in the runtime loop with and without the workspace mask, on the same seeds.

    python benchmarks/wm_workspace_mask.py --episodes 300 --seed 410000 --out benchmarks/results/wm_workspace_mask.json

Two arms of ``edge run --policy comet --task push --query-mode async`` (the profiler's
``comet-ahead[:N]`` and ``comet-ahead+mask[:N]``), each over the same ``--episodes`` seeds, on the
virtual clock with each decision's measured time charged, one thread, in blocks of ``--block``
episodes that alternate between the arms (AB, BA, AB, ...; each arm's run directory resumed block
by block), so that the machine's drift over the run falls on both arms alike:

* ``async``: a decision every tick, searched from after the queued move (``edge run``'s default).
* ``async+mask``: the same, and the search does not consider a root move that the robot's workspace
  box would cut to under half its length (``--plan-workspace-mask on``).

Per arm, from the run records (besides :func:`benchmarks.wm_lookahead.arm_stats`): per episode the
share of moves clipped at the box's walls (the safety layer's ``workspace_clip``, or the simulated
arm's own clip of its target: the tick's ``sent`` differs from its ``command``; ``cut_share``), the
share of moves into a wall (``into_wall_share``: the planner's move, the tick's ``raw_action``, which
the robot's workspace box would cut to under half its length from the TCP where it ran, ``ee_pos_m``:
what the mask is for, judged at the tick the move ran rather than the frame it was decided on), the
TCP's mean xy step per move (cm), and the planner's masked decisions. Paired per seed: successes
(exact McNemar) and mask − no mask for those shares, the step, moves per tick and R (95 % bootstrap
intervals over episodes).
The run directories stay under ``--runs-dir``. Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions


def move_stats(run_dir: Path) -> dict[str, list[float]]:
    """Per episode (in the order of ``episodes.jsonl``): the share of executed moves clipped at the
    box's walls (by the safety layer or the simulated arm), the share into a wall (the robot's box
    would cut the planner's move to under half its length from the TCP where it ran), and the TCP's
    mean xy step per move (cm)."""
    from benchmarks.wm_motion_gap import sim_clipped
    from edge.robot_spec import load_robot_spec
    from world_models.policy import wall_cut

    meta = json.loads((run_dir / "meta.json").read_text())
    box = (meta.get("robot") or {}).get("workspace_m") or (meta.get("policy") or {}).get("workspace_mask")
    if box is None:  # recorded before runs kept their box: the robot spec's as it is now
        spec = load_robot_spec(str((meta.get("session") or {}).get("robot") or "panda"))
        box = (spec.workspace_min_m, spec.workspace_max_m)
    lo, hi = np.array(box[0][:2], float), np.array(box[1][:2], float)
    cut: dict[int, list[float]] = defaultdict(list)
    waste: dict[int, list[float]] = defaultdict(list)
    step: dict[int, list[float]] = defaultdict(list)
    prev = None
    with open(run_dir / "ticks.jsonl", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            if prev is not None and prev["kind"] == "act" and prev["ep"] == t["ep"]:
                ivs = {k for k, _ in (prev.get("interventions") or ())}
                sim = sim_clipped(prev)
                wall = "workspace_clip" in ivs or sim
                cut[prev["ep"]].append(float(wall))
                raw = np.asarray(prev.get("raw_action") or prev["command"], float)[None, :2]
                at = np.clip(np.asarray(prev["ee_pos_m"][:2], float), lo, hi)  # as the mask judges it
                waste[prev["ep"]].append(float(wall_cut(at, raw, lo, hi)[0]))
                step[prev["ep"]].append(float(np.hypot(*(np.asarray(t["ee_pos_m"][:2]) - prev["ee_pos_m"][:2]))))
            prev = t
    eps = [json.loads(x)["ep"] for x in (run_dir / "episodes.jsonl").read_text().splitlines() if x.strip()]
    return {"cut_share": [float(np.mean(cut[e])) if cut[e] else float("nan") for e in eps],
            "into_wall_share": [float(np.mean(waste[e])) if waste[e] else float("nan") for e in eps],
            "step_cm": [100 * float(np.mean(step[e])) if step[e] else float("nan") for e in eps]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-model", default="", metavar="DIR",
                    help="a world-model directory from `edge train world-model` (default: the shipped comet_push3)")
    ap.add_argument("--simulations", type=int, default=0, help="search simulations per decision (0 = the model's own)")
    ap.add_argument("--backend", default="onnxruntime", choices=("onnxruntime", "torch"),
                    help="what runs the search's model passes (as edge run --plan-backend)")
    ap.add_argument("--episodes", type=int, default=30, help="episodes per arm (seeds SEED .. SEED+N-1, paired)")
    ap.add_argument("--seed", type=whole(0), default=410000, help="first episode seed")
    ap.add_argument("--runs-dir", default="/tmp/wm_workspace_mask_runs",
                    help="where the two arms' run directories go (must not exist)")
    ap.add_argument("--max-steps", type=whole(0, 100_000), default=0, help="ticks per episode (0 = the task's own)")
    ap.add_argument("--latency-ms", type=float, default=None,
                    help="charge this constant decision time instead of the measured one (e.g. for tests)")
    ap.add_argument("--block", type=int, default=50, help="episodes per block; the arms alternate block by block")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_workspace_mask.json", help="JSON written")
    args = ap.parse_args(argv)
    if args.world_model and not (Path(args.world_model) / "model.pt").is_file():
        ap.error(f"--world-model {args.world_model}: no model.pt there (a directory from `edge train world-model`)")
    if args.episodes < 2:
        ap.error(f"--episodes {args.episodes}: need >= 2 for intervals")
    if args.block < 1:
        ap.error(f"--block {args.block}: must be >= 1")
    if not 0 <= args.simulations <= 10000:
        ap.error(f"--simulations {args.simulations}: must be in 0..10000 (0 = the model's own)")
    if args.latency_ms is not None and not 0.0 <= args.latency_ms <= 10000.0:
        ap.error(f"--latency-ms {args.latency_ms:g}: must be in [0, 10000]")
    runs = Path(args.runs_dir)
    if runs.exists():
        ap.error(f"--runs-dir {runs}: exists; give a new directory (two runs never mix)")
    import torch

    from benchmarks.slot_carry_iters import bootstrap_mean, paired_differences
    from benchmarks.wm_lookahead import arm_stats, p50_ratio
    from edge.profiler.profile import ProfileConfig, make_arm, session_config
    from edge.runtime.session import run_session
    from edge.stats import mcnemar_exact, wilson
    from edge.vla.manifest import git_revision

    torch.set_num_threads(1)
    latency = ("measured", 0.0) if args.latency_ms is None else ("constant", args.latency_ms)
    from world_models.policy import RUNTIME_TASK, SHIPPED, load_world_model

    from edge.errors import EdgeError

    try:
        wm_env = load_world_model(args.world_model or str(SHIPPED))[0].env  # the task and sim the model learned
    except (EdgeError, OSError, ValueError) as err:
        ap.error(f"--world-model {args.world_model or SHIPPED}: {err}")
    pc = ProfileConfig(task=RUNTIME_TASK[wm_env.task], sim=wm_env.sim, episodes=args.episodes, seed=args.seed,
                       latency=latency[0], latency_ms=latency[1], world_model=args.world_model,
                       max_steps=args.max_steps)
    sims = f":{args.simulations}" if args.simulations else ""
    arms = {"async": make_arm(f"comet-ahead{sims}", args.backend),
            "async+mask": make_arm(f"comet-ahead+mask{sims}", args.backend)}
    res: dict = {"benchmark": "wm_workspace_mask", "machine": machine_info(),
                 "command": " ".join(["python", *sys.argv]), "git": git_revision(), "versions": package_versions(),
                 "world_model": args.world_model or "(the shipped comet_push3)",
                 "simulations": args.simulations or "the model's own", "backend": args.backend,
                 "seeds": [args.seed, args.seed + args.episodes - 1],
                 "latency": "measured (charged, virtual clock)" if args.latency_ms is None
                 else f"constant {args.latency_ms:g} ms (charged, virtual clock)", "block": args.block, "arms": {}}
    rng = np.random.default_rng(0)
    wall = dict.fromkeys(arms, 0.0)
    for b, done in enumerate(range(0, args.episodes, args.block)):
        total = min(done + args.block, args.episodes)
        for name in (list(arms) if b % 2 == 0 else list(arms)[::-1]):
            t0 = time.perf_counter()
            run_session(session_config(pc, arms[name], args.seed, total), runs / name,
                        progress=not args.no_progress, resume=done > 0)
            wall[name] += time.perf_counter() - t0
    for name, arm in arms.items():
        st = arm_stats(runs / name)
        st["per_episode"].update(move_stats(runs / name))
        eps = [json.loads(x) for x in (runs / name / "episodes.jsonl").read_text().splitlines() if x.strip()]
        st["planner"]["masked"] = sum(e.get("planner_masked") or 0 for e in eps)
        st["planner"]["masked_moves"] = sum(e.get("planner_masked_moves") or 0 for e in eps)
        st["sim_workspace_clips"] = sum(e.get("sim_workspace_clips") or 0 for e in eps)
        st["cut_share"] = bootstrap_mean(st["per_episode"]["cut_share"], rng)
        st["into_wall_share"] = bootstrap_mean(st["per_episode"]["into_wall_share"], rng)
        st["step_cm"] = bootstrap_mean(st["per_episode"]["step_cm"], rng)
        st["R_per_episode"] = bootstrap_mean(st["per_episode"]["R"], rng)
        st["success_rate"] = round(st["successes"] / st["episodes"], 4)
        st["success_wilson95"] = [round(x, 4) for x in wilson(st["successes"], st["episodes"])]
        res["arms"][name] = {"label": arm.name, "wall_s": round(wall[name], 1), **st}
    a, m = res["arms"]["async"], res["arms"]["async+mask"]
    if a["per_episode"]["seed"] != m["per_episode"]["seed"]:
        print("error: the two arms ran different seeds", file=sys.stderr)
        return 2
    only_m = sum(x and not y for x, y in zip(m["per_episode"]["success"], a["per_episode"]["success"]))
    only_a = sum(y and not x for x, y in zip(m["per_episode"]["success"], a["per_episode"]["success"]))
    res["success_paired"] = {"only_mask": only_m, "only_no_mask": only_a,
                             "mcnemar_exact_p": round(mcnemar_exact(only_m, only_a), 6)}
    keys = ("into_wall_share", "cut_share", "step_cm", "moves_per_tick", "R")
    res["paired_mask_minus_no_mask"] = paired_differences({k: m["per_episode"][k] for k in keys},
                                                          {k: a["per_episode"][k] for k in keys}, rng)
    res["decision_p50_ratio_mask_over_no_mask"] = p50_ratio(m, a)
    for k, v in res["arms"].items():
        print(f"{k:10s} into wall {v['into_wall_share']['mean']:.3f}  cut share {v['cut_share']['mean']:.3f}  step {v['step_cm']['mean']:.3f} cm  moves/tick "
              f"{v['moves_per_tick']:.3f}  decision p50 / p99 {v['decision_ms']['p50']} / {v['decision_ms']['p99']} ms  "
              f"R pooled {v['planner']['R_pooled']}  masked {v['planner']['masked']}  successes "
              f"{v['successes']}/{v['episodes']}  max stage {v['max_stage']}")
    print(f"success only mask {only_m}, only no mask {only_a}, McNemar p {res['success_paired']['mcnemar_exact_p']}")
    print(json.dumps(res["paired_mask_minus_no_mask"], indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
