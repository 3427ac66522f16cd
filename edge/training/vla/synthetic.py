"""A small synthetic demonstration dataset in the real on-disk format, for tests and CI smoke runs.

Not a task anyone should train a deployable model on: two coloured squares on a grey table, a
"gripper" position in proprio, and actions that move it toward the named square. It exercises the
same loader, shapes, layouts and instruction handling as recorded demos (``sim.demos`` format v1),
so the training, export and backend code paths run without a simulator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

COLOURS = {"red": (220, 30, 25), "blue": (30, 60, 220), "green": (30, 180, 50), "yellow": (235, 215, 25)}
# the simulator's proprio names (sim.env.PROPRIO_LAYOUT): the TCP pose sits where models look for it
PROPRIO_LAYOUT = (tuple(f"q{i}_rad" for i in range(7)) + tuple(f"qd{i}_rad_s" for i in range(7))
                  + ("gripper_width_m", "tcp_x_m", "tcp_y_m", "tcp_z_m", "tcp_qw", "tcp_qx", "tcp_qy", "tcp_qz"))
PROPRIO_DIM = len(PROPRIO_LAYOUT)
IMAGE_HW = (96, 96)


def write_synthetic_demos(root: str | Path, episodes: int = 4, steps: int = 24, seed: int = 0,
                          control_rate_hz: float = 20.0,
                          action_layout: tuple[str, ...] = ("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper"),
                          wrist: bool = False) -> Path:
    """Write ``episodes`` episodes of ``steps`` frames to ``root`` and return it."""
    from sim.demos import prepare_dir, write_episode

    meta = {
        "task": "stack", "sim": "synthetic", "action_layout": list(action_layout),
        "proprio_layout": list(PROPRIO_LAYOUT), "control_rate_hz": control_rate_hz,
        "env_config": {"synthetic": True}, "phases": ["approach", "grasp", "lift", "place"],
        "cameras": ["front", "wrist"] if wrist else ["front"],
    }
    root = prepare_dir(root, meta)
    h, w = IMAGE_HW
    names = list(COLOURS)
    for ep in range(episodes):
        rng = np.random.default_rng([seed, ep])
        a, b = (names[i] for i in rng.permutation(len(names))[:2])
        pos = rng.uniform(12, 84, size=(2, 2))  # (block, yx) pixel centres
        ee = rng.uniform(0.0, 1.0, size=3).astype(np.float32)
        yaw = float(rng.uniform(-np.pi / 2, np.pi / 2))
        goal = np.array([pos[0, 1] / w, pos[0, 0] / h, 0.2], np.float32)
        front = np.full((steps, h, w, 3), 110, np.uint8)
        proprio = np.zeros((steps, PROPRIO_DIM), np.float32)
        action = np.zeros((steps, 5), np.float32)
        for t in range(steps):
            for k, colour in enumerate((a, b)):
                y, x = pos[k].astype(int)
                front[t, y - 5 : y + 5, x - 5 : x + 5] = COLOURS[colour]
            gy, gx = int(ee[1] * (h - 1)), int(ee[0] * (w - 1))
            front[t, max(gy - 2, 0) : gy + 2, max(gx - 2, 0) : gx + 2] = 250
            step = np.clip(goal - ee, -0.05, 0.05)
            grip = float(np.linalg.norm(goal - ee) < 0.05)
            proprio[t, :3], proprio[t, 3] = ee, grip
            proprio[t, 4:] = rng.normal(0, 0.01, PROPRIO_DIM - 4)
            # TCP pose: position = the "gripper", pointing down (180 deg about x) turned by a yaw
            proprio[t, 15:18] = ee
            proprio[t, 18:22] = [0.0, np.cos(yaw / 2), np.sin(yaw / 2), 0.0]
            action[t] = [*step, 0.0, grip]
            ee = (ee + step).astype(np.float32)
        arrays = {
            "front": front, "proprio": proprio, "action": action,
            "phase": np.minimum(np.arange(steps) * 4 // steps, 3).astype(np.int8),
            "object_pos": np.repeat(np.c_[pos[:, ::-1] / [w, h], np.zeros(2)][None], steps, 0)
            .astype(np.float32),
            "instruction": np.array(f"stack the {a} block on the {b} block"),
            "success": np.array(True), "seed": np.array(ep, np.int64),
        }
        if wrist:
            arrays["wrist"] = front[:, ::-1].copy()
        write_episode(root, ep, arrays)
    return Path(root)


def write_synthetic_scenes(root: str | Path, count: int = 200, seed: int = 0) -> Path:
    """Scene dataset (:mod:`sim.scenes` format) of first frames drawn like :func:`write_synthetic_demos`
    draws them: two named squares on the table; objects = (moved square, base square) positions in the
    demos' units. For the scene-locator tests."""
    import json

    from sim.scenes import DATA_FILE, META_FILE

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    h, w = IMAGE_HW
    names = list(COLOURS)
    rng = np.random.default_rng([seed, 77])
    front = np.full((count, h, w, 3), 110, np.uint8)
    objects = np.zeros((count, 6), np.float32)
    instructions = []
    for i in range(count):
        a, b = (names[j] for j in rng.permutation(len(names))[:2])
        pos = rng.uniform(12, 84, size=(2, 2))
        for k, colour in enumerate((a, b)):
            y, x = pos[k].astype(int)
            front[i, y - 5 : y + 5, x - 5 : x + 5] = COLOURS[colour]
            objects[i, 3 * k : 3 * k + 2] = pos[k, ::-1] / [w, h]
        instructions.append(f"stack the {a} block on the {b} block")
    np.savez(root / DATA_FILE, front=front, objects=objects, instruction=np.asarray(instructions))
    (root / META_FILE).write_text(json.dumps({"format": "edge-scenes", "version": 1, "task": "stack",
                                              "sim": "synthetic", "count": count, "seed": seed}))
    return root


def tiny_checkpoint(root: str | Path, steps: int = 20, episodes: int = 4, seed: int = 0,
                    overrides: tuple[str, ...] = (), wrist: bool = False, scene_memory: bool = False) -> Path:
    """Synthetic demos + a ``tiny``-preset model trained for ``steps`` steps, in ``root/ckpt``.

    For tests of checkpoint, export and backend plumbing only: the weights are barely trained.
    Uses the hash language encoder so no sentence-transformers model is loaded; ``wrist`` adds the
    wrist camera to the demos and the model; ``scene_memory`` an object token with scene memory and
    a (barely trained) scene locator on synthetic scenes.
    """
    from edge.config import load_config
    from edge.resources import config_dir
    from edge.training.vla.train import TrainVLAConfig, VLATrainer
    from edge.vla.language import HASH_ID

    root = Path(root)
    data = write_synthetic_demos(root / "demos", episodes=episodes, seed=seed, wrist=wrist)
    if wrist:
        overrides = ("model.cameras=[front,wrist]", *overrides)
    if scene_memory:
        scenes = write_synthetic_scenes(root / "scenes", count=64, seed=seed)
        overrides = ("model.aux_source=front", "model.object_token=true", "model.scene_memory=true",
                     f"scene_data=[{scenes}]", "locator_steps=5", "model.locator_channels=[8,16,32]",
                     *overrides)
    preset = config_dir("train") / "vla_tiny.yaml"
    config = load_config(TrainVLAConfig, preset, [f"steps={steps}", f"language_encoder={HASH_ID}",
                                                  "eval_episodes=0", *overrides])
    VLATrainer(config, "stack", data, root / "ckpt", command="tiny_checkpoint (tests)",
               progress=False).run()
    return root / "ckpt"
