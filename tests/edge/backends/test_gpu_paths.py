"""The GPU code paths, checked on CPU: the torch device loop (CUDA graphs skipped here) and the
TensorRT backend's host-side loop driven by stand-in engines. Neither has run on a GPU in this tier."""

import copy

import numpy as np
import pytest
import torch

from edge.backends import BackendConfig, BackendUnavailable, make_backend
from edge.backends.base import euler_schedule
from edge.backends.tensorrt_backend import TensorRTBackend, unavailable_reason
from edge.backends.torch_backend import TorchBackend
from edge.backends.torch_cuda import TorchCudaBackend
from edge.export import example_inputs


@pytest.fixture(scope="module")
def model(tiny_ckpt):
    from edge.vla.checkpoint import load_model

    return load_model(tiny_ckpt)


@pytest.fixture(scope="module")
def case(model):
    ref = TorchBackend(copy.deepcopy(model))
    feats = ref.encode(example_inputs(ref.spec, batch=3, seed=11))
    noise = np.random.default_rng(1).standard_normal((3, ref.spec.chunk_len, ref.spec.action_dim),
                                                     dtype=np.float32)
    return ref, feats, noise


def test_euler_schedule_matches_the_base_loop():
    order, steps = euler_schedule(np.array([2, 5, 1, 5]))
    assert order.tolist() == [1, 3, 0, 2]
    assert [n for n, _, _ in steps] == [4, 3, 2, 2, 2]
    _, t, dt = steps[1]
    np.testing.assert_array_equal(t, np.array([1 / 5, 1 / 5, 1 / 2], np.float32))
    np.testing.assert_array_equal(dt, np.array([1 / 5, 1 / 5, 1 / 2], np.float32))


def test_device_loop_on_cpu_gives_the_same_chunks_as_torch_fp32(model, case):
    ref, feats, noise = case
    new = TorchCudaBackend(copy.deepcopy(model), device="cpu", cuda_graphs=False)
    for k in (1, 4, 10):
        np.testing.assert_array_equal(new.sample(feats, noise, k), ref.sample(feats, noise, k))
    np.testing.assert_allclose(new.sample(feats, noise, [1, 3, 10]), ref.sample(feats, noise, [1, 3, 10]),
                               rtol=0, atol=1e-6)
    a = TorchCudaBackend(copy.deepcopy(model), seed=3, cuda_graphs=False)
    b = TorchBackend(copy.deepcopy(model), seed=3)
    np.testing.assert_array_equal(a.sample(feats[:1], num_steps=2), b.sample(feats[:1], num_steps=2))


def test_cuda_graphs_are_skipped_on_cpu_with_a_reason(model):
    b = TorchCudaBackend(copy.deepcopy(model), device="cpu", cuda_graphs=True)
    assert not b.cuda_graphs and "not a CUDA device" in b.graph_skip_reason
    d = b.describe()
    assert d["cuda_graphs"] is False and d["graphs_captured"] == [] and "CUDA graphs" in d["graph_skip_reason"]
    assert "disabled" in TorchCudaBackend(copy.deepcopy(model), cuda_graphs=False).graph_skip_reason
    assert b.prepare([1, 2, 4]) == []  # nothing to capture on CPU; the loop just runs


def test_reduced_precision_network_keeps_a_float32_state(model, case):
    ref, feats, noise = case
    k = 10
    low = TorchCudaBackend(copy.deepcopy(model), device="cpu", precision="bf16", cuda_graphs=False)
    got = low.sample(feats, noise, k)
    exact = ref.sample(feats, noise, k)
    assert got.dtype == np.float32
    assert np.abs(got - exact).max() < 0.1 * np.abs(exact).max()  # bf16 network, bounded error
    # the loop is exactly: x (float32) += dt * float32(net_bf16(bf16(x)))
    net = copy.deepcopy(model).to(torch.bfloat16).eval()
    x = torch.from_numpy(noise.copy())
    f = torch.from_numpy(feats).to(torch.bfloat16)
    with torch.no_grad():
        for i in range(k):
            t = torch.full((3,), np.float32(i / k))
            dt = torch.full((3, 1, 1), np.float32(1 / k))
            x = x + dt * net.denoise_step(x.to(torch.bfloat16), t, f).float()
    assert x.dtype == torch.float32
    mean, std = ref.spec.action_stats()
    np.testing.assert_array_equal(got, x.numpy() * std + mean)


def test_make_backend_routes_cuda_devices_to_the_device_loop(tiny_ckpt):
    assert type(make_backend(BackendConfig(name="torch"), tiny_ckpt)) is TorchBackend
    if not torch.cuda.is_available():
        with pytest.raises(BackendUnavailable, match="sees no CUDA GPU"):
            make_backend(BackendConfig(name="torch", device="cuda"), tiny_ckpt)


# --- TensorRT -----------------------------------------------------------------------------------
class FakeEngine:
    """Stands in for TrtEngine: fixed max-batch buffers, ``run(n)`` fills the first n output rows."""

    def __init__(self, fn, inputs, outputs, max_batch):
        self.fn = fn
        self.inputs = {n: torch.zeros((max_batch, *shape), dtype=dt) for n, (shape, dt) in inputs.items()}
        self.outputs = {n: torch.zeros((max_batch, *shape)) for n, shape in outputs.items()}
        self.calls = []

    def run(self, n, stream):
        self.calls.append(n)
        with torch.no_grad():
            out = self.fn(**{name: buf[:n] for name, buf in self.inputs.items()})
        next(iter(self.outputs.values()))[:n].copy_(out)


def fake_trt(model, max_batch):
    spec = model.spec
    h, w = spec.image_hw
    enc_in = {cam: ((h, w, 3), torch.uint8) for cam in spec.cameras}
    enc_in.update(proprio=((spec.proprio_dim,), torch.float32), lang=((spec.lang_dim,), torch.float32))

    def encode(**a):
        return model.encode({c: a[c] for c in spec.cameras}, a["proprio"], a["lang"])

    def step(x, t, features):
        return model.denoise_step(x, t, features)

    chunk = (spec.chunk_len, spec.action_dim)
    engines = {
        "encoder": FakeEngine(encode, enc_in, {"features": (spec.feature_dim,)}, max_batch),
        "denoise_step": FakeEngine(step, {"x": (chunk, torch.float32), "t": ((), torch.float32),
                                          "features": ((spec.feature_dim,), torch.float32)},
                                   {"velocity": chunk}, max_batch),
    }
    return TensorRTBackend._from_engines(spec, engines, max_batch=max_batch), engines


def test_tensorrt_host_loop_integrates_like_the_base_loop(model, case):
    ref, feats, noise = case
    trt, engines = fake_trt(model, max_batch=2)
    inputs = example_inputs(ref.spec, batch=3, seed=11)
    np.testing.assert_allclose(trt.encode(inputs), feats, atol=1e-6)
    assert engines["encoder"].calls == [2, 1]  # batch 3 runs in slices of max_batch
    for ks in (1, 4, [1, 3, 10], [10, 1, 3]):
        np.testing.assert_allclose(trt.sample(feats, noise, ks), ref.sample(feats, noise, ks),
                                   rtol=0, atol=1e-5)
    engines["denoise_step"].calls.clear()
    trt.sample(feats[:2], noise[:2], [1, 3])  # finished rows drop out as a shrinking prefix
    assert engines["denoise_step"].calls == [2, 1, 1]
    x = noise[:2]
    np.testing.assert_allclose(trt.denoise_step(x, 0.3, feats[:2]), ref.denoise_step(x, 0.3, feats[:2]),
                               atol=1e-6)
    assert trt.describe()["engines"] == {"encoder": "given", "denoise_step": "given"}


def test_tensorrt_unavailable_says_why_and_what_to_install(tmp_path):
    reason = unavailable_reason()
    if reason.startswith("tensorrt is not installed"):
        for words in ("JetPack", "pip install tensorrt", "gpu extra", "Jetson or an NVIDIA GPU"):
            assert words in reason
    if reason:
        with pytest.raises(BackendUnavailable, match="backend 'tensorrt' is not available"):
            TensorRTBackend(tmp_path)
