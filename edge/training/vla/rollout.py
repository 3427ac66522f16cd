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

from edge.contracts import reset_policy_episode


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
            reset_policy_episode(policy, obs)
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


def dagger_episode(env: Any, policy: Any, seed: int, num_steps: int = 10, execute: int = 8,
                   noise_temperature: float = 0.5, expert_mix: float = 0.0, max_steps: int = 400,
                   approach_offset_m: float = 0.0, place_held_object: bool = False,
                   regrasp_off_centre_m: float = 0.0) -> dict[str, Any]:
    """One episode driven by ``policy`` and labelled by the scripted expert (DAgger).

    The policy acts as in :func:`evaluate` (query, execute ``execute`` actions, K = ``num_steps``,
    initial noise scaled by ``noise_temperature``); at every step the expert's action for the
    state the arm is in (:meth:`sim.experts.ScriptedExpert.act_from_state`) is recorded as the
    label. With ``expert_mix`` > 0 each chunk is executed by the expert instead with that
    probability (so late phases are reached even where the policy is weak). ``place_held_object``,
    ``regrasp_off_centre_m``: how the expert labels an off-centre grasp (:class:`sim.experts.
    ScriptedExpert`). Returns arrays in the
    demonstration format of :mod:`sim.demos` (observation before each label), ``success`` being
    the run's own outcome, plus ``roles`` (indices of the block to move and its base, which
    :func:`edge.training.vla.data.object_roles` cannot infer from a run that never moved the block) and
    ``policy_fraction`` (steps the policy drove).
    """
    from sim.experts import make_expert

    u = env.unwrapped
    obs, info = env.reset(seed=seed)
    reset_policy_episode(policy, obs)
    expert = make_expert(u.cfg.task, approach_offset_m, place_held_object, regrasp_off_centre_m)
    expert.reset(u, seed)
    rng = np.random.default_rng([seed, 8_191])
    names = [o.name for o in u.scene.objects]
    order = tuple(getattr(u.spec_task, "order", ()))
    keys = ("front", "wrist", "proprio", "action", "phase", "object_pos")
    rows: dict[str, list] = {k: [] for k in keys}
    queue: list[np.ndarray] = []
    by_policy, steps, done = 0, 0, False
    while not done and steps < max_steps:
        if not queue:
            if expert_mix > 0 and rng.random() < expert_mix:
                queue = [None] * execute  # the expert drives this chunk
            else:
                noise = (rng.standard_normal((policy.chunk_len, policy.action_dim))
                         * noise_temperature).astype(np.float32)
                queue = list(policy.sample(policy.encode(obs), noise, num_steps)[:execute])
        label, phase = expert.act_from_state()
        rows["front"].append(obs["front"])
        if "wrist" in obs:
            rows["wrist"].append(obs["wrist"])
        rows["proprio"].append(obs["proprio"])
        rows["action"].append(label)
        rows["phase"].append(phase)
        rows["object_pos"].append([info["object_poses"][n][:3] for n in names])
        action = queue.pop(0)
        by_policy += action is not None
        obs, _, terminated, truncated, info = env.step(label if action is None else action)
        steps += 1
        done = bool(terminated or truncated)
    out = {
        "front": np.asarray(rows["front"], np.uint8), "proprio": np.asarray(rows["proprio"], np.float32),
        "action": np.asarray(rows["action"], np.float32), "phase": np.asarray(rows["phase"], np.int8),
        "object_pos": np.asarray(rows["object_pos"], np.float32), "instruction": obs["instruction"],
        "success": bool(info.get("success", False)), "seed": int(seed),
        "policy_fraction": by_policy / max(steps, 1),
    }
    if rows["wrist"]:
        out["wrist"] = np.asarray(rows["wrist"], np.uint8)
    if u.cfg.task == "stack" and len(order) == 2:
        out["roles"] = np.array([names.index(order[1]), names.index(order[0])], np.int64)
    return out
