"""A real camera as an :class:`edge.contracts.ObservationSource`, through OpenCV.

The control loop calls ``observe`` on its own thread and must never wait for a camera, so a
background thread grabs frames continuously (``cv2.VideoCapture.read`` blocks for up to a frame
period) and keeps only the newest one with its capture time. ``observe`` returns that frame at once.

Stale and frozen frames are faults, not data (S7 in the HIL catalogue; LeRobot #608): ``observe``
raises :class:`CameraStale` when the newest frame is older than ``max_frame_age_s`` (grab thread
stuck, camera unplugged) or when the image content has not changed for ``max_frozen_s`` (a driver
that keeps re-delivering one buffer; a real sensor's noise makes consecutive frames differ). The
control loop then stops the arm and surfaces the error.

Frames are converted BGR -> RGB and resized to ``width`` x ``height`` (uint8, (H, W, 3)).
The proprioceptive part of the observation comes from the robot state the loop passes in; pass a
``proprio_fn(state) -> (P,) float32`` that matches what the policy was trained on.

Example::

    cam = OpenCVCamera(OpenCVCameraConfig(source="0", width=96, height=96))
    cam.start()                        # opens the device; raises CameraError if it cannot
    obs = cam.observe(driver.read_state())
    cam.close()
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.config import cfg, check_fields
from edge.contracts import Observation, RobotState
from edge.errors import EdgeError


class CameraError(EdgeError):
    """The camera cannot be opened or delivers nothing."""


class CameraStale(CameraError):
    """The newest frame is too old, or the image has stopped changing (frozen)."""


class FrameWatch:
    """Tracks when the image content last changed (a cheap checksum of a strided subsample)."""

    def __init__(self) -> None:
        self._sum: int | None = None
        self.changed_at_s = -float("inf")
        self.frames = 0
        self.repeats = 0

    def update(self, image: np.ndarray, t_s: float) -> None:
        s = zlib.adler32(np.ascontiguousarray(image[::3, ::3]).tobytes())
        self.frames += 1
        if s != self._sum:
            self._sum, self.changed_at_s = s, t_s
        else:
            self.repeats += 1

    def frozen_for_s(self, now_s: float) -> float:
        return now_s - self.changed_at_s


@dataclass
class OpenCVCameraConfig:
    """One OpenCV camera."""

    source: str = cfg("0", "device index ('0'), device path (/dev/video0), file or stream URL")
    name: str = cfg("front", "camera name in Observation.images (must match the policy)")
    width: int = cfg(96, "output width in pixels", range=(8, 4096))
    height: int = cfg(96, "output height in pixels", range=(8, 4096))
    fps: float = cfg(30.0, "requested capture rate (the device may ignore it)", range=(1.0, 240.0))
    max_frame_age_s: float = cfg(0.5, "newest frame older than this -> CameraStale", range=(0.01, 60.0))
    max_frozen_s: float = cfg(1.0, "image unchanged for this long -> CameraStale", range=(0.01, 600.0))
    open_timeout_s: float = cfg(3.0, "start(): wait this long for the first frame", range=(0.1, 60.0))
    instruction: str = cfg("", "instruction text put into every observation")

    def __post_init__(self) -> None:
        check_fields(self)


class OpenCVCamera:
    """ObservationSource over ``cv2.VideoCapture`` with a background grab thread."""

    def __init__(
        self,
        config: OpenCVCameraConfig,
        proprio_fn: Callable[[RobotState], np.ndarray] | None = None,
        capture_factory: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.proprio_fn = proprio_fn or _default_proprio
        self._factory = capture_factory
        self._clock = clock
        self._lock = threading.Lock()
        self._frame: np.ndarray | None = None
        self._frame_t_s = -float("inf")
        self.watch = FrameWatch()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cap: Any = None
        self.error: BaseException | None = None
        self.read_failures = 0
        self._frame_period_s = 0.0  # > 0: a video file, read at its frame rate (not as fast as it decodes)

    def _open(self) -> Any:
        if self._factory is not None:
            return self._factory()
        try:
            import cv2
        except ImportError as err:  # pragma: no cover - cv2 is a core dependency
            raise CameraError("OpenCV is missing: pip install opencv-python-headless") from err
        src: Any = int(self.config.source) if self.config.source.isdigit() else self.config.source
        cap = cv2.VideoCapture(src)
        if is_video_file(self.config.source):  # a recording plays at its own rate, as it was filmed
            fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
            self._frame_period_s = 1.0 / (fps if 0 < fps <= 1000 else self.config.fps)
        else:
            cap.set(cv2.CAP_PROP_FPS, self.config.fps)
            cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # the newest frame, not a queue of old ones
        return cap

    def start(self) -> OpenCVCamera:
        """Open the device, start the grab thread, wait for the first frame."""
        self._cap = self._open()
        if not self._cap.isOpened():
            raise CameraError(f"cannot open camera {self.config.source!r}; check the index/path and permissions (video group)")
        self._thread = threading.Thread(target=self._grab_loop, name=f"camera-{self.config.name}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.config.open_timeout_s
        while self._frame is None and time.monotonic() < deadline and self.error is None:
            time.sleep(0.005)
        if self._frame is None:
            self.close()
            raise CameraError(f"camera {self.config.source!r} delivered no frame within {self.config.open_timeout_s} s")
        return self

    def _grab_loop(self) -> None:
        import cv2

        c = self.config
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                if self._frame_period_s > 0:  # a file: one frame per period of its frame rate
                    next_t += self._frame_period_s
                    self._stop.wait(max(0.0, next_t - time.monotonic()))
                ok, bgr = self._cap.read()
                if not ok or bgr is None:
                    self.read_failures += 1
                    self._stop.wait(0.01)  # unplugged / end of stream: the frame ages, observe() raises
                    continue
                rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
                if rgb.shape[:2] != (c.height, c.width):
                    rgb = cv2.resize(rgb, (c.width, c.height), interpolation=cv2.INTER_AREA)
                t = self._clock()
                with self._lock:
                    self._frame, self._frame_t_s = rgb, t
                    self.watch.update(rgb, t)
        except Exception as err:  # noqa: BLE001 - kept and surfaced by observe()
            self.error = err

    def latest(self) -> tuple[np.ndarray, float]:
        """Newest frame (H, W, 3) uint8 and its capture time; raises CameraStale if too old/frozen."""
        now = self._clock()
        with self._lock:
            frame, t = self._frame, self._frame_t_s
            frozen = self.watch.frozen_for_s(now)
        if self.error is not None:
            raise CameraError(f"camera {self.config.name!r} grab thread failed: {self.error}")
        if frame is None or now - t > self.config.max_frame_age_s:
            raise CameraStale(f"camera {self.config.name!r}: newest frame is {now - t:.3f} s old "
                              f"(limit {self.config.max_frame_age_s} s)")
        if frozen > self.config.max_frozen_s:
            raise CameraStale(f"camera {self.config.name!r}: image unchanged for {frozen:.3f} s "
                              f"(limit {self.config.max_frozen_s} s); the camera looks frozen")
        return frame, t

    def check(self) -> None:
        """Raise :class:`CameraStale` / :class:`CameraError` as :meth:`latest` would (the loop calls it every tick)."""
        self.latest()

    def observe(self, state: RobotState) -> Observation:
        frame, _ = self.latest()
        proprio = np.asarray(self.proprio_fn(state), np.float32)
        return Observation({self.config.name: frame}, proprio, self.config.instruction, state.t_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class CameraSet:
    """Several named cameras as one :class:`edge.contracts.ObservationSource`: each camera's newest
    frame (:meth:`OpenCVCamera.latest`, so a stale or frozen one raises :class:`CameraStale`), the
    proprio ``proprio_fn(state)`` and the instruction. ``start`` opens them all (or none: the ones
    opened are closed again when one fails)."""

    def __init__(self, cameras: list[OpenCVCamera], proprio_fn: Callable[[RobotState], np.ndarray],
                 instruction: str = "") -> None:
        names = [c.config.name for c in cameras]
        if len(set(names)) != len(names) or not names:
            raise CameraError(f"cameras {names}: give each camera once, by a distinct name")
        self.cameras, self.proprio_fn, self.instruction = cameras, proprio_fn, instruction

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.config.name for c in self.cameras)

    def start(self) -> CameraSet:
        started: list[OpenCVCamera] = []
        try:
            for cam in self.cameras:
                started.append(cam.start())
        except BaseException:
            for cam in started:
                cam.close()
            raise
        return self

    def check(self) -> None:
        """Every camera's :meth:`OpenCVCamera.check` (the loop calls it every tick the arm runs)."""
        for c in self.cameras:
            c.check()

    def observe(self, state: RobotState) -> Observation:
        images = {c.config.name: c.latest()[0] for c in self.cameras}
        proprio = np.asarray(self.proprio_fn(state), np.float32)
        return Observation(images, proprio, self.instruction, state.t_s)

    def close(self) -> None:
        for cam in self.cameras:
            cam.close()


def is_video_file(source: str) -> bool:
    """A source that names an existing regular file (a recording, not a device node or a stream URL)."""
    from pathlib import Path

    try:
        return Path(source).is_file()
    except OSError:
        return False


def _default_proprio(state: RobotState) -> np.ndarray:
    """[q (n), qd (n), gripper] from the robot state."""
    return np.concatenate([state.q_rad, state.qd_rad_s, [state.gripper]]).astype(np.float32)
