"""The world-model planner in the runtime loop, sync against async with lookahead, on the same seeds.

    python benchmarks/wm_lookahead.py --episodes 30 --out benchmarks/results/wm_lookahead.json

Two arms of ``edge run --policy comet --task push`` (the profiler's ``comet[:N]`` and
``comet-ahead[:N]``: :mod:`edge.profiler.profile`), each over the same ``--episodes`` seeds, on the
virtual clock with each decision's measured time charged (``--latency measured``, ``edge run``'s
default), one after the other, one thread:

* ``sync``: a decision when the queue is empty; its move runs from the tick it arrives.
* ``async``: a decision every tick, searched from the state the model predicts after the move that
  runs meanwhile; the chunk is [that move, the new move].

Per arm, from the run records: ticks, moves (executed ticks) per tick, starved ticks, decisions,
decision time p50 / p99 (the charged latency), safety interventions by kind, successes, and the
planner's own per-episode counts (``WorldModelPolicy.episode_stats``): the model's one-step
prediction error in the loop, against the frame that followed each move, beside the error of
predicting no change (ratio R per episode = prediction MSE / no-change MSE; R < 1: the model
predicts the move's effect). Paired per seed: successes (exact McNemar) and async − sync for moves
per tick and R (95 % bootstrap intervals over episodes). The run directories stay under ``--runs-dir`` (``edge profile --runs`` reads
them). Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def p50_ratio(a: dict, b: dict) -> float | None:
    """Arm ``a``'s decision p50 over arm ``b``'s (:func:`arm_stats`); None where either had no decision."""
    pa, pb = a["decision_ms"]["p50"], b["decision_ms"]["p50"]
    return round(pa / pb, 3) if pa is not None and pb else None


def arm_stats(run_dir: Path) -> dict:
    """One arm's figures from its run records (ticks, queries, episodes)."""
    eps = _read(run_dir / "episodes.jsonl")
    ticks = _read(run_dir / "ticks.jsonl")
    queries = _read(run_dir / "queries.jsonl")
    lat = np.array([q["latency_s"] for q in queries]) * 1e3
    ivs = Counter(kind for t in ticks for kind, _ in (t.get("interventions") or ()) if kind != "wait_first_plan")
    n_ticks, moves = sum(e["ticks"] for e in eps), sum(e["executed"] for e in eps)
    per_ep = {"seed": [e["seed"] for e in eps], "success": [bool(e.get("success")) for e in eps],
              "moves_per_tick": [e["executed"] / e["ticks"] for e in eps],
              "R": [e["planner_pred_mse"] / e["planner_still_mse"]
                    if e.get("planner_pred_n") and e.get("planner_still_mse") else float("nan") for e in eps]}
    n_pred = sum(e.get("planner_pred_n") or 0 for e in eps)
    pred = sum((e.get("planner_pred_mse") or 0.0) * (e.get("planner_pred_n") or 0) for e in eps)
    still = sum((e.get("planner_still_mse") or 0.0) * (e.get("planner_pred_n") or 0) for e in eps)
    keys = ("decisions", "ahead", "held", "modified", "context_resets", "foreign_queued")
    periods = sum(e["steps"] for e in eps)  # simulated periods: ticks, and the real clock's skipped deadlines
    return {"run_dir": str(run_dir), "episodes": len(eps), "ticks": n_ticks, "moves": moves,
            "moves_per_tick": round(moves / n_ticks, 4), "sim_periods": periods,
            "moves_per_sim_period": round(moves / periods, 4) if periods else None,
            "starved": sum(e["starved"] for e in eps),
            "decision_ms": {**({"p50": round(float(np.percentile(lat, 50)), 2), "p99": round(float(np.percentile(lat, 99)), 2)}
                               if lat.size else {"p50": None, "p99": None}),  # none: every decision cancelled
                            "n": int(lat.size)},
            "interventions": dict(ivs), "interventions_per_move": {k: round(v / max(moves, 1), 4) for k, v in ivs.items()},
            "successes": sum(bool(e.get("success")) for e in eps),
            "max_stage": dict(Counter(int(e.get("max_stage") or 0) for e in eps)),
            "planner": {**{k: sum(e.get(f"planner_{k}") or 0 for e in eps) for k in keys},
                        "transitions": n_pred, "pred_mse": pred / n_pred if n_pred else None,
                        "still_mse": still / n_pred if n_pred else None,
                        "R_pooled": round(pred / still, 4) if still else None},
            "per_episode": per_ep}


def train_env_reference(world_model: str, episodes: int, seed: int, simulations: int, progress: bool) -> dict:
    """The same planner acting in the world model's own training env (``ObjectTaskEnv``: one move per
    step, exactly as trained, episodes of the task's own length (push3: 60 moves); no safety layer,
    no latency; the search's model passes on torch, which agree with the ONNX graph to 1e-4): its
    one-step prediction error there, the reference for the runtime arms' R."""
    from tqdm import tqdm

    from world_models.object_env import ObjectTaskEnv
    from world_models.policy import SHIPPED, WorldModelPolicy

    pol = WorldModelPolicy(world_model or str(SHIPPED), simulations=simulations, seed=seed)
    env = ObjectTaskEnv(pol.cfg.env)
    per_ep, successes, pred, still, n = [], 0, 0.0, 0.0, 0
    won, moves = [], []
    try:
        for ep in tqdm(range(episodes), desc="training env", disable=not progress):
            obs, _ = env.reset(seed=seed + ep)
            pol.reset()
            pol.episode_stats(reset=True)
            executed = None
            for t in range(env.cfg.steps):
                a, _ = pol.encode_query({"front": obs["frame"]}, None, executed, 0)
                obs, _, success, truncated, _ = env.step(a)
                executed = (pol.sample(a, None, 1)[0],)
                if success or truncated:
                    break
            successes += bool(success)
            won.append(bool(success))
            moves.append(t + 1)
            st = pol.episode_stats(reset=True)
            k = st["planner_pred_n"]
            per_ep.append(st["planner_pred_mse"] / st["planner_still_mse"] if k and st["planner_still_mse"] else float("nan"))
            pred, still, n = pred + (st["planner_pred_mse"] or 0.0) * k, still + (st["planner_still_mse"] or 0.0) * k, n + k
    finally:
        env.close()
    return {"episodes": episodes, "seeds": [seed, seed + episodes - 1], "steps_per_episode": env.cfg.steps,
            "successes": successes, "transitions": n, "pred_mse": pred / n if n else None,
            "still_mse": still / n if n else None, "R_pooled": round(pred / still, 4) if still else None,
            "per_episode_R": per_ep, "per_episode_success": won, "per_episode_moves": moves}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-model", default="", metavar="DIR",
                    help="a world-model directory from `edge train world-model` (default: the shipped comet_push3)")
    ap.add_argument("--simulations", type=int, default=0, help="search simulations per decision (0 = the model's own)")
    ap.add_argument("--backend", default="onnxruntime", choices=("onnxruntime", "torch"),
                    help="what runs the search's model passes (as edge run --plan-backend)")
    ap.add_argument("--episodes", type=int, default=30, help="episodes per arm (seeds SEED .. SEED+N-1, paired)")
    ap.add_argument("--seed", type=whole(0), default=300000, help="first episode seed")
    ap.add_argument("--runs-dir", default="/tmp/wm_lookahead_runs", help="where the two arms' run directories go "
                    "(must not exist)")
    ap.add_argument("--max-steps", type=whole(0, 100_000), default=0, help="ticks per episode (0 = the task's own)")
    ap.add_argument("--latency-ms", type=float, default=None,
                    help="charge this constant decision time instead of the measured one (e.g. for tests)")
    ap.add_argument("--train-env", type=int, default=0, metavar="N",
                    help="also run the planner N episodes in its own training env (ObjectTaskEnv, one move per "
                         "step, no safety layer or latency; seeds SEED ..): the reference for R (default 0: no)")
    ap.add_argument("--train-env-only", action="store_true", help="run only the --train-env reference")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--out", type=writable_file, default=None,
                    help="JSON written (default benchmarks/results/wm_lookahead.json; with --train-env-only "
                         "benchmarks/results/wm_lookahead_train_env.json)")
    args = ap.parse_args(argv)
    if args.out is None:  # the default depends on --train-env-only: checked as a given --out is
        try:
            args.out = writable_file("benchmarks/results/wm_lookahead_train_env.json" if args.train_env_only
                                     else "benchmarks/results/wm_lookahead.json")
        except argparse.ArgumentTypeError as err:
            ap.error(f"--out (default) {err}")
    if args.world_model and not (Path(args.world_model) / "model.pt").is_file():
        ap.error(f"--world-model {args.world_model}: no model.pt there (a directory from `edge train world-model`)")
    if args.episodes < 2:
        ap.error(f"--episodes {args.episodes}: need >= 2 for intervals")
    if not 0 <= args.simulations <= 10000:
        ap.error(f"--simulations {args.simulations}: must be in 0..10000 (0 = the model's own)")
    if args.train_env < 0 or (args.train_env_only and args.train_env < 2):
        ap.error(f"--train-env {args.train_env}: must be >= 0, and >= 2 with --train-env-only")
    runs = Path(args.runs_dir)
    if runs.exists() and not args.train_env_only:
        ap.error(f"--runs-dir {runs}: exists; give a new directory (two runs never mix)")
    import torch

    from benchmarks.slot_carry_iters import bootstrap_mean, paired_differences
    from edge.profiler.profile import ProfileConfig, make_arm, session_config
    from edge.runtime.session import run_session

    torch.set_num_threads(1)
    if args.latency_ms is not None and not 0.0 <= args.latency_ms <= 10000.0:
        ap.error(f"--latency-ms {args.latency_ms:g}: must be in [0, 10000]")
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
    arms = {"sync": make_arm(f"comet{sims}", args.backend), "async": make_arm(f"comet-ahead{sims}", args.backend)}
    from edge.vla.manifest import git_revision

    res: dict = {"benchmark": "wm_lookahead", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
                 "git": git_revision(), "versions": package_versions(), "world_model": args.world_model or "(the shipped comet_push3)",
                 "simulations": args.simulations or "the model's own", "backend": args.backend,
                 "seeds": [args.seed, args.seed + args.episodes - 1], "latency": "measured (charged, virtual clock)" if args.latency_ms is None
                 else f"constant {args.latency_ms:g} ms (charged, virtual clock)",
                 "arms": {}}
    rng = np.random.default_rng(0)
    if args.train_env:
        ref = train_env_reference(args.world_model, args.train_env, args.seed, args.simulations, not args.no_progress)
        ref["R_per_episode"] = bootstrap_mean(ref["per_episode_R"], np.random.default_rng(1))  # arms keep rng
        res["train_env"] = ref
        print(f"training env: R pooled {ref['R_pooled']}, per episode {ref['R_per_episode']}, "
              f"successes {ref['successes']}/{ref['episodes']}")
    if args.train_env_only:
        res.pop("arms")
        res.pop("latency")
        res["backend"] = "torch"  # the reference's search (see train_env_reference)
        res["seeds"] = ref["seeds"]
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {args.out}")
        return 0
    for name, arm in arms.items():
        t0 = time.perf_counter()
        run_session(session_config(pc, arm, args.seed, args.episodes), runs / name, progress=not args.no_progress)
        res["arms"][name] = {"label": arm.name, "wall_s": round(time.perf_counter() - t0, 1),
                             **arm_stats(runs / name)}
    s, a = res["arms"]["sync"], res["arms"]["async"]
    if s["per_episode"]["seed"] != a["per_episode"]["seed"]:
        print("error: the two arms ran different seeds", file=sys.stderr)
        return 2
    from edge.stats import mcnemar_exact, wilson

    for v in res["arms"].values():
        v["success_rate"] = round(v["successes"] / v["episodes"], 4)
        v["success_wilson95"] = [round(x, 4) for x in wilson(v["successes"], v["episodes"])]
    only_a = sum(x and not y for x, y in zip(a["per_episode"]["success"], s["per_episode"]["success"]))
    only_s = sum(y and not x for x, y in zip(a["per_episode"]["success"], s["per_episode"]["success"]))
    res["success_paired"] = {"only_async": only_a, "only_sync": only_s,
                             "mcnemar_exact_p": round(mcnemar_exact(only_a, only_s), 6)}
    res["R_per_episode"] = {k: bootstrap_mean(res["arms"][k]["per_episode"]["R"], rng) for k in arms}
    res["paired_async_minus_sync"] = paired_differences(
        {k: a["per_episode"][k] for k in ("moves_per_tick", "R")},
        {k: s["per_episode"][k] for k in ("moves_per_tick", "R")}, rng)
    res["decision_p50_ratio_async_over_sync"] = p50_ratio(a, s)
    for k, v in res["arms"].items():
        print(f"{k:5s} moves/tick {v['moves_per_tick']:.3f}  decisions {v['planner']['decisions']}  decision p50 / p99 "
              f"{v['decision_ms']['p50']} / {v['decision_ms']['p99']} ms  R pooled {v['planner']['R_pooled']}  "
              f"interventions {v['interventions']}  successes {v['successes']}/{v['episodes']}")
    print(f"success only async {only_a}, only sync {only_s}, McNemar p {res['success_paired']['mcnemar_exact_p']}")
    print(json.dumps(res["paired_async_minus_sync"], indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
