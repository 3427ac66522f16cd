"""GPU check of the shipped VLA: parity and latency of every GPU path this machine can run.

    scripts/gpu_check.sh                                   # -> benchmarks/results/gpu_check.json
    scripts/gpu_check.sh --out /tmp/gpu_check.json --queries 300
    python benchmarks/gpu_check.py --device cpu --queries 5 --k-max 2   # dry run of the script on CPU

On a machine with an NVIDIA GPU (CUDA torch; onnxruntime-gpu and TensorRT optional), for the shipped
model (``edge/vla/checkpoints/stack``, or ``--checkpoint``):

* **parity** of each reduced-precision / accelerated path against torch fp32 eager on the same GPU,
  end to end (encode + K Euler steps, same observations and noise, K in ``--parity-k``): per chunk
  cosine (on normalised actions) and max abs error (physical units); a path passes at min cosine
  >= 0.999. Also torch fp32 on the GPU vs fp32 on the CPU. Observations are recorded frames when
  ``--data DIR`` is given, else synthesised (random uint8 images, proprio drawn around the training
  statistics, cached training instructions, plausible scene): the JSON says which;
* **latency**, batch 1: encoder + K = 1..``--k-max`` per query, p50/p99 over ``--queries`` (>= 200
  by default) after ``--warmup`` untimed queries, for torch eager fp32, torch + CUDA graphs at fp32 /
  bf16 / fp16, torch eager bf16, and ONNX Runtime CUDA EP and native TensorRT fp32 / fp16 where those
  libraries import; every path not run is listed with the reason.

Results go to ``--out`` (JSON, rewritten after every section so a killed run keeps what it measured)
with machine facts (:func:`edge.telemetry.machine_info` + GPU, CUDA, cuDNN, TF32 settings). A time
budget (``--budget-s``, default 270 s) keeps the whole run under 5 minutes; sections cut short say so.
Temporary files (ONNX export, engines) go to a temporary directory, a few MiB.

Exit status: 0 = ran (see each path's "pass"), 1 = a parity check failed, 2 = no CUDA GPU here
(nothing was measured and nothing is written), 3 = could not start (missing package, bad args).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXIT_OK, EXIT_PARITY, EXIT_NO_GPU, EXIT_SETUP = 0, 1, 2, 3
COSINE_MIN = 0.999
DEFAULT_CKPT = ROOT / "edge" / "vla" / "checkpoints" / "stack"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default=str(DEFAULT_CKPT))
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N; cpu = dry run of this script")
    ap.add_argument("--data", help="recorded demonstrations (edge data record) for the observations")
    ap.add_argument("--observations", type=int, default=8, help="observations in the parity set")
    ap.add_argument("--parity-k", default="1,2,4,10", help="K values of the parity check")
    ap.add_argument("--queries", type=int, default=200, help="timed queries per (path, K)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed queries per (path, K)")
    ap.add_argument("--k-max", type=int, default=10, help="latency table covers K = 1..k-max")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile + CUDA graphs")
    ap.add_argument("--budget-s", type=float, default=270.0, help="stop timing after this long")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gpu_check.json"))
    return ap.parse_args(argv)


# --- helpers ------------------------------------------------------------------------------------
def percentiles(samples_s: list[float]) -> dict[str, float]:
    a = np.asarray(samples_s) * 1e3
    return {"p50_ms": round(float(np.percentile(a, 50)), 4), "p99_ms": round(float(np.percentile(a, 99)), 4),
            "mean_ms": round(float(a.mean()), 4), "n": int(a.size)}


def chunk_parity(ref: np.ndarray, got: np.ndarray, mean: np.ndarray, std: np.ndarray) -> dict[str, float]:
    """Per chunk cosine on normalised actions (min over chunks) and max abs errors."""
    r = ((ref - mean) / std).reshape(ref.shape[0], -1).astype(np.float64)
    g = ((got - mean) / std).reshape(got.shape[0], -1).astype(np.float64)
    denom = np.linalg.norm(r, axis=1) * np.linalg.norm(g, axis=1)
    cos = np.where(denom > 0, (r * g).sum(axis=1) / np.maximum(denom, 1e-30), 1.0)
    return {"cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
            "max_abs": float(np.abs(ref - got).max()), "max_abs_normalised": float(np.abs(r - g).max())}


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(tmp, path)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.t0, self.seconds = time.perf_counter(), seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.seconds - self.elapsed()


# --- observations -------------------------------------------------------------------------------
def observations(spec: Any, ref: Any, n: int, data: str | None) -> tuple[list[dict[str, np.ndarray]], str]:
    """n batch-1 observations: recorded frames from ``data`` if given and readable, else synthetic."""
    from edge.export import example_inputs

    why = "no --data given"
    if data:
        try:
            return recorded_observations(spec, ref, n, data), f"recorded: first frames of {data}"
        except Exception as err:  # noqa: BLE001 - fall back, and say why (here and in the JSON)
            why = f"--data {data} unusable ({type(err).__name__}: {err})"
            print(f"gpu_check: note: {why}; synthetic observations instead", file=sys.stderr)
    obs = []
    for i in range(n):
        obs.append(example_inputs(spec, batch=1, seed=1000 + i))
    return obs, (f"synthetic ({why}): random uint8 images, proprio ~ N(training mean, std), cached "
                 "training instruction embeddings" + (", plausible scene" if spec.scene_memory else ""))


def recorded_observations(spec: Any, ref: Any, n: int, data: str) -> list[dict[str, np.ndarray]]:
    from edge.vla.language import InstructionCache
    from sim.demos import iter_episodes

    lang = InstructionCache(spec.lang_encoder_id, spec.lang_dim, spec.instruction_embeddings)
    out: list[dict[str, np.ndarray]] = []
    for ep in iter_episodes(data):
        idx = np.linspace(0, len(ep["action"]) - 1, 4).astype(int)
        emb = lang([ep["instruction"]])
        scene = None
        if spec.scene_memory:
            scene = ref.locate({"front": ep["front"][:1], "lang": emb})
        for i in idx:
            o = {cam: ep[cam][i:i + 1] for cam in spec.cameras}
            o["proprio"] = ep["proprio"][i:i + 1].astype(np.float32)
            o["lang"] = emb
            if scene is not None:
                o["scene"] = scene
            out.append(o)
            if len(out) == n:
                return out
    if not out:
        raise ValueError("no episodes")
    return out


# --- paths --------------------------------------------------------------------------------------
def torch_paths(model: Any, device: str, compile_too: bool) -> dict[str, Any]:
    """name -> factory (a callable returning a backend, or raising with the reason it cannot)."""
    from edge.backends.torch_cuda import TorchCudaBackend

    def make(precision: str, graphs: bool, compile: bool = False):
        def factory():
            b = TorchCudaBackend(copy.deepcopy(model), device=device, precision=precision,
                                 compile=compile, cuda_graphs=graphs)
            if graphs and not b.cuda_graphs:
                raise RuntimeError(f"CUDA graphs unavailable: {b.graph_skip_reason}")
            if compile and not b.compiled:
                raise RuntimeError("torch.compile failed (fell back to eager; see the log)")
            return b
        return factory

    paths = {"torch_eager_fp32": make("fp32", False), "torch_graphs_fp32": make("fp32", True),
             "torch_eager_bf16": make("bf16", False), "torch_graphs_bf16": make("bf16", True),
             "torch_graphs_fp16": make("fp16", True)}
    if compile_too:
        paths["torch_compile_graphs_fp32"] = make("fp32", True, compile=True)
    return paths


def export_paths(ckpt: Path, device: str, work: Path, budget: Budget) -> tuple[dict[str, Any], dict[str, str]]:
    """ONNX Runtime CUDA EP and native TensorRT factories, or the reason each is skipped."""
    factories: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    try:
        import onnxruntime as ort
        has_cuda_ep = "CUDAExecutionProvider" in ort.get_available_providers()
        ort_reason = "" if has_cuda_ep else (
            f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (providers "
            f"{ort.get_available_providers()}): the CPU package is installed, not onnxruntime-gpu")
    except Exception as err:  # noqa: BLE001
        ort_reason = f"onnxruntime does not import ({type(err).__name__}: {err})"
    from edge.backends.tensorrt_backend import unavailable_reason

    trt_reason = unavailable_reason()
    dry = not device.startswith("cuda")
    if dry:  # exercise the export + onnxruntime code path on the CPU EP instead
        ort_reason = ""
        trt_reason = trt_reason or "dry run on cpu"
    if ort_reason:
        skipped["ort_cuda_fp32"] = ort_reason
    if trt_reason:
        skipped["tensorrt_fp32"] = skipped["tensorrt_fp16"] = trt_reason
    if ort_reason and trt_reason:
        return factories, skipped
    export_dir = work / "onnx"
    try:
        from edge.export import export_onnx

        t0 = time.perf_counter()
        export_onnx(ckpt, export_dir)
        print(f"gpu_check: exported ONNX in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    except Exception as err:  # noqa: BLE001
        reason = f"ONNX export failed ({type(err).__name__}: {err})"
        for name in ("ort_cpu_fp32_dry_run" if dry else "ort_cuda_fp32", "tensorrt_fp32", "tensorrt_fp16"):
            skipped.setdefault(name, reason)  # keeps an earlier, more specific reason
        return factories, skipped
    if not ort_reason:
        def ort_factory():
            from edge.backends.ort_backend import OrtBackend

            b = OrtBackend(export_dir, providers=("cpu",) if dry else ("cuda",))
            if not dry and b.providers[0] != "CUDAExecutionProvider":
                raise RuntimeError(f"CUDA EP failed to initialise; runs on {b.providers}")
            return b
        factories["ort_cpu_fp32_dry_run" if dry else "ort_cuda_fp32"] = ort_factory
    if not trt_reason:
        for precision in ("fp32", "fp16"):
            def trt_factory(precision=precision):
                from edge.backends.tensorrt_backend import TensorRTBackend

                return TensorRTBackend(export_dir, precision=precision, max_batch=8,
                                       cache_dir=work / "engines", device=device)
            factories[f"tensorrt_{precision}"] = trt_factory
    return factories, skipped


# --- measurements -------------------------------------------------------------------------------
def run_chunks(backend: Any, obs: list[dict[str, np.ndarray]], noise: np.ndarray, ks: list[int]
               ) -> tuple[dict[int, np.ndarray], np.ndarray]:
    feats = np.concatenate([backend.encode(o) for o in obs], axis=0)
    chunks = {k: np.concatenate([backend.sample(feats[i:i + 1], noise[i:i + 1], k) for i in range(len(obs))])
              for k in ks}
    return chunks, feats


def latency(backend: Any, obs: list[dict[str, np.ndarray]], k: int, queries: int, warmup: int,
            rng: np.random.Generator, deadline: float) -> dict[str, Any]:
    shape = (1, backend.spec.chunk_len, backend.spec.action_dim)
    total, enc, smp = [], [], []
    for i in range(warmup + queries):
        if i >= warmup and time.perf_counter() > deadline and len(total) >= 20:
            break
        o = obs[i % len(obs)]
        noise = rng.standard_normal(shape, dtype=np.float32)
        t0 = time.perf_counter()
        feats = backend.encode(o)
        t1 = time.perf_counter()
        backend.sample(feats, noise, k)  # numpy out: the device work is finished
        t2 = time.perf_counter()
        if i >= warmup:
            total.append(t2 - t0)
            enc.append(t1 - t0)
            smp.append(t2 - t1)
    out = {"query": percentiles(total), "encode": percentiles(enc), "sample": percentiles(smp)}
    if len(total) < queries:
        out["cut_short"] = f"time budget: {len(total)} of {queries} queries"
    return out


def machine(device: str) -> dict[str, Any]:
    import torch

    from edge.commands.doctor import (
        jetson_info,
        onnxruntime_info,
        tensorrt_info,
        torch_info,
    )
    from edge.telemetry import machine_info

    info = machine_info()
    info["torch_cuda"] = torch_info()
    info["onnxruntime"] = onnxruntime_info()
    info["tensorrt"] = tensorrt_info()
    info["jetson"] = jetson_info()
    info["tf32"] = {"matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                    "cudnn": bool(torch.backends.cudnn.allow_tf32)}
    info["device"] = device
    return info


def bad_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, naming the flag and value (None: nothing). Exit code EXIT_SETUP."""
    for flag, v in (("--queries", args.queries), ("--k-max", args.k_max), ("--observations", args.observations)):
        if v < 1:
            return f"{flag} {v}: must be >= 1"
    if args.warmup < 0:
        return f"--warmup {args.warmup}: must be >= 0"
    if not args.budget_s > 0 or args.budget_s == float("inf"):
        return f"--budget-s {args.budget_s}: must be a finite number of seconds > 0"
    try:
        ks = [int(k) for k in args.parity_k.split(",")]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1 or max(ks) > 100:
        return f"--parity-k {args.parity_k!r}: give a comma-separated list of K in 1..100, e.g. 1,2,4,10"
    if args.data and not Path(args.data).is_dir():
        return (f"--data {args.data}: no such directory (recorded demonstrations from `edge data record`); leave "
                "--data out for synthetic observations")
    dev = args.device
    if not (dev in ("cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        return f"--device {dev}: give cuda, cuda:N or cpu"
    from edge.commands._out import check_writable_file
    from edge.errors import EdgeError

    try:
        from edge.vla.checkpoint import resolve  # imports torch: main says so in one line where it cannot
    except ImportError:
        resolve = None
    if resolve is not None:
        try:
            resolve(args.checkpoint)
        except FileNotFoundError as err:  # names what the directory is instead, where it can tell
            said = str(err)  # resolve's message names the path itself: say it once
            return f"--checkpoint: {said}" if str(args.checkpoint) in said else f"--checkpoint {args.checkpoint}: {said}"
    elif not Path(args.checkpoint).exists():
        return f"--checkpoint {args.checkpoint}: no VLA checkpoint there"

    try:
        check_writable_file(args.out, replace=True)  # before the device time is spent (written by rename)
    except EdgeError as err:
        return str(err)
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bad = bad_args(args)
    if bad:
        print(f"gpu_check: {bad}", file=sys.stderr)
        return EXIT_SETUP
    budget = Budget(args.budget_s)
    try:
        import torch
    except ImportError as err:
        print(f"gpu_check: torch does not import ({err}); nothing to check", file=sys.stderr)
        return EXIT_SETUP
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(f"gpu_check: no CUDA GPU visible to torch {torch.__version__} ({build}); nothing was "
              "checked and nothing was written. Run scripts/gpu_check.sh on a machine with an NVIDIA "
              "GPU (`edge doctor` says what is missing), or pass --device cpu for a dry run of the "
              "script itself.", file=sys.stderr)
        return EXIT_NO_GPU

    from edge.backends.torch_cuda import TorchCudaBackend
    from edge.errors import EdgeError
    from edge.vla.checkpoint import load_model, resolve

    out_path = Path(args.out)
    ckpt = resolve(args.checkpoint)
    try:
        base_model = load_model(ckpt)
    except EdgeError as err:  # weights that fail their manifest, a stored config this code cannot build
        print(f"gpu_check: --checkpoint {args.checkpoint}: {err}", file=sys.stderr)
        return EXIT_SETUP
    spec = base_model.spec
    mean, std = spec.action_stats()
    parity_k = sorted({int(k) for k in args.parity_k.split(",")})
    result: dict[str, Any] = {
        "benchmark": "gpu_check", "checkpoint": str(ckpt.relative_to(ROOT) if ckpt.is_relative_to(ROOT) else ckpt),
        "machine": machine(args.device), "settings": vars(args), "cosine_min_required": COSINE_MIN,
        "dry_run": not args.device.startswith("cuda"),
    }
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    try:
        ref = TorchCudaBackend(copy.deepcopy(base_model), device=args.device, cuda_graphs=False)
        obs, source = observations(spec, ref, args.observations, args.data)
        result["observations"] = {"n": len(obs), "source": source}
        noise = np.random.default_rng(7).standard_normal(
            (len(obs), spec.chunk_len, spec.action_dim), dtype=np.float32)
        ref_chunks, ref_feats = run_chunks(ref, obs, noise, parity_k)

        # fp32 on the device vs fp32 on the CPU (the numbers every other path is compared with)
        from edge.backends.torch_backend import TorchBackend

        cpu = TorchBackend(copy.deepcopy(base_model))
        cpu_chunks, _ = run_chunks(cpu, obs, noise, parity_k)
        result["reference"] = {
            "path": "torch_eager_fp32", "device": args.device,
            "vs_cpu_fp32": {str(k): chunk_parity(cpu_chunks[k], ref_chunks[k], mean, std) for k in parity_k}}
        del cpu

        factories = torch_paths(base_model, args.device, args.compile)
        more, skipped = export_paths(ckpt, args.device, work, budget)
        factories.update(more)
        result["skipped"] = dict(skipped)
        result["parity"], result["latency"] = {}, {}
        write_json(out_path, result)

        failed = []
        rng = np.random.default_rng(0)
        for idx, (name, factory) in enumerate(factories.items()):
            if budget.left() < 15:
                result["skipped"][name] = f"time budget ({args.budget_s:.0f} s) spent"
                continue
            t0 = time.perf_counter()
            try:
                backend = ref if name == "torch_eager_fp32" else factory()
                backend.warmup(batch=1, num_steps=2)
            except Exception as err:  # noqa: BLE001 - skip that path, say why
                result["skipped"][name] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                print(f"gpu_check: {name} skipped: {result['skipped'][name]}", file=sys.stderr)
                continue
            setup_s = time.perf_counter() - t0
            if name != "torch_eager_fp32":
                chunks, feats = run_chunks(backend, obs, noise, parity_k)
                per_k = {str(k): chunk_parity(ref_chunks[k], chunks[k], mean, std) for k in parity_k}
                worst = min(p["cosine_min"] for p in per_k.values())
                ok = worst >= COSINE_MIN
                result["parity"][name] = {
                    "pass": ok, "cosine_min": worst,
                    "max_abs": max(p["max_abs"] for p in per_k.values()),
                    "features_max_abs": float(np.abs(feats - ref_feats).max()), "per_k": per_k}
                if not ok:
                    failed.append(name)
            k_left = max(budget.left() - 10, 0)
            deadline = time.perf_counter() + k_left / (len(factories) - idx)  # a fair share of what is left
            table = {}
            for k in range(1, args.k_max + 1):
                per_k_deadline = time.perf_counter() + (deadline - time.perf_counter()) / (args.k_max - k + 1)
                table[str(k)] = latency(backend, obs, k, args.queries, args.warmup, rng, per_k_deadline)
            result["latency"][name] = {"setup_s": round(setup_s, 2), "describe": backend.describe(),
                                       "per_k": table}
            print(f"gpu_check: {name}: K=1 p50 {table['1']['query']['p50_ms']:.3f} ms, "
                  f"K={args.k_max} p50 {table[str(args.k_max)]['query']['p50_ms']:.3f} ms", file=sys.stderr)
            write_json(out_path, result)
            if backend is not ref:
                del backend
        result["wall_s"] = round(budget.elapsed(), 1)
        result["parity_failed"] = failed
        write_json(out_path, result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"gpu_check: wrote {out_path} in {result['wall_s']} s; parity "
          + ("ok" if not failed else f"FAILED for {failed}")
          + (f"; skipped: {sorted(result['skipped'])}" if result["skipped"] else ""), file=sys.stderr)
    return EXIT_PARITY if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
