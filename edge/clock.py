"""Clocks and inference-latency models.

* :class:`RealClock` — ``time.monotonic``; ``sleep_until`` takes an absolute deadline (sleeping to
  a deadline instead of for a duration means a late tick does not push every later tick back).
  An optional short spin before the deadline trades CPU for wake-up precision.
* :class:`VirtualClock` — time only moves when the loop sleeps to its next deadline, i.e. exactly
  one control period per tick, however long the host takes. Inference latency is then *charged*
  in virtual time, either from a wall-clock measurement or from a :class:`LatencyModel`, so "what
  happens at 80 ms of inference latency" is a reproducible experiment.

Latency models (seeded, deterministic): ``constant`` (``latency_s``), ``gaussian``
(``mean_s``, ``std_s``, truncated at ``min_s``), ``per_step`` (``a_ms + b_ms * K`` plus optional
Gaussian jitter), the last matching the published "fixed prefix + cost per denoising step" shape,
and ``device``: the projected time of encoder + K steps of the checkpoint's network on a target
device (``device="orin-nano"``, ...; :mod:`edge.profiler.device_model`), so a run on this machine
is timed "as if on an Orin Nano" (the scene locator, once per episode, is not charged).
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from edge.config import ConfigError, cfg, check_fields
from edge.profiler.device_model import DEVICES
from edge.stats import percentiles


def parse_cpus(text: str, key: str) -> frozenset[int]:
    """CPU list ``"0"``, ``"1,3"`` or ``"1-3"`` -> a set; ``""`` -> empty (leave affinity as is).

    The CPUs must be ones this process may run on (``os.sched_getaffinity``); the error names
    ``key``, the value and the allowed CPUs."""
    if not isinstance(text, str):
        raise ConfigError(f"{key}={text!r} must be a string CPU list, e.g. '0', '1,3' or '1-3'")
    text = text.strip()
    if not text:
        return frozenset()
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, sep, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi) + 1) if sep else (int(lo),))
    except ValueError:
        raise ConfigError(f"{key}={text!r} is not a CPU list; write e.g. '0', '1,3' or '1-3'") from None
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    if not cpus or not cpus <= allowed:
        raise ConfigError(f"{key}={text!r}: CPUs {sorted(cpus - allowed) or '(none)'} are not available; "
                          f"this process may use {sorted(allowed)}")
    return frozenset(cpus)


def pin_current_thread(cpus: frozenset[int]) -> frozenset[int] | None:
    """Restrict the calling thread (Linux: ``sched_setaffinity(0)`` acts per thread) to ``cpus``;
    returns the previous set to restore, or None when nothing was changed."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return None
    old = frozenset(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus)
    return old


_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30


def thread_timer_slack() -> int | None:
    """Linux: the calling thread's timer slack in ns (how late the kernel may fire its sleeps, to
    batch wake-ups; 50,000 ns by default for normal threads, 0 for real-time ones); None where it
    cannot be read (other OSes)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        v = ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
    except (OSError, AttributeError):
        return None
    return None if v < 0 else int(v)


def set_thread_timer_slack(ns: int) -> int | None:
    """Linux: set the calling thread's timer slack (see :func:`thread_timer_slack`) and return the
    previous value to restore, or None where it cannot be read or set (other OSes)."""
    old = thread_timer_slack()
    if old is None:
        return None
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return old


#: the model whose work the ``device`` latency model counts when no checkpoint is named
SHIPPED_CHECKPOINT = Path(__file__).resolve().parent / "vla" / "checkpoints" / "stack"


class RealClock:
    """Monotonic wall clock. ``spin_s``: busy-wait this long before each deadline (0 = pure sleep)."""

    def __init__(self, spin_s: float = 0.0) -> None:
        if not 0.0 <= spin_s <= 0.01:
            raise ConfigError(f"spin_s={spin_s!r} is out of range; allowed [0, 0.01]")
        self.spin_s = spin_s
        self.is_virtual = False

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t_s: float) -> None:
        remaining = t_s - time.monotonic() - self.spin_s
        if remaining > 0:
            time.sleep(remaining)
        while self.spin_s and time.monotonic() < t_s:
            pass


class VirtualClock:
    """Deterministic clock: ``now()`` only changes through ``sleep_until`` / ``advance``."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._t = float(start_s)
        self.is_virtual = True

    def now(self) -> float:
        return self._t

    def sleep_until(self, t_s: float) -> None:
        if t_s > self._t:
            self._t = float(t_s)

    def advance(self, dt_s: float) -> None:
        if dt_s < 0:
            raise ValueError(f"cannot advance a clock backwards (dt_s={dt_s})")
        self._t += dt_s


class LatencyModel(Protocol):
    """Inference latency (seconds) charged for one query with ``num_steps`` denoising steps."""

    def sample(self, num_steps: int) -> float: ...


@dataclass
class LatencyConfig:
    """How inference latency is charged on the virtual clock."""

    kind: str = cfg(
        "measured",
        "measured (wall time of the real compute) or a model",
        choices=("measured", "constant", "gaussian", "per_step", "device"),
    )
    latency_s: float = cfg(0.05, "constant: latency per query", range=(0.0, 10.0))
    mean_s: float = cfg(0.05, "gaussian: mean latency", range=(0.0, 10.0))
    std_s: float = cfg(0.01, "gaussian: standard deviation", range=(0.0, 10.0))
    min_s: float = cfg(0.0, "gaussian/per_step: lower bound after jitter", range=(0.0, 10.0))
    a_ms: float = cfg(20.0, "per_step: fixed cost per query (encoder, prefix)", range=(0.0, 1e4))
    b_ms: float = cfg(5.0, "per_step: cost per denoising step", range=(0.0, 1e4))
    jitter_std_ms: float = cfg(0.0, "per_step: Gaussian jitter", range=(0.0, 1e4))
    seed: int = cfg(0, "seed of the jitter generator", range=(0, None))
    device: str = cfg("orin-nano", "device: the target whose projected query time is charged",
                      choices=tuple(DEVICES))
    checkpoint: str = cfg("", "device: the VLA checkpoint whose network is counted ('' = the shipped "
                          "stack model)")

    def __post_init__(self) -> None:
        check_fields(self)


class ConstantLatency:
    def __init__(self, latency_s: float) -> None:
        self.latency_s = float(latency_s)

    def sample(self, num_steps: int) -> float:
        return self.latency_s


class GaussianLatency:
    def __init__(self, mean_s: float, std_s: float, min_s: float = 0.0, seed: int = 0) -> None:
        self.mean_s, self.std_s, self.min_s = mean_s, std_s, min_s
        self._rng = np.random.default_rng(seed)

    def sample(self, num_steps: int) -> float:
        return max(self.min_s, float(self._rng.normal(self.mean_s, self.std_s)))


class PerStepLatency:
    """``a_ms + b_ms * K`` (+ jitter): fixed prefix cost plus a linear cost per denoising step."""

    def __init__(
        self, a_ms: float, b_ms: float, jitter_std_ms: float = 0.0, min_s: float = 0.0, seed: int = 0
    ) -> None:
        self.a_ms, self.b_ms, self.jitter_std_ms, self.min_s = a_ms, b_ms, jitter_std_ms, min_s
        self._rng = np.random.default_rng(seed)

    def sample(self, num_steps: int) -> float:
        ms = self.a_ms + self.b_ms * num_steps
        if self.jitter_std_ms > 0:
            ms += float(self._rng.normal(0.0, self.jitter_std_ms))
        return max(self.min_s, ms / 1000.0)


def make_latency_model(config: LatencyConfig) -> LatencyModel | None:
    """The configured model, or None for ``measured`` (charge the real compute time)."""
    if config.kind == "measured":
        return None
    if config.kind == "constant":
        return ConstantLatency(config.latency_s)
    if config.kind == "gaussian":
        return GaussianLatency(config.mean_s, config.std_s, config.min_s, config.seed)
    if config.kind == "device":
        return device_latency(config.device, config.checkpoint)
    return PerStepLatency(config.a_ms, config.b_ms, config.jitter_std_ms, config.min_s, config.seed)


def device_latency(device: str, checkpoint: str | Path = "") -> LatencyModel:
    """The ``device`` model: encoder + K steps of ``checkpoint``'s network projected on ``device``
    (counting the network loads it with torch once per process)."""
    from edge.profiler.device_model import DeviceLatency
    from edge.profiler.flops import count_checkpoint

    path = Path(checkpoint) if checkpoint else SHIPPED_CHECKPOINT
    if path.is_dir() and not (path / "model.pt").is_file():
        raise ConfigError(f"latency kind 'device' counts the network of a checkpoint with model.pt; "
                          f"{path} has none (an ONNX export?): set latency.checkpoint to the checkpoint")
    return DeviceLatency(device, count_checkpoint(str(path)))


def steps_for(duration_s: float, period_s: float) -> int:
    """Whole control periods needed to cover ``duration_s`` (a small tolerance absorbs float error)."""
    if not math.isfinite(duration_s) or duration_s <= 0:
        return 0
    return math.ceil(duration_s / period_s - 1e-9)


class LatencyWindow:
    """Measured query latencies over a sliding window (the first ``warmup`` skipped, but never the
    only one): p50 / p95 for the scheduler's context and the ticks a query takes (``delay_steps``),
    recomputed only when a latency arrives."""

    def __init__(self, size: int, warmup: int) -> None:
        self._window: deque[float] = deque(maxlen=size)
        self._warmup, self._seen = warmup, 0
        self._cache: tuple[float, float] | None = None

    def add(self, latency_s: float) -> None:
        self._seen += 1
        if self._seen > self._warmup or not self._window:
            self._window.append(latency_s)
            self._cache = None

    @property
    def seen(self) -> int:
        """Latencies offered so far (warm-up ones included): the queries that returned."""
        return self._seen

    @property
    def window(self) -> tuple[float, ...]:
        """The latencies the estimate reads now, oldest first."""
        return tuple(self._window)

    def restore(self, window: Iterable[float], seen: int) -> None:
        """Continue from a recorded :attr:`window` and :attr:`seen` (a resumed run)."""
        self._window = deque((float(x) for x in window), maxlen=self._window.maxlen)
        self._seen, self._cache = int(seen), None

    def clear(self) -> None:
        """Forget the window (the device or its latency model changed); warm-up stays done."""
        self._window.clear()
        self._cache = None

    def stats(self) -> tuple[float, float]:
        """(p50, p95) in seconds; nan before the first latency."""
        if self._cache is None:
            if not self._window:
                return float("nan"), float("nan")
            # pure Python on <= size values: np.percentile cost ~0.5 ms per call (and a 14 ms lazy
            # import on its first), on the tick that merges a chunk
            self._cache = percentiles(self._window, (50.0, 95.0))
        return self._cache

    def delay_steps(self, period_s: float) -> int:
        """Control ticks covered by the p95 latency."""
        return steps_for(self.stats()[1], period_s)
