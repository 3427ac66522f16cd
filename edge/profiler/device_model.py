"""Target-device cost model: what one VLA query would cost on a Jetson, a desktop GPU or a CPU.

Per part of a query (the encoder, once per query; one denoising step, K times; the scene locator,
once per episode) the network's work is counted once from the torch module
(:mod:`edge.profiler.flops`): matmul-class FLOPs, the elements it reads and writes, and the kernels
it launches. On a device, a roofline with a launch term::

    t(part) = max(flops / (peak * efficiency), bytes / bandwidth) + launches * launch_overhead
    t(query, K) = t(encoder) + K * t(step)          energy = power * t

``peak``/``bandwidth``/``power`` are the vendors' published figures (sources beside each entry).
``efficiency`` (the fraction of peak a batch-1 network this small reaches) and ``launch_overhead``
are *assumptions* for the accelerators — nothing here was measured on a Jetson — and a fit for
``x86-cpu``, the CPU this project runs on (:func:`fit_host`; measured numbers in
``benchmarks/results/device_calibration.json``). Projections therefore say "as if on an Orin
Nano at its rated clocks, with TensorRT-like fusion", not "measured on one".

No torch, no numpy: the clock's ``device`` latency model (:class:`DeviceLatency`) uses this on the
robot's own tick path configuration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from edge.errors import EdgeError

BYTES = {"fp32": 4, "fp16": 2}


@dataclass(frozen=True)
class DeviceSpec:
    """One target. Peaks are dense (no structured sparsity); ``*_tflops`` are 10^12 FLOP/s."""

    name: str
    title: str
    fp32_tflops: float
    fp16_tflops: float  # tensor cores where the device has them
    bandwidth_gb_s: float  # DRAM, 10^9 B/s
    power_w: float  # the power mode the peaks are quoted for
    launch_overhead_us: float  # per launched kernel (launch + a tiny kernel's minimum run time)
    efficiency: float  # achieved fraction of peak for this model's batch-1 layers
    precision: str = "fp16"  # what a deployment would run (TensorRT fp16 on GPUs)
    launch_unit: str = "kernels"  # kernels (fused graph: TensorRT) | ops (every tensor op: ORT CPU)
    source: str = ""
    assumptions: str = ""

    def peak_flops(self, precision: str | None = None) -> float:
        p = precision or self.precision
        return (self.fp16_tflops if p == "fp16" else self.fp32_tflops) * 1e12


# Published figures. Derived numbers say how they were derived.
DEVICES: dict[str, DeviceSpec] = {d.name: d for d in (
    DeviceSpec(
        "orin-nano", "Jetson Orin Nano 8GB (Super, 25 W)",
        # 1024 CUDA cores x 2 FLOP x 1.02 GHz; fp16 dense = 67 sparse INT8 TOPS / 4
        fp32_tflops=2.09, fp16_tflops=16.7, bandwidth_gb_s=102.0, power_w=25.0,
        launch_overhead_us=20.0, efficiency=0.3,
        source="NVIDIA Jetson Orin Nano Super Developer Kit datasheet (Dec 2024): 1024 CUDA cores, "
               "32 tensor cores, GPU 1020 MHz, 67 INT8 TOPS (sparse), 8 GB 128-bit LPDDR5 102 GB/s, "
               "7-25 W; Jetson Orin Nano Series datasheet DS-11105 (the 40 TOPS / 68 GB/s / 15 W "
               "mode before JetPack 6.1)",
        assumptions="launch 20 us/kernel: GR00T N1.5's deployment README (trtexec FP16, AGX Orin) "
                    "times its 2-3 layer state encoder / action decoder at 0.05 / 0.04 ms "
                    "(shared/research/edge_anchors.md); efficiency 0.3 of tensor-core peak"),
    DeviceSpec(
        "orin-nx", "Jetson Orin NX 16GB (25 W)",
        # 1024 CUDA cores x 2 x 0.918 GHz; fp16 dense: 8 SM x 4 TC x 256 FMA x 2 x 0.918 GHz
        # (= the GPU's 60 of the module's 100 sparse INT8 TOPS, / 4)
        fp32_tflops=1.88, fp16_tflops=15.0, bandwidth_gb_s=102.4, power_w=25.0,
        launch_overhead_us=20.0, efficiency=0.3,
        source="NVIDIA Jetson Orin NX Series datasheet DS-10712: 1024 CUDA cores, 32 tensor cores, "
               "GPU 918 MHz, 100 TOPS (sparse INT8, GPU + 2 DLA), 16 GB 128-bit LPDDR5 102.4 GB/s, "
               "10-25 W",
        assumptions="as orin-nano"),
    DeviceSpec(
        "agx-orin", "Jetson AGX Orin 64GB (MAXN, 60 W)",
        # 2048 CUDA cores x 2 x 1.3 GHz; fp16 dense = the GPU's 170 sparse INT8 TOPS / 4
        fp32_tflops=5.32, fp16_tflops=42.5, bandwidth_gb_s=204.8, power_w=60.0,
        launch_overhead_us=20.0, efficiency=0.3,
        source="NVIDIA Jetson AGX Orin Series Technical Brief v1.2 / datasheet DS-10662: 2048 CUDA "
               "cores, 64 tensor cores, GPU 1.3 GHz, 275 TOPS (GPU 170 sparse INT8 + DLA), 64 GB "
               "256-bit LPDDR5 204.8 GB/s, 15-60 W",
        assumptions="as orin-nano (the GR00T timings were measured on this module)"),
    DeviceSpec(
        "thor", "Jetson AGX Thor T5000 (130 W)",
        # 2560 CUDA cores x 2 x 1.57 GHz; fp16 dense = 2070 sparse FP4 TFLOPS / 8 (sparsity 2x,
        # FP4 -> FP8 -> FP16 each 2x)
        fp32_tflops=8.04, fp16_tflops=259.0, bandwidth_gb_s=273.0, power_w=130.0,
        launch_overhead_us=15.0, efficiency=0.3,
        source="NVIDIA Jetson AGX Thor Developer Kit / T5000 module datasheet (Aug 2025): Blackwell "
               "GPU, 2560 CUDA cores, 96 5th-gen tensor cores, up to 1.57 GHz, 2070 FP4 TFLOPS "
               "(sparse), 128 GB 256-bit LPDDR5X 273 GB/s, 40-130 W",
        assumptions="fp16 rate derived from the FP4 figure (not published directly); launch 15 us "
                    "(faster CPU than Orin, same driver path); efficiency 0.3"),
    DeviceSpec(
        "x86-cpu", "x86 CPU core (the fit's host: Intel Xeon, AVX-512, 2.6 GHz; 1 thread)",
        # 2 AVX-512 FMA units x 16 fp32 lanes x 2 FLOP x 2.6 GHz, one core (runs use 1 thread)
        fp32_tflops=0.166, fp16_tflops=0.166, bandwidth_gb_s=100.0, power_w=6.25,
        launch_overhead_us=4.7, efficiency=0.78, precision="fp32", launch_unit="ops",
        source="Intel 64 and IA-32 Architectures Optimization Reference Manual (2 FMA-512 ports "
               "on Xeon Scalable cores); clock from /proc/cpuinfo; 6.25 W = a 350 W, 56-core "
               "Xeon Platinum 8480+ TDP per core",
        assumptions="efficiency and launch overhead fitted to onnxruntime (1 thread) timings of "
                    "the shipped checkpoint on this host (fit_host; "
                    "benchmarks/results/device_calibration.json); 100 GB/s: one core's L2/L3 "
                    "read bandwidth, not DRAM (the 5 MB of fp32 weights stay in the 480 MB L3 "
                    "between calls); fp16 = fp32 (the CPU path runs fp32)"),
    DeviceSpec(
        "x86-gpu", "NVIDIA GeForce RTX 4090 (450 W)",
        fp32_tflops=82.6, fp16_tflops=165.2, bandwidth_gb_s=1008.0, power_w=450.0,
        launch_overhead_us=5.0, efficiency=0.3,
        source="NVIDIA Ada GPU Architecture whitepaper v2.1, appendix A: RTX 4090 82.6 FP32 "
               "TFLOPS, 165.2 FP16 tensor TFLOPS (FP32 accumulate, dense), 24 GB GDDR6X 1008 GB/s, "
               "450 W TGP",
        assumptions="launch 5 us/kernel (a desktop CUDA launch plus a minimal kernel); "
                    "efficiency 0.3; frames copied over PCIe not counted (55 kB per query)"),
)}


@dataclass(frozen=True)
class PartCost:
    """The network work of one call of a part, batch 1: matmul-class FLOPs (2 x multiply-adds;
    conv, linear, matmul, einsum), weight / activation elements read or written by the kernels
    that are not fused away (matmul-class, norms, softmax), and launch counts."""

    flops: float = 0.0
    weight_elems: float = 0.0
    act_elems: float = 0.0
    kernels: int = 0  # matmul-class + norm / softmax / reduction launches (a fused graph)
    ops: int = 0  # every tensor op that computes (kernels + elementwise + copies: eager / ORT)
    elementwise_flops: float = 0.0  # not in the roofline's compute term (fused, memory-bound)

    def bytes(self, precision: str) -> float:
        return (self.weight_elems + self.act_elems) * BYTES[precision]

    def launches(self, unit: str) -> int:
        return self.ops if unit == "ops" else self.kernels


@dataclass(frozen=True)
class CostProfile:
    """A checkpoint's parts (see :mod:`edge.profiler.flops`)."""

    encoder: PartCost
    step: PartCost
    locator: PartCost | None = None  # scene memory: once per episode
    parameters: int = 0
    source: str = ""  # checkpoint path / description

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CostProfile:
        loc = d.get("locator")
        return cls(PartCost(**d["encoder"]), PartCost(**d["step"]),
                   None if loc is None else PartCost(**loc), int(d.get("parameters", 0)),
                   str(d.get("source", "")))


def get_device(name: str) -> DeviceSpec:
    try:
        return DEVICES[name]
    except KeyError:
        raise EdgeError(f"unknown device {name!r}: choose one of {', '.join(DEVICES)}") from None


def part_time_s(part: PartCost, device: DeviceSpec, precision: str | None = None) -> float:
    """Projected wall time of one call of ``part`` on ``device`` (seconds)."""
    p = precision or device.precision
    compute = part.flops / (device.peak_flops(p) * device.efficiency)
    memory = part.bytes(p) / (device.bandwidth_gb_s * 1e9)
    return max(compute, memory) + part.launches(device.launch_unit) * device.launch_overhead_us * 1e-6


def part_breakdown(part: PartCost, device: DeviceSpec, precision: str | None = None) -> dict[str, float]:
    """The three terms of :func:`part_time_s` (seconds) and which of compute/memory binds."""
    p = precision or device.precision
    compute = part.flops / (device.peak_flops(p) * device.efficiency)
    memory = part.bytes(p) / (device.bandwidth_gb_s * 1e9)
    launch = part.launches(device.launch_unit) * device.launch_overhead_us * 1e-6
    return {"compute_s": compute, "memory_s": memory, "launch_s": launch,
            "bound": "compute" if compute >= memory else "memory", "total_s": max(compute, memory) + launch}


def query_time_s(profile: CostProfile, device: DeviceSpec, num_steps: int, first_of_episode: bool = False,
                 precision: str | None = None) -> float:
    """encoder + K steps (+ the scene locator on an episode's first query)."""
    t = part_time_s(profile.encoder, device, precision) + num_steps * part_time_s(profile.step, device, precision)
    if first_of_episode and profile.locator is not None:
        t += part_time_s(profile.locator, device, precision)
    return t


def project_run(profile: CostProfile, device: DeviceSpec, queries: int, nfe: int, episodes: int = 0,
                executed: int = 0) -> dict[str, Any]:
    """A run's inference cost on ``device`` from its counts (queries, NFE, episodes with a
    locator call, executed actions): seconds and joules in total and per executed action."""
    enc = part_time_s(profile.encoder, device) * queries
    steps = part_time_s(profile.step, device) * nfe
    loc = part_time_s(profile.locator, device) * episodes if profile.locator is not None else 0.0
    total = enc + steps + loc

    def per(x: float) -> float | None:
        return x / executed if executed else None

    return {"device": device.name, "encoder_s": enc, "steps_s": steps, "locator_s": loc, "total_s": total,
            "energy_j": total * device.power_w,
            "ms_per_action": None if not executed else 1e3 * total / executed,
            "mj_per_action": None if not executed else 1e3 * total * device.power_w / executed,
            "encoder_ms_per_action": None if not executed else 1e3 * per(enc),
            "steps_ms_per_action": None if not executed else 1e3 * per(steps),
            "locator_ms_per_action": None if not executed else 1e3 * per(loc)}


class DeviceLatency:
    """A :class:`edge.clock.LatencyModel`: the projected query time on a device (deterministic)."""

    def __init__(self, device: DeviceSpec | str, profile: CostProfile) -> None:
        self.device = get_device(device) if isinstance(device, str) else device
        self.profile = profile
        self._enc = part_time_s(profile.encoder, self.device)
        self._step = part_time_s(profile.step, self.device)

    def sample(self, num_steps: int) -> float:
        return self._enc + num_steps * self._step


# ---------------------------------------------------------------------------------------- calibration
def fit_host(profile: CostProfile, measured_s: Mapping[str, float],
             device: DeviceSpec | None = None) -> tuple[DeviceSpec, dict[str, Any]]:
    """Fit ``efficiency`` and ``launch_overhead_us`` of a compute-bound device (a CPU) to measured
    times of the parts: ``measured_s`` = {"encoder": s, "step": s[, "locator": s]}. Least squares
    on t = flops / (peak * eff) + launches * overhead over the parts given (two unknowns, so two
    parts determine it; a third is over-determined). Returns the fitted device and the fit."""
    device = device or DEVICES["x86-cpu"]
    peak = device.peak_flops()
    rows, ys = [], []
    for name in ("encoder", "step", "locator"):
        part = getattr(profile, name)
        if name in measured_s and part is not None:
            rows.append((part.flops / peak, part.launches(device.launch_unit)))
            ys.append(float(measured_s[name]))
    if len(rows) < 2:
        raise EdgeError("fit_host needs measured times of at least two parts (encoder, step)")
    # normal equations of the 2-parameter least squares: a = 1/eff, b = overhead (s)
    s11 = sum(r[0] * r[0] for r in rows)
    s12 = sum(r[0] * r[1] for r in rows)
    s22 = sum(r[1] * r[1] for r in rows)
    y1 = sum(r[0] * y for r, y in zip(rows, ys))
    y2 = sum(r[1] * y for r, y in zip(rows, ys))
    det = s11 * s22 - s12 * s12
    a, b = ((s22 * y1 - s12 * y2) / det, (s11 * y2 - s12 * y1) / det) if det else (math.nan, math.nan)
    if not (a > 0 and b >= 0):  # degenerate: all compute, no launch term
        a, b = sum(ys) / sum(r[0] for r in rows), 0.0
    fitted = replace(device, efficiency=1.0 / a, launch_overhead_us=b * 1e6)
    return fitted, {"efficiency": fitted.efficiency, "launch_overhead_us": fitted.launch_overhead_us,
                    "parts": [n for n in ("encoder", "step", "locator") if n in measured_s]}


def calibration_errors(profile: CostProfile, device: DeviceSpec,
                       measured_queries_s: Mapping[int, float]) -> dict[str, Any]:
    """Predicted vs measured query times (K -> seconds): per K and the mean / max relative error."""
    rows = {}
    for k, m in sorted(measured_queries_s.items()):
        pred = query_time_s(profile, device, int(k))
        rows[str(k)] = {"measured_ms": 1e3 * m, "predicted_ms": 1e3 * pred, "rel_error": (pred - m) / m}
    errs = [abs(r["rel_error"]) for r in rows.values()]
    return {"per_k": rows, "mean_abs_rel_error": sum(errs) / len(errs) if errs else None,
            "max_abs_rel_error": max(errs) if errs else None}


def device_table(profile: CostProfile | None = None, num_steps: tuple[int, ...] = (1, 2, 10)
                 ) -> list[dict[str, Any]]:
    """Every device's published figures (+ the projected encoder / step / query ms for ``profile``)."""
    out = []
    for d in DEVICES.values():
        row: dict[str, Any] = {k: v for k, v in asdict(d).items()}
        if profile is not None:
            row["encoder_ms"] = 1e3 * part_time_s(profile.encoder, d)
            row["step_ms"] = 1e3 * part_time_s(profile.step, d)
            row["locator_ms"] = None if profile.locator is None else 1e3 * part_time_s(profile.locator, d)
            for k in num_steps:
                row[f"query_K{k}_ms"] = 1e3 * query_time_s(profile, d, k)
            row["encoder_terms"] = part_breakdown(profile.encoder, d)
            row["step_terms"] = part_breakdown(profile.step, d)
        out.append(row)
    return out


__all__ = ["BYTES", "DEVICES", "CostProfile", "DeviceLatency", "DeviceSpec", "PartCost", "calibration_errors",
           "device_table", "fit_host", "get_device", "part_breakdown", "part_time_s", "project_run",
           "query_time_s"]
