"""Run the scripted expert for one episode and collect what a recording or an evaluation needs."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.env import MAX_DPOS_M
from sim.experts import APPROACH_OFFSET_M, PHASE_ID, make_expert

# Phases in which DART noise is injected: reaching, descending onto and lifting the block. Not
# while the fingers close or open (the expert holds still on purpose), and not while placing: its
# 2-3 mm arrival tolerance is never met under noise of that size, so those episodes time out
# (measured, 24 seeds, max std 1 cm: 15/24 successes with noise while placing, 23/24 without).
NOISY_PHASES = frozenset(PHASE_ID[p] for p in ("transport", "approach", "lift"))


def expert_episode(env, seed: int, keep_frames: bool = True, action_noise_m: float = 0.0,
                   approach_offset_m: float = APPROACH_OFFSET_M, place_held_object: bool = False) -> dict[str, Any]:
    """Roll out the expert from ``env.reset(seed=seed)`` until success or truncation.

    Returns per-step arrays in the demonstration format of :mod:`sim.demos` (observation before
    each action) plus ``steps`` and ``regrasps``.

    ``action_noise_m`` > 0 records DART-style demonstrations (Laskey et al., 2017): the env
    executes the expert's action plus Gaussian position noise (per-episode std drawn uniformly in
    [0, action_noise_m], seeded by ``seed``), while the *recorded* action is the expert's clean
    one. The expert re-reads the commanded target every step, so the data shows states off the
    nominal path together with the correction back to it, which is what a cloned policy needs
    after its own small errors. ``approach_offset_m``, ``place_held_object``: see
    :class:`sim.experts.ScriptedExpert`.
    """
    if not 0.0 <= action_noise_m <= MAX_DPOS_M:
        raise ValueError(f"action_noise_m={action_noise_m} must lie in [0, {MAX_DPOS_M}] m")
    u = env.unwrapped
    obs, info = env.reset(seed=seed)
    expert = make_expert(u.cfg.task, approach_offset_m, place_held_object)
    expert.reset(u, seed)
    noise_rng = np.random.default_rng([seed, 104_729])
    noise_std = float(noise_rng.uniform(0.0, action_noise_m)) if action_noise_m > 0 else 0.0
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
        executed = action
        if noise_std > 0 and phase in NOISY_PHASES:
            executed = action.copy()
            executed[:3] = np.clip(action[:3] + noise_rng.normal(0.0, noise_std, 3), -MAX_DPOS_M, MAX_DPOS_M)
        obs, _, terminated, truncated, info = env.step(executed)
        done = terminated or truncated
    out = {
        "proprio": np.asarray(proprios, np.float32), "action": np.asarray(actions, np.float32),
        "phase": np.asarray(phases, np.int8), "object_pos": np.asarray(objpos, np.float32),
        "instruction": obs["instruction"], "success": bool(info["success"]), "seed": int(seed),
        "steps": len(actions), "regrasps": expert.regrasps, "sim_diverged": bool(info.get("sim_diverged")),
        "action_noise_std_m": noise_std,
    }
    if keep_frames:
        out["front"] = np.asarray(fronts, np.uint8)
        if wrists:
            out["wrist"] = np.asarray(wrists, np.uint8)
    return out
