import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


@pytest.fixture(autouse=True, scope="session")
def _export_cache(tmp_path_factory):
    """ONNX exports made on the fly (onnxruntime backend) go to a per-session cache, not ~/.cache."""
    old = os.environ.get("EDGE_CACHE_DIR")
    os.environ["EDGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("edge-cache"))
    yield
    if old is None:
        os.environ.pop("EDGE_CACHE_DIR", None)
    else:
        os.environ["EDGE_CACHE_DIR"] = old
