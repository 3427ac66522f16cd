"""Does the scripted expert act the same through the runtime loop (``edge run --policy expert``:
control loop, inference worker, action queue, safety, telemetry) as in its own episode loop
(:func:`sim.rollout.expert_episode`)? Same seeds both ways; per seed: success, steps, and the largest
difference between the actions the env executed at the same step. Writes
benchmarks/results/expert_runtime_agreement.json.

    python benchmarks/expert_runtime_agreement.py [--episodes 20] [--seed 1000] [--cells stack2,stack3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

CELLS = {"stack2": ("stack", 2), "stack3": ("stack", 3), "pick_place": ("pick_place", 2), "push": ("push", 2)}


def own_loop(task: str, sim_name: str, n_blocks: int, seeds: list[int], image_size: int) -> list[dict]:
    import sim
    from sim.rollout import expert_episode

    env = sim.make_env(task, sim=sim_name, n_blocks=n_blocks, image_size=image_size)
    out = []
    try:
        for s in seeds:
            ep = expert_episode(env, s, keep_frames=False)
            out.append({"seed": s, "success": bool(ep["success"]), "steps": int(ep["steps"]),
                        "actions": np.asarray(ep["action"], np.float32)})
    finally:
        env.close()
    return out


def runtime_loop(task: str, sim_name: str, n_blocks: int, seeds: list[int], image_size: int) -> list[dict]:
    from edge.runtime.factories import EXPERT_SETTINGS
    from edge.runtime.config import RuntimeConfig
    from edge.runtime.session import run_session
    from edge.telemetry import read_jsonl

    cfg = RuntimeConfig.of(policy="expert", task=task, sim=sim_name, n_blocks=n_blocks, image_size=image_size,
                        episodes=len(seeds), seed=seeds[0], video_episodes=0, **EXPERT_SETTINGS)
    with tempfile.TemporaryDirectory() as d:
        res = run_session(cfg, Path(d) / "run", progress=False)
        ticks = read_jsonl(Path(d) / "run" / "ticks.jsonl")
    out = []
    for ep in res.episodes:
        # what the env was given (the safety layer's command); the tick's `sent` is what the simulated
        # arm applied after its own clips, which the direct path does not record
        sent = [t["command"] for t in ticks if t["ep"] == ep["ep"] and t.get("sent") is not None]
        kinds = [t["kind"] for t in ticks if t["ep"] == ep["ep"]]
        ivs = sum(len(t.get("interventions") or ()) for t in ticks if t["ep"] == ep["ep"])
        out.append({"seed": int(ep["seed"]), "success": bool(ep["success"]), "steps": int(ep["steps"]),
                    "actions": np.asarray(sent, np.float32), "holds": kinds.count("hold"),
                    "interventions": ivs})
    return out


def main(argv: list[str] | None = None) -> None:
    from edge.argtypes import whole, writable_file

    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=whole(1), default=20)
    ap.add_argument("--seed", type=whole(0), default=1000, help="first seed (expert_success.py uses 1000)")
    ap.add_argument("--cells", default="stack2", help=f"comma-separated, of {', '.join(CELLS)}")
    ap.add_argument("--sim", default="mujoco", choices=("mujoco", "pybullet"))
    ap.add_argument("--image-size", type=whole(16, 512), default=96)
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/expert_runtime_agreement.json")
    a = ap.parse_args(argv)
    unknown = [c for c in a.cells.split(",") if c not in CELLS]
    if unknown:
        ap.error(f"--cells {a.cells}: unknown cell {unknown[0]!r}; choose from {', '.join(CELLS)}")
    if Path(a.out).is_dir():
        ap.error(f"--out {a.out}: a directory; give the result JSON's path")
    seeds = list(range(a.seed, a.seed + a.episodes))
    out = Path(a.out)
    from edge import atomic
    from edge.argtypes import read_json_dict

    results = read_json_dict(out, "--out", "a results file of this script", "choose another --out") if out.exists() else {}
    for cell in a.cells.split(","):
        task, n_blocks = CELLS[cell]
        t0 = time.perf_counter()
        old = own_loop(task, a.sim, n_blocks, seeds, a.image_size)
        t1 = time.perf_counter()
        new = runtime_loop(task, a.sim, n_blocks, seeds, a.image_size)
        t2 = time.perf_counter()
        rows = []
        for o, n in zip(old, new):
            m = min(len(o["actions"]), len(n["actions"]))
            diff = float(np.abs(o["actions"][:m] - n["actions"][:m]).max()) if m else 0.0
            rows.append({"seed": o["seed"], "success_own": o["success"], "success_runtime": n["success"],
                         "steps_own": o["steps"], "steps_runtime": n["steps"],
                         "max_action_diff": diff, "runtime_holds": n["holds"],
                         "runtime_interventions": n["interventions"]})
        agree = sum(r["success_own"] == r["success_runtime"] for r in rows)
        same = sum(r["steps_own"] == r["steps_runtime"] and r["max_action_diff"] == 0.0 for r in rows)
        rep = {"task": task, "sim": a.sim, "n_blocks": n_blocks, "seeds": seeds,
               "successes_own": sum(r["success_own"] for r in rows),
               "successes_runtime": sum(r["success_runtime"] for r in rows),
               "success_agreement": agree, "identical_trajectories": same,
               "wall_s_own": t1 - t0, "wall_s_runtime": t2 - t1, "rows": rows, "command": " ".join(sys.argv)}
        results[f"{cell}/{a.sim}"] = rep
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(out, results, indent=2)
        print(f"{cell}/{a.sim}: success own {rep['successes_own']}/{len(seeds)}, runtime "
              f"{rep['successes_runtime']}/{len(seeds)}; success agrees on {agree}/{len(seeds)} seeds, "
              f"identical actions and steps on {same}/{len(seeds)} (own {t1 - t0:.1f} s, runtime {t2 - t1:.1f} s)")
        for r in rows:
            print(f"  {r['seed']}: own {r['success_own']!s:>5} {r['steps_own']:>4}  runtime "
                  f"{r['success_runtime']!s:>5} {r['steps_runtime']:>4}  max|da| {r['max_action_diff']:.2e}  "
                  f"holds {r['runtime_holds']}  interventions {r['runtime_interventions']}", flush=True)


if __name__ == "__main__":
    main()
