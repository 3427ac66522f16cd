"""Shared flags for commands that build a simulated tabletop env."""

from __future__ import annotations

import argparse

TASKS = ("stack", "pick_place", "push", "reach")
EXPERT_TASKS = ("stack", "pick_place", "push")  # with a scripted expert: demonstrations, expert eval, VLA training
SIMS = ("mujoco", "pybullet")


def add_env_args(p: argparse.ArgumentParser, episodes: int, tasks: tuple[str, ...] = EXPERT_TASKS,
                 task_action: type[argparse.Action] | None = None, image_size: bool = True) -> None:
    """``task_action``: the --task flag's argparse action (e.g. one that notes the flag was given);
    ``image_size``: offer --image-size (commands that render no camera image leave it out)."""
    p.add_argument("--task", default="stack", choices=tasks, help="task family",
                   **({"action": task_action} if task_action is not None else {}))
    p.add_argument("--sim", default="mujoco", choices=SIMS, help="physics engine")
    p.add_argument("--n-blocks", type=int, default=2, choices=(2, 3), help="stack only: number of cubes")
    p.add_argument("--distribution", default="train", choices=("train", "ood"), help="randomisation")
    p.add_argument("--episodes", type=int, default=episodes, help="number of episodes (seeds)")
    p.add_argument("--seed", type=int, default=0, help="first episode seed; episode i uses seed+i")
    if image_size:
        p.add_argument("--image-size", type=int, default=96, help="camera image side in pixels")


def check_env_args(args: argparse.Namespace) -> None:
    """Refuse env flags out of range or meaningless for the task (EdgeError naming the flag)."""
    from edge.errors import EdgeError

    if args.episodes < 1:
        raise EdgeError(f"--episodes={args.episodes} must be >= 1")
    if not 16 <= getattr(args, "image_size", 96) <= 512:
        raise EdgeError(f"--image-size={args.image_size} is out of range; allowed [16, 512]")
    if args.n_blocks != 2 and args.task != "stack":
        raise EdgeError(f"--n-blocks {args.n_blocks}: sets the stack task's cubes; --task {args.task} has its own "
                        "objects; drop --n-blocks")
    if getattr(args, "seed", 0) < 0:
        raise EdgeError(f"--seed {args.seed}: episode seeds are >= 0")


def env_kwargs(args: argparse.Namespace, **extra) -> dict:
    check_env_args(args)
    return {"task": args.task, "sim": args.sim, "n_blocks": args.n_blocks,
            "distribution": args.distribution, "image_size": getattr(args, "image_size", 96), **extra}


def make_env(args: argparse.Namespace, **extra):
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")
    import sim
    from edge.errors import EdgeError

    try:
        return sim.make_env(**env_kwargs(args, **extra))
    except ValueError as err:
        raise EdgeError(str(err)) from None
