"""Inference backends for the reference VLA behind one interface (:class:`Backend`).

=============  ===========================================  =========================================
name           runs                                         needs
=============  ===========================================  =========================================
torch          ``model.pt`` in-process (eager, opt. compile);  torch (a CUDA build for device=cuda)
               on device=cuda the K-step loop stays on the
               GPU, one CUDA graph per K (``cuda_graphs``)
onnxruntime    the ``edge export`` graphs; TensorRT / CUDA /  onnxruntime (or onnxruntime-gpu); a
               CPU execution providers with fallback         checkpoint is exported on first use
tensorrt       native engines built from the export (encoder  TensorRT + a CUDA build of torch, on a
               + one denoising step), cached on disk          Jetson (JetPack) or an NVIDIA GPU
=============  ===========================================  =========================================

Example::

    from edge.backends import BackendConfig, make_backend
    backend = make_backend(BackendConfig(name="onnxruntime"), "checkpoints/vla_stack", robot=robot)
    feats = backend.encode(inputs)                       # (1, D), once per query
    actions = backend.sample(feats, noise, num_steps=4)  # (1, H, Da) float32, physical units

This package imports neither torch nor onnxruntime until a backend is made.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge.backends.base import Backend, BackendUnavailable, steps_per_row
from edge.config import ConfigError, cfg, check_fields
from edge.registry import Registry

log = logging.getLogger(__name__)

#: the built-in backends' factories; a name of the form ``pkg.module:factory`` is a user's own backend
BACKEND_FACTORIES = Registry("backend", {
    "torch": "edge.backends.factories:torch_backend",
    "onnxruntime": "edge.backends.factories:ort_backend",
    "tensorrt": "edge.backends.factories:tensorrt_backend",
})
BACKENDS = BACKEND_FACTORIES.names()
__all__ = ["BACKENDS", "BACKEND_FACTORIES", "Backend", "BackendConfig", "BackendUnavailable", "availability",
           "make_backend", "steps_per_row"]


@dataclass(frozen=True)
class BackendConfig:
    """How to run the VLA. Fields that do not apply to the chosen backend are ignored."""

    name: str = cfg("torch", "inference backend: torch, onnxruntime, tensorrt, or your own "
                    "'pkg.module:factory' (factory(config, model_path, robot, verify) -> Backend)")
    device: str = cfg("cpu", "torch device (cpu, cuda, cuda:1); onnxruntime picks it via providers")
    precision: str = cfg("fp32", "network precision (torch, tensorrt); the latent stays float32",
                         choices=("fp32", "bf16", "fp16"))
    compile: bool = cfg(False, "torch.compile the denoising step (falls back to eager on failure)")
    providers: tuple[str, ...] = cfg(("auto",), "onnxruntime execution providers in preference "
                                     "order: tensorrt, cuda, cpu (or full EP names); auto = all present")
    threads: int = cfg(0, "intra-op threads: onnxruntime per session (0 = all cores); torch "
                       "process-wide (0 = leave torch's setting)", range=(0, 256))
    inter_op_threads: int = cfg(1, "onnxruntime inter-op threads", range=(1, 64))
    allow_spinning: bool = cfg(True, "onnxruntime worker threads spin between ops (lower latency, "
                               "busier cores)")
    graph_optimization: str = cfg("all", "onnxruntime graph optimisation level",
                                  choices=("disable", "basic", "extended", "all"))
    trt_cache_dir: str = cfg("", "TensorRT EP engine cache directory ('' = no cache)")
    trt_fp16: bool = cfg(False, "TensorRT EP builds fp16 engines (inputs/outputs stay float32)")
    cuda_graphs: bool = cfg(True, "torch on a CUDA device: capture the K-step Euler loop once per "
                            "(K, batch) as a CUDA graph and replay it (ignored on cpu)")
    trt_max_batch: int = cfg(8, "tensorrt backend: the engines' optimisation profile covers batch "
                             "1..this (bigger batches run in slices)", range=(1, 4096))
    trt_workspace_mb: int = cfg(1024, "tensorrt backend: builder workspace limit, MiB",
                                range=(16, 1 << 20))
    engine_cache_dir: str = cfg("", "tensorrt backend: engine cache directory ('' = "
                                "$EDGE_ENGINE_CACHE or ~/.cache/edge/tensorrt)")
    seed: int = cfg(0, "seed of the backend's noise generator (used when no noise is passed)",
                    range=(0, 2**63 - 1))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.name not in BACKENDS and ":" not in self.name:
            raise ConfigError(f"name={self.name!r} is not allowed; choose one of "
                              f"{', '.join(map(repr, BACKENDS))} or your own 'pkg.module:factory'")


def availability() -> dict[str, str]:
    """Backend name -> "" if it can be made here, else the reason it cannot."""
    from edge.backends.tensorrt_backend import unavailable_reason

    out = {}
    out["torch"] = "" if importlib.util.find_spec("torch") else "torch is not installed"
    out["onnxruntime"] = ("" if importlib.util.find_spec("onnxruntime")
                          else "onnxruntime is not installed (pip install onnxruntime)")
    out["tensorrt"] = unavailable_reason()
    return out


def _is_export_dir(path: Path) -> bool:
    from edge.export import METADATA_FILE

    return path.is_dir() and (path / METADATA_FILE).is_file()


def make_backend(config: BackendConfig | str, model_path: str | Path, robot: Any = None,
                 verify: bool = True) -> Backend:
    """Build the configured backend for a checkpoint (dir or ``model.pt``) or an export directory.

    ``config.name`` is a built-in backend (:data:`BACKENDS`) or a user's own ``pkg.module:factory``
    with ``factory(config, model_path, robot, verify) -> Backend`` (a :class:`edge.backends.base.Backend`).
    ``robot`` (e.g. :class:`edge.robot_spec.RobotSpec`) is checked against the model's control rate
    and action layout; a mismatch raises :class:`edge.vla.spec.CheckpointMismatch`. An unknown or
    unavailable backend raises :class:`BackendUnavailable` listing the ones that are available.
    ``verify``: the files must match the sha256 hashes in the checkpoint's ``manifest.json`` (or the
    export's ``metadata.json``), else :class:`edge.vla.verify.VerificationError`.
    """
    if isinstance(config, str):
        config = BackendConfig(name=config) if config in BACKENDS or ":" in config else _unknown(config)
    if config.name in BACKENDS:
        status = availability()
        if status.get(config.name):
            usable = [n for n, why in status.items() if not why]
            raise BackendUnavailable(f"backend {config.name!r} is not available: {status[config.name]}. "
                                     f"Available here: {', '.join(usable) or 'none'}")
    return BACKEND_FACTORIES.resolve(config.name)(config, model_path, robot=robot, verify=verify)


def _unknown(name: str) -> BackendConfig:
    usable = [n for n, why in availability().items() if not why]
    raise BackendUnavailable(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}; "
                             f"available here: {', '.join(usable) or 'none'}")
