"""Closed-loop evaluation of a VLA policy in the simulator (used during training).

Synchronous and simple on purpose: query, execute the first C actions of the chunk, query again.
The runtime's asynchronous loop (``edge run`` / ``edge eval``) is the reference for deployment
numbers; this gives the training curve a success rate on the same env and seeds every time.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np


def sim_unavailable_reason() -> str:
    """"" if ``sim.make_env`` can be imported, else why not (evaluation is then skipped)."""
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        sim = importlib.import_module("sim")
    except ImportError as err:
        return f"cannot import sim ({err})"
    if not hasattr(sim, "make_env"):
        return "sim.make_env does not exist yet"
    return ""


def evaluate(policy: Any, task: str, sim_name: str = "mujoco", episodes: int = 10,
             num_steps: int = 10, execute: int = 8, seed: int = 1_000_000, max_steps: int = 400,
             env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Success rate over ``episodes`` env seeds ``seed, seed + 1, ...``, each capped at ``max_steps``.

    ``policy`` has ``encode(obs)`` and ``sample(features, noise, num_steps)`` (e.g. VLAPolicy).
    The noise of every query comes from a generator seeded by the episode seed, so two calls with
    the same policy weights give the same result.
    """
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering; must be set before mujoco loads
    import sim

    kwargs = dict(env_kwargs or {})
    cameras = tuple(getattr(getattr(policy, "spec", None), "cameras", ("front",)))
    if "wrist" in cameras:
        kwargs.setdefault("wrist_camera", True)  # the env renders the wrist view only on request
    env = sim.make_env(task=task, sim=sim_name, **kwargs)
    results = []
    t0 = time.perf_counter()
    try:
        for i in range(episodes):
            ep_seed = seed + i
            rng = np.random.default_rng(ep_seed)
            obs, info = env.reset(seed=ep_seed)
            steps, done, success = 0, False, False
            while not done and steps < max_steps:
                feats = policy.encode(obs)
                noise = rng.standard_normal((policy.chunk_len, policy.action_dim)).astype(np.float32)
                chunk = policy.sample(feats, noise, num_steps)
                for action in chunk[:execute]:
                    obs, _, terminated, truncated, info = env.step(action)
                    steps += 1
                    success = success or bool(info.get("success", False))
                    done = bool(terminated or truncated)
                    if done or steps >= max_steps:
                        break
            results.append({"seed": ep_seed, "success": success, "steps": steps})
    finally:
        env.close()
    successes = sum(r["success"] for r in results)
    n = max(len(results), 1)
    return {
        "episodes": len(results),
        "successes": successes,
        "success_rate": successes / n,
        "num_steps": num_steps,
        "execute": execute,
        "sim": sim_name,
        "mean_steps": float(np.mean([r["steps"] for r in results])) if results else 0.0,
        "wall_s": round(time.perf_counter() - t0, 2),
        "per_episode": results,
    }
