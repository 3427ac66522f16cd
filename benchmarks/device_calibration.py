"""Calibrate the device cost model's CPU entry on this host and measure its error.

    python benchmarks/device_calibration.py            # ~1 min on 2 cores; writes the JSON below

1. Count the shipped checkpoint's work (FLOPs, bytes, launches per encoder call, denoising step and
   scene-locator call; :mod:`edge.profiler.flops`).
2. Time the parts and whole queries (encode + K steps, K = 1, 2, 4, 8, 10) on onnxruntime, 1 thread,
   batch 1, interleaved call by call (:func:`edge.profiler.calibrate.measure_parts`).
3. Fit ``x86-cpu``'s efficiency and per-op overhead to the encoder and step medians; report the error
   on what the fit did not see: the whole queries, the locator, and a model of *another
   architecture* (the random-init default preset, ``configs/train/vla_default.yaml``: one camera,
   no object token) counted and timed the same way.

Writes benchmarks/results/device_calibration.json (with the device table and the projected
per-device encoder / step / query times of the shipped checkpoint).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.argtypes import check_vla_checkpoint, existing, whole, writable_file  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=existing("path"), default=str(ROOT / "edge/vla/checkpoints/stack"))
    ap.add_argument("--reps", type=whole(2), default=60, help="timed repetitions per measurement (>= 2)")
    ap.add_argument("--out", type=writable_file, default=str(ROOT / "benchmarks/results/device_calibration.json"))
    ap.add_argument("--no-verify", action="store_true",
                    help="measure a --checkpoint whose model.pt does not match its manifest.json (or has none)")
    args = ap.parse_args(argv)
    check_vla_checkpoint(args.checkpoint, verify=not args.no_verify)

    import os

    from edge.profiler.calibrate import calibrate, measure_parts
    from edge.profiler.device_model import DEVICES, calibration_errors, device_table, part_time_s
    from edge.profiler.flops import count_checkpoint
    from edge.telemetry import machine_info

    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    profile = count_checkpoint(args.checkpoint, verify=not args.no_verify)
    measured = measure_parts(args.checkpoint, reps=args.reps, verify=not args.no_verify)
    cal = calibrate(profile, measured)

    from dataclasses import replace

    fitted = replace(DEVICES["x86-cpu"], **cal["fitted_device"])
    # another architecture, never used by the fit
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from vla_latency import random_default_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        other, weights = random_default_checkpoint(Path(tmp))
        other_profile = count_checkpoint(str(other / "model.pt"), verify=False)
        other_measured = measure_parts(str(other / "model.pt"), reps=args.reps // 2, verify=False)
    queries = {int(k.removeprefix("query_K")): v["p50_s"] for k, v in other_measured.items()
               if k.startswith("query_K")}
    other_err = calibration_errors(other_profile, fitted, queries)
    for part in ("encoder", "step"):
        m, p = other_measured[part]["p50_s"], part_time_s(getattr(other_profile, part), fitted)
        other_err[part] = {"measured_ms": 1e3 * m, "predicted_ms": 1e3 * p, "rel_error": (p - m) / m}

    result = {
        "benchmark": "device_calibration",
        "command": " ".join(sys.argv),
        "checkpoint": args.checkpoint,
        "machine": machine_info(),
        "load_avg_1m_at_start": load0,
        "profile": profile.to_json(),
        "measured": measured,
        "calibration": cal,
        "held_out_architecture": {"weights": weights, "profile": other_profile.to_json(),
                                  "measured": other_measured, "errors": other_err},
        "devices": device_table(profile),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    f = cal["fitted"]
    print(f"fit: efficiency {cal['fitted_device']['efficiency']:.3f}, "
          f"{cal['fitted_device']['launch_overhead_us']:.2f} us/op")
    print(f"shipped model, whole queries K=1..10: mean |error| {f['mean_abs_rel_error']:.1%}, max "
          f"{f['max_abs_rel_error']:.1%}; locator {f.get('locator', {}).get('rel_error', float('nan')):+.1%}")
    print(f"default-preset model (held out): queries mean |error| {other_err['mean_abs_rel_error']:.1%}, "
          f"encoder {other_err['encoder']['rel_error']:+.1%}, step {other_err['step']['rel_error']:+.1%}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
