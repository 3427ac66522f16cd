"""ONNX Runtime backend over an export directory (``edge export``): needs numpy + onnxruntime only.

Execution providers are configuration, in order of preference, e.g. ``("tensorrt", "cuda", "cpu")``
or ``("auto",)`` (= every accelerator this onnxruntime build has, then CPU). A requested provider
that is missing from the build, or that fails to initialise, is skipped with a logged reason; CPU is
always the last resort, and :attr:`OrtBackend.providers` records what actually runs.

CPU tuning for batch-1 latency: a fixed intra-op thread count (default: all cores), one inter-op
thread, sequential execution, full graph optimisation, and spinning worker threads (lower wake-up
latency at the cost of busy cores while a query runs; turn off if the control loop shares the core).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge.backends.base import Backend, BackendUnavailable
from edge.export import ENCODER_FILE, LOCATOR_FILE, STEP_FILE, read_metadata
from edge.vla.spec import ModelSpec

log = logging.getLogger(__name__)

PROVIDER_ALIASES = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
PREFERENCE = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")
GPU_HINT = "install the gpu extra (onnxruntime-gpu) on a machine with an NVIDIA GPU or a Jetson"
OPT_LEVELS = ("disable", "basic", "extended", "all")


def resolve_providers(requested: Sequence[str], available: Sequence[str]) -> tuple[list[str], list[str]]:
    """Requested names/aliases -> (providers to try in order, reasons for the ones skipped)."""
    names = list(PREFERENCE) if tuple(requested) in (("auto",), ()) else [
        PROVIDER_ALIASES.get(r.lower(), r) for r in requested]
    auto = tuple(requested) in (("auto",), ())
    chosen, skipped = [], []
    for name in names:
        if name in available:
            if name not in chosen:
                chosen.append(name)
        elif not auto:
            hint = GPU_HINT if name in PREFERENCE[:2] else "check the provider name"
            skipped.append(f"{name} is not in this onnxruntime build (has {list(available)}); {hint}")
    if "CPUExecutionProvider" not in chosen:
        chosen.append("CPUExecutionProvider")
    return chosen, skipped


class OrtBackend(Backend):
    """Runs ``encoder.onnx`` and ``denoise_step.onnx`` with onnxruntime."""

    name = "onnxruntime"

    def __init__(self, export_dir: str | Path, providers: Sequence[str] = ("auto",),
                 threads: int = 0, inter_op_threads: int = 1, allow_spinning: bool = True,
                 graph_optimization: str = "all", trt_cache_dir: str = "", trt_fp16: bool = False,
                 seed: int = 0, robot: Any = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable("onnxruntime backend: onnxruntime is not installed; "
                                     "pip install onnxruntime (or onnxruntime-gpu)") from None
        self._ort = ort
        export_dir = Path(export_dir)
        meta = read_metadata(export_dir)
        spec = ModelSpec.from_dict(meta["spec"])
        spec.check_robot(robot, source=str(export_dir))
        if graph_optimization not in OPT_LEVELS:
            raise BackendUnavailable(f"graph_optimization={graph_optimization!r}; choose from {OPT_LEVELS}")
        chosen, skipped = resolve_providers(providers, ort.get_available_providers())
        for reason in skipped:
            log.warning("onnxruntime: %s; falling back to %s", reason, chosen[0])
        options = self._session_options(threads, inter_op_threads, allow_spinning, graph_optimization)
        provider_opts = [self._provider_options(p, trt_cache_dir, trt_fp16) for p in chosen]
        self._enc = self._session(export_dir / ENCODER_FILE, options, chosen, provider_opts)
        self._stp = self._session(export_dir / STEP_FILE, options, chosen, provider_opts)
        self._loc = (self._session(export_dir / LOCATOR_FILE, options, chosen, provider_opts)
                     if spec.scene_memory else None)
        self.providers = self._stp.get_providers()
        for p in chosen:
            if p not in self.providers:
                log.warning("onnxruntime: %s failed to initialise for this model; running on %s",
                            p, self.providers[0])
        self.fallback_reasons = skipped
        device = "cuda" if self.providers[0] in PREFERENCE[:2] else "cpu"
        super().__init__(spec, device, seed)
        self.export_dir = export_dir
        self.threads = options.intra_op_num_threads
        self._enc_outputs = [o.name for o in self._enc.get_outputs()]
        self._bindings: dict[tuple, tuple] = {}  # CPU step I/O binding per input shapes (one thread)

    def _session_options(self, threads: int, inter_op: int, spinning: bool, level: str):
        ort = self._ort
        so = ort.SessionOptions()
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        so.intra_op_num_threads = threads if threads > 0 else usable  # all CPUs this process may use
        so.inter_op_num_threads = max(inter_op, 1)
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[level]
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        so.log_severity_level = 3  # warnings from node placement are expected on CPU-only builds
        return so

    @staticmethod
    def _provider_options(name: str, cache_dir: str, fp16: bool) -> dict[str, Any]:
        if name == "TensorrtExecutionProvider":
            opts: dict[str, Any] = {"trt_fp16_enable": bool(fp16)}
            if cache_dir:
                opts.update(trt_engine_cache_enable=True, trt_engine_cache_path=cache_dir)
            return opts
        return {}

    def _session(self, path: Path, options, providers: list[str], provider_opts: list[dict]):
        try:
            return self._ort.InferenceSession(str(path), sess_options=options, providers=providers,
                                              provider_options=provider_opts)
        except (RuntimeError, ValueError) as err:  # onnxruntime raises its own Fail/InvalidGraph types
            raise BackendUnavailable(f"onnxruntime could not load {path}: {err}") from None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "providers": list(self.providers),
                "threads": self.threads, "onnxruntime": self._ort.__version__,
                "fallback_reasons": list(self.fallback_reasons)}

    def _to_native(self, a: np.ndarray) -> np.ndarray:
        return a

    def _to_numpy(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a, np.float32)

    def _encode(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return self._enc.run(self._enc_outputs, inputs)[0]

    def _locate(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return self._loc.run(["scene"], inputs)[0]

    def _step(self, x: np.ndarray, t: np.ndarray, features: np.ndarray) -> np.ndarray:
        if self.device != "cpu":
            feeds = {"x": np.ascontiguousarray(x, np.float32), "t": np.ascontiguousarray(t, np.float32),
                     "features": np.ascontiguousarray(features, np.float32)}
            return self._stp.run(["velocity"], feeds)[0].astype(np.float32, copy=False)
        # CPU: inputs and output bound once per shape to pre-allocated buffers (I/O binding); a
        # step then copies three small arrays in and one out instead of converting the feeds and
        # allocating the output (measured: 0.94 -> 0.60 ms per step of the default expert)
        key = (x.shape, t.shape, features.shape)
        bound = self._bindings.get(key)
        if bound is None:
            bound = self._bindings[key] = self._bind(key)
        io, bx, bt, bf, out = bound
        bx[...] = x
        bt[...] = t
        bf[...] = features
        self._stp.run_with_iobinding(io)
        return out.copy()

    def _bind(self, shapes: tuple[tuple[int, ...], ...]):
        io = self._stp.io_binding()
        bufs = [np.empty(shape, np.float32) for shape in shapes]
        for name, buf in zip(("x", "t", "features"), bufs):
            io.bind_input(name, "cpu", 0, np.float32, list(buf.shape), buf.ctypes.data)
        out = np.empty(shapes[0], np.float32)  # velocity has the shape of x
        io.bind_output("velocity", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
        return io, *bufs, out
