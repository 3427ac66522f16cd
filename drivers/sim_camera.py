"""The simulator's cameras as an :class:`edge.contracts.ObservationSource` for HIL runs.

Images are rendered from the physics the MCU emulator is driving (holding the bench lock, since the
bench's service thread steps that physics), get a little pixel noise (as a real sensor has, so
consecutive frames differ), then pass through the ``sim.realism`` hooks, which from
:meth:`SimCamera.freeze_from` on freeze the frame. A :class:`drivers.opencv_camera.FrameWatch`
detects the frozen image exactly as it does for a real camera and raises ``CameraStale``.

Proprioception is built from the measured :class:`RobotState` the loop passes in, i.e. from the
telemetry that came over the serial link, in the layout of ``sim.env.PROPRIO_LAYOUT`` (22,):
q (7), qd (7), gripper opening (m), TCP position (3), TCP quaternion wxyz (4).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from drivers.opencv_camera import CameraStale, FrameWatch
from edge.contracts import Observation, RobotState
from sim import robot_model as rm
from sim.env import (
    _rot_to_quat,  # the env's own conversion, so proprio matches training data
)
from sim.realism import Realism, RealismConfig


class SimCamera:
    """Render ``cameras`` of a sim env at ``image_size`` px; frozen-frame check over ``max_frozen_s``."""

    def __init__(
        self,
        env: Any,
        lock: threading.Lock,
        cameras: tuple[str, ...] = ("front",),
        image_size: int = 96,
        noise_std: float = 2.0,
        max_frozen_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
    ) -> None:
        self.env = env.unwrapped if hasattr(env, "unwrapped") else env
        self.lock, self.cameras, self.image_size = lock, cameras, image_size
        self.noise_std, self.max_frozen_s, self.clock = noise_std, max_frozen_s, clock
        self._rng = np.random.default_rng(seed)
        self.realism = Realism(RealismConfig())  # no sensor fault until freeze_from()
        self.realism.reset(np.random.default_rng(seed + 1))
        self._freeze_at_s: float | None = None
        self.watch = FrameWatch()
        self.frames = 0

    def _noisy(self, img: np.ndarray) -> np.ndarray:
        if self.noise_std <= 0:
            return img
        noise = self._rng.normal(0.0, self.noise_std, img.shape)
        return np.clip(img.astype(np.float32) + noise, 0, 255).astype(np.uint8)

    def warm_up(self) -> None:
        """Render once before the run: the first render creates the GL context (hundreds of ms),
        which must not happen inside a control tick while holding the bench lock."""
        s = self.image_size
        for c in self.cameras:
            self.env.backend.render(c, s, s)

    def freeze_from(self, t_s: float) -> None:
        """From monotonic time ``t_s`` on, the ``sim.realism`` freeze hook holds the image."""
        self._freeze_at_s = t_s

    def observe(self, state: RobotState) -> Observation:
        now = self.clock()
        if self._freeze_at_s is not None and now >= self._freeze_at_s and self.realism.cfg.image_freeze_prob == 0:
            rng = self.realism.rng
            self.realism = Realism(RealismConfig(image_freeze_prob=1.0, image_freeze_steps=10**9))
            self.realism.reset(rng)
        s = self.image_size
        with self.lock:
            imgs = {c: self.env.backend.render(c, s, s) for c in self.cameras}
        # Sensor noise first, then the realism hook: a frozen camera repeats the exact frame it showed.
        imgs = {k: self._noisy(v) for k, v in imgs.items()}
        imgs = self.realism.images(imgs)
        self.frames += 1
        self.watch.update(imgs[self.cameras[0]], now)
        frozen = self.watch.frozen_for_s(now)
        if frozen > self.max_frozen_s:
            raise CameraStale(f"camera {self.cameras[0]!r}: image unchanged for {frozen:.3f} s "
                              f"(limit {self.max_frozen_s} s); the camera looks frozen")
        return Observation(imgs, proprio_from_state(state), self.env.spec_task.instruction, state.t_s)


def proprio_from_state(state: RobotState, gripper_width_max_m: float = rm.GRIPPER_MAX_WIDTH_M) -> np.ndarray:
    """``sim.env.PROPRIO_LAYOUT`` (22,) float32 from a measured robot state."""
    q = np.asarray(state.q_rad, float)
    p, R, _ = rm.fk(q)
    width = (1.0 - float(state.gripper)) * gripper_width_max_m
    return np.concatenate([q, state.qd_rad_s, [width], p, _rot_to_quat(R)]).astype(np.float32)


class ProprioObserver:
    """ObservationSource without cameras (a host process with no access to the simulator)."""

    def __init__(self, instruction: str = "") -> None:
        self.instruction = instruction

    def observe(self, state: RobotState) -> Observation:
        return Observation({}, proprio_from_state(state), self.instruction, state.t_s)
