"""Time the parts of a query on this host and fit the CPU entry of the device model to them.

:func:`measure_parts` times, interleaved call by call (so every part sees the same machine load),
the encoder, one denoising step, the scene locator and whole queries (encode + K steps) on a
backend, batch 1; :func:`calibrate` fits ``x86-cpu``'s efficiency and launch overhead to the
encoder and step medians (:func:`edge.profiler.device_model.fit_host`) and reports the error on
what the fit did not see: whole queries at each K and the locator.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from edge.profiler.device_model import DEVICES, CostProfile, DeviceSpec, calibration_errors, fit_host, part_time_s
from edge.stats import percentiles


def measure_parts(checkpoint: str | Path, backend: str = "onnxruntime", threads: int = 1, reps: int = 40,
                  ks: tuple[int, ...] = (1, 2, 4, 8, 10), warmup: int = 5, verify: bool = True) -> dict[str, Any]:
    """Medians (and p10 / p90) of the parts' wall times in seconds, ``reps`` interleaved rounds."""
    import numpy as np

    from edge.backends import BackendConfig, make_backend
    from edge.export import example_inputs

    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    b = make_backend(BackendConfig(name=backend, threads=threads), checkpoint, verify=verify)
    spec = b.spec
    inputs = example_inputs(spec, batch=1)
    feats = b.encode(inputs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, spec.chunk_len, spec.action_dim)).astype(np.float32)
    has_locator = bool(getattr(spec, "scene_memory", False))
    loc_in = {"front": inputs["front"], "lang": inputs["lang"]}
    samples: dict[str, list[float]] = {"encoder": [], "step": [], **({"locator": []} if has_locator else {}),
                                       **{f"query_K{k}": [] for k in ks}}
    for i in range(warmup + reps):
        t0 = time.perf_counter()
        b.encode(inputs)
        t1 = time.perf_counter()
        b.denoise_step(x, 0.5, feats)
        t2 = time.perf_counter()
        if has_locator:
            b.locate(loc_in)
        t3 = time.perf_counter()
        qs = []
        for k in ks:
            a = time.perf_counter()
            b.sample(b.encode(inputs), x, k)
            qs.append(time.perf_counter() - a)
        if i < warmup:
            continue
        samples["encoder"].append(t1 - t0)
        samples["step"].append(t2 - t1)
        if has_locator:
            samples["locator"].append(t3 - t2)
        for k, q in zip(ks, qs):
            samples[f"query_K{k}"].append(q)
    out: dict[str, Any] = {"backend": b.describe(), "reps": reps, "threads": threads}
    for name, xs in samples.items():
        p10, p50, p90 = percentiles(xs, (10.0, 50.0, 90.0))
        out[name] = {"p10_s": p10, "p50_s": p50, "p90_s": p90, "min_s": min(xs)}
    return out


def calibrate(profile: CostProfile, measured: dict[str, Any], device: DeviceSpec | None = None,
              stat: str = "p50_s") -> dict[str, Any]:
    """Fit on encoder + step, judge on queries and the locator. Returns the fit, the fitted device
    and the errors of both the fitted device and the device table's current entry."""
    device = device or DEVICES["x86-cpu"]
    parts = {n: measured[n][stat] for n in ("encoder", "step") if n in measured}
    fitted, fit = fit_host(profile, parts, device)
    queries = {int(k.removeprefix("query_K")): v[stat] for k, v in measured.items() if k.startswith("query_K")}
    out: dict[str, Any] = {"stat": stat, "fit": fit, "fitted_device": {"efficiency": fitted.efficiency,
                                                                      "launch_overhead_us": fitted.launch_overhead_us}}
    for label, dev in (("fitted", fitted), ("table", device)):
        err = calibration_errors(profile, dev, queries)
        if profile.locator is not None and "locator" in measured:
            m, p = measured["locator"][stat], part_time_s(profile.locator, dev)
            err["locator"] = {"measured_ms": 1e3 * m, "predicted_ms": 1e3 * p, "rel_error": (p - m) / m}
        for part in ("encoder", "step"):
            m, p = measured[part][stat], part_time_s(getattr(profile, part), dev)
            err[part] = {"measured_ms": 1e3 * m, "predicted_ms": 1e3 * p, "rel_error": (p - m) / m}
        out[label] = err
    return out
