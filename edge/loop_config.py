"""Settings of the fixed-rate control loop (:class:`edge.control_loop.ControlLoop`)."""

from __future__ import annotations

from dataclasses import dataclass

from edge.clock import parse_cpus
from edge.config import cfg, check_fields


@dataclass
class LoopConfig:
    """Control loop settings."""

    rate_hz: float = cfg(20.0, "control rate; must equal the robot's and the policy's", range=(1.0, 2000.0))
    execution: str = cfg(
        "async", "async (inference overlaps execution) | sync (blocking baseline)", choices=("async", "sync")
    )
    prefetch_margin_steps: int = cfg(
        1, "start the next query this many ticks before the queue would run dry", range=(0, 1000)
    )
    latency_window: int = cfg(20, "recent queries used for the latency estimate", range=(1, 10000))
    warmup_queries: int = cfg(1, "first queries excluded from the latency estimate", range=(0, 1000))
    gil_switch_interval_s: float = cfg(
        0.0005,
        "real clock only: Python thread switch interval so the loop thread wakes on time (0 = leave as is)",
        range=(0.0, 0.1),
    )
    record_ticks: bool = cfg(True, "write one telemetry line per tick")
    gc_in_slack: bool = cfg(
        True,
        "real clock only: switch off Python's automatic garbage collection while the loop runs and "
        "collect in each tick's slack instead (young objects after the tick when at least "
        "gc_min_slack_s is left, everything at episode ends). An automatic collection can land "
        "inside any tick, in any thread's allocation: measured 0.3-6 ms each",
    )
    gc_min_slack_s: float = cfg(
        0.002, "gc_in_slack: collect only when this much time is left before the next deadline",
        range=(0.0, 1.0),
    )
    slack_work: bool = cfg(
        True,
        "real clock, thread/process inference: a chunk that arrives while the loop waits for its "
        "next deadline is merged right then (for that coming tick), and a process-mode query is "
        "sent after the tick's own work, not on the tick path (measured on 2 cores at 20 Hz: a "
        "merge tick cost 0.45-0.7 ms, a process submit 0.3-0.4 ms, on a cold cache)",
    )
    slack_margin_s: float = cfg(
        0.001, "slack_work: no merging later than this before the next deadline (a chunk arriving "
        "then is merged on the tick, as without slack_work)", range=(0.0, 1.0),
    )
    slack_receive_margin_s: float = cfg(
        0.0003, "slack_work, process inference (a thread worker's answer has nothing to receive): an "
        "answer that arrives until this long before the "
        "next deadline is taken off the worker's pipe right then (receiving and unpickling it cost "
        "~0.15 ms on a cold cache), also when it is too late to merge it (slack_margin_s); a later "
        "one is received on the tick", range=(0.0, 1.0),
    )
    prefetch_observation: bool = cfg(
        True, "real clock, a query made before the tick's command (sync, or inline async): after a tick "
        "whose successor will query, the observer reads that query's observation in the slack (an "
        "observer with prefetch(): a simulated camera renders its frame then, about 3 ms at 96x96, as a "
        "real camera's frame is ready before the tick), only where the slack left covers the read's "
        "recent time plus gc_min_slack_s; counted per episode (prefetched, prefetch_ms)",
    )
    timer_slack_ns: int = cfg(
        1, "real clock only, Linux: timer slack of the loop thread from start() to close(), in ns "
        "(how late the kernel may fire its sleeps; Linux gives normal threads 50,000 ns, real-time "
        "ones 0); threads the loop thread starts meanwhile inherit it; close() restores it on the thread "
        "that calls it (start() and close() on the loop thread, as for cpus); 0 = leave as is",
        range=(0, 10_000_000),
    )
    cpus: str = cfg("", "real clock only: CPUs the loop thread runs on from start() to close(), "
                    "e.g. '0' (empty = leave as is); pair with worker.cpus on the others")

    def __post_init__(self) -> None:
        check_fields(self)
        parse_cpus(self.cpus, "loop.cpus")
