"""How hard the world-model object tasks are: a hand-written policy that reads the true poses.

The world models learn ``push3`` and ``reach3`` (``world_models/object_env.py``) from pixels or
slots; this script plays a scripted policy that sees the simulator's poses instead, to give each
task a reference success at its step limit (a lower bound on what the task allows) and the number
of steps a competent policy needs (the planning horizon). Both policies use the same ``discrete8`` actions (2 cm in one of 8 compass directions)
as the agents.

* ``reach3``: move towards the red cube.
* ``push3``: if the TCP is not behind the red cube (on the side away from the goal square), go
  around it at ``--clear`` metres; once behind, line up with the cube–goal line to within
  ``--side-tol`` at ``--back`` metres behind the cube; then push towards the goal.

The three distances were chosen on 24 episodes from seed 600,000,000 (the 2.5 cm test of being
behind the cube is fixed); ``--seed0`` defaults to another block.

A second reference, the best **constant action**: each of the 8 actions repeated for a whole
episode on ``--constant-select-episodes`` selection episodes (from ``--select-seed0``, a block of
their own); the best one (the lowest index on a tie) is then played on the evaluation seeds. It is
the trivial policy an agent can find without looking at the scene (on ``reach3`` the cubes lie
in front of the arm's start, so one direction already reaches some).

Writes JSON with the machine, command and per-episode results::

    python benchmarks/object_task_scripted.py --episodes 100 \\
        --out benchmarks/results/object_task_scripted.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from edge.argtypes import whole, writable_path
from edge.errors import EdgeError
from edge.stats import wilson
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision
from world_models.scripted import DIRS, compass, push_action  # noqa: F401 (DIRS, compass: part of this script's API)


def scripted(task: str, args: argparse.Namespace):
    """The hand-written policy: (tcp, red, goal) -> action."""
    if task == "push3":
        return lambda tcp, red, goal: push_action(tcp, red, goal, args.back, args.side_tol, args.clear)
    return lambda tcp, red, goal: compass(red - tcp)


def play(task: str, episodes: int, seed0: int, policy) -> dict:
    """``policy(tcp, red, goal) -> action`` (xy metres) on ``episodes`` seeds from ``seed0``."""
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv

    env = ObjectTaskEnv(ObjectTaskConfig(task=task))
    succ, steps, final_dist = [], [], []
    t0 = time.perf_counter()
    try:
        for e in range(episodes):
            _, info = env.reset(seed=seed0 + e)
            for t in range(env.cfg.steps):
                red, tcp, goal = info["object_poses"]["red"][:2], env._tcp()[:2], info["goal_m"]
                a = policy(tcp, red, goal)
                _, _, done, trunc, info = env.step(a)
                if done or trunc:
                    break
            succ.append(bool(done))
            steps.append(t + 1)
            red = info["object_poses"]["red"][:2]
            final_dist.append(round(float(np.linalg.norm(red - (info["goal_m"] if task == "push3"
                                                                 else env._tcp()[:2]))), 4))
            if sys.stderr.isatty():
                print(f"{task} {e + 1}/{episodes}: {sum(succ)} successes", end="\r", file=sys.stderr)
    finally:
        env.close()
    k = sum(succ)
    done_steps = [s for s, ok in zip(steps, succ) if ok]
    return {"episodes": episodes, "seed0": seed0, "max_steps": env.cfg.steps, "successes": k,
            "success": k / episodes, "wilson95": list(wilson(k, episodes)),
            "steps_to_success_p25_p50_p75": ([float(x) for x in np.percentile(done_steps, [25, 50, 75])]
                                             if done_steps else None),
            "per_episode_success": succ, "per_episode_steps": steps, "per_episode_final_dist_m": final_dist,
            "wall_s": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", default=["push3", "reach3"], choices=["push3", "reach3"])
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed0", type=whole(0), default=610_000_000, help="first episode seed")
    ap.add_argument("--back", type=float, default=0.06, help="push3: metres behind the cube to line up at")
    ap.add_argument("--side-tol", type=float, default=0.02, help="push3: metres off the cube–goal line allowed")
    ap.add_argument("--clear", type=float, default=0.065, help="push3: metres to keep from the cube going around")
    ap.add_argument("--constant-select-episodes", type=int, default=50,
                    help="episodes per action to pick the best constant action on (0: skip that reference)")
    ap.add_argument("--select-seed0", type=whole(0), default=611_000_000,
                    help="first seed of the constant actions' selection episodes")
    ap.add_argument("--out", type=writable_path, default="benchmarks/results/object_task_scripted.json")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        raise EdgeError(f"--episodes={args.episodes} must be at least 1")
    if args.constant_select_episodes < 0:
        raise EdgeError(f"--constant-select-episodes={args.constant_select_episodes} must be 0 (skip) or more")
    n_sel = args.constant_select_episodes
    if n_sel and max(args.seed0, args.select_seed0) < min(args.seed0 + args.episodes, args.select_seed0 + n_sel):
        raise EdgeError(f"--select-seed0={args.select_seed0} overlaps the evaluation seeds from --seed0={args.seed0}; "
                        "choose seed blocks that do not overlap")
    for name in ("back", "side_tol", "clear"):
        v = getattr(args, name)
        if not 0 < v < 0.3:
            raise EdgeError(f"--{name.replace('_', '-')}={v} is out of range; allowed (0, 0.3) metres")
    res: dict = {"machine": machine_info(), "git": git_revision(), "settings": {**vars(args), "out": str(args.out)},
                 "tasks": {}}
    for task in args.tasks:
        r = play(task, args.episodes, args.seed0, scripted(task, args))
        res["tasks"][task] = r
        print(f"{task}: scripted {r['successes']}/{r['episodes']} = {r['success']:.2f} "
              f"[{r['wilson95'][0]:.2f}, {r['wilson95'][1]:.2f}], steps to success p25/p50/p75 "
              f"{r['steps_to_success_p25_p50_p75']} of {r['max_steps']}")
        if args.constant_select_episodes:
            sel = [play(task, args.constant_select_episodes, args.select_seed0, lambda *_, a=a: a)["success"]
                   for a in range(len(DIRS))]
            best = int(np.argmax(sel))
            c = play(task, args.episodes, args.seed0, lambda *_: best)
            r["constant_action"] = {"select_episodes": args.constant_select_episodes,
                                    "select_seed0": args.select_seed0, "select_success_per_action": sel,
                                    "best_action": best, **c}
            print(f"{task}: best constant action {best} (selection {sel[best]:.2f}): {c['successes']}/{c['episodes']}"
                  f" = {c['success']:.2f} [{c['wilson95'][0]:.2f}, {c['wilson95'][1]:.2f}]")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EdgeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
