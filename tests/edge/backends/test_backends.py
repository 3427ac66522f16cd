"""Backend selection, provider fallback and torch/onnxruntime agreement."""

import logging

import numpy as np
import pytest

from edge.backends import BackendConfig, BackendUnavailable, availability, make_backend
from edge.errors import EdgeError
from edge.export import example_inputs


def test_availability_reports_every_backend_with_a_reason():
    status = availability()
    assert set(status) == {"torch", "onnxruntime", "tensorrt"}
    assert status["torch"] == "" and status["onnxruntime"] == ""
    assert "gpu extra" in status["tensorrt"] or "not implemented" in status["tensorrt"]


def test_unknown_or_unavailable_backend_lists_what_is_available(tiny_ckpt):
    with pytest.raises(BackendUnavailable, match="unknown backend 'jax'.*available here: torch, onnxruntime"):
        make_backend("jax", tiny_ckpt)
    with pytest.raises(BackendUnavailable, match="'tensorrt' is not available.*Jetson or an NVIDIA GPU"
                       ".*Available here: torch, onnxruntime"):
        make_backend("tensorrt", tiny_ckpt)
    with pytest.raises(Exception, match="choose one of"):
        BackendConfig(name="tflite")


def test_onnxruntime_falls_back_to_cpu_with_a_logged_reason(tiny_ckpt, caplog):
    caplog.set_level(logging.WARNING)
    cfg = BackendConfig(name="onnxruntime", providers=("tensorrt", "cuda", "cpu"), threads=1)
    b = make_backend(cfg, tiny_ckpt)
    assert b.providers == ["CPUExecutionProvider"] and b.device == "cpu"
    if "TensorrtExecutionProvider" not in b._ort.get_available_providers():
        assert "TensorrtExecutionProvider is not in this onnxruntime build" in caplog.text
        assert b.describe()["fallback_reasons"]
    with pytest.raises(BackendUnavailable, match="fp32 export"):
        make_backend(BackendConfig(name="onnxruntime", precision="fp16"), tiny_ckpt)


def test_torch_and_onnxruntime_sample_the_same_chunks(tiny_ckpt):
    tb = make_backend(BackendConfig(name="torch"), tiny_ckpt)
    ob = make_backend(BackendConfig(name="onnxruntime", threads=1), tiny_ckpt)  # cached export
    assert not (tiny_ckpt / "onnx").exists()  # exported into the cache, never into the checkpoint
    inputs = example_inputs(tb.spec, batch=3, seed=7)
    ft, fo = tb.encode(inputs), ob.encode(inputs)
    np.testing.assert_allclose(ft, fo, atol=1e-4)
    noise = np.random.default_rng(0).standard_normal((3, 16, 5)).astype(np.float32)
    for ks in (10, [1, 3, 10]):  # per-sample K on both
        np.testing.assert_allclose(tb.sample(ft, noise, ks), ob.sample(ft, noise, ks), atol=1e-4)
    assert ob.sample(ft, noise, 4).dtype == np.float32


def test_noise_generator_is_seeded_per_backend(tiny_ckpt):
    a = make_backend(BackendConfig(name="torch", seed=5), tiny_ckpt)
    b = make_backend(BackendConfig(name="torch", seed=5), tiny_ckpt)
    feats = a.encode(example_inputs(a.spec, batch=1))
    np.testing.assert_array_equal(a.sample(feats, num_steps=2), b.sample(feats, num_steps=2))


def test_torch_backend_needs_the_checkpoint_not_the_export(tiny_ckpt):
    from edge.export import ensure_export

    with pytest.raises(EdgeError, match="needs the checkpoint"):
        make_backend("torch", ensure_export(tiny_ckpt))


@pytest.mark.slow  # inductor compiles C++ for ~80 s on 2 cores
def test_torch_compile_flag_runs_or_falls_back(tiny_ckpt):
    pytest.importorskip("torch")
    b = make_backend(BackendConfig(name="torch", compile=True), tiny_ckpt)
    feats = b.encode(example_inputs(b.spec, batch=1))
    assert b.sample(feats, num_steps=2).shape == (1, 16, 5)
    assert b.describe()["compiled"] in (True, False)


def test_onnxruntime_cpu_step_with_io_binding_equals_a_plain_run(tiny_ckpt):
    ob = make_backend(BackendConfig(name="onnxruntime", threads=1), tiny_ckpt)
    rng = np.random.default_rng(3)
    for batch in (1, 2, 1):  # one binding per shape, reused
        x = rng.standard_normal((batch, 16, 5)).astype(np.float32)
        t = np.full(batch, 0.3, np.float32)
        f = rng.standard_normal((batch, ob.spec.feature_dim)).astype(np.float32)
        want = ob._stp.run(["velocity"], {"x": x, "t": t, "features": f})[0]
        got = ob._step(x, t, f)
        np.testing.assert_allclose(got, want, atol=1e-6)
        got[...] = np.nan  # the caller's copy, not the bound output buffer
        np.testing.assert_allclose(ob._step(x, t, f), want, atol=1e-6)
    assert len(ob._bindings) == 2
