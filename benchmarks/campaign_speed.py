"""Episodes per second of a VLA campaign through the runtime, with the cameras rendered at every
simulator step (``scene.lazy_images=false``) or only when the loop reads them, once per query
(``true``, the default), side by side in interleaved rounds on the same seeds (issue 23: "rendering
only what is observed").

Every round runs the same episodes both ways in one process each (the VLA at K, C on the virtual
clock, sync queries, zero charged latency, as ``vla_grid.py``); the per-seed outcomes, steps and
NFE must be identical, and the JSON stores the wall time of each arm per round and their ratios.

    python benchmarks/campaign_speed.py --episodes 20 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.argtypes import whole, writable_file  # noqa: E402


def run_arm(lazy: bool, episodes: int, seed: int, k: int, c: int) -> dict:
    from edge.runtime import RuntimeConfig, run_session

    cfg = RuntimeConfig.of(num_steps=k, execute=c, execution="sync", latency="constant", latency_ms=0.0,
                           episodes=episodes, seed=seed, record_ticks=False, video_episodes=0,
                           **{"scene.lazy_images": lazy})
    t0 = time.perf_counter()
    res = run_session(cfg, None, progress=False)
    wall = time.perf_counter() - t0
    steps = sum(e["steps"] for e in res.episodes)
    return {"lazy_images": lazy, "wall_s": wall, "steps": steps, "steps_per_s": steps / wall,
            "outcomes": [(e["seed"], bool(e["success"]), e["steps"], e["nfe"]) for e in res.episodes]}


def query_env_rate(lazy: bool, queries: int, seed: int, render_mesh_cell_m: float = 0.0) -> float:
    """QueryEnv (the env EQRL trains in) at K=2, C=8: queries per second, one process."""
    from edge.runtime import QueryEnv, RuntimeConfig

    env = QueryEnv(RuntimeConfig.of(num_steps=2, execute=8, execution="sync", latency="constant", latency_ms=0.0,
                                    episodes=1, seed=seed, **{"scene.lazy_images": lazy,
                                                              "scene.render_mesh_cell_m": render_mesh_cell_m}))
    try:
        env.reset()
        n, done, t0 = 0, False, time.perf_counter()
        while n < queries:
            if done:
                env.reset()
            _, _, term, trunc, _ = env.step({"noise": None, "num_steps": 2, "execute": 8})
            done, n = term or trunc, n + 1
        return n / (time.perf_counter() - t0)
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    from edge.telemetry import machine_info

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=whole(1), default=20, help="episodes per arm and round (default: %(default)s)")
    ap.add_argument("--rounds", type=whole(1), default=3, help="interleaved rounds (default: %(default)s)")
    ap.add_argument("--seed", type=whole(0), default=100000, help="first episode seed (default: %(default)s)")
    ap.add_argument("--k", type=int, default=2, help="denoising steps K (default: %(default)s)")
    ap.add_argument("--c", type=int, default=8, help="executed actions C (default: %(default)s)")
    ap.add_argument("--query-env-queries", type=whole(0), default=0,
                    help="also QueryEnv queries/s both ways, this many queries per arm and round (default: 0 = skip)")
    ap.add_argument("--query-env-render-mesh-cell-m", type=float, default=0.0,
                    help="with --query-env-queries: also QueryEnv with lazy images and the robot's render meshes "
                         "simplified on this grid (scene.render_mesh_cell_m; 0 = not measured)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/campaign_speed.json", help="JSON written (default: %(default)s)")
    a = ap.parse_args(argv)
    from edge.config import ConfigError
    from edge.runtime import RuntimeConfig

    try:
        RuntimeConfig.of(num_steps=a.k, execute=a.c, seed=a.seed)
    except ConfigError as err:
        ap.error(f"--k {a.k} / --c {a.c}: {err}")
    if a.query_env_render_mesh_cell_m:
        if not a.query_env_queries:
            ap.error(f"--query-env-render-mesh-cell-m {a.query_env_render_mesh_cell_m}: measured only with "
                     "--query-env-queries N (N >= 1)")
        try:
            RuntimeConfig.of(**{"scene.render_mesh_cell_m": a.query_env_render_mesh_cell_m})
        except (ConfigError, ValueError) as err:
            ap.error(f"--query-env-render-mesh-cell-m {a.query_env_render_mesh_cell_m}: {err}")
    res = {"command": " ".join(["python", *sys.argv]), "machine": machine_info(), "load_avg_before": os.getloadavg(),
           "cell": {"K": a.k, "C": a.c}, "episodes": a.episodes, "seed": a.seed, "rounds": []}
    run_arm(True, 1, a.seed, a.k, a.c)  # warm-up: imports, the sentence encoder, caches (not counted)
    for r in range(a.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)  # alternate who goes first
        arms = {lazy: run_arm(lazy, a.episodes, a.seed, a.k, a.c) for lazy in order}
        same = arms[True]["outcomes"] == arms[False]["outcomes"]
        ratio = arms[False]["wall_s"] / arms[True]["wall_s"]
        res["rounds"].append({"every_step": {k: v for k, v in arms[False].items() if k != "outcomes"},
                              "lazy": {k: v for k, v in arms[True].items() if k != "outcomes"},
                              "speedup": ratio, "outcomes_identical": same})
        if not same:
            res["outcomes_every_step"], res["outcomes_lazy"] = arms[False]["outcomes"], arms[True]["outcomes"]
        if a.query_env_queries:
            qe = {lazy: query_env_rate(lazy, a.query_env_queries, a.seed) for lazy in order}
            res["rounds"][-1]["query_env_queries_per_s"] = {"every_step": qe[False], "lazy": qe[True],
                                                            "speedup": qe[True] / qe[False]}
            print(f"  QueryEnv: every step {qe[False]:.1f} queries/s, lazy {qe[True]:.1f} ({qe[True] / qe[False]:.2f}x)",
                  flush=True)
            if a.query_env_render_mesh_cell_m:
                simple = query_env_rate(True, a.query_env_queries, a.seed, a.query_env_render_mesh_cell_m)
                res["rounds"][-1]["query_env_queries_per_s"].update(
                    {"lazy_simplified_meshes": simple, "simplified_over_lazy": simple / qe[True]})
                print(f"  QueryEnv, lazy + simplified meshes: {simple:.1f} queries/s ({simple / qe[True]:.2f}x lazy)",
                      flush=True)
        print(f"round {r + 1}: every step {arms[False]['wall_s']:.1f} s, lazy {arms[True]['wall_s']:.1f} s, "
              f"speed-up {ratio:.2f}x, outcomes identical: {same}", flush=True)
    res["speedup_median"] = statistics.median(r["speedup"] for r in res["rounds"])
    if a.query_env_queries:
        res["query_env_speedup_median"] = statistics.median(r["query_env_queries_per_s"]["speedup"]
                                                            for r in res["rounds"])
    if a.query_env_queries and a.query_env_render_mesh_cell_m:
        res["query_env_render_mesh_cell_m"] = a.query_env_render_mesh_cell_m
        res["query_env_simplified_over_lazy_median"] = statistics.median(
            r["query_env_queries_per_s"]["simplified_over_lazy"] for r in res["rounds"])
    res["outcomes_identical"] = all(r["outcomes_identical"] for r in res["rounds"])
    res["successes"] = sum(o[1] for o in arms[True]["outcomes"])
    res["load_avg_after"] = os.getloadavg()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(f"median speed-up {res['speedup_median']:.2f}x; outcomes identical: {res['outcomes_identical']}; wrote {out}")
    return 0 if res["outcomes_identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
