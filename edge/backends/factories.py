"""The built-in backends' factories (:data:`edge.backends.BACKEND_FACTORIES`): each
``factory(config, model_path, robot, verify) -> Backend``, the signature a user's own
``--backend pkg.module:factory`` has too. Imported only when a backend is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge.backends import BackendConfig, _is_export_dir
from edge.backends.base import Backend, BackendUnavailable
from edge.errors import EdgeError


def torch_backend(config: BackendConfig, model_path: str | Path, robot: Any = None, verify: bool = True) -> Backend:
    """``model.pt`` in-process (eager, optionally compiled); on a CUDA device the K-step loop stays on
    the GPU with one CUDA graph per K."""
    path = Path(model_path)
    if _is_export_dir(path):
        raise EdgeError(f"{path} is an ONNX export; the torch backend needs the checkpoint "
                        "(model.pt) it was exported from")
    from edge.backends.torch_backend import TorchBackend
    from edge.vla.checkpoint import load_model

    if config.device.startswith("cuda"):  # the K-step loop on the GPU, CUDA graphs per K
        from edge.backends.torch_cuda import TorchCudaBackend

        return TorchCudaBackend(load_model(path, robot=robot, verify=verify),
                                device=config.device, precision=config.precision,
                                compile=config.compile, seed=config.seed,
                                threads=config.threads, cuda_graphs=config.cuda_graphs)
    return TorchBackend(load_model(path, robot=robot, verify=verify), device=config.device,
                        precision=config.precision, compile=config.compile,
                        seed=config.seed, threads=config.threads)


def ort_backend(config: BackendConfig, model_path: str | Path, robot: Any = None, verify: bool = True) -> Backend:
    """The ``edge export`` graphs under ONNX Runtime (a checkpoint is exported on first use)."""
    if config.precision != "fp32":
        raise BackendUnavailable("onnxruntime backend runs the fp32 export; for reduced precision "
                                 "use providers=[tensorrt] with trt_fp16=true")
    from edge.backends.ort_backend import OrtBackend
    from edge.export import ensure_export

    export_dir = ensure_export(Path(model_path), verify=verify)  # an export dir: verified, used as it is
    return OrtBackend(export_dir, providers=config.providers, threads=config.threads,
                      inter_op_threads=config.inter_op_threads,
                      allow_spinning=config.allow_spinning,
                      graph_optimization=config.graph_optimization,
                      trt_cache_dir=config.trt_cache_dir, trt_fp16=config.trt_fp16,
                      seed=config.seed, robot=robot)


def tensorrt_backend(config: BackendConfig, model_path: str | Path, robot: Any = None,
                     verify: bool = True) -> Backend:
    """Native TensorRT engines built from the export, cached on disk."""
    from edge.backends.tensorrt_backend import TensorRTBackend
    from edge.export import ensure_export

    return TensorRTBackend(ensure_export(Path(model_path), verify=verify), precision=config.precision,
                           max_batch=config.trt_max_batch, workspace_mb=config.trt_workspace_mb,
                           cache_dir=config.engine_cache_dir,
                           device=config.device if config.device.startswith("cuda") else "cuda",
                           seed=config.seed, robot=robot)
