"""`edge expert eval`: measure the scripted experts' success rate (with a 95% Wilson interval)."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from edge.cli import add_subparser
from edge.stats import wilson  # noqa: F401 - re-exported for old imports
from edge.commands._sim_args import add_env_args, make_env


def register(sub) -> None:
    p = add_subparser(sub, "expert", "Scripted experts: evaluate success rates.", """
  edge expert eval --task stack --sim mujoco --episodes 100
  edge expert eval --task stack --n-blocks 3 --sim pybullet --episodes 100 --out results.json""")
    esub = p.add_subparsers(dest="expert_command", metavar="<action>")
    e = add_subparser(esub, "eval", "Run the expert on seeds seed..seed+episodes-1 and report success.", """
  edge expert eval --task pick_place --sim pybullet --episodes 100""")
    add_env_args(e, episodes=100, image_size=False)  # the expert reads the simulator's state: no camera
    e.add_argument("--out", help="write a JSON report here (default: none, print the result only)")
    e.set_defaults(func=evaluate)


def run_eval(args: argparse.Namespace, progress: bool = True) -> dict:
    from tqdm import tqdm

    from sim.rollout import expert_episode

    env = make_env(args, render_images=False, physics_dt_s=getattr(args, "physics_dt_s", 0.0))
    seeds = [args.seed + i for i in range(args.episodes)]
    rows = []
    t0 = time.perf_counter()
    bar = tqdm(seeds, desc=f"expert {args.task}/{args.sim}", unit="ep", disable=not progress)
    for seed in bar:
        ep = expert_episode(env, seed, keep_frames=False)
        rows.append({"seed": seed, "success": ep["success"], "steps": ep["steps"], "regrasps": ep["regrasps"],
                     "sim_diverged": ep["sim_diverged"]})
        bar.set_postfix(success=f"{sum(r['success'] for r in rows)}/{len(rows)}")
    wall = time.perf_counter() - t0
    env.close()
    k, n = sum(r["success"] for r in rows), len(rows)
    lo, hi = wilson(k, n)
    return {
        "task": args.task, "sim": args.sim, "n_blocks": args.n_blocks, "distribution": args.distribution,
        "episodes": n, "successes": k, "success_rate": k / n, "ci95": [lo, hi],
        "mean_steps": sum(r["steps"] for r in rows) / n, "episodes_per_min": 60 * n / wall,
        "seed": args.seed, "physics_step_s": env.unwrapped.cfg.physics_step_s,
        "failed_seeds": [r["seed"] for r in rows if not r["success"]], "wall_s": wall,
        "diverged_seeds": [r["seed"] for r in rows if r["sim_diverged"]],
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0],
                    "processor": platform.processor() or platform.machine()},
        "command": " ".join(sys.argv),
    }


def evaluate(args: argparse.Namespace) -> int:
    if args.out:  # before the episodes: a path that cannot take the report is refused now
        from edge.commands._out import check_writable_file

        check_writable_file(args.out)
    rep = run_eval(args)
    print(f"{rep['task']} ({rep['sim']}, {rep['n_blocks']} blocks, {rep['distribution']}): "
          f"{rep['successes']}/{rep['episodes']} = {rep['success_rate']:.1%} "
          f"[95% CI {rep['ci95'][0]:.1%}–{rep['ci95'][1]:.1%}], failed seeds {rep['failed_seeds']}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rep, indent=2))
    return 0
