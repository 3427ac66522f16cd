import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

try:  # property tests judge results, not speed: no per-example deadline (a loaded CI machine stalls 100s of ms)
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("edge", deadline=None)
    _hypothesis_settings.load_profile("edge")
except ImportError:
    pass


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Benchmark mains and trainers set torch's process-wide thread count; give it back after each test,
    so no test's numbers or timing depend on which test ran before it."""
    import torch

    before = torch.get_num_threads()
    yield
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)


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


@pytest.fixture
def sync_calls(monkeypatch):
    """The fsyncs ("file" / "dir") and renames (target name) made while the test runs, in order."""
    import os
    import stat

    calls: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"))
        real_fsync(fd)

    def replace(a, b):
        calls.append(("replace", os.path.basename(b)))
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return calls
