"""Does the runtime keep a world model's competence? A reach3 model in its own env and in the loop.

    python benchmarks/wm_runtime_reach.py --episodes 300 --seed 430000 --out benchmarks/results/wm_runtime_reach.json

The same model (default: the shipped ``comet_reach3``) on the same scene seeds, paired:

* ``train_env``: greedy in its own training env (``ObjectTaskEnv`` reach3: one move per step, the
  task's 30 moves, no safety layer, no latency; the search on torch), through the runtime's own
  policy class (:func:`benchmarks.wm_lookahead.train_env_reference`);
* ``async``: ``edge run --policy comet --task reach`` as a user runs it (a decision every tick,
  searched from after the queued move; ONNX Runtime search; the workspace mask on; each decision's
  measured time charged on the virtual clock), ``--async-ticks`` ticks (default 31: 30 moves; the
  first tick holds while the first decision is made);
* ``sync``: the same with ``--query-mode sync``, ``--sync-ticks`` ticks (default 60: one move per two
  ticks, 30 moves);
* ``constant``: the best constant action of ``object_task_scripted.py`` (action 7) in the training
  env, for context.

The two runtime arms run in blocks of ``--block`` episodes that alternate (AB, BA, ...), so the
machine's drift falls on both. The runtime's ``reach`` draws exactly reach3's scene for a seed
(tests/sim/test_tasks.py). Reported: successes with Wilson intervals; paired per seed, each runtime
arm − train_env (the difference in success with a 95 % bootstrap interval over episodes, exact
McNemar p) and async vs sync; decision p50 / p99, moves and ticks per episode, steps to success,
safety interventions and sim clips per move (from the run records). The run directories stay under
``--runs-dir``. Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions

CONSTANT_ACTION = 7  # object_task_scripted.py's selection on reach3 (+x, -y)


def constant_action(task_cfg, action: int, episodes: int, seed: int) -> list[bool]:
    """Success per episode of repeating ``action`` for a whole episode of the training env."""
    from world_models.object_env import ObjectTaskEnv

    env = ObjectTaskEnv(task_cfg)
    won = []
    try:
        for ep in range(episodes):
            env.reset(seed=seed + ep)
            for _ in range(env.cfg.steps):
                _, _, success, truncated, _ = env.step(action)
                if success or truncated:
                    break
            won.append(bool(success))
    finally:
        env.close()
    return won


def paired(a: list[bool], b: list[bool], rng: np.random.Generator) -> dict:
    """a − b per episode: the mean difference in success, its 95 % bootstrap interval, exact McNemar."""
    from edge.profiler.episodes import bootstrap_difference
    from edge.stats import mcnemar_exact

    only_a = int(sum(x and not y for x, y in zip(a, b)))
    only_b = int(sum(y and not x for x, y in zip(a, b)))
    return {**bootstrap_difference(a, b, rng), "only_first": only_a, "only_second": only_b,
            "mcnemar_exact_p": round(mcnemar_exact(only_a, only_b), 6), "episodes": len(a)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-model", default="", metavar="DIR",
                    help="a reach3 world-model directory from `edge train world-model` (default: the shipped comet_reach3)")
    ap.add_argument("--simulations", type=int, default=0, help="search simulations per decision (0 = the model's own)")
    ap.add_argument("--episodes", type=int, default=30, help="episodes per arm (seeds SEED .. SEED+N-1, paired)")
    ap.add_argument("--seed", type=whole(0), default=430000, help="first episode seed")
    ap.add_argument("--async-ticks", type=whole(1, 100_000), default=31,
                    help="ticks per async episode (a move on every tick after the first)")
    ap.add_argument("--sync-ticks", type=whole(1, 100_000), default=60, help="ticks per sync episode (a move every other tick)")
    ap.add_argument("--runs-dir", default="/tmp/wm_runtime_reach_runs",
                    help="where the runtime arms' run directories go (must not exist)")
    ap.add_argument("--latency-ms", type=float, default=None,
                    help="charge this constant decision time instead of the measured one (e.g. for tests)")
    ap.add_argument("--block", type=int, default=50, help="episodes per block; the runtime arms alternate block by block")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_runtime_reach.json", help="JSON written")
    args = ap.parse_args(argv)
    from world_models.policy import SHIPPED_BY_TASK, load_world_model

    model = args.world_model or str(SHIPPED_BY_TASK["reach"])
    if not (Path(model) / "model.pt").is_file():
        ap.error(f"--world-model {model}: no model.pt there (a directory from `edge train world-model --task reach3`)")
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
    cfg, _, manifest = load_world_model(model)
    if cfg.env.task != "reach3":
        ap.error(f"--world-model {model}: a {cfg.env.task} model; this benchmark runs reach3 models")
    import torch

    from benchmarks.wm_lookahead import arm_stats, train_env_reference
    from edge.profiler.profile import ProfileConfig, make_arm, session_config
    from edge.runtime.session import run_session
    from edge.stats import wilson
    from edge.vla.manifest import git_revision

    torch.set_num_threads(1)
    latency = ("measured", 0.0) if args.latency_ms is None else ("constant", args.latency_ms)
    sims = f":{args.simulations}" if args.simulations else ""
    arms = {"async": (make_arm(f"comet-ahead+mask{sims}", "onnxruntime"), args.async_ticks),
            "sync": (make_arm(f"comet+mask{sims}", "onnxruntime"), args.sync_ticks)}
    res: dict = {"benchmark": "wm_runtime_reach", "machine": machine_info(),
                 "command": " ".join(["python", *sys.argv]), "git": git_revision(), "versions": package_versions(),
                 "world_model": model, "model_sha256": (manifest.get("files") or {}).get("model.pt"),
                 "simulations": args.simulations or cfg.planner.num_simulations,
                 "seeds": [args.seed, args.seed + args.episodes - 1],
                 "latency": "measured (charged, virtual clock)" if args.latency_ms is None
                 else f"constant {args.latency_ms:g} ms (charged, virtual clock)", "block": args.block, "arms": {}}
    t0 = time.perf_counter()
    ref = train_env_reference(model, args.episodes, args.seed, args.simulations, not args.no_progress)
    won = {"train_env": ref["per_episode_success"]}
    res["arms"]["train_env"] = {"successes": ref["successes"], "episodes": args.episodes,
                                "moves_per_episode": ref["steps_per_episode"], "R_pooled": ref["R_pooled"],
                                "moves_to_success_p50": _p50([m for m, w in zip(ref["per_episode_moves"], won["train_env"]) if w]),
                                "wall_s": round(time.perf_counter() - t0, 1), "search_backend": "torch",
                                "per_episode": {"success": won["train_env"], "moves": ref["per_episode_moves"]}}
    t0 = time.perf_counter()
    won["constant"] = constant_action(cfg.env, CONSTANT_ACTION, args.episodes, args.seed)
    res["arms"]["constant"] = {"action": CONSTANT_ACTION, "successes": sum(won["constant"]), "episodes": args.episodes,
                               "wall_s": round(time.perf_counter() - t0, 1),
                               "per_episode": {"success": won["constant"]}}
    wall = dict.fromkeys(arms, 0.0)
    for b, done in enumerate(range(0, args.episodes, args.block)):
        total = min(done + args.block, args.episodes)
        for name in (list(arms) if b % 2 == 0 else list(arms)[::-1]):
            arm, ticks = arms[name]
            pc = ProfileConfig(task="reach", sim=cfg.env.sim, episodes=args.episodes, seed=args.seed, latency=latency[0],
                               latency_ms=latency[1], world_model=model, max_steps=ticks)
            t1 = time.perf_counter()
            run_session(session_config(pc, arm, args.seed, total), runs / name,
                        progress=not args.no_progress, resume=done > 0)
            wall[name] += time.perf_counter() - t1
    for name, (arm, ticks) in arms.items():
        st = arm_stats(runs / name)
        eps = [json.loads(x) for x in (runs / name / "episodes.jsonl").read_text().splitlines() if x.strip()]
        if st["per_episode"]["seed"] != list(range(args.seed, args.seed + args.episodes)):
            print(f"error: arm {name} ran other seeds than {args.seed}..", file=sys.stderr)
            return 2
        won[name] = st["per_episode"]["success"]
        st["per_episode"]["moves"] = [e["executed"] for e in eps]
        st["per_episode"]["ticks"] = [e["ticks"] for e in eps]
        st["moves_to_success_p50"] = _p50([e["executed"] for e in eps if e.get("success")])
        st["ticks_to_success_p50"] = _p50([e["ticks"] for e in eps if e.get("success")])
        st["sim_workspace_clips_per_move"] = round(sum(e.get("sim_workspace_clips") or 0 for e in eps)
                                                   / max(st["moves"], 1), 4)
        st["ticks_per_episode"] = ticks
        res["arms"][name] = {"label": arm.name, "wall_s": round(wall[name], 1), **st}
    for name, v in res["arms"].items():
        v["success_rate"] = round(v["successes"] / v["episodes"], 4)
        v["success_wilson95"] = [round(x, 4) for x in wilson(v["successes"], v["episodes"])]
    rng = np.random.default_rng(0)
    res["paired"] = {"async_minus_train_env": paired(won["async"], won["train_env"], rng),
                     "sync_minus_train_env": paired(won["sync"], won["train_env"], rng),
                     "async_minus_sync": paired(won["async"], won["sync"], rng),
                     "train_env_minus_constant": paired(won["train_env"], won["constant"], rng)}
    for name, v in res["arms"].items():
        extra = (f"  decision p50 / p99 {v['decision_ms']['p50']} / {v['decision_ms']['p99']} ms  moves/ep "
                 f"{v['moves'] / v['episodes']:.1f}  interventions/move {v['interventions_per_move']}"
                 if "decision_ms" in v else "")
        print(f"{name:10s} {v['successes']}/{v['episodes']} = {v['success_rate']:.3f} {v['success_wilson95']}{extra}")
    for k, v in res["paired"].items():
        print(f"{k:26s} {v['difference']:+.3f} {v['ci95']}  McNemar p {v['mcnemar_exact_p']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def _p50(values: list) -> float | None:
    return float(np.median(values)) if values else None


if __name__ == "__main__":
    raise SystemExit(main())
