"""Run the scripted expert for one episode and collect what a recording or an evaluation needs."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.experts import make_expert


def expert_episode(env, seed: int, keep_frames: bool = True) -> dict[str, Any]:
    """Roll out the expert from ``env.reset(seed=seed)`` until success or truncation.

    Returns per-step arrays in the demonstration format of :mod:`sim.demos` (observation before
    each action) plus ``steps`` and ``regrasps``.
    """
    u = env.unwrapped
    obs, info = env.reset(seed=seed)
    expert = make_expert(u.cfg.task)
    expert.reset(u, seed)
    fronts, wrists, proprios, actions, phases, objpos = [], [], [], [], [], []
    names = [o.name for o in u.scene.objects]
    done = False
    while not done:
        action, phase = expert.act()
        if keep_frames:
            fronts.append(obs["front"])
            if "wrist" in obs:
                wrists.append(obs["wrist"])
        proprios.append(obs["proprio"])
        actions.append(action)
        phases.append(phase)
        objpos.append([info["object_poses"][n][:3] for n in names])
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    out = {
        "proprio": np.asarray(proprios, np.float32), "action": np.asarray(actions, np.float32),
        "phase": np.asarray(phases, np.int8), "object_pos": np.asarray(objpos, np.float32),
        "instruction": obs["instruction"], "success": bool(info["success"]), "seed": int(seed),
        "steps": len(actions), "regrasps": expert.regrasps, "sim_diverged": bool(info.get("sim_diverged")),
    }
    if keep_frames:
        out["front"] = np.asarray(fronts, np.uint8)
        if wrists:
            out["wrist"] = np.asarray(wrists, np.uint8)
    return out
