"""Backends come from a lazy registry: the built-in names, or a user's own 'pkg.module:factory'."""

import pytest

from edge.backends import BACKEND_FACTORIES, BACKENDS, BackendConfig, make_backend
from edge.backends.base import BackendUnavailable
from edge.config import ConfigError


def test_builtin_names_are_the_registry_and_resolve_lazily():
    assert BACKENDS == ("torch", "onnxruntime", "tensorrt") == BACKEND_FACTORIES.names()
    assert callable(BACKEND_FACTORIES.resolve("onnxruntime"))


def test_unknown_names_are_refused_with_the_choices():
    with pytest.raises(ConfigError, match="name='cuda' is not allowed.*'torch'.*pkg.module:factory"):
        BackendConfig(name="cuda")
    with pytest.raises(BackendUnavailable, match="unknown backend 'cuda'"):
        make_backend("cuda", "nowhere")


def test_a_users_own_backend_runs_a_session(tmp_path):
    from edge.runtime import RuntimeConfig, run_session
    from edge.training.vla.synthetic import tiny_checkpoint
    from tests import fakes

    ckpt = tiny_checkpoint(tmp_path, steps=2)
    fakes.CUSTOM_BACKEND_CALLS.clear()
    cfg = RuntimeConfig.of(checkpoint=str(ckpt), backend="tests.fakes:counting_backend", episodes=1,
                           max_steps=8, num_steps=1, execute=4, execution="sync", latency="constant",
                           video_episodes=0, record_ticks=False)
    res = run_session(cfg, None, progress=False)
    assert res.episodes[0]["queries"] >= 2
    assert len(fakes.CUSTOM_BACKEND_CALLS) >= res.episodes[0]["queries"]
    assert set(fakes.CUSTOM_BACKEND_CALLS) == {"tests.fakes:counting_backend"}
    with pytest.raises(Exception, match="no callable 'nope'"):
        make_backend("tests.fakes:nope", ckpt)
