"""Per-query VLA latency (encoder + K denoising steps) on each available backend, batch 1.

    python benchmarks/vla_latency.py                          # random-init default-size model
    python benchmarks/vla_latency.py --checkpoint checkpoints/vla_stack --queries 300

For K = 1..10 and each backend: ``--queries`` timed queries after ``--warmup`` untimed ones, each
query = ``encode`` + ``sample(K)`` on fresh noise; p50/p90/p99/mean in ms. Then the denoising step
alone, torch eager vs onnxruntime CPU, interleaved call by call in the same process (so both see the
same machine load), at each thread count in ``--ratio-threads``; the ratio is torch p50 / ORT p50.
Latency does not depend on the weights' values, so a randomly initialised model of the default
architecture is as good as a trained one (the JSON says which was used). Writes
benchmarks/results/vla_latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.argtypes import check_vla_checkpoint, existing, whole, whole_list, writable_file  # noqa: E402


def random_default_checkpoint(directory: Path) -> tuple[Path, str]:
    """A default-architecture model with random weights (zero-initialised gates perturbed too)."""
    import torch

    from edge.config import load_config
    from edge.vla.checkpoint import save_model
    from edge.vla.model import VLAModel
    from edge.vla.spec import ModelSpec
    from edge.training.vla.train import TrainVLAConfig

    config = load_config(TrainVLAConfig, ROOT / "configs/train/vla_default.yaml").model
    spec = ModelSpec(
        task="stack", action_layout="ee_delta", proprio_layout=tuple(f"p{i}" for i in range(22)),
        action_dim=5, proprio_dim=22, control_rate_hz=20.0, chunk_len=config.chunk_len,
        cameras=tuple(config.cameras), image_hw=(96, 96), feature_dim=config.d_model,
        lang_encoder_id="sentence-transformers/all-MiniLM-L6-v2", lang_dim=384,
        action_mean=(0.0,) * 5, action_std=(1.0,) * 5, proprio_mean=(0.0,) * 22,
        proprio_std=(1.0,) * 22)
    torch.manual_seed(0)
    model = VLAModel(config, spec)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    save_model(directory / "model.pt", model)
    return directory, "random-init default preset (configs/train/vla_default.yaml)"


def percentiles(samples_s: list[float]) -> dict[str, float]:
    a = np.asarray(samples_s) * 1e3
    return {"p50_ms": float(np.percentile(a, 50)), "p90_ms": float(np.percentile(a, 90)),
            "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean()), "n": int(a.size)}


def query_latency(backend, inputs, k: int, queries: int, warmup: int, rng) -> dict[str, float]:
    shape = (1, backend.spec.chunk_len, backend.spec.action_dim)
    times = []
    for i in range(warmup + queries):
        noise = rng.standard_normal(shape, dtype=np.float32)
        t0 = time.perf_counter()
        backend.sample(backend.encode(inputs), noise, k)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return percentiles(times)


def _plain_step(ort_b, x: np.ndarray, t: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The CPU step without I/O binding (feeds dict, output allocated by onnxruntime): the lever's baseline."""
    feeds = {"x": np.ascontiguousarray(x, np.float32), "t": np.ascontiguousarray(t, np.float32),
             "features": np.ascontiguousarray(f, np.float32)}
    return ort_b._stp.run(["velocity"], feeds)[0].astype(np.float32, copy=False)


def step_ratio(torch_b, ort_b, feats, pairs: int, rng) -> dict[str, object]:
    """Interleaved single denoising steps on identical inputs, round-robin in a rotating order (the
    first call of a round runs on a colder cache): torch eager and onnxruntime through the backends'
    ``denoise_step``, and onnxruntime's step with and without I/O binding (the lever)."""
    x = rng.standard_normal((1, torch_b.spec.chunk_len, torch_b.spec.action_dim), dtype=np.float32)
    t = np.full(1, 0.5, np.float32)
    f = np.asarray(feats, np.float32)
    np.testing.assert_allclose(ort_b._step(x, t, f), _plain_step(ort_b, x, t, f), atol=1e-6)
    arms = {"torch_eager": lambda: torch_b.denoise_step(x, t, feats),
            "onnxruntime_cpu": lambda: ort_b.denoise_step(x, t, feats),
            "ort_step_io_binding": lambda: ort_b._step(x, t, f),
            "ort_step_plain_run": lambda: _plain_step(ort_b, x, t, f)}
    names = list(arms)
    times: dict[str, list[float]] = {k: [] for k in arms}
    for i in range(pairs + 20):
        for name in names[i % len(names):] + names[:i % len(names)]:
            a = time.perf_counter()
            arms[name]()
            if i >= 20:
                times[name].append(time.perf_counter() - a)
    p = {k: percentiles(v) for k, v in times.items()}
    return {**p, "ratio_p50": p["torch_eager"]["p50_ms"] / p["onnxruntime_cpu"]["p50_ms"],
            "ratio_mean": p["torch_eager"]["mean_ms"] / p["onnxruntime_cpu"]["mean_ms"],
            "io_binding_speedup_p50": p["ort_step_plain_run"]["p50_ms"] / p["ort_step_io_binding"]["p50_ms"]}


def query_env_throughput(queries: int, backend: str) -> dict[str, object]:
    """QueryEnv (the env EQRL trains in) with the shipped VLA at K=2, C=8, one process: queries/s
    including the simulator, rendering and the VLA, and the share spent in inference."""
    from edge.runtime.query_env import QueryEnv
    from edge.runtime.config import RuntimeConfig

    env = QueryEnv(RuntimeConfig.of(num_steps=2, execute=8, execution="sync", latency="constant",
                                 latency_ms=0.0, episodes=1, seed=100000, record_ticks=False,
                                 video_episodes=0, backend=backend))
    env.reset()
    n, t0, done = 0, time.perf_counter(), False
    while n < queries:
        if done:
            env.reset()
        _, _, term, trunc, _ = env.step({"noise": None, "num_steps": 2, "execute": 8})
        done, n = term or trunc, n + 1
    wall = time.perf_counter() - t0
    env.close()
    return {"backend": backend, "queries": n, "queries_per_s": n / wall, "wall_s": wall,
            "plan": "K=2, C=8 (the best fixed cell), sync, zero latency, shipped VLA, cameras as trained",
            "cores": 1}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=existing("path"), help="trained checkpoint (default: random-init default model)")
    ap.add_argument("--queries", type=whole(1), default=200)
    ap.add_argument("--warmup", type=whole(0), default=20)
    ap.add_argument("--k-max", type=whole(2, 100), default=10, help="the table covers K = 1..k-max (2..100)")
    ap.add_argument("--threads", type=whole(1), default=1, help="threads for the per-query table")
    ap.add_argument("--ratio-threads", type=whole_list(1), default=[1, 2], help="thread counts for the step ratio (default 1,2)")
    ap.add_argument("--ratio-pairs", type=whole(1), default=300)
    ap.add_argument("--query-env-queries", type=whole(0), default=300,
                    help="QueryEnv throughput: queries timed per backend (0 = skip)")
    ap.add_argument("--out", type=writable_file, default=str(ROOT / "benchmarks/results/vla_latency.json"))
    ap.add_argument("--no-verify", action="store_true",
                    help="time a --checkpoint whose model.pt does not match its manifest.json (or has none)")
    args = ap.parse_args(argv)
    if args.checkpoint:
        check_vla_checkpoint(args.checkpoint, verify=not args.no_verify)

    import onnxruntime
    import torch

    from edge.backends import BackendConfig, availability, make_backend
    from edge.export import example_inputs

    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="vla-bench-"))
    if args.checkpoint:
        ckpt, weights = Path(args.checkpoint), f"trained checkpoint {args.checkpoint}"
    else:
        ckpt, weights = random_default_checkpoint(tmp)
    status = availability()
    rng = np.random.default_rng(0)

    def build(name: str, threads: int):
        # the random-init model has no manifest (nothing to verify); a given checkpoint is verified
        return make_backend(BackendConfig(name=name, threads=threads), ckpt,
                            verify=bool(args.checkpoint) and not args.no_verify)

    backends = {n: build(n, args.threads) for n in ("torch", "onnxruntime") if not status[n]}
    spec = next(iter(backends.values())).spec
    inputs = example_inputs(spec, batch=1)
    table: dict[str, dict[str, object]] = {}
    for name, b in backends.items():
        torch.set_num_threads(args.threads)
        b.warmup()
        feats = b.encode(inputs)
        enc: list[float] = []
        for i in range(args.warmup + args.queries):
            t0 = time.perf_counter()
            b.encode(inputs)
            if i >= args.warmup:
                enc.append(time.perf_counter() - t0)
        rows = {str(k): query_latency(b, inputs, k, args.queries, args.warmup, rng)
                for k in range(1, args.k_max + 1)}
        p50 = np.array([rows[str(k)]["p50_ms"] for k in range(1, args.k_max + 1)])
        slope, intercept = np.polyfit(np.arange(1, args.k_max + 1), p50, 1)
        table[name] = {"backend": b.describe(), "encoder": percentiles(enc), "per_k": rows,
                       "fit_p50_ms": {"fixed": float(intercept), "per_step": float(slope)}}
        del feats
        print(f"{name}: encoder p50 {table[name]['encoder']['p50_ms']:.2f} ms; query p50 K=1 "
              f"{rows['1']['p50_ms']:.2f} ms, K={args.k_max} {rows[str(args.k_max)]['p50_ms']:.2f} ms", flush=True)

    ratios = {}
    if "torch" in backends and "onnxruntime" in backends:
        for n in args.ratio_threads:
            torch.set_num_threads(n)
            tb, ob = build("torch", n), build("onnxruntime", n)
            tb.warmup()
            ob.warmup()
            feats = tb.encode(inputs)
            ratios[str(n)] = step_ratio(tb, ob, feats, args.ratio_pairs, rng)
            print(f"denoise step, {n} thread(s): torch p50 {ratios[str(n)]['torch_eager']['p50_ms']:.3f} ms,"
                  f" onnxruntime p50 {ratios[str(n)]['onnxruntime_cpu']['p50_ms']:.3f} ms, "
                  f"ratio {ratios[str(n)]['ratio_p50']:.2f}x", flush=True)

    qenv = {}
    if args.query_env_queries:
        torch.set_num_threads(1)
        for name in backends:
            qenv[name] = query_env_throughput(args.query_env_queries, name)
            print(f"QueryEnv ({name}): {qenv[name]['queries_per_s']:.1f} queries/s on one core", flush=True)

    from edge.vla.checkpoint import load_model
    from edge.vla.model import parameter_count

    result = {
        "benchmark": "vla_latency",
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "weights": weights,
        "parameters": parameter_count(load_model(ckpt, verify=bool(args.checkpoint) and not args.no_verify)),
        "batch": 1,
        "queries_per_k": args.queries,
        "warmup_per_k": args.warmup,
        "threads": args.threads,
        "query": "encode(obs) + sample(features, noise, K) (Euler, float32 state), batch 1",
        "machine": {"platform": platform.platform(), "machine": platform.machine(),
                    "processor": platform.processor() or _cpu_model(), "cpu_count": os.cpu_count(),
                    "python": platform.python_version(), "torch": torch.__version__,
                    "onnxruntime": onnxruntime.__version__,
                    "load_avg_1m_at_start": os.getloadavg()[0]},
        "backends": table,
        "unavailable": {n: why for n, why in status.items() if why},
        "denoise_step_torch_over_ort": ratios,
        "query_env": qenv,
        "target": "onnxruntime CPU >= 2.5x faster than torch eager for the denoising step at batch 1",
        "target_met": {n: r["ratio_p50"] >= 2.5 for n, r in ratios.items()},
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out} in {result['wall_s']} s")
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    sys.exit(main())
