"""The device cost model: FLOP counts against closed forms, the roofline formula, the host fit,
and the clock's ``device`` latency model."""

import math

import pytest
import torch
from torch import nn

from edge.clock import LatencyConfig, make_latency_model
from edge.config import ConfigError
from edge.errors import EdgeError
from edge.profiler.device_model import (
    DEVICES,
    CostProfile,
    DeviceSpec,
    PartCost,
    fit_host,
    get_device,
    part_time_s,
    project_run,
    query_time_s,
)
from edge.profiler.flops import count, count_checkpoint, count_model
from edge.vla.action_expert import AdaLNBlock


def test_flop_count_of_a_known_layer_stack_equals_the_closed_form():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)  # (1, 3, 8, 8) -> (1, 4, 4, 4)
    head = nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 10))
    x = torch.randn(1, 3, 8, 8)
    part = count(lambda: head(conv(x).flatten(1)))
    conv_flops = 2 * (4 * 4 * 4) * (3 * 3 * 3)  # 2 x outputs x (C_in x kh x kw)
    lin_flops = 2 * 64 * 32 + 2 * 32 * 10
    assert part.flops == conv_flops + lin_flops
    assert part.weight_elems == (4 * 27 + 4) + (64 * 32 + 32) + (32 * 10 + 10)
    assert part.kernels == 3 and part.ops >= 4  # + the GELU


def test_attention_matmuls_are_counted():
    d, heads, n, mlp = 8, 2, 5, 2.0
    block = AdaLNBlock(d, heads, mlp)
    part = count(lambda: block(torch.randn(1, n, d), torch.randn(1, d)))
    hidden = int(d * mlp)
    linear = 2 * d * 6 * d + 2 * n * d * 3 * d + 2 * n * d * d + 2 * n * d * hidden + 2 * n * hidden * d
    attention = 2 * (2 * heads * n * n * (d // heads))  # q @ k^T and att @ v
    assert part.flops == linear + attention == 6688


def test_shipped_checkpoint_parts_are_counted():
    p = count_checkpoint("edge/vla/checkpoints/stack", verify=False)
    assert p.parameters > 1_000_000 and p.locator is not None
    assert 1e7 < p.encoder.flops < 1e9 and 1e6 < p.step.flops < p.encoder.flops
    assert p.step.weight_elems > 0.5 * sum(x.numel() for x in _expert_params())
    assert CostProfile.from_json(p.to_json()) == p


def _expert_params():
    from edge.vla.checkpoint import load_model

    return load_model("edge/vla/checkpoints/stack", verify=False).expert.parameters()


def test_roofline_formula_and_projection():
    dev = DeviceSpec("t", "test", fp32_tflops=1.0, fp16_tflops=2.0, bandwidth_gb_s=10.0, power_w=20.0,
                     launch_overhead_us=10.0, efficiency=0.5)
    part = PartCost(flops=1e9, weight_elems=1e6, act_elems=1e6, kernels=7, ops=20)
    # compute 1e9 / (2e12 * 0.5) = 1 ms; memory 2e6 * 2 B / 10e9 = 0.4 ms; launches 70 us
    assert part_time_s(part, dev) == pytest.approx(1e-3 + 7e-5)
    slow_mem = DeviceSpec(**{**dev.__dict__, "bandwidth_gb_s": 1.0})  # memory 4 ms binds
    assert part_time_s(part, slow_mem) == pytest.approx(4e-3 + 7e-5)
    prof = CostProfile(part, PartCost(flops=2e8, kernels=3), PartCost(flops=1e9))
    t = query_time_s(prof, dev, 4)
    assert t == pytest.approx(part_time_s(part, dev) + 4 * (2e-4 + 3e-5))
    r = project_run(prof, dev, queries=10, nfe=40, episodes=1, executed=80)
    assert r["total_s"] == pytest.approx(10 * part_time_s(part, dev) + 40 * (2e-4 + 3e-5) + 1e-3)
    assert r["mj_per_action"] == pytest.approx(1e3 * r["total_s"] * 20.0 / 80)


def test_fit_host_recovers_efficiency_and_overhead():
    cpu = DEVICES["x86-cpu"]
    prof = CostProfile(PartCost(flops=7e7, ops=150), PartCost(flops=1.4e7, ops=90))
    true = DeviceSpec(**{**cpu.__dict__, "efficiency": 0.6, "launch_overhead_us": 6.0, "bandwidth_gb_s": 1e6})
    measured = {"encoder": part_time_s(prof.encoder, true), "step": part_time_s(prof.step, true)}
    fitted, fit = fit_host(prof, measured, true)
    assert fitted.efficiency == pytest.approx(0.6) and fitted.launch_overhead_us == pytest.approx(6.0)
    with pytest.raises(EdgeError, match="two parts"):
        fit_host(prof, {"encoder": 1e-3}, true)


def test_every_device_is_sourced_and_unknown_names_are_clear():
    for d in DEVICES.values():
        assert d.source and d.assumptions and d.fp16_tflops > 0 and d.power_w > 0
    assert set(DEVICES) >= {"orin-nano", "orin-nx", "agx-orin", "thor", "x86-cpu", "x86-gpu"}
    with pytest.raises(EdgeError, match="orin-nano"):
        get_device("orin-mega")


def test_clock_latency_model_as_if_on_a_device(tiny_ckpt):
    m = make_latency_model(LatencyConfig(kind="device", device="orin-nano", checkpoint=str(tiny_ckpt)))
    prof = count_model(__import__("edge.vla.checkpoint", fromlist=["load_model"]).load_model(tiny_ckpt))
    dev = DEVICES["orin-nano"]
    assert m.sample(3) == pytest.approx(part_time_s(prof.encoder, dev) + 3 * part_time_s(prof.step, dev))
    assert m.sample(10) > m.sample(1) > 0 and math.isfinite(m.sample(10))
    with pytest.raises(ConfigError, match="device"):
        LatencyConfig(kind="device", device="orin-mega")
