"""The trained adapter as a runtime scheduler: ``edge run --scheduler eqrl [--adapter DIR]``.

:class:`EqrlScheduler` satisfies :class:`edge.contracts.Scheduler`: per query it runs the adapter's
deterministic decision (the actor's mean noise and schedule, the difficulty from the Q^W ensemble
with the running statistics frozen at the end of training, the prior gate as trained) on the VLA's
features and the runtime context — exactly :meth:`adapters.eqrl.agent.EqrlAgent.act` with
``deterministic=True`` and the same standard-normal draws for the noise (``noise="sample"``, the
default: w ~ the adapter's noise distribution, as in training; ``"mean"``: its mode) — and returns a :class:`~edge.contracts.QueryPlan` whose
``noise`` is the latent w. Signals logged per query: ``u`` (difficulty), ``c_K``, ``c_C``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from adapters.eqrl.checkpoint import ONNX_FILE, SHIPPED_ADAPTERS, load_agent
from edge.contracts import QueryContext, QueryPlan
from edge.errors import EdgeError

log = logging.getLogger(__name__)

SHIPPED_ADAPTER = SHIPPED_ADAPTERS / "stack"  # the default; stack_efficient: value-gap schedule, 0.7x the NFE; stack_latency: trained with 0-300 ms latency


class EqrlScheduler:
    """Per query: the adapter's decision on (features, context). ``onnx`` = path of the exported
    decision network (run by ONNX Runtime, ~0.15 ms per query on one CPU thread) or None for the
    torch module (~1.3 ms)."""

    name = "eqrl"

    def __init__(self, agent: Any, gate: float, onnx: str | Path | None = None, threads: int = 1,
                 noise: str = "sample", seed: int = 0) -> None:
        if noise not in ("sample", "mean"):
            raise EdgeError(f"eqrl: noise={noise!r}; choose 'sample' (draw w from the adapter) or 'mean'")
        self.agent, self.gate, self.noise = agent, gate, noise
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._L = agent.H * agent.Da
        self._t_first = 0.0
        self._session = None
        if onnx is not None:
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            self._session = ort.InferenceSession(str(onnx), so, providers=["CPUExecutionProvider"])
        else:
            import torch

            torch.set_num_threads(threads)
        self.backend = "onnxruntime" if self._session is not None else "torch"

    @classmethod
    def load(cls, path: str | Path, backend: str = "auto", noise: str = "sample", seed: int = 0) -> EqrlScheduler:
        agent, gate, manifest = load_agent(path)
        d = Path(path) if Path(path).is_dir() else Path(path).parent
        onnx = d / ONNX_FILE
        if backend == "onnxruntime" and not onnx.is_file():
            raise EdgeError(f"{d} has no {ONNX_FILE}; export it with adapters.eqrl.export.export_onnx")
        listed = onnx.is_file() and (manifest.get("files") or {}).get(ONNX_FILE) is not None
        if onnx.is_file() and backend != "torch" and not listed:  # e.g. left from before a resumed run's saves
            if backend == "onnxruntime":
                raise EdgeError(f"{onnx}: not listed in {d / 'manifest.json'}, so not made from this adapter.pt; "
                                "re-export it (adapters.eqrl.export.export_onnx) or use the torch backend")
            log.warning("%s: not listed in %s (not made from this adapter.pt): deciding on torch", onnx,
                        d / "manifest.json")
        if listed:
            from edge.export import sha256_file

            if sha256_file(onnx) != manifest["files"][ONNX_FILE]:
                raise EdgeError(f"{onnx}: sha256 does not match {d / 'manifest.json'}; re-export it")
        use = onnx if listed and backend != "torch" else None
        obj = cls(agent, gate, use, noise=noise, seed=seed)
        from adapters.eqrl.checkpoint import ADAPTER_FILE
        from edge.export import sha256_file

        f = Path(path) if Path(path).is_file() else d / ADAPTER_FILE  # the weights load_agent read
        obj.source = {"adapter": str(f.resolve()), "adapter_sha256": sha256_file(f),
                      **({"onnx_sha256": sha256_file(use)} if use is not None else {})}  # the graph that decides
        return obj

    def describe(self) -> dict[str, Any]:
        """What ran, for the run records: the adapter (path and sha256 when loaded from one), backend, noise."""
        return {**getattr(self, "source", {}), "backend": self.backend, "noise": self.noise}

    def decide(self, features: np.ndarray, context: np.ndarray, eps: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """One decision. ``eps`` (L,) standard-normal draws for the noise; None = the next draws of
        this scheduler's seeded generator ("sample") or zeros ("mean")."""
        f = np.asarray(features, np.float32).reshape(1, -1)
        x = np.asarray(context, np.float32).reshape(1, -1)
        if eps is None:
            eps = (self._rng.standard_normal(self._L) if self.noise == "sample" else np.zeros(self._L))
        e = np.asarray(eps, np.float32).reshape(1, -1)
        if self._session is None:
            return self.agent.act(f, x, self.gate, deterministic=True, noise_eps=e)
        w, c, k, ch, u = self._session.run(None, {"features": f, "context": x, "noise_eps": e})
        return {"w": w, "c": c, "K": k, "C": ch, "u": u}

    def plan(self, features: Any, history: QueryContext) -> QueryPlan:
        from edge.runtime.query_env import context_vector

        if history.query_index == 0:
            self._t_first = history.t_s
        d = self.decide(features, context_vector(history, self._t_first))
        k, c = int(d["K"][0]), int(min(d["C"][0], history.chunk_len))
        return QueryPlan(noise=d["w"][0].astype(np.float32), num_steps=k, execute=c, next_query_in_steps=c,
                         signals={"u": float(d["u"][0]), "c_K": float(d["c"][0, 0]), "c_C": float(d["c"][0, 1])})

    def reset(self) -> None:
        self._t_first = 0.0


def _adapter_path(name: str) -> Path:
    """An adapter directory, or the name of a shipped one; '' = the shipped ``stack``."""
    path = Path(name) if name else SHIPPED_ADAPTER
    if name and not path.exists() and "/" not in name and (SHIPPED_ADAPTERS / name).is_dir():
        path = SHIPPED_ADAPTERS / name
    return path


class SplitScheduler:
    """Noise from one scheduler, K and C (and when to query next) from another: e.g. one adapter's
    noise steering with another's compute schedule. Both see every query."""

    name = "eqrl"

    def __init__(self, schedule: Any, noise: Any) -> None:
        self.schedule, self.noise_source = schedule, noise

    def describe(self) -> dict[str, Any]:
        """Both adapters, for the run records."""
        return {role: getattr(x, "describe", lambda: {})() for role, x in (("schedule", self.schedule),
                                                                            ("noise", self.noise_source))}

    def plan(self, features: Any, history: QueryContext) -> QueryPlan:
        import dataclasses

        p = self.schedule.plan(features, history)
        w = self.noise_source.plan(features, history)
        return dataclasses.replace(p, noise=w.noise, signals={**w.signals, **p.signals})

    def reset(self) -> None:
        self.schedule.reset()
        self.noise_source.reset()


def eqrl_scheduler(cfg: Any, policy: Any = None) -> EqrlScheduler | SplitScheduler:
    """Registry factory: the adapter at ``cfg.scheduler.eqrl.adapter`` — a directory, or the name of a
    shipped one (``stack``, ``stack_efficient``, ``stack_latency``); '' = ``stack``. Its noise draws are
    seeded by the session's seed, like a fixed schedule's. With ``scheduler.eqrl.noise_adapter`` the
    noise comes from that adapter and K, C from this one (:class:`SplitScheduler`)."""
    e = cfg.scheduler.eqrl
    sched = EqrlScheduler.load(_adapter_path(e.adapter), noise=e.noise, seed=int(cfg.run.seed))
    if not e.noise_adapter:
        return sched
    return SplitScheduler(sched, EqrlScheduler.load(_adapter_path(e.noise_adapter), noise=e.noise,
                                                    seed=int(cfg.run.seed)))
