"""Simulated tabletop: the same Franka Panda task family in MuJoCo and PyBullet behind one gymnasium API.

Registered ids (``gymnasium.make(id)`` after ``import sim``)::

    edge/Stack-MuJoCo-v0   edge/Stack3-MuJoCo-v0   edge/PickPlace-MuJoCo-v0   edge/Push-MuJoCo-v0
    edge/Stack-PyBullet-v0 edge/Stack3-PyBullet-v0 edge/PickPlace-PyBullet-v0 edge/Push-PyBullet-v0
    edge/Reach-MuJoCo-v0   edge/Reach-PyBullet-v0

This package imports no other project package except the numpy-only leaf ``edge.kinematics`` (the
arm's one FK/IK; docs/design.md, layering).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

ENV_IDS: dict[str, dict[str, Any]] = {}
for _sim, _sim_name in (("mujoco", "MuJoCo"), ("pybullet", "PyBullet")):
    for _task, _name, _extra in (("stack", "Stack", {}), ("stack", "Stack3", {"n_blocks": 3}),
                                 ("pick_place", "PickPlace", {}), ("push", "Push", {}),
                                 ("reach", "Reach", {})):
        _id = f"edge/{_name}-{_sim_name}-v0"
        ENV_IDS[_id] = {"task": _task, "sim": _sim, **_extra}
        if _id not in gym.registry:
            gym.register(_id, entry_point="sim.env:TabletopEnv", kwargs=ENV_IDS[_id])


def make_env(task: str = "stack", sim: str = "mujoco", **kwargs: Any):
    """Build a :class:`sim.env.TabletopEnv` directly (no gymnasium wrappers)."""
    from sim.env import TabletopEnv

    return TabletopEnv(task=task, sim=sim, **kwargs)
