"""Native TensorRT backend: engines built from the ONNX export, the Euler loop driven per step.

Written against the TensorRT 10 Python API (named I/O tensors, ``execute_async_v3``) and **not yet
run on a GPU**: ``scripts/gpu_check.sh`` is where it is first measured. Without TensorRT this module
still imports (TensorRT and torch are imported lazily) and :func:`unavailable_reason` says exactly
what is missing and how to install it.

What it does, per part of the export (``encoder.onnx``, ``denoise_step.onnx``, and ``locator.onnx``
for scene-memory models):

* builds an engine with the ONNX parser at ``precision`` fp32 / fp16 / bf16 (I/O stays float32 as in
  the graph; in reduced precision the normalisation layers are asked to stay float32), one
  optimisation profile covering batch 1..``max_batch`` (tuned for batch 1), a workspace limit, and
  TensorRT's timing cache (kept per TensorRT version and GPU, so rebuilds are fast);
* caches the engine on disk (:mod:`edge.backends.engine_cache`): keyed by the ONNX file's sha256,
  the TensorRT version, the GPU name and compute capability, the precision, the batch range and the
  builder settings; a stale or foreign engine is refused and rebuilt, never loaded;
* allocates every device buffer once (torch CUDA tensors sized for ``max_batch``) and binds their
  addresses to the execution contexts once; a call of batch ``b`` uses the first ``b`` rows;
* runs the K-step Euler loop from the host, one engine call per step, the integration state float32
  on the device; rows sorted by K so that finished rows drop out as a shrinking prefix
  (:func:`edge.backends.base.euler_schedule`). K is elastic: any K runs on the same engine.

Device memory and the CUDA stream come from torch (a CUDA build of torch is required: JetPack's
wheel on a Jetson, a cu12x/cu13x wheel on x86).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge.backends.base import (
    Backend,
    BackendUnavailable,
    euler_schedule,
    steps_per_row,
)
from edge.backends.engine_cache import DeviceInfo, EngineCache, engine_key, sha256_file
from edge.errors import EdgeError

log = logging.getLogger(__name__)

NEEDS = "needs a Jetson or an NVIDIA GPU with TensorRT 10"
INSTALL = ("on a Jetson, TensorRT comes with JetPack 6 or newer (apt package python3-libnvinfer; "
           "create the venv with --system-site-packages so it is visible); on x86 with an NVIDIA GPU "
           "and driver, `pip install tensorrt` (the gpu extra; in a checkout: pip install -e '.[gpu]')")
TORCH_HINT = ("the tensorrt backend keeps its device buffers in torch CUDA tensors: install a CUDA "
              "build of torch (on a Jetson NVIDIA's JetPack wheel, on x86 a cu12x/cu13x wheel)")
PRECISIONS = ("fp32", "fp16", "bf16")
ENGINE_API = "edge-trt-1"  # bump when how engines are built changes (part of the cache key)


def unavailable_reason() -> str:
    """Why this backend cannot run here ("" = it can)."""
    if importlib.util.find_spec("tensorrt") is None:
        return f"tensorrt is not installed: {INSTALL}; {NEEDS}"
    try:
        trt = importlib.import_module("tensorrt")
    except Exception as err:  # noqa: BLE001 - a broken install raises ImportError, OSError, ...
        return (f"tensorrt is installed but does not import ({type(err).__name__}: {err}); its "
                f"libraries (libnvinfer) are missing or do not match the driver: {INSTALL}")
    version = str(getattr(trt, "__version__", "0"))
    if _major(version) < 10:
        return (f"tensorrt {version} is too old: this backend uses the TensorRT 10 API (named I/O "
                "tensors, execute_async_v3); JetPack 6 or `pip install 'tensorrt>=10'`")
    if importlib.util.find_spec("torch") is None:
        return f"torch is not installed; {TORCH_HINT}"
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build; {TORCH_HINT}"
    if not torch.cuda.is_available():
        return (f"no CUDA GPU is visible (torch {torch.__version__}, CUDA {torch.version.cuda}): "
                "check the NVIDIA driver and CUDA_VISIBLE_DEVICES")
    return ""


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def torch_dtype(trt: Any, torch: Any, dtype: Any) -> Any:
    """A TensorRT DataType -> the torch dtype of a buffer for it."""
    table = {}
    for trt_name, torch_name in (("FLOAT", "float32"), ("HALF", "float16"), ("BF16", "bfloat16"),
                                 ("INT8", "int8"), ("INT32", "int32"), ("INT64", "int64"),
                                 ("UINT8", "uint8"), ("BOOL", "bool")):
        if hasattr(trt.DataType, trt_name):
            table[getattr(trt.DataType, trt_name)] = getattr(torch, torch_name)
    if dtype not in table:
        raise EdgeError(f"TensorRT tensor type {dtype} has no torch buffer type here")
    return table[dtype]


def build_engine(trt: Any, logger: Any, onnx_path: Path, precision: str,
                 batch_range: tuple[int, int, int], workspace_mb: int, timing_cache: bytes = b""
                 ) -> tuple[bytes, bytes]:
    """Parse ``onnx_path`` and build a serialised engine; returns (engine, updated timing cache).

    Every input's first axis is the batch (min, opt, max from ``batch_range``); the other axes must
    be static, as ``edge export`` writes them.
    """
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT 10: every network is explicit-batch
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EdgeError(f"TensorRT could not parse {onnx_path}: {errors or 'no error reported'}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)
    if precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    elif precision == "bf16":
        config.set_flag(trt.BuilderFlag.BF16)
    if precision != "fp32":
        _normalisation_in_fp32(trt, network, config)
    lo, opt, hi = batch_range
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        dims = tuple(tensor.shape)
        if not dims or dims[0] != -1 or any(d < 0 for d in dims[1:]):
            raise EdgeError(f"{onnx_path.name}: input {tensor.name!r} has shape {dims}; expected a "
                            "dynamic batch axis first and static other axes (re-export with edge export)")
        rest = dims[1:]
        profile.set_shape(tensor.name, (lo, *rest), (opt, *rest), (hi, *rest))
    config.add_optimization_profile(profile)
    cache = None
    if timing_cache:
        try:
            cache = config.create_timing_cache(timing_cache)
            if not config.set_timing_cache(cache, False):  # ignore_mismatch=False
                cache = None
        except Exception as err:  # noqa: BLE001 - a corrupt cache must not stop the build
            log.warning("TensorRT timing cache unusable (%s); starting a fresh one", err)
            cache = None
    if cache is None:
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise EdgeError(f"TensorRT could not build an engine for {onnx_path.name} at {precision} "
                        "(see the TensorRT log above)")
    updated = config.get_timing_cache()
    return bytes(memoryview(serialized)), bytes(memoryview(updated.serialize())) if updated else b""


def _normalisation_in_fp32(trt: Any, network: Any, config: Any) -> None:
    """Ask TensorRT to keep LayerNorm (INormalizationLayer) in float32 in an fp16/bf16 engine: its
    variance overflows fp16 easily (ONNX Runtime's TRT EP has trt_layer_norm_fp32_fallback)."""
    norm = getattr(trt.LayerType, "NORMALIZATION", None)
    flag = getattr(trt.BuilderFlag, "PREFER_PRECISION_CONSTRAINTS", None)
    if norm is None or flag is None:
        return
    marked = 0
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type == norm:
            if hasattr(layer, "compute_precision"):
                layer.compute_precision = trt.float32
            layer.precision = trt.float32
            for j in range(layer.num_outputs):
                layer.set_output_type(j, trt.float32)
            marked += 1
    if marked:
        config.set_flag(flag)


class TrtEngine:
    """One engine, its execution context and its device buffers (batch ``max_batch``), bound once.

    ``inputs`` / ``outputs`` map tensor names to torch tensors of shape (max_batch, ...); a call of
    batch ``b`` reads and writes their first ``b`` rows (contiguous, so the bound addresses hold).
    """

    def __init__(self, trt: Any, torch: Any, engine: Any, name: str, max_batch: int, device: Any) -> None:
        self.name, self.engine = name, engine
        self.context = engine.create_execution_context()
        if self.context is None:
            raise BackendUnavailable(f"TensorRT could not create an execution context for {name} "
                                     "(out of GPU memory?)")
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        for i in range(engine.num_io_tensors):
            tname = engine.get_tensor_name(i)
            shape = tuple(engine.get_tensor_shape(tname))
            if not shape or shape[0] != -1:
                raise EdgeError(f"engine {name}: tensor {tname!r} has shape {shape}; expected a "
                                "dynamic batch axis first")
            buf = torch.empty((max_batch, *shape[1:]), dtype=torch_dtype(trt, torch, engine.get_tensor_dtype(tname)),
                              device=device)
            if engine.get_tensor_mode(tname) == trt.TensorIOMode.INPUT:
                self.inputs[tname] = buf
            else:
                self.outputs[tname] = buf
            if not self.context.set_tensor_address(tname, buf.data_ptr()):
                raise EdgeError(f"engine {name}: could not bind {tname!r}")
        self._batch = -1

    def run(self, batch: int, stream: int) -> None:
        """Enqueue the engine on ``stream`` (a cudaStream_t as int) for the first ``batch`` rows."""
        if batch != self._batch:
            for tname, buf in self.inputs.items():
                if not self.context.set_input_shape(tname, (batch, *buf.shape[1:])):
                    raise EdgeError(f"engine {self.name}: batch {batch} is outside its optimisation "
                                    "profile")
            self._batch = batch
        if not self.context.execute_async_v3(stream):
            raise EdgeError(f"engine {self.name}: execute_async_v3 failed (see the TensorRT log)")


class TensorRTBackend(Backend):
    """Runs an ``edge export`` directory through TensorRT engines (built once, cached on disk)."""

    name = "tensorrt"

    def __init__(self, export_dir: str | Path, precision: str = "fp32", max_batch: int = 8,
                 workspace_mb: int = 1024, cache_dir: str | Path = "", device: str = "cuda",
                 seed: int = 0, robot: Any = None) -> None:
        reason = unavailable_reason()
        if reason:
            raise BackendUnavailable(f"backend 'tensorrt' is not available: {reason}")
        if precision not in PRECISIONS:
            raise BackendUnavailable(f"tensorrt backend: precision {precision!r} is not one of {list(PRECISIONS)}")
        import tensorrt as trt
        import torch

        from edge.export import ENCODER_FILE, LOCATOR_FILE, STEP_FILE, read_metadata
        from edge.vla.spec import ModelSpec

        if precision == "bf16" and not hasattr(trt.BuilderFlag, "BF16"):
            raise BackendUnavailable(f"tensorrt {trt.__version__} has no BF16 builder flag; use fp16 or fp32")
        dev = torch.device(device)
        if dev.type != "cuda":
            raise BackendUnavailable(f"tensorrt backend runs on a CUDA device, not {device!r}")
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        dev = torch.device("cuda", index)
        export_dir = Path(export_dir)
        meta = read_metadata(export_dir)
        spec = ModelSpec.from_dict(meta["spec"])
        spec.check_robot(robot, source=str(export_dir))
        self.precision, self.max_batch = precision, int(max_batch)
        self.device_info = DeviceInfo.from_torch(index)
        self.tensorrt_version = str(trt.__version__)
        self.cache = EngineCache(cache_dir or None)
        self.engine_sources: dict[str, str] = {}
        self._trt_logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._trt_logger)
        parts = {"encoder": ENCODER_FILE, "denoise_step": STEP_FILE}
        if spec.scene_memory:
            parts["locator"] = LOCATOR_FILE
        settings = {"api": ENGINE_API, "workspace_mb": int(workspace_mb),
                    "fp32_normalisation": precision != "fp32"}
        batch_range = (1, 1, self.max_batch)
        engines = {}
        with torch.cuda.device(index):
            for part, file in parts.items():
                onnx_path = export_dir / file
                key = engine_key(onnx_sha256=sha256_file(onnx_path), tensorrt_version=self.tensorrt_version,
                                 device=self.device_info, precision=precision, batch_range=batch_range,
                                 builder=settings)

                def build(onnx_path: Path = onnx_path) -> bytes:
                    timing = self.cache.read_timing_cache(self.tensorrt_version, self.device_info)
                    data, timing = build_engine(trt, self._trt_logger, onnx_path, precision, batch_range,
                                                workspace_mb, timing)
                    if timing:
                        self.cache.write_timing_cache(self.tensorrt_version, self.device_info, timing)
                    return data

                engine, how = self.cache.get_or_build(f"{part}-{precision}", key, build,
                                                      self._runtime.deserialize_cuda_engine)
                self.engine_sources[part] = how
                engines[part] = TrtEngine(trt, torch, engine, part, self.max_batch, dev)
        self._setup(spec, engines, torch, dev, seed)

    @classmethod
    def _from_engines(cls, spec: Any, engines: Mapping[str, Any], device: str = "cpu",
                      max_batch: int = 8, seed: int = 0) -> TensorRTBackend:
        """The backend around ready engine objects (same ``inputs``/``outputs``/``run`` interface as
        :class:`TrtEngine`): lets the host-side loop be tested without TensorRT."""
        import torch

        self = cls.__new__(cls)
        self.precision, self.max_batch = "fp32", int(max_batch)
        self.device_info, self.tensorrt_version, self.cache = None, "none", None
        self.engine_sources = {part: "given" for part in engines}
        self._setup(spec, dict(engines), torch, torch.device(device), seed)
        return self

    def _setup(self, spec: Any, engines: dict[str, Any], torch: Any, dev: Any, seed: int) -> None:
        super().__init__(spec, str(dev), seed)
        self._torch, self._dev = torch, dev
        self._enc, self._stp, self._loc = engines["encoder"], engines["denoise_step"], engines.get("locator")
        want = {"encoder": set(spec.encoder_inputs), "denoise_step": {"x", "t", "features"}}
        for part, names in want.items():
            if set(engines[part].inputs) != names:
                raise EdgeError(f"{part} engine takes {sorted(engines[part].inputs)}, the model "
                                f"needs {sorted(names)}; rebuild from a matching export")
        self._stream = torch.cuda.Stream(device=dev) if dev.type == "cuda" else None
        # the Euler state: float32 whatever the engines' precision, allocated once
        self._state = torch.zeros((self.max_batch, spec.chunk_len, spec.action_dim),
                                  dtype=torch.float32, device=dev)

    def close(self) -> None:
        """Release contexts and engines before the runtime that made them (also on garbage collection)."""
        for attr in ("_enc", "_stp", "_loc"):
            if hasattr(self, attr):
                setattr(self, attr, None)
        if hasattr(self, "_runtime"):
            self._runtime = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from a finaliser
            self.close()

    @contextlib.contextmanager
    def _on_device(self) -> Iterator[int]:
        """Current device + the backend's stream; yields the stream handle for TensorRT."""
        if self._stream is None:
            yield 0
            return
        torch = self._torch
        with torch.cuda.device(self._dev), torch.cuda.stream(self._stream):
            yield self._stream.cuda_stream

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "precision": self.precision,
                "tensorrt": self.tensorrt_version, "max_batch": self.max_batch,
                "gpu": self.device_info.name if self.device_info else None,
                "compute_capability": self.device_info.compute_capability if self.device_info else None,
                "engines": dict(self.engine_sources),
                "engine_cache": str(self.cache.root) if self.cache else None}

    # --- primitives --------------------------------------------------------------------------------
    def _to_native(self, a: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(a)).to(self._dev)

    def _to_numpy(self, a: Any) -> np.ndarray:
        return a.detach().to("cpu", self._torch.float32).numpy()

    def _run_part(self, engine: Any, inputs: Mapping[str, np.ndarray], output: str) -> np.ndarray:
        """Host arrays in (any batch; sliced to max_batch), host float32 array of ``output`` out."""
        torch = self._torch
        batch = next(iter(inputs.values())).shape[0]
        chunks = []
        for s in range(0, batch, self.max_batch):
            n = min(self.max_batch, batch - s)
            with self._on_device() as stream:
                for name, buf in engine.inputs.items():
                    buf[:n].copy_(torch.from_numpy(np.ascontiguousarray(inputs[name][s:s + n])))
                engine.run(n, stream)
                chunks.append(engine.outputs[output][:n].to("cpu", torch.float32, copy=True).numpy())
        return np.concatenate(chunks, axis=0)

    def _encode(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return self._run_part(self._enc, inputs, "features")

    def _locate(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        if self._loc is None:
            raise EdgeError("this export has no locator engine")
        return self._run_part(self._loc, inputs, "scene")

    def _step(self, x: Any, t: Any, features: Any) -> Any:
        """One NFE (used by :meth:`denoise_step`); the result is synchronised for the caller."""
        host = {"x": self._to_numpy(x), "t": self._to_numpy(t), "features": self._to_numpy(features)}
        return self._to_native(self._run_part(self._stp, host, "velocity"))

    # --- the sampling loop -----------------------------------------------------------------------
    def sample(self, features: np.ndarray, noise: np.ndarray | None = None,
               num_steps: int | Sequence[int] | np.ndarray = 10) -> np.ndarray:
        """As :meth:`Backend.sample` (same noise draws and t / dt values), one engine call per step."""
        feats = self._check_features(features)
        batch = feats.shape[0]
        ks = steps_per_row(num_steps, batch)
        x0 = self.draw_noise(batch) if noise is None else self._check_latent(noise, batch, "noise")
        out = np.empty((batch, self.spec.chunk_len, self.spec.action_dim), np.float32)
        for s in range(0, batch, self.max_batch):
            e = min(s + self.max_batch, batch)
            out[s:e] = self._sample_slice(feats[s:e], np.asarray(x0[s:e], np.float32), ks[s:e])
        return out * self._action_std + self._action_mean

    def _sample_slice(self, feats: np.ndarray, x0: np.ndarray, ks: np.ndarray) -> np.ndarray:
        torch = self._torch
        b = len(ks)
        order, steps = euler_schedule(ks)
        t_tab = np.zeros((len(steps), b), np.float32)
        dt_tab = np.zeros((len(steps), b, 1, 1), np.float32)
        for i, (n, t, dt) in enumerate(steps):
            t_tab[i, :n], dt_tab[i, :n, 0, 0] = t, dt
        stp = self._stp
        x_in, t_in, f_in = stp.inputs["x"], stp.inputs["t"], stp.inputs["features"]
        v_out = stp.outputs["velocity"]
        with self._on_device() as stream:
            x = self._state[:b]
            x.copy_(torch.from_numpy(np.ascontiguousarray(x0[order])))
            f_in[:b].copy_(torch.from_numpy(np.ascontiguousarray(feats[order])))
            t_dev = torch.from_numpy(t_tab).to(self._dev)
            dt_dev = torch.from_numpy(dt_tab).to(self._dev)
            for i, (n, _, _) in enumerate(steps):
                x_in[:n].copy_(x[:n])  # float32 state -> the engine's x input
                t_in[:n].copy_(t_dev[i, :n])
                stp.run(n, stream)
                x[:n] += dt_dev[i, :n] * v_out[:n].float()
            done = x.to("cpu", copy=True).numpy()  # waits for the stream
        out = np.empty_like(done)
        out[order] = done
        return out
