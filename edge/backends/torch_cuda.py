"""Torch on an NVIDIA GPU: the whole K-step Euler loop on the device, one CUDA graph per (K, batch).

:class:`TorchCudaBackend` is :class:`edge.backends.torch_backend.TorchBackend` (same model, precision,
optional ``torch.compile``) with its own :meth:`sample`:

* the integration state ``x`` is float32 on the device for every network precision: each step casts
  ``x`` to the network dtype, runs the denoiser and casts the velocity back to float32 before
  ``x = x + dt * v`` (as :meth:`edge.backends.base.Backend.sample`, without a host round trip per
  step);
* on a CUDA device and with ``cuda_graphs=True``, the K network calls + Euler updates of one query
  are captured once as a CUDA graph per distinct (K, batch), lazily on first use, and replayed:
  static input buffers (noise, features) are filled by a copy, the graph is replayed, the static
  output is copied back. K stays elastic (a new K captures one more graph; nothing is rebuilt), and
  a capture that fails falls back to the eager device loop with the reason logged;
* rows with different K in one batch run eagerly on the device, rows sorted by K so the rows still
  integrating are a prefix of the batch (:func:`edge.backends.base.euler_schedule`).

On a CPU device the graph path is skipped (:attr:`graph_skip_reason` says why) and the eager loop
gives the same chunks as :class:`TorchBackend` bit for bit at fp32 (tested). Graph capture follows
PyTorch's documented recipe: warm-up iterations on a side stream, then capture into a private memory
pool per graph; the graph's time values and step sizes are device tensors allocated before capture.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from edge.backends.base import euler_schedule, steps_per_row
from edge.backends.torch_backend import TorchBackend
from edge.vla.model import VLAModel

log = logging.getLogger(__name__)

WARMUP_ITERS = 3  # before capture: cuBLAS/cuDNN handles and workspaces, lazy init, torch.compile


@dataclass
class _Graph:
    graph: Any                # torch.cuda.CUDAGraph
    noise: torch.Tensor       # static input (b, H, Da) float32
    features: torch.Tensor    # static input (b, D) float32
    out: torch.Tensor         # static output (b, H, Da) float32, overwritten by every replay
    constants: tuple          # t / dt tensors the graph reads; must live as long as the graph


def graph_skip_reason(device: str, cuda_graphs: bool) -> str:
    """Why the CUDA-graph path is off for this device and setting ("" = it is on)."""
    if not cuda_graphs:
        return "disabled (cuda_graphs=false): the K-step loop runs eagerly on the device"
    if not str(device).startswith("cuda"):
        return (f"device {device!r} is not a CUDA device: CUDA graphs need an NVIDIA GPU; the K-step "
                "loop runs eagerly")
    if not torch.cuda.is_available():
        return f"this torch ({torch.__version__}) sees no CUDA GPU"
    return ""


class TorchCudaBackend(TorchBackend):
    """:class:`TorchBackend` with a device-side K-step loop and lazily captured CUDA graphs."""

    name = "torch"

    def __init__(self, model: VLAModel, device: str = "cpu", precision: str = "fp32",
                 compile: bool = False, seed: int = 0, threads: int = 0, cuda_graphs: bool = True,
                 max_graphs: int = 64) -> None:
        super().__init__(model, device=device, precision=precision, compile=compile, seed=seed,
                         threads=threads)
        self.graph_skip_reason = graph_skip_reason(device, cuda_graphs)
        if self.graph_skip_reason and cuda_graphs:
            log.info("CUDA graphs off: %s", self.graph_skip_reason)
        self._max_graphs = max(int(max_graphs), 1)
        self._graphs: OrderedDict[tuple[int, int], _Graph] = OrderedDict()

    @classmethod
    def from_checkpoint(cls, path: str, robot: Any = None, **kwargs: Any) -> TorchCudaBackend:
        from edge.vla.checkpoint import load_model

        return cls(load_model(path, robot=robot), **kwargs)

    @property
    def cuda_graphs(self) -> bool:
        return not self.graph_skip_reason

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(cuda_graphs=self.cuda_graphs, graph_skip_reason=self.graph_skip_reason,
                   graphs_captured=[list(k) for k in self._graphs])
        if self.device.startswith("cuda") and torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(torch.device(self.device))
        return out

    def prepare(self, num_steps: Sequence[int], batch: int = 1) -> list[tuple[int, int]]:
        """Capture the graphs for these K now (at start-up, before the robot moves) instead of on
        the first query that uses each K; returns the (K, batch) graphs held. Eager on CPU."""
        feats = np.zeros((batch, self.spec.feature_dim), np.float32)
        noise = np.zeros((batch, self.spec.chunk_len, self.spec.action_dim), np.float32)
        for k in num_steps:
            self.sample(feats, noise, int(k))
        return list(self._graphs)

    # --- sampling --------------------------------------------------------------------------------
    def sample(self, features: np.ndarray, noise: np.ndarray | None = None,
               num_steps: int | Sequence[int] | np.ndarray = 10) -> np.ndarray:
        """As :meth:`Backend.sample` (same noise draws, same t and dt values), loop on the device."""
        feats = self._check_features(features)
        batch = feats.shape[0]
        ks = steps_per_row(num_steps, batch)
        x0 = self.draw_noise(batch) if noise is None else self._check_latent(noise, batch, "noise")
        x0 = np.array(x0, dtype=np.float32, copy=True)
        with torch.no_grad():
            if np.all(ks == ks[0]):
                k = int(ks[0])
                x = self._graph_sample(feats, x0, k) if self.cuda_graphs else None
                if x is None:
                    x = self._uniform_loop(self._to_native(x0), self._to_native(feats), k)
            else:
                x = self._mixed_loop(feats, x0, ks)
            out = self._to_numpy(x)
        return out * self._action_std + self._action_mean

    def _uniform_loop(self, x: torch.Tensor, f: torch.Tensor, k: int,
                      ts: Sequence[torch.Tensor] | None = None, dt: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """K Euler steps for every row; x float32 (b, H, Da), f (b, D) on the device."""
        b = x.shape[0]
        f = f.to(self._dtype)
        if dt is None:
            dt = torch.full((b, 1, 1), np.float32(1.0 / k), dtype=torch.float32, device=x.device)
        for i in range(k):
            t = ts[i] if ts is not None else torch.full((b,), np.float32(i / k), dtype=torch.float32,
                                                        device=x.device)
            x = x + dt * self._step_fn(x.to(self._dtype), t, f).float()
        return x

    def _mixed_loop(self, feats: np.ndarray, x0: np.ndarray, ks: np.ndarray) -> torch.Tensor:
        """Rows with different K: sorted by K so the active rows are a prefix, then un-sorted."""
        order, steps = euler_schedule(ks)
        x = self._to_native(np.ascontiguousarray(x0[order]))
        f = self._to_native(np.ascontiguousarray(feats[order])).to(self._dtype)
        for n, t, dt in steps:
            v = self._step_fn(x[:n].to(self._dtype), self._to_native(t), f[:n]).float()
            x[:n] = x[:n] + self._to_native(dt[:, None, None]) * v
        out = torch.empty_like(x)
        out[self._to_native(order)] = x
        return out

    # --- CUDA graphs -----------------------------------------------------------------------------
    def _graph_sample(self, feats: np.ndarray, x0: np.ndarray, k: int) -> torch.Tensor | None:
        """Replay (capturing first if needed) the graph for (k, batch); None if capture failed."""
        key = (k, feats.shape[0])
        g = self._graphs.get(key)
        if g is None:
            try:
                g = self._capture(*key)
            except Exception as err:  # noqa: BLE001 - capture errors come as RuntimeError/others
                self.graph_skip_reason = (f"CUDA graph capture failed for K={k}, batch={key[1]} "
                                          f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                                          "the K-step loop runs eagerly")
                log.warning("%s", self.graph_skip_reason)
                self._graphs.clear()
                return None
            self._graphs[key] = g
            while len(self._graphs) > self._max_graphs:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        g.noise.copy_(torch.from_numpy(x0))
        g.features.copy_(torch.from_numpy(np.ascontiguousarray(feats, np.float32)))
        g.graph.replay()
        return g.out

    def _capture(self, k: int, b: int) -> _Graph:
        dev = torch.device(self.device)
        h, da, d = self.spec.chunk_len, self.spec.action_dim, self.spec.feature_dim
        noise = torch.zeros(b, h, da, dtype=torch.float32, device=dev)
        feats = torch.zeros(b, d, dtype=torch.float32, device=dev)
        ts = tuple(torch.full((b,), np.float32(i / k), dtype=torch.float32, device=dev) for i in range(k))
        dt = torch.full((b, 1, 1), np.float32(1.0 / k), dtype=torch.float32, device=dev)

        def body() -> torch.Tensor:
            return self._uniform_loop(noise, feats, k, ts, dt)  # never writes into noise

        with torch.cuda.device(dev):
            side = torch.cuda.Stream(device=dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                for _ in range(WARMUP_ITERS):
                    body()
            torch.cuda.current_stream(dev).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = body()
            torch.cuda.synchronize(dev)
        log.info("captured a CUDA graph for K=%d, batch=%d", k, b)
        return _Graph(graph, noise, feats, out, (ts, dt))
