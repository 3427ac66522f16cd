"""Shapes, elastic sampling (per-sample K), noise determinism and float32 integration state."""

import numpy as np
import pytest
import torch

from edge.backends.base import steps_per_row
from edge.backends.torch_backend import TorchBackend
from edge.errors import EdgeError
from edge.export import example_inputs
from edge.vla.model import VLAConfig, VLAModel

CONFIG = VLAConfig(conv_channels=(8, 16), keypoints=4, d_model=32, d_lang=8, d_proprio=8,
                   expert_layers=1, expert_heads=2, mlp_ratio=2.0)


@pytest.fixture
def backend(make_spec):
    torch.manual_seed(0)
    spec = make_spec(action_layout="ee_delta", action_mean=(0.01, 0.0, -0.01, 0.0, 0.5),
                     action_std=(0.02, 0.02, 0.02, 0.1, 0.5))
    model = VLAModel(CONFIG, spec)
    with torch.no_grad():  # move the zero-initialised gates so the velocity depends on everything
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return TorchBackend(model, seed=0)


def test_encode_and_step_shapes(backend):
    feats = backend.encode(example_inputs(backend.spec, batch=3))
    assert feats.shape == (3, 32) and feats.dtype == np.float32
    v = backend.denoise_step(np.zeros((3, 16, 5), np.float32), 0.5, feats)
    assert v.shape == (3, 16, 5) and v.dtype == np.float32
    chunk = backend.sample(feats, num_steps=4)
    assert chunk.shape == (3, 16, 5) and chunk.dtype == np.float32


def test_fresh_expert_predicts_zero_velocity(make_spec):
    model = VLAModel(CONFIG, make_spec())
    v = model.denoise_step(torch.randn(2, 16, 5), torch.rand(2), torch.randn(2, 32))
    assert torch.count_nonzero(v) == 0  # adaLN-zero: training starts from the identity flow


def test_same_noise_same_chunk_and_noise_steers_the_sample(backend):
    feats = backend.encode(example_inputs(backend.spec, batch=1))
    noise = np.random.default_rng(1).standard_normal((1, 16, 5)).astype(np.float32)
    a = backend.sample(feats, noise, num_steps=5)
    np.testing.assert_array_equal(a, backend.sample(feats, noise.copy(), num_steps=5))
    assert not np.allclose(a, backend.sample(feats, -noise, num_steps=5))


def test_euler_matches_a_hand_written_loop(backend):
    feats = backend.encode(example_inputs(backend.spec, batch=1))
    x = np.random.default_rng(2).standard_normal((1, 16, 5)).astype(np.float32)
    noise = x.copy()
    for i in range(3):
        x = x + np.float32(1 / 3) * backend.denoise_step(x, i / 3, feats)
    mean, std = backend.spec.action_stats()
    np.testing.assert_allclose(backend.sample(feats, noise, 3), x * std + mean, atol=1e-6)


def test_per_sample_steps_equal_separate_calls(backend):
    feats = backend.encode(example_inputs(backend.spec, batch=3))
    noise = np.random.default_rng(3).standard_normal((3, 16, 5)).astype(np.float32)
    ks = [1, 4, 10]
    batched = backend.sample(feats, noise, num_steps=ks)
    for b, k in enumerate(ks):
        alone = backend.sample(feats[b : b + 1], noise[b : b + 1], num_steps=k)
        np.testing.assert_allclose(batched[b], alone[0], atol=1e-5)
    assert not np.allclose(batched[0], backend.sample(feats, noise, num_steps=10)[0])


def test_reduced_precision_keeps_float32_state(backend):
    model = VLAModel(CONFIG, backend.spec)
    model.load_state_dict(backend.model.state_dict())
    bf16 = TorchBackend(model, precision="bf16")
    inputs = example_inputs(backend.spec, batch=2)
    feats = backend.encode(inputs)
    noise = np.random.default_rng(4).standard_normal((2, 16, 5)).astype(np.float32)
    ref = backend.sample(feats, noise, 10)
    low = bf16.sample(feats, noise, 10)
    assert low.dtype == np.float32
    assert np.abs(low - ref).max() < 0.1 * np.abs(ref).max()  # bf16 network, f32 accumulation


def test_bad_inputs_name_what_is_wrong(backend):
    inputs = example_inputs(backend.spec, batch=1)
    with pytest.raises(EdgeError, match="missing \\['lang'\\]"):
        backend.encode({k: v for k, v in inputs.items() if k != "lang"})
    with pytest.raises(EdgeError, match="'front': got float32"):
        backend.encode({**inputs, "front": inputs["front"].astype(np.float32)})
    feats = backend.encode(inputs)
    with pytest.raises(EdgeError, match="noise must be"):
        backend.sample(feats, np.zeros((1, 8, 5), np.float32))
    with pytest.raises(EdgeError, match=">= 1"):
        backend.sample(feats, num_steps=0)
    with pytest.raises(EdgeError, match="one per row"):
        steps_per_row([2, 3], batch=3)


def test_aux_head_can_read_the_front_trunk_alone(make_spec):
    import dataclasses

    spec = make_spec()
    torch.manual_seed(0)
    model = VLAModel(dataclasses.replace(CONFIG, aux_outputs=6, aux_source="front"), spec).eval()
    inputs = {k: torch.from_numpy(v) for k, v in example_inputs(spec, batch=2).items()}
    images = {c: inputs[c] for c in model.config.cameras}
    with torch.no_grad():
        feats, aux_in = model.encode_with_aux_input(images, inputs["proprio"], inputs["lang"])
        assert torch.equal(feats, model.encode(images, inputs["proprio"], inputs["lang"]))
        front = model.trunks["front"](images["front"], model.lang_proj(inputs["lang"]))
        assert torch.allclose(aux_in, front)
        # pixels only: changing proprio moves the features but not what the aux head reads
        _, aux_other = model.encode_with_aux_input(images, inputs["proprio"] + 5.0, inputs["lang"])
        assert torch.allclose(aux_other, aux_in)
    fused = VLAModel(dataclasses.replace(CONFIG, aux_outputs=6), spec).eval()
    with torch.no_grad():
        f, a = fused.encode_with_aux_input(images, inputs["proprio"], inputs["lang"])
    assert a is f


def test_object_token_is_pixels_only_gradient_stopped_and_relative_to_the_tcp(make_spec):
    import dataclasses

    from edge.config import ConfigError

    with pytest.raises(ConfigError, match="aux_source=front"):
        dataclasses.replace(CONFIG, aux_outputs=6, object_token=True)
    layout = ("q0_rad", "tcp_x_m", "tcp_y_m", "tcp_z_m")
    spec = make_spec(proprio_layout=layout, proprio_dim=4, proprio_mean=(0.0,) * 4, proprio_std=(1.0,) * 4)
    config = dataclasses.replace(CONFIG, aux_outputs=6, aux_source="front", object_token=True)
    torch.manual_seed(0)
    model = VLAModel(config, spec)
    model.set_aux_stats(torch.tensor([0.5, 0.0, 0.02] * 2), torch.tensor([0.1, 0.1, 0.01] * 2))
    assert model._tcp_index == [1, 2, 3]
    assert model.token_proj[0].in_features == 12  # 2 objects x (position, offset from the TCP)
    inputs = {k: torch.from_numpy(v) for k, v in example_inputs(spec, batch=2).items()}
    images = {c: inputs[c] for c in config.cameras}
    # the token sees the TCP: moving it changes the features through the offsets even when the
    # proprio MLP is blind to it
    with torch.no_grad():
        model.proprio_mlp[0].weight.zero_()
        a = model.encode(images, inputs["proprio"], inputs["lang"])
        moved = inputs["proprio"].clone()
        moved[:, 1] += 0.1
        b = model.encode(images, moved, inputs["lang"])
    assert not torch.allclose(a, b)
    # the flow loss alone sends no gradient into the aux head: only the aux loss trains the token
    feats = model.encode(images, inputs["proprio"], inputs["lang"])
    feats.sum().backward()
    assert model.aux_head.weight.grad is None or float(model.aux_head.weight.grad.abs().max()) == 0.0
    assert model.token_proj[0].weight.grad is not None


def test_object_token_needs_object_outputs(make_spec):
    import dataclasses

    with pytest.raises(ValueError, match="aux_outputs"):
        VLAModel(dataclasses.replace(CONFIG, aux_source="front", object_token=True), make_spec())


def test_hand_frame_offsets_and_the_wrist_token_rotation_invert_each_other():
    import math

    from edge.vla.model import hand_frame_offsets, quat_to_matrix

    yaw = 0.7  # pointing down (180 deg about x), then turned by yaw about the world z axis
    q = torch.tensor([[0.0, math.cos(yaw / 2), math.sin(yaw / 2), 0.0]])
    rot = quat_to_matrix(q)[0]
    assert torch.allclose(rot @ rot.T, torch.eye(3), atol=1e-6)
    assert torch.allclose(rot[:, 2], torch.tensor([0.0, 0.0, -1.0]), atol=1e-6)  # TCP z points down
    tcp = torch.tensor([[0.5, 0.1, 0.2]])
    objects = torch.tensor([[0.53, 0.08, 0.02, 0.4, -0.1, 0.02]])
    local = hand_frame_offsets(objects, tcp, q).view(2, 3)
    assert float(local[0, 2]) == pytest.approx(1.8, abs=1e-5)  # 18 cm below the TCP, in dm, along +z
    back = (rot @ local.T).T / 10.0 + tcp  # what the token computes, in metres
    assert torch.allclose(back.flatten(), objects[0], atol=1e-6)


def test_wrist_token_is_gradient_stopped_and_turns_with_the_hand(make_spec):
    import dataclasses

    from edge.config import ConfigError
    from edge.training.vla.synthetic import PROPRIO_LAYOUT

    with pytest.raises(ConfigError, match="wrist_token"):
        dataclasses.replace(CONFIG, aux_outputs=6, aux_source="front", object_token=True, wrist_token=True)
    n = len(PROPRIO_LAYOUT)
    spec = make_spec(proprio_layout=PROPRIO_LAYOUT, proprio_dim=n, proprio_mean=(0.0,) * n,
                     proprio_std=(1.0,) * n, cameras=("front", "wrist"))
    config = dataclasses.replace(CONFIG, cameras=("front", "wrist"), aux_outputs=6, aux_source="front",
                                 object_token=True, wrist_token=True)
    torch.manual_seed(0)
    model = VLAModel(config, spec)
    assert model.token_proj[0].in_features == 18  # + 2 objects x wrist offset
    inputs = {k: torch.from_numpy(v) for k, v in example_inputs(spec, batch=2).items()}
    images = {c: inputs[c] for c in config.cameras}
    proprio = inputs["proprio"].clone()
    proprio[:, 18:22] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # pointing down, yaw 0
    turned = proprio.clone()
    turned[:, 18:22] = torch.tensor([0.0, 0.0, 1.0, 0.0])  # the same, turned 180 deg about z
    with torch.no_grad():
        # only the wrist part of the token may see the quaternion: blind the proprio MLP
        model.proprio_mlp[0].weight.zero_()
        a = model.encode(images, proprio, inputs["lang"])
        b = model.encode(images, turned, inputs["lang"])
    assert not torch.allclose(a, b)
    feats = model.encode(images, proprio, inputs["lang"])
    feats.sum().backward()
    assert model.wrist_head.weight.grad is None or float(model.wrist_head.weight.grad.abs().max()) == 0.0


def test_scene_memory_moved_feeds_the_moved_blocks_memory_and_grows_from_a_model_without_it(make_spec):
    import dataclasses

    from edge.config import ConfigError
    from edge.training.vla.train import load_grown

    with pytest.raises(ConfigError, match="scene_memory_moved"):
        dataclasses.replace(CONFIG, aux_outputs=6, aux_source="front", object_token=True, scene_memory_moved=True)
    layout = ("q0_rad", "tcp_x_m", "tcp_y_m", "tcp_z_m")
    spec = make_spec(proprio_layout=layout, proprio_dim=4, proprio_mean=(0.0,) * 4, proprio_std=(1.0,) * 4,
                     scene_memory=True)
    base_cfg = dataclasses.replace(CONFIG, aux_outputs=6, aux_source="front", object_token=True,
                                   scene_memory=True, locator_channels=(4, 8))
    torch.manual_seed(0)
    old = VLAModel(base_cfg, spec)
    new = VLAModel(dataclasses.replace(base_cfg, scene_memory_moved=True), spec)
    for m in (old, new):
        m.set_aux_stats(torch.tensor([0.5, 0.0, 0.02] * 2), torch.tensor([0.1, 0.1, 0.01] * 2))
    assert new.token_proj[0].in_features == old.token_proj[0].in_features + 6  # memory + its TCP offset
    grown = load_grown(new, old.state_dict(), source="test")
    assert grown == ["token_proj.0.weight (12 -> 18 inputs)"]
    inputs = {k: torch.from_numpy(v) for k, v in example_inputs(spec, batch=2).items()}
    images = {c: inputs[c] for c in base_cfg.cameras}
    scene = torch.tensor([[0.45, 0.05, 0.02, 0.6, -0.1, 0.02]] * 2)
    other = scene.clone()
    other[:, 0] += 0.05  # only the moved block's memory differs
    with torch.no_grad():
        # grown with zero columns: the same features as the model it grew from
        assert torch.allclose(new.encode(images, inputs["proprio"], inputs["lang"], scene),
                              old.encode(images, inputs["proprio"], inputs["lang"], scene), atol=1e-6)
        # the old model ignores the moved block's memory; the new one, once trained, reads it
        assert torch.equal(old.encode(images, inputs["proprio"], inputs["lang"], scene),
                           old.encode(images, inputs["proprio"], inputs["lang"], other))
        new.token_proj[0].weight.add_(0.1)
        assert not torch.allclose(new.encode(images, inputs["proprio"], inputs["lang"], scene),
                                  new.encode(images, inputs["proprio"], inputs["lang"], other))
