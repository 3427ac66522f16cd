"""Sensor and actuator realism hooks (all off by default). The HIL fault scenarios turn them on.

Sensor side (applied to proprio and images, per episode, seeded): Gaussian noise, constant bias,
delay by whole control steps, dropout (the previous reading is repeated) and frozen camera frames
(the image stops updating for a stretch of steps). Actuator side: latency by whole control steps
(commands are applied late; the first steps after reset apply the hold action) and action repeat
(each new command is held for ``action_repeat`` steps — only every ``action_repeat``-th command is
taken, the others are counted as skipped in ``info``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RealismConfig:
    proprio_noise_std: float = 0.0
    proprio_bias: float = 0.0
    proprio_delay_steps: int = 0
    proprio_dropout_prob: float = 0.0
    image_noise_std: float = 0.0  # in 0–255 intensity units
    image_delay_steps: int = 0
    image_freeze_prob: float = 0.0  # chance per step that a freeze starts
    image_freeze_steps: int = 10
    action_latency_steps: int = 0
    action_repeat: int = 1

    def __post_init__(self) -> None:
        for name in ("proprio_noise_std", "image_noise_std", "proprio_dropout_prob", "image_freeze_prob"):
            v = getattr(self, name)
            if not (v >= 0.0) or (name.endswith("prob") and v > 1.0):
                raise ValueError(f"realism.{name}={v!r} out of range; allowed [0, 1] for "
                                 "probabilities, >= 0 for noise")
        for name in ("proprio_delay_steps", "image_delay_steps", "image_freeze_steps", "action_latency_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"realism.{name}={getattr(self, name)!r} must be >= 0")
        if self.action_repeat < 1:
            raise ValueError(f"realism.action_repeat={self.action_repeat!r} must be >= 1")

    @property
    def enabled(self) -> bool:
        return self != RealismConfig()


class Realism:
    """Stateful per-episode application of :class:`RealismConfig`."""

    def __init__(self, cfg: RealismConfig) -> None:
        self.cfg = cfg
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._proprio_hist: deque = deque(maxlen=self.cfg.proprio_delay_steps + 1)
        self._image_hist: deque = deque(maxlen=self.cfg.image_delay_steps + 1)
        self._last_proprio: np.ndarray | None = None
        self._frozen: dict | None = None
        self._freeze_left = 0
        self._actions: deque = deque()
        self._held_action: np.ndarray | None = None
        self._step = 0
        self.counts = {"proprio_dropouts": 0, "frozen_frames": 0, "skipped_actions": 0}

    def proprio(self, x: np.ndarray) -> np.ndarray:
        c = self.cfg
        self._proprio_hist.append(x.copy())
        y = self._proprio_hist[0].copy()
        if c.proprio_noise_std > 0:
            y += self.rng.normal(0.0, c.proprio_noise_std, y.shape)
        y += c.proprio_bias
        if self._last_proprio is not None and c.proprio_dropout_prob > 0 and self.rng.random() < c.proprio_dropout_prob:
            self.counts["proprio_dropouts"] += 1
            return self._last_proprio.copy()
        self._last_proprio = y.astype(np.float32)
        return self._last_proprio.copy()

    def images(self, imgs: dict) -> dict:
        c = self.cfg
        self._image_hist.append(imgs)
        out = self._image_hist[0]
        if self._freeze_left > 0 and self._frozen is not None:
            self._freeze_left -= 1
            self.counts["frozen_frames"] += 1
            return {k: v.copy() for k, v in self._frozen.items()}
        if c.image_noise_std > 0:
            out = {k: np.clip(v.astype(np.float32) + self.rng.normal(0, c.image_noise_std, v.shape),
                              0, 255).astype(np.uint8) for k, v in out.items()}
        if c.image_freeze_prob > 0 and self.rng.random() < c.image_freeze_prob:
            self._frozen, self._freeze_left = out, c.image_freeze_steps  # freeze what was delivered
        return out

    def action(self, a: np.ndarray, hold: np.ndarray) -> np.ndarray:
        """The command actually applied this step, given the commanded ``a`` and a hold action."""
        c = self.cfg
        self._step += 1
        if c.action_repeat > 1:
            if (self._step - 1) % c.action_repeat == 0 or self._held_action is None:
                self._held_action = a.copy()
            else:
                self.counts["skipped_actions"] += 1
            a = self._held_action
        if c.action_latency_steps > 0:
            self._actions.append(a.copy())
            if len(self._actions) <= c.action_latency_steps:
                return hold
            return self._actions.popleft()
        return a
