"""Compute schedulers behind the :class:`edge.contracts.Scheduler` protocol.

* ``fixed(K, C)`` — K denoising steps, execute C actions, next query after C ticks (the loop starts it
  earlier by the measured inference delay so the queue does not run dry).
* :class:`DenoisingVarianceScheduler` (``dvac``) — a training-free adaptive baseline after DVAC
  ("Denoising Tells When to Replan"): the spread of the clean-action estimates over the last few
  denoising steps, per chunk position, says how settled the model is about each future action.
  It executes the longest prefix whose mean variance stays under a threshold calibrated by a rolling
  median of recent variances (so no absolute scale has to be tuned per task or model), clamped to
  ``[min_execute, max_execute]``. It needs the per-step trace, so it only adapts with a policy that
  exposes ``denoise_step``; with a black-box sampler it behaves like ``fixed(K, max_execute)``.

The EQRL adapter plugs in through the same protocol (``plan(features, history) -> QueryPlan``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.config import ConfigError, cfg, check_fields
from edge.contracts import DenoiseTrace, QueryContext, QueryPlan, Scheduler


class FixedScheduler:
    """Same K and C on every query."""

    name = "fixed"

    def __init__(self, num_steps: int, execute: int, next_query_in_steps: int | None = None) -> None:
        if num_steps < 1 or execute < 1:
            raise ConfigError(
                f"fixed scheduler needs num_steps >= 1 and execute >= 1 (got K={num_steps}, C={execute})"
            )
        self.num_steps, self.execute = num_steps, execute
        self.next_query_in_steps = next_query_in_steps

    def plan(self, features: Any, history: QueryContext) -> QueryPlan:
        c = min(self.execute, history.chunk_len)
        nxt = c if self.next_query_in_steps is None else self.next_query_in_steps
        return QueryPlan(noise=None, num_steps=self.num_steps, execute=c, next_query_in_steps=nxt)

    def reset(self) -> None:
        pass


def fixed(num_steps: int, execute: int) -> FixedScheduler:
    """``fixed(K, C)``: K denoising steps per query, execute C actions of each chunk."""
    return FixedScheduler(num_steps, execute)


class DenoisingVarianceScheduler:
    """Training-free execution length from denoising variance (DVAC-style)."""

    name = "dvac"

    def __init__(
        self,
        num_steps: int = 10,
        min_execute: int = 2,
        max_execute: int = 16,
        last_steps: int = 3,
        kappa: float = 1.5,
        window: int = 32,
    ) -> None:
        if not 1 <= min_execute <= max_execute:
            raise ConfigError(
                f"dvac: need 1 <= min_execute <= max_execute (got {min_execute}, {max_execute})"
            )
        if last_steps < 2:
            raise ConfigError(f"dvac: last_steps={last_steps} must be >= 2 (a variance needs two estimates)")
        self.num_steps, self.min_execute, self.max_execute = num_steps, min_execute, max_execute
        self.last_steps, self.kappa = last_steps, kappa
        self._recent: deque[float] = deque(maxlen=window)

    def plan(self, features: Any, history: QueryContext) -> QueryPlan:
        c = min(self.max_execute, history.chunk_len)
        return QueryPlan(noise=None, num_steps=self.num_steps, execute=c, next_query_in_steps=c)

    def refine(self, plan: QueryPlan, trace: DenoiseTrace) -> QueryPlan:
        x = np.asarray(trace.x_clean)[-self.last_steps :]  # (m, H, Da)
        if x.shape[0] < 2:
            return plan
        var = x.var(axis=0).mean(axis=-1).astype(np.float64)  # (H,) spread per chunk position
        self._recent.extend(var.tolist())
        threshold = self.kappa * float(np.median(self._recent)) + 1e-12
        hi = min(self.max_execute, plan.execute, var.shape[0])
        lo = min(self.min_execute, hi)
        prefix_mean = np.cumsum(var[:hi]) / np.arange(1, hi + 1)
        ok = np.flatnonzero(prefix_mean[lo - 1 :] <= threshold)
        c = lo + int(ok[-1]) if ok.size else lo
        signals = {
            "var_first": float(var[0]),
            "var_mean": float(var.mean()),
            "var_threshold": threshold,
            "dvac_execute": float(c),
        }
        return dataclasses.replace(plan, execute=c, next_query_in_steps=c, signals=signals)

    def reset(self) -> None:
        self._recent.clear()


@dataclass(frozen=True)
class FixedSchedulerConfig:
    """``fixed``: the same K and C on every query."""

    num_steps: int = cfg(10, "denoising steps K per query", range=(1, 100))
    execute: int = cfg(8, "actions executed per chunk C", range=(1, 64))
    next_query_in_steps: int = cfg(0, "ticks between queries (0 = same as execute)", range=(0, 10000))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class DvacSchedulerConfig:
    """``dvac``: execution length from the denoising variance."""

    num_steps: int = cfg(10, "denoising steps K per query", range=(1, 100))
    min_execute: int = cfg(2, "shortest executed prefix", range=(1, 64))
    max_execute: int = cfg(16, "longest executed prefix", range=(1, 64))
    last_steps: int = cfg(3, "denoising steps whose estimates are compared", range=(2, 100))
    kappa: float = cfg(1.5, "threshold = kappa * rolling median variance", range=(0.0, 1e6))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.min_execute > self.max_execute:
            raise ConfigError(f"min_execute={self.min_execute} > max_execute={self.max_execute}; "
                              "lower min_execute or raise max_execute")


def make_scheduler(config: FixedSchedulerConfig | DvacSchedulerConfig) -> Scheduler:
    """The scheduler a kind's config describes."""
    if isinstance(config, FixedSchedulerConfig):
        return FixedScheduler(config.num_steps, config.execute, config.next_query_in_steps or None)
    if isinstance(config, DvacSchedulerConfig):
        return DenoisingVarianceScheduler(
            config.num_steps, config.min_execute, config.max_execute, config.last_steps, config.kappa
        )
    raise ConfigError(f"make_scheduler: no scheduler for {type(config).__name__}")
