"""PyTorch backend: eager by default, optionally ``torch.compile`` for the denoising step.

Precision is configuration: ``fp32`` (default), ``bf16`` or ``fp16`` run the network in that dtype,
while the sampling loop in :class:`edge.backends.base.Backend` keeps the latent in float32.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from edge.backends.base import Backend, BackendUnavailable
from edge.vla.model import VLAModel

log = logging.getLogger(__name__)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class TorchBackend(Backend):
    """Runs a :class:`VLAModel` in-process. Use :meth:`from_checkpoint` to load ``model.pt``."""

    name = "torch"

    def __init__(self, model: VLAModel, device: str = "cpu", precision: str = "fp32",
                 compile: bool = False, seed: int = 0, threads: int = 0) -> None:
        if precision not in DTYPES:
            raise BackendUnavailable(f"torch backend: precision {precision!r} is not one of {list(DTYPES)}")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BackendUnavailable(f"torch backend: device {device!r} requested but this torch "
                                     f"({torch.__version__}) sees no CUDA GPU; use device=cpu")
        super().__init__(model.spec, device, seed)
        if threads > 0:
            # process-wide: at batch 1 the ops are tiny and thread wake-ups dominate, so fewer
            # threads are often faster (measure with benchmarks/vla_latency.py)
            torch.set_num_threads(threads)
        self.precision = precision
        self._dtype = DTYPES[precision]
        self.model = model.to(device=device, dtype=self._dtype).eval()
        self._step_fn = self.model.denoise_step
        self.compiled = False
        if compile:
            self._step_fn = self._compile()

    @classmethod
    def from_checkpoint(cls, path: str, robot: Any = None, **kwargs: Any) -> TorchBackend:
        from edge.vla.checkpoint import load_model

        return cls(load_model(path, robot=robot), **kwargs)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "precision": self.precision,
                "compiled": self.compiled, "torch": torch.__version__,
                "threads": torch.get_num_threads()}

    def _compile(self):
        """torch.compile the step; fall back to eager with the reason logged if it cannot compile."""
        compiled = torch.compile(self.model.denoise_step, dynamic=True)
        probe = (torch.zeros(1, self.spec.chunk_len, self.spec.action_dim, device=self.device),
                 torch.zeros(1, device=self.device),
                 torch.zeros(1, self.spec.feature_dim, device=self.device, dtype=self._dtype))
        try:
            with torch.no_grad():
                compiled(*probe)
        except Exception as err:  # noqa: BLE001 - inductor raises many types (missing compiler, ...)
            log.warning("torch.compile failed (%s: %s); running the denoising step eagerly",
                        type(err).__name__, str(err).splitlines()[0] if str(err) else "")
            return self.model.denoise_step
        self.compiled = True
        return compiled

    def _to_native(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def _to_numpy(self, a: torch.Tensor) -> np.ndarray:
        return a.detach().to("cpu", torch.float32).numpy()

    def _encode(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            images = {cam: self._to_native(inputs[cam]) for cam in self.spec.cameras}
            scene = self._to_native(inputs["scene"]) if "scene" in inputs else None
            feats = self.model.encode(images, self._to_native(inputs["proprio"]),
                                      self._to_native(inputs["lang"]), scene)
        return self._to_numpy(feats)

    def _locate(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return self._to_numpy(self.model.locate_scene(self._to_native(inputs["front"]),
                                                          self._to_native(inputs["lang"])))

    def _step(self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            v = self._step_fn(x.to(self._dtype), t, features.to(self._dtype))
        return v.float()
