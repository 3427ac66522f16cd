"""The bench for ``edge run --arm bridge`` tests: the emulated MCU of the Panda on a pty (a servo plant at
the Panda's home pose, the real serial protocol) and a camera recording played from a video file. Stand-ins
at the true boundaries only: the arm's motors and the camera sensor."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from edge.robot_spec import load_robot_spec
from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.plant import ServoPlant, ServoPlantConfig
from firmware_bridge.rig import PtyRig
from firmware_bridge.wire_constants import Mode


def video(path: Path, frames: int, fps: float = 20.0) -> Path:
    """A recording of changing images (a real sensor's frames differ: a frozen one is a fault)."""
    import cv2

    rng = np.random.default_rng(0)
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (64, 64))
    for _ in range(frames):
        w.write(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
    w.release()
    return path


def panda_mcu() -> PtyRig:
    """The reference device for the Panda (drivers/README.md): 8 joints, 200 ms watchdog, +-4 rad, at home."""
    home = tuple(load_robot_spec("panda").q_home_rad) + (0.08,)
    cfg = McuConfig(n_joints=8, watchdog_ms=200, hard_q_min_rad=-4.0, hard_q_max_rad=4.0, tick_s=0.002)
    return PtyRig(cfg, plant=ServoPlant(ServoPlantConfig(n_joints=8), q0_rad=home))


def settled_mode(rig: PtyRig, timeout_s: float = 2.0) -> Mode:
    """The MCU's mode once a controlled stop (STOPPING) has come to standstill."""
    t_end = time.monotonic() + timeout_s
    while True:
        with rig.lock:
            mode = rig.mcu.mode
        if mode is not Mode.STOPPING or time.monotonic() > t_end:
            return mode
        time.sleep(0.01)
