"""OpenCVCamera: background grab thread, latest frame, stale and frozen detection. Uses a synthetic
capture object and a real ``cv2.VideoCapture`` on a generated video file; a real camera only if
one is present."""

import os
import threading
import time

import numpy as np
import pytest

from drivers.opencv_camera import (
    CameraError,
    CameraSet,
    CameraStale,
    OpenCVCamera,
    OpenCVCameraConfig,
)
from edge.contracts import ObservationSource, RobotState

STATE = RobotState(0.0, np.zeros(7), np.zeros(7), 0.5)


class SyntheticCapture:
    """TEST FIXTURE with the ``cv2.VideoCapture`` surface: a new noisy BGR frame every 10 ms;
    ``freeze`` repeats the last one, ``unplug`` makes ``read`` fail."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.freeze = threading.Event()
        self.unplug = threading.Event()
        self.frame = None

    def isOpened(self) -> bool:
        return True

    def read(self):
        time.sleep(0.01)
        if self.unplug.is_set():
            return False, None
        if self.frame is None or not self.freeze.is_set():
            self.frame = self.rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
        return True, self.frame

    def release(self) -> None:
        pass


def test_latest_frame_then_frozen_then_stale():
    cap = SyntheticCapture()
    cfg = OpenCVCameraConfig(width=32, height=24, max_frame_age_s=0.1, max_frozen_s=0.1, instruction="stack")
    cam = OpenCVCamera(cfg, capture_factory=lambda: cap).start()
    try:
        assert isinstance(cam, ObservationSource)
        obs = cam.observe(STATE)
        assert obs.images["front"].shape == (24, 32, 3) and obs.images["front"].dtype == np.uint8
        assert obs.instruction == "stack" and obs.proprio.shape == (15,)
        cap.freeze.set()
        time.sleep(0.25)
        with pytest.raises(CameraStale, match="unchanged"):
            cam.observe(STATE)
        cap.freeze.clear()
        deadline = time.monotonic() + 2.0  # recovers once frames change again (the grab thread's next frame)
        while True:
            try:
                cam.observe(STATE)
                break
            except CameraStale:
                assert time.monotonic() < deadline, "the camera did not recover within 2 s of changing frames"
                time.sleep(0.01)
        cap.unplug.set()
        time.sleep(0.25)
        with pytest.raises(CameraStale, match="old"):
            cam.observe(STATE)
        assert cam.read_failures > 0
    finally:
        cam.close()


def test_real_videocapture_on_a_generated_file(tmp_path):
    cv2 = pytest.importorskip("cv2")
    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (64, 48))
    if not writer.isOpened():
        pytest.skip("this OpenCV build cannot write MJPG/AVI")
    rng = np.random.default_rng(1)
    for _ in range(300):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    cam = OpenCVCamera(OpenCVCameraConfig(source=path, width=32, height=32, max_frame_age_s=1.0)).start()
    try:
        assert cam.observe(STATE).images["front"].shape == (32, 32, 3)
    finally:
        cam.close()


def test_a_video_file_plays_at_its_frame_rate_then_goes_stale(tmp_path):
    """A recording stands in for a camera as it was filmed: 10 frames at 20 fps last half a second (read as
    fast as they decode they would be gone at once), then the stream ends and the frame ages."""
    cv2 = pytest.importorskip("cv2")
    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 20.0, (32, 32))
    rng = np.random.default_rng(2)
    for _ in range(10):
        writer.write(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8))
    writer.release()
    cam = OpenCVCamera(OpenCVCameraConfig(source=path, width=32, height=32, max_frame_age_s=0.3)).start()
    try:
        t0 = time.monotonic()
        seen = set()
        while time.monotonic() - t0 < 1.5:
            with cam._lock:  # every frame's capture time as it lands (not judged stale or not)
                seen.add(cam._frame_t_s)
            time.sleep(0.005)
        played = max(seen) - min(seen)
        assert len(seen) >= 5 and 0.25 <= played <= 0.8, (len(seen), played)  # 9 frame periods of 50 ms
        with pytest.raises(CameraStale, match="old"):  # the last frame came about 1 s ago
            cam.latest()
    finally:
        cam.close()


def test_a_camera_set_observes_every_camera_and_opens_all_or_none():
    caps = [SyntheticCapture(), SyntheticCapture()]
    cams = [OpenCVCamera(OpenCVCameraConfig(name=n, width=16, height=16), capture_factory=lambda c=c: c)
            for n, c in zip(("front", "wrist"), caps, strict=True)]
    rig = CameraSet(cams, lambda s: np.asarray(s.q_rad, np.float32), "stack the red block").start()
    try:
        obs = rig.observe(STATE)
        assert set(obs.images) == {"front", "wrist"} and obs.images["wrist"].shape == (16, 16, 3)
        assert obs.instruction == "stack the red block" and obs.proprio.shape == (7,) and rig.names == ("front", "wrist")
        caps[1].unplug.set()
        time.sleep(0.6)
        with pytest.raises(CameraStale, match="'wrist': newest frame"):
            rig.observe(STATE)
    finally:
        rig.close()
    bad = OpenCVCamera(OpenCVCameraConfig(name="wrist", source="/dev/does-not-exist"))
    good = OpenCVCamera(OpenCVCameraConfig(name="front"), capture_factory=SyntheticCapture)
    with pytest.raises(CameraError, match="cannot open camera"):
        CameraSet([good, bad], lambda s: s.q_rad).start()
    assert good._stop.is_set()  # the camera opened first was closed again
    with pytest.raises(CameraError, match="distinct name"):
        CameraSet([OpenCVCamera(OpenCVCameraConfig()), OpenCVCamera(OpenCVCameraConfig())], lambda s: s.q_rad)


def test_missing_device_is_a_clear_error():
    with pytest.raises(CameraError, match="cannot open camera"):
        OpenCVCamera(OpenCVCameraConfig(source="/dev/does-not-exist")).start()


@pytest.mark.skipif(not os.path.exists("/dev/video0"), reason="no camera at /dev/video0 on this machine")
def test_real_camera():
    cam = OpenCVCamera(OpenCVCameraConfig(source="0")).start()
    try:
        assert cam.observe(STATE).images["front"].shape == (96, 96, 3)
    finally:
        cam.close()
