"""Scene datasets: the first camera frame of many freshly drawn scenes, with the task objects' poses.

Training data for the VLA's scene locator (``model.scene_memory``): the policy localises the task's
objects once per episode, at the first query, when the arm is at home and hides nothing. Drawing a
scene is an env reset and one render (~300 scenes/s on one core), so a locator can see tens of
thousands of scenes where the demonstrations have hundreds; with 702 demo scenes the front-camera
localiser is 1.2-1.5 cm off on held-out scenes, with 20,000 drawn scenes 0.5 cm.

Layout of a scene directory::

    meta.json    task, sim, distribution, seed, count, image_hw, roles, command
    scenes.npz   front (N, H, W, 3) uint8, objects (N, 6) float32 (moved object xyz, then its base
                 / second object xyz; metres, world frame), instruction (N,) str

Roles follow the task's object order: for ``stack`` the block to move (``order[1]``) and the block
it goes on (``order[0]``), as :func:`edge.training.vla.data.object_roles` names them in the demos; a
one-object task repeats its object.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from sim.demos import _atomic_write_bytes

META_FILE = "meta.json"
DATA_FILE = "scenes.npz"


def record_scenes(env: Any, count: int, seed: int, out: str | Path, meta: dict[str, Any] | None = None,
                  progress: bool = True) -> dict[str, Any]:
    """Reset ``env`` with seeds ``seed .. seed+count-1`` and write the first front frames + object
    positions to ``out`` (written to a temporary file, then renamed: never half-written)."""
    from tqdm import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    u = env.unwrapped
    frames: np.ndarray | None = None
    objects = np.zeros((count, 6), np.float32)
    instructions: list[str] = []
    t0 = time.perf_counter()
    for i in tqdm(range(count), desc="scenes", unit="scene", disable=not progress, mininterval=1.0):
        obs, info = env.reset(seed=seed + i)
        order = tuple(u.spec_task.order)
        moved, base = (order[1], order[0]) if len(order) >= 2 else (order[0], order[0])
        front = np.asarray(obs["front"])
        if frames is None:
            frames = np.zeros((count, *front.shape), np.uint8)
        frames[i] = front
        objects[i, :3] = info["object_poses"][moved][:3]
        objects[i, 3:] = info["object_poses"][base][:3]
        instructions.append(str(obs["instruction"]))
    _atomic_write_bytes(out / DATA_FILE, lambda fh: np.savez(fh, front=frames, objects=objects,
                                                           instruction=np.asarray(instructions)))
    record = {"format": "edge-scenes", "version": 1, "count": count, "seed": seed,
              "image_hw": list(frames.shape[1:3]) if frames is not None else None,
              "roles": ["moved", "base"], "wall_s": round(time.perf_counter() - t0, 1),
              "command": " ".join(["edge", *sys.argv[1:]]), **(meta or {})}
    text = (json.dumps(record, indent=2) + "\n").encode()
    _atomic_write_bytes(out / META_FILE, lambda fh: fh.write(text))
    return record


def load_scenes(paths: str | Path | list[str | Path], task: str | None = None,
                image_hw: tuple[int, int] | None = None) -> dict[str, Any]:
    """One or more scene directories -> {"front", "objects", "instruction"} concatenated, checked
    against the task and image size the model is trained for (FileNotFoundError / ValueError, each
    naming the directory and what to do)."""
    parts = []
    for p in ([paths] if isinstance(paths, (str, Path)) else list(paths)):
        p = Path(p)
        if not (p / META_FILE).is_file() or not (p / DATA_FILE).is_file():
            raise FileNotFoundError(f"{p} is not a scene dataset (needs {META_FILE} and {DATA_FILE}); record "
                            f"one with `edge data scenes --task stack --count 20000 --out {p}`")
        meta = json.loads((p / META_FILE).read_text())
        if task is not None and meta.get("task") != task:
            raise ValueError(f"{p} holds scenes of task {meta.get('task')!r}, not {task!r}")
        with np.load(p / DATA_FILE) as z:
            part = {"front": z["front"], "objects": z["objects"], "instruction": z["instruction"].astype(str)}
        if image_hw is not None and tuple(part["front"].shape[1:3]) != tuple(image_hw):
            raise ValueError(f"{p}: scene images are {part['front'].shape[1:3]}, the model takes "
                            f"{tuple(image_hw)}; record them with --image-size {image_hw[0]}")
        parts.append(part)
    if not parts:
        raise ValueError("no scene dataset given")
    return {k: np.concatenate([q[k] for q in parts]) for k in parts[0]}


def scenes_hash(paths: list[str | Path]) -> str:
    """Content hash of scene directories' data (for manifests; meta.json's wall time is left out)."""
    import hashlib

    h = hashlib.sha256()
    for p in paths:
        with open(Path(p) / DATA_FILE, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()
