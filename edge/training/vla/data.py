"""Demonstrations in memory for VLA training: frames, action chunks, statistics, data order.

Every control step t of every (successful) episode is one sample: the observation at t and the
chunk of the next H actions ``action[t : t + H]``. Chunks that run past the episode end are padded
with the last action and masked out of the loss (``mask`` = 0), so the policy is not taught to stop
moving because the recording stopped.

Data order is a pure function of (seed, epoch): :class:`BatchOrder` draws a fresh permutation per
epoch and keeps a cursor (epoch, position) that the trainer saves, so a resumed run sees exactly
the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge.errors import EdgeError

ACTION_STD_FLOOR = 1e-4  # physical units; a constant action dimension normalises to 0, not inf
PROPRIO_STD_FLOOR = 1e-3


def _concat_releasing(sets: list[DemoSet], camera: str) -> np.ndarray:
    """One camera's frames of several sets in one array, each part released once copied.

    ``np.concatenate`` would hold every part and the result at once: twice the image memory
    (~21 GB for 190 k frames of two 96² cameras), enough to get a 24 GB machine's training
    killed. The result is written part by part, so the peak is the images plus one part."""
    first = sets[0].images[camera]
    out = np.empty((sum(d.n_frames for d in sets), *first.shape[1:]), first.dtype)
    offset = 0
    for d in sets:
        part = d.images.pop(camera)
        out[offset:offset + len(part)] = part
        offset += len(part)
    return out


@dataclass
class DemoSet:
    """All frames of a demonstration dataset, concatenated over episodes (N frames)."""

    meta: dict[str, Any]
    images: dict[str, np.ndarray]  # camera -> (N, H_img, W_img, 3) uint8
    proprio: np.ndarray  # (N, P) float32
    action: np.ndarray  # (N, Da) float32
    episode_end: np.ndarray  # (N,) int64: exclusive end index of the frame's episode
    instruction_index: np.ndarray  # (N,) int64 into ``instructions``
    instructions: list[str]
    n_episodes: int
    # (N, 6) float32: positions of the moved object and of the object it ends next to (stack: top and
    # base block), from the privileged ``object_pos``; a training-only auxiliary target, or None
    aux_objects: np.ndarray | None = None

    @property
    def n_frames(self) -> int:
        return int(self.action.shape[0])

    @classmethod
    def load(cls, root: str | Path, cameras: tuple[str, ...] = ("front",), task: str | None = None,
             successful_only: bool = True, max_episodes: int = 0) -> DemoSet:
        from sim.demos import iter_episodes, read_meta

        meta = read_meta(root)
        if task is not None and meta.get("task") != task:
            raise EdgeError(f"{root} holds demonstrations for task {meta.get('task')!r}, not {task!r}; "
                            f"pass the matching --task or another --data directory")
        imgs: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
        proprio, action, ends, instr, aux = [], [], [], [], []
        texts: dict[str, int] = {}
        n, count = 0, 0
        # a policy-driven run relabelled by the expert (edge data record --dagger) carries the
        # expert's action at every state it visited, whether or not the run itself succeeded
        relabelled = meta.get("dagger") is not None
        for ep in iter_episodes(root, successful_only=successful_only and not relabelled):
            for cam in cameras:
                if cam not in ep:
                    raise EdgeError(f"{root}: episode seed {ep['seed']} has no {cam!r} images; record "
                                    f"with that camera enabled or drop it from model.cameras")
                imgs[cam].append(ep[cam])
            t = len(ep["action"])
            proprio.append(ep["proprio"].astype(np.float32))
            action.append(ep["action"].astype(np.float32))
            ends.append(np.full(t, n + t, np.int64))
            aux.append(object_roles(ep["object_pos"], ep.get("roles")) if "object_pos" in ep else None)
            instr.append(np.full(t, texts.setdefault(ep["instruction"], len(texts)), np.int64))
            n += t
            count += 1
            if max_episodes and count >= max_episodes:
                break
        if count == 0:
            which = "successful " if successful_only else ""
            raise EdgeError(f"{root} has no {which}episodes; record demonstrations first "
                            "(edge data record)")
        return cls(meta=meta, images={c: np.concatenate(v) for c, v in imgs.items()},
                   proprio=np.concatenate(proprio), action=np.concatenate(action),
                   episode_end=np.concatenate(ends), instruction_index=np.concatenate(instr),
                   instructions=list(texts), n_episodes=count,
                   aux_objects=None if any(a is None for a in aux) else np.concatenate(aux))

    @classmethod
    def load_many(cls, roots: list[str | Path], cameras: tuple[str, ...] = ("front",),
                  task: str | None = None, successful_only: bool = True, max_episodes: int = 0) -> DemoSet:
        """Several dataset directories as one (e.g. clean demos + DART recovery demos).

        They must agree on task, layouts and control rate; ``max_episodes`` applies to each."""
        sets = [cls.load(r, cameras, task, successful_only, max_episodes) for r in roots]
        first = sets[0]
        for root, other in zip(roots[1:], sets[1:]):
            for key in ("task", "action_layout", "proprio_layout", "control_rate_hz"):
                if other.meta.get(key) != first.meta.get(key):
                    raise EdgeError(f"{root}: {key}={other.meta.get(key)!r} differs from {roots[0]} "
                                    f"({first.meta.get(key)!r}); train on datasets of one robot setup")
        if len(sets) == 1:
            return first
        texts: dict[str, int] = {}
        instr, ends, offset = [], [], 0
        for d in sets:
            remap = np.array([texts.setdefault(t, len(texts)) for t in d.instructions], np.int64)
            instr.append(remap[d.instruction_index])
            ends.append(d.episode_end + offset)
            offset += d.n_frames
        aux = None if any(d.aux_objects is None for d in sets) else np.concatenate([d.aux_objects for d in sets])
        return cls(meta=first.meta, images={c: _concat_releasing(sets, c) for c in cameras},
                   proprio=np.concatenate([d.proprio for d in sets]),
                   action=np.concatenate([d.action for d in sets]), episode_end=np.concatenate(ends),
                   instruction_index=np.concatenate(instr), instructions=list(texts),
                   n_episodes=sum(d.n_episodes for d in sets), aux_objects=aux)

    def stats(self) -> dict[str, np.ndarray]:
        """Per-dimension mean/std of actions (Da,) and proprio (P,), float32, with std floors."""
        extra = {}
        if self.aux_objects is not None:
            extra = {"aux_mean": self.aux_objects.mean(0).astype(np.float32),
                     "aux_std": np.maximum(self.aux_objects.std(0), 1e-3).astype(np.float32)}
        return {**extra,
            "action_mean": self.action.mean(0).astype(np.float32),
            "action_std": np.maximum(self.action.std(0), ACTION_STD_FLOOR).astype(np.float32),
            "proprio_mean": self.proprio.mean(0).astype(np.float32),
            "proprio_std": np.maximum(self.proprio.std(0), PROPRIO_STD_FLOOR).astype(np.float32),
        }

    def chunks(self, idx: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """Frame indices (B,) -> actions (B, H, Da) physical, mask (B, H) float32 (0 = padding)."""
        steps = idx[:, None] + np.arange(horizon)[None, :]  # (B, H)
        end = self.episode_end[idx][:, None]
        mask = (steps < end).astype(np.float32)
        return self.action[np.minimum(steps, end - 1)], mask


def object_roles(object_pos: np.ndarray, roles: np.ndarray | None = None) -> np.ndarray:
    """(T, N, 3) object positions -> (T, 6): the object that moved most over the episode, then the
    object whose final xy is nearest to it (for ``stack``: the placed block and its base); or the
    two objects ``roles`` names (indices), as recorded for policy-driven runs that may fail."""
    if roles is not None:
        moved, base = (int(i) for i in roles)
        return np.concatenate([object_pos[:, moved], object_pos[:, base]], -1).astype(np.float32)
    moved = int(np.argmax(np.linalg.norm(object_pos[-1] - object_pos[0], axis=-1)))
    if object_pos.shape[1] == 1:
        return np.concatenate([object_pos[:, moved], object_pos[:, moved]], -1).astype(np.float32)
    dist = np.linalg.norm(object_pos[-1, :, :2] - object_pos[-1, moved, :2], axis=-1)
    dist[moved] = np.inf
    base = int(np.argmin(dist))
    return np.concatenate([object_pos[:, moved], object_pos[:, base]], -1).astype(np.float32)


def before_lift(aux_objects: np.ndarray, episode_end: np.ndarray, lift_m: float = 0.01) -> np.ndarray:
    """(N,) bool: frames before the moved object first rises ``lift_m`` above its start height.

    Until then the object's position can only be read from pixels; afterwards it rides in the
    gripper and the arm's own state gives it away. ``aux_objects`` (N, 6) as in :class:`DemoSet`.
    """
    out = np.zeros(len(aux_objects), bool)
    start = 0
    for end in np.unique(episode_end):
        z = aux_objects[start:end, 2]
        lifted = np.flatnonzero(z > z[0] + lift_m)
        out[start:start + (int(lifted[0]) if len(lifted) else end - start)] = True
        start = int(end)
    return out


class BatchOrder:
    """Deterministic, resumable batch indices over N samples: a new permutation every epoch."""

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.epoch, self.pos = 0, 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.n)

    def next(self) -> np.ndarray:
        """The next (batch_size,) indices; an epoch boundary inside a batch continues in the next."""
        out = []
        need = self.batch_size
        while need:
            take = self._perm[self.pos : self.pos + need]
            out.append(take)
            need -= len(take)
            self.pos += len(take)
            if self.pos >= self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation(self.epoch)
        return np.concatenate(out)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "pos": self.pos, "n": self.n, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["n"] != self.n or state["seed"] != self.seed:
            raise EdgeError(f"resume: the saved data order is for {state['n']} samples / seed "
                            f"{state['seed']}, this run has {self.n} / {self.seed}")
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._perm = self._permutation(self.epoch)


def random_shift(images: Any, pad: int, generator: Any) -> Any:
    """Random-shift augmentation: replicate-pad by ``pad`` px and crop back at a random offset.

    images (B, H, W, 3) uint8 torch tensor -> same shape; offsets from ``generator`` (torch).
    Shifts of a few pixels make the policy robust to camera jitter without changing the scene.
    """
    import torch
    from torch.nn import functional as F

    if pad <= 0:
        return images
    b, h, w, _ = images.shape
    x = F.pad(images.permute(0, 3, 1, 2).float(), (pad, pad, pad, pad), mode="replicate")
    oy = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
    ox = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
    rows = (oy[:, None] + torch.arange(h)[None, :])[:, None, :, None]  # (B, 1, H, 1)
    cols = (ox[:, None] + torch.arange(w)[None, :])[:, None, None, :]  # (B, 1, 1, W)
    bidx = torch.arange(b)[:, None, None, None]
    cidx = torch.arange(3)[None, :, None, None]
    out = x[bidx, cidx, rows, cols]  # (B, 3, H, W)
    return out.to(torch.uint8).permute(0, 2, 3, 1).contiguous()
