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


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_is_keyboard_interrupt():
    """The Ctrl-C tests send SIGINT (or ``_thread.interrupt_main``) and expect KeyboardInterrupt, as at a
    terminal; a test run started as a background job (``make test &``, nohup) inherits SIGINT ignored, where
    neither would arrive. Give SIGINT Python's own handler for the session, as an interactive shell has."""
    import signal

    old = signal.getsignal(signal.SIGINT)
    if old is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if old is signal.SIG_IGN:
        signal.signal(signal.SIGINT, old)
