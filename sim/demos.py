"""On-disk demonstration format (version 1) — writer and reader.

Layout of a dataset directory::

    DIR/meta.json                     dataset-level metadata (task, sim, env config, layouts, phases)
    DIR/episodes/ep_<seed:07d>.npz    one finished episode per file (numpy .npz, no pickle)

Each episode file holds, for T control steps (one row per step, observation *before* the action):

    front        (T, H, W, 3) uint8   front camera RGB
    wrist        (T, H, W, 3) uint8   wrist camera RGB (only if the env had it enabled)
    proprio      (T, P) float32       see meta["proprio_layout"]
    action       (T, A) float32       the action applied at that step, see meta["action_layout"]
    phase        (T,) int8            expert phase index into meta["phases"]
    object_pos   (T, N, 3) float32    ground-truth object positions (privileged; metrics only)
    instruction  () str               natural-language instruction
    success      () bool              the task's success test at the end of the episode
    seed         () int64             env seed; re-running the expert with it reproduces the episode

Atomicity: an episode is written to ``ep_XXXXXXX.npz.tmp`` and renamed when complete, so a crash
never leaves a half-written file that looks valid; ``*.tmp`` files are ignored and removed on
resume. ``meta.json`` is written the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_NAME = "edge-demos"
FORMAT_VERSION = 1
REQUIRED_KEYS = ("front", "proprio", "action", "phase", "instruction", "success", "seed")


def _atomic_write_bytes(path: Path, write) -> None:
    """Write ``path`` whole or not at all, also across a power cut: a temp file beside it, fsynced, renamed
    over it, the folder fsynced (as edge/atomic.py does; sim imports no project module but kinematics)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # a platform without directory handles: the rename itself is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def episode_path(root: Path, seed: int) -> Path:
    return Path(root) / "episodes" / f"ep_{seed:07d}.npz"


def prepare_dir(root: str | Path, meta: dict[str, Any]) -> Path:
    """Create (or reopen for resume) a dataset dir. Refuses to mix different task/sim/layouts."""
    root = Path(root)
    try:
        (root / "episodes").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(f"cannot create output directory {root}: {err.strerror}") from None
    if not os.access(root, os.W_OK):
        raise PermissionError(f"output directory {root} is not writable; choose another --out")
    meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **meta}
    meta_path = root / "meta.json"
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        defaults = {"action_noise_m": 0.0, "expert_approach_offset_m": 0.04,  # older recordings
                    "expert_place_held_object": False, "expert_regrasp_off_centre_m": 0.0}
        for key in ("task", "sim", "action_layout", "proprio_layout", "control_rate_hz", "env_config",
                    "action_noise_m", "expert_approach_offset_m", "expert_place_held_object",
                    "expert_regrasp_off_centre_m", "dagger"):
            was = old.get(key, defaults.get(key))
            if key == "env_config" and isinstance(was, dict) and isinstance(meta.get(key), dict):
                from sim.env import with_new_env_defaults

                was = with_new_env_defaults(was, meta[key])  # settings added since, at their defaults
            if was != meta.get(key, defaults.get(key)):
                raise ValueError(
                    f"{meta_path}: existing dataset has {key}={old.get(key)!r}, this recording has "
                    f"{meta.get(key)!r}; record into a new --out directory"
                )
    else:
        text = json.dumps(meta, indent=2, sort_keys=True).encode()
        _atomic_write_bytes(meta_path, lambda fh: fh.write(text))
    for stale in (root / "episodes").glob("*.tmp"):
        stale.unlink()
    return root


def write_episode(root: str | Path, seed: int, arrays: dict[str, Any]) -> Path:
    """Atomically write one finished episode."""
    missing = [k for k in REQUIRED_KEYS if k not in arrays]
    if missing:
        raise ValueError(f"episode for seed {seed} lacks keys {missing}")
    lengths = {k: len(arrays[k]) for k in ("front", "proprio", "action", "phase")}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"episode for seed {seed}: per-step arrays differ in length {lengths}")
    out = {k: np.asarray(v) for k, v in arrays.items()}
    path = episode_path(Path(root), seed)
    _atomic_write_bytes(path, lambda fh: np.savez_compressed(fh, **out))
    return path


def done_seeds(root: str | Path) -> set[int]:
    """Seeds whose episode file is complete (used to resume a recording)."""
    return {int(p.stem[3:]) for p in (Path(root) / "episodes").glob("ep_*.npz")}


def read_meta(root: str | Path) -> dict[str, Any]:
    path = Path(root) / "meta.json"
    if not path.is_file():
        if Path(root).is_file():
            raise FileNotFoundError(f"{root} is a file; give the dataset's directory (made by `edge data record`)")
        raise FileNotFoundError(f"{root} is not a demonstration dataset (no meta.json); "
                                "record one with `edge data record`")
    meta = json.loads(path.read_text())
    if meta.get("format") is None and (Path(root) / "ticks.jsonl").exists():
        raise ValueError(f"{root} is a run directory (edge run), not a demonstration dataset; "
                         "read it with `edge report`")
    if meta.get("format") == "edge-scenes":
        raise ValueError(f"{root} holds scenes (edge data scenes: initial states, no demonstrations), not a "
                         "demonstration dataset (edge data record)")
    if meta.get("format") != FORMAT_NAME or meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: format {meta.get('format')} v{meta.get('version')} is not "
                         f"{FORMAT_NAME} v{FORMAT_VERSION}")
    return meta


def read_episode(path: str | Path) -> dict[str, Any]:
    """Load one episode as a dict of numpy arrays (scalars unwrapped)."""
    with np.load(path, allow_pickle=False) as data:
        ep = {k: data[k] for k in data.files}
    for k in ("instruction", "success", "seed"):
        ep[k] = ep[k].item()
    return ep


def iter_episodes(root: str | Path, successful_only: bool = False) -> Iterator[dict[str, Any]]:
    """Episodes in seed order (deterministic)."""
    for path in sorted((Path(root) / "episodes").glob("ep_*.npz")):
        ep = read_episode(path)
        if successful_only and not ep["success"]:
            continue
        yield ep


def dataset_hash(root: str | Path | list) -> str:
    """SHA-256 over meta.json and every episode file, in name order (for manifests).

    A list of directories hashes the list of their hashes (a one-element list = that directory)."""
    import hashlib

    if isinstance(root, (list, tuple)):
        parts = [dataset_hash(r) for r in root]
        return parts[0] if len(parts) == 1 else hashlib.sha256("\n".join(parts).encode()).hexdigest()

    h = hashlib.sha256()
    root = Path(root)
    for path in [root / "meta.json", *sorted((root / "episodes").glob("ep_*.npz"))]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()
