"""What the world model sees of an observation: oracle slots, frozen encoder slots, or pixels.

* ``oracle``: the env's object states (robot, goal, target, distractors; F features each, 8 or 12,
  see :mod:`world_models.object_env`) through a fixed random linear map to D — one slot per entity,
  identity by construction (the upper bound). The map for F features is :func:`oracle_map`.
* ``slots``: a frozen :mod:`world_models.slot_encoder`; the previous frame's slots initialise the
  next frame's, and a new episode's first frame is encoded twice (no prior, then its own output).
* ``pixels``: the frame itself (uint8); the pixel world model learns its own encoder.

All methods are batched over environments: ``observe(obs_list, first)`` with ``first`` (B,) bool
marking rows whose episode just started, returns stored states (B, ...).
"""

from __future__ import annotations

import numpy as np
import torch

MODES = ("oracle", "slots", "pixels")


class Observer:
    def __init__(self, mode: str, n_envs: int, *, slot_dim: int = 64, n_entities: int = 5, encoder=None,
                 image_size: int = 64, seed: int = 0, oracle_features: int = 8) -> None:
        if mode not in MODES:
            raise ValueError(f"observation mode {mode!r} is not allowed; choose one of {MODES}")
        if mode == "slots" and encoder is None:
            raise ValueError("observation mode 'slots' needs a slot encoder (world_model.encoder=DIR)")
        self.mode, self.encoder = mode, encoder
        if mode == "oracle":
            self._proj = oracle_map(oracle_features, slot_dim, seed)
            self.state_shape, self.dtype = (n_entities, slot_dim), np.dtype(np.float32)
        elif mode == "slots":
            k, d = encoder.cfg.num_slots, encoder.cfg.slot_dim
            self.state_shape, self.dtype = (k, d), np.dtype(np.float32)
            self._prev = np.zeros((n_envs, k, d), np.float32)
        else:
            self.state_shape, self.dtype = (image_size, image_size, 3), np.dtype(np.uint8)

    @classmethod
    def for_run(cls, cfg, n_envs: int = 1, encoder=None) -> Observer:
        """The observer of a world-model run (:class:`world_models.train.RunConfig`) for ``n_envs`` envs."""
        return cls(cfg.obs, n_envs, slot_dim=cfg.model.slot_dim, n_entities=cfg.env.n_entities, encoder=encoder,
                   image_size=cfg.env.image_size, seed=cfg.seed, oracle_features=len(cfg.env.oracle_layout))

    def observe(self, obs_list: list[dict], first: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """States for the given observations; ``rows`` are their environment indices (default 0..B-1)."""
        rows = np.arange(len(obs_list)) if rows is None else np.asarray(rows)
        if self.mode == "oracle":
            feats = np.stack([o["oracle"] for o in obs_list])
            if feats.shape[-1] != self._proj.shape[0]:
                raise ValueError(f"oracle observations with {feats.shape[-1]} features per slot, but this observer "
                                 f"maps {self._proj.shape[0]} (the run's env.oracle_state decides; see object_env)")
            return (feats @ self._proj).astype(np.float32)
        frames = np.stack([o["frame"] for o in obs_list])
        if self.mode == "pixels":
            return frames
        first = np.asarray(first, bool)
        out = np.zeros((len(obs_list), *self.state_shape), np.float32)
        with torch.no_grad():
            if first.any():
                out[first] = _np(self.encoder.encode_first(frames[first]))
            if (~first).any():
                init = torch.as_tensor(self._prev[rows[~first]])
                out[~first] = _np(self.encoder.encode(frames[~first], init_slots=init))
        self._prev[rows] = out
        return out


def _np(x) -> np.ndarray:
    if isinstance(x, tuple):
        x = x[0]
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def oracle_map(features: int, slot_dim: int, seed: int) -> np.ndarray:
    """(features, slot_dim) float32: the oracle observer's fixed random map. Its first 8 rows are
    the same for every ``features`` (the pose features keep their map when control features are
    appended)."""
    return (np.random.default_rng(seed + 7919).standard_normal((features, slot_dim)) / np.sqrt(8)).astype(np.float32)
