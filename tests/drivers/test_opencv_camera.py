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
        time.sleep(0.05)
        cam.observe(STATE)  # recovers once frames change again
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
