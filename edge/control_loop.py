"""The fixed-rate control loop: read state -> take the action due now -> safety -> driver.

Timing: tick ``n`` has the absolute deadline ``t0_s + n * period_s`` on the injected clock. A tick
that finishes after the next deadline is an *overrun*: the missed deadlines are counted and skipped
(their actions are purged from the queue), never caught up in a burst; a driver whose physics
advances only with its commands (the simulated arm) is told how many periods passed (``elapse``), so
the simulated world does not wait for a late tick. Lateness (wake time minus
deadline) and tick overhead (wall time of the tick's own work) are measured every tick.

Inference never blocks the loop (``execution="async"``): a query starts when none is in flight and
either the plan's ``next_query_in_steps`` has elapsed since the last query's observation, or the
executable actions left in the queue would run out before a new chunk could arrive
(``depth <= delay_steps + prefetch_margin_steps``, with ``delay_steps`` from the windowed p95 of
measured latencies, warm-up queries excluded). ``execution="sync"`` is the blocking baseline: query
only when the queue is empty and execute the chunk from its first action (no latency compensation).

The observation handed to the worker is stamped with the tick time (``Observation.t_s``), so the
chunk's actions land in the slots they were planned for. For the ``rtc`` seam the loop passes the
queued actions from the observation slot on as the guidance target and freezes the ones that run
while the query computes.

Errors: the loop never swallows an exception. If anything raises inside a tick (including
KeyboardInterrupt and a failed inference query), the driver is told to hold (e-stop if that fails),
the error is logged to the run record, and the exception propagates.

Not thread-safe, except :meth:`request_estop`, which any thread may call.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge.action_queue import ActionQueue, QueueConfig
from edge.clock import LatencyWindow, parse_cpus, pin_current_thread, set_thread_timer_slack
from edge.config import ConfigError
from edge.contracts import (
    Clock,
    DriverState,
    ObservationSource,
    QueryContext,
    RobotDriver,
)
from edge.errors import EdgeError, EpisodeAborted
from edge.inference_worker import InferenceWorker, QueryRequest
from edge.loop_config import LoopConfig
from edge.records import EpisodeRecord, QueryRecord, TickRecord
from edge.safety import SafetyMode, SafetySupervisor, check_compatibility
from edge.telemetry import RunRecorder

log = logging.getLogger("edge.loop")


def _restore_gc(enabled: bool) -> None:
    gc.unfreeze()
    if enabled:
        gc.enable()


@dataclass(frozen=True)
class LoopResult:
    ticks: int
    reason: str  # "max_ticks" | "stop_when" | "fault" | "estop"
    mode: SafetyMode


class ControlLoop:
    def __init__(
        self,
        config: LoopConfig,
        clock: Clock,
        driver: RobotDriver,
        observer: ObservationSource,
        worker: InferenceWorker,
        safety: SafetySupervisor,
        queue_config: QueueConfig | None = None,
        recorder: RunRecorder | None = None,
    ) -> None:
        policy, spec = worker.policy, safety.spec
        check_compatibility(spec, policy.control_rate_hz, policy.action_layout, policy.action_dim)
        if abs(config.rate_hz - spec.control_rate_hz) > 1e-9:
            raise ConfigError(
                f"loop rate_hz={config.rate_hz} differs from robot {spec.name!r} "
                f"control_rate_hz={spec.control_rate_hz}; they must match"
            )
        if getattr(driver, "action_layout", spec.action_layout) != spec.action_layout:
            raise ConfigError(
                f"driver action_layout={driver.action_layout!r} differs from robot "
                f"{spec.name!r} action_layout={spec.action_layout!r}"
            )
        self.config, self.clock, self.driver, self.observer = config, clock, driver, observer
        check = getattr(observer, "check", None)  # a sensor failure between queries
        self._check_sensors = check if callable(check) else None
        self.worker, self.safety, self.recorder = worker, safety, recorder
        self.queue_config = queue_config or QueueConfig()
        if config.execution == "sync":
            self.queue_config = dataclasses.replace(self.queue_config, latency_compensation=False)
        self.period_s = 1.0 / config.rate_hz
        self.horizon = policy.chunk_len
        # a policy that tracks what the arm executed (``encode_query``) gets the queued actions too
        self._tracks_execution = callable(getattr(policy, "encode_query", None))
        self.queue: ActionQueue | None = None
        self.n = 0  # slot of the next tick
        self.episode = 0
        self.overruns = 0
        self.lateness_s: deque[float] = deque(maxlen=200_000)
        self.overhead_s: deque[float] = deque(maxlen=200_000)
        # tick start -> command handed to the driver (the part of the overhead the arm waits for)
        self.command_s: deque[float] = deque(maxlen=200_000)
        # tick start -> the loop thread is done with the tick (query send, telemetry, gc included)
        self.busy_s: deque[float] = deque(maxlen=200_000)
        # queries merged this tick: their records are built and written after the tick's work
        self._query_records: list[tuple[Any, Any, int, float, bool, int | None]] = []
        # An inline query (sync, virtual clock) may be due the very tick it starts, so it must come
        # before the pop; a thread/process query never is, so it waits until the command is out.
        self._query_first = config.execution == "sync" or getattr(worker, "mode", "inline") == "inline"
        self._slack_work = (config.slack_work and not self._query_first
                            and not clock.is_virtual)
        # the next observation read in the slack, where the next tick observes before its command
        prefetch = getattr(observer, "prefetch", None)
        self._prefetch = (prefetch if callable(prefetch) and config.prefetch_observation and self._query_first
                          and not clock.is_virtual else None)
        self._prefetch_s = 0.0  # the read's recent time (s): it runs only where the slack covers it
        self._slack_s = 0.0  # time the loop spent merging before this tick, in its slack
        self.latency = LatencyWindow(config.latency_window, config.warmup_queries)
        self._estop_reason: str | None = None
        self._estop_lock = threading.Lock()
        self._old_switch: float | None = None
        self._old_cpus: frozenset[int] | None = None
        self._old_slack_ns: int | None = None
        self._gc_was_enabled: bool | None = None  # set while the loop holds the collector off
        self._started = False
        self._reset_episode_state()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Connect and activate the driver, fix t0, arm the safety supervisor."""
        if self.driver.state is DriverState.DISCONNECTED:
            self.driver.connect()
        if self.driver.state is not DriverState.ACTIVE:
            self.driver.activate()
        if not self.clock.is_virtual and self._old_cpus is None:
            self._old_cpus = pin_current_thread(parse_cpus(self.config.cpus, "loop.cpus"))
        if not self.clock.is_virtual and self.config.timer_slack_ns and self._old_slack_ns is None:
            self._old_slack_ns = set_thread_timer_slack(self.config.timer_slack_ns)
        if not self.clock.is_virtual and self.config.gil_switch_interval_s > 0:
            self._old_switch = sys.getswitchinterval()
            sys.setswitchinterval(self.config.gil_switch_interval_s)
        if not self.clock.is_virtual and self.config.gc_in_slack \
                and self._gc_was_enabled is None:
            self._gc_was_enabled = gc.isenabled()
            # what exists now (modules, models) is never scanned again; no collection here: a
            # full pass over a loaded interpreter holds the GIL for ~150 ms (measured)
            gc.freeze()
            gc.disable()
            # a loop dropped without close() still gives the collector back
            self._gc_restore = weakref.finalize(self, _restore_gc, self._gc_was_enabled)
        self.t0_s = self.clock.now()
        self.queue = ActionQueue(self.queue_config, self.worker.policy.action_dim, self.period_s, self.t0_s)
        self.n = 0
        self.worker.reset_scheduler()  # the first episode: a policy reused from another run forgets it
        self.safety.start(self.driver.read_state(), self.t0_s)
        self._started = True
        self._event(
            "start",
            t0_s=self.t0_s,
            period_s=self.period_s,
            execution=self.config.execution,
            seam=self.queue_config.seam,
        )

    def new_episode(self) -> None:
        """Forget plans from the previous episode (call after the sim/robot was reset)."""
        if self.safety.mode is not SafetyMode.RUNNING:
            raise EdgeError(
                f"safety is {self.safety.mode.value} ({self.safety.fault_reason}); call reset() first"
            )
        self.episode += 1
        self._discard_plans()
        if not self.clock.is_virtual:
            # the env reset took wall time: re-base the deadlines so it is not counted as an overrun
            # (on the virtual clock a reset takes no time and the time base stays bit-identical)
            self.t0_s = self.clock.now() - self.n * self.period_s
            self.queue = ActionQueue(self.queue_config, self.worker.policy.action_dim, self.period_s, self.t0_s)
        self._reset_episode_state()
        self.worker.reset_scheduler()
        self.safety.start(self.driver.read_state(), self.clock.now())
        self._event("episode_start")

    def end_episode(self, **extra: Any) -> dict[str, Any]:
        """Write the episode record (loop statistics + ``extra``, e.g. success) and flush. Returns
        the record's JSON dict (:meth:`edge.records.EpisodeRecord.from_json` types it)."""
        rec = EpisodeRecord.from_loop(
            {"ep": self.episode, **self._ep, "safety_mode": self.safety.mode.value}, **extra
        ).to_json()
        if self.recorder is not None:
            self.recorder.end_episode(rec)
        if self._gc_was_enabled is not None:
            gc.collect()  # between episodes the arm holds still: the one place for a full pass
        return rec

    def request_estop(self, reason: str = "operator") -> None:
        """Thread-safe: latch a software e-stop at the start of the next tick."""
        with self._estop_lock:
            self._estop_reason = reason

    def reset(self) -> None:
        """Explicitly clear a latched e-stop/fault. The interrupted chunk is discarded; motion
        resumes only from a query observed after this call."""
        now = self.clock.now()
        self._discard_plans()
        self.safety.reset(self.driver.read_state(), now)
        if self.driver.state is not DriverState.ACTIVE:
            self.driver.activate()
        self.safety.start(self.driver.read_state(), now)
        self._event("reset")

    def close(self, close_driver: bool = True) -> None:
        """Hold and close the driver (unless ``close_driver`` is False, e.g. when the same driver is
        reused), then stop the worker; flush the recorder (closing it is the caller's job). The driver
        goes first: stopping a worker can take longer than an MCU's watchdog (a worker process's
        shutdown: about 0.35 s), which would e-stop an arm still waiting for its DISARM."""
        try:
            try:
                if close_driver:
                    try:
                        if self.driver.state is DriverState.ACTIVE:
                            self.driver.hold()
                    finally:  # the DISARM even when the hold failed
                        if self.driver.state is not DriverState.DISCONNECTED:
                            self.driver.close()
            finally:  # the worker stops even if the driver's hold or close fails
                self.worker.close()
        finally:  # the process-wide settings come back even if stopping the worker or driver fails
            if self._old_switch is not None:
                sys.setswitchinterval(self._old_switch)
                self._old_switch = None
            if self._old_cpus is not None:
                pin_current_thread(self._old_cpus)
                self._old_cpus = None
            if self._old_slack_ns is not None:
                set_thread_timer_slack(self._old_slack_ns)
                self._old_slack_ns = None
            if self._gc_was_enabled is not None:
                self._gc_restore()
                self._gc_was_enabled = None
            if self.recorder is not None and not self.recorder.closed:
                self.recorder.flush()

    # ------------------------------------------------------------------ running
    def run(self, max_ticks: int, stop_when: Callable[[TickRecord], bool] | None = None) -> LoopResult:
        """Tick until ``max_ticks``, ``stop_when(tick_record)``, a latched fault, or an e-stop."""
        if not self._started:
            self.start()
        ticks = 0
        try:
            while ticks < max_ticks:
                rec = self.step()
                ticks += 1
                mode = self.safety.mode
                if mode in (SafetyMode.FAULT, SafetyMode.ESTOP):
                    return LoopResult(ticks, mode.value, mode)
                if stop_when is not None and stop_when(rec):
                    return LoopResult(ticks, "stop_when", mode)
        except BaseException as err:  # includes KeyboardInterrupt; re-raised after a safe stop
            self._safe_stop(err)
            raise
        return LoopResult(ticks, "max_ticks", self.safety.mode)

    def step(self) -> TickRecord:
        """One tick. Returns the tick record (also written to the recorder)."""
        deadline = self.t0_s + self.n * self.period_s
        if self._slack_work:
            self._merge_in_slack(deadline)
        self.clock.sleep_until(deadline)
        now = self.clock.now()
        p0 = time.perf_counter()
        n = self.n
        self._handle_estop_request(now)
        state = self.driver.read_state()
        running = self.safety.mode is SafetyMode.RUNNING
        query_first = self._query_first
        if running and self._check_sensors is not None:
            self._check_sensors()  # raises (a stale camera): run() stops the arm safely before any command
        if running:
            self._collect(now)
            if query_first:
                self._maybe_query(state, now)
                self._collect(now)  # an inline query with no charged latency is due right away
        qa = self.queue.pop(n) if running else None
        decision = self.safety.filter(
            None if qa is None else qa.action, state, now, None if qa is None else qa.t_obs_s
        )
        sent = None
        if decision.command is not None:
            sent = self.driver.send_command(decision.command)
        command_s = time.perf_counter() - p0
        self._note_faults(decision, now)
        if self._tracks_execution:  # what this slot executed, for the next query's ``executed``
            self._executed.append((n, decision.command if decision.kind == "act" else None))
        if running and not query_first and self.safety.mode is SafetyMode.RUNNING:
            self._maybe_query(state, now)
        overhead = time.perf_counter() - p0
        if self._slack_work:
            self.worker.flush()  # a process query goes out now: the tick's work is done
        self.n += 1
        skipped = 0
        if not self.clock.is_virtual:
            late_by = self.clock.now() - (self.t0_s + self.n * self.period_s)
            if late_by > 0:  # missed the next deadline: skip, don't burst
                skipped = int(late_by // self.period_s) + 1
                self.n += skipped
                self.overruns += skipped
                self._elapse(skipped)
        self.lateness_s.append(now - deadline)
        self.overhead_s.append(overhead)
        self.command_s.append(command_s)
        self._ep["ticks"] += 1
        self._ep["overruns"] += skipped
        self._ep["starved"] += int(qa is None and running)
        self._ep["executed"] += int(decision.kind == "act")
        ivs = decision.interventions
        rec = TickRecord(
            self.episode, n, now, now - deadline, overhead, command_s, self._slack_s, skipped,
            state.q_rad, state.gripper, state.ee_pos_m,
            None if qa is None else qa.action, None if qa is None else qa.query_id,
            decision.command, sent, decision.kind, decision.mode.value,
            [(iv.kind, iv.detail) for iv in ivs] if ivs else None,
            self.queue.depth(n + 1), qa is None and running,
        )  # positional, in TickRecord's field order: 2.8 us vs 4 us with keywords (measured)
        # telemetry after the loop's own work, like the tick record (a failure before this point
        # still writes the merged queries' records: see run())
        self._write_query_records()
        if self.recorder is not None and self.config.record_ticks:
            self.recorder.tick(rec.to_json())
        if self._prefetch is not None:  # the next query's frame, off the next tick's path (before the gc,
            self._maybe_prefetch()      # whose own slack check then sees the read)
        if self._gc_was_enabled is not None:
            self._collect_in_slack()
        self._slack_s = 0.0
        # loop-thread time of this tick after the wake-up: overhead + query send + telemetry + gc
        self.busy_s.append(time.perf_counter() - p0)
        return rec

    def _merge_in_slack(self, deadline: float) -> None:
        """Wait for the query in flight until ``slack_margin_s`` before ``deadline``; if its chunk
        arrives, merge it now for the coming slot ``self.n`` (exactly what that tick would do
        first) and write its record, so the tick itself only pops. A process worker's answer is
        received up to ``slack_receive_margin_s`` before ``deadline`` (the tick merges it)."""
        if self.queue is None or not self.worker.busy or self.safety.mode is not SafetyMode.RUNNING:
            return
        with self._estop_lock:
            if self._estop_reason is not None:
                return  # the tick latches it and discards every plan first
        margin = self.config.slack_margin_s
        # wait_ready receives a process worker's answer as it arrives, until the receive margin
        # (the tick then only merges it) or, when that is wider, the merge margin
        until = deadline - (min(margin, self.config.slack_receive_margin_s) if self.worker.mode == "process"
                            else margin)  # a thread worker's answer is in memory: nothing to receive
        if not self.worker.wait_ready(until - self.clock.now()):
            return
        now = self.clock.now()
        if now > deadline - margin:
            return  # too close to the tick: merged there
        t0 = time.perf_counter()
        self._collect(now, in_slack=True)
        self._write_query_records()
        self._slack_s += time.perf_counter() - t0

    def _collect_in_slack(self) -> None:
        """Young-generation collection after the tick, if the next deadline is far enough away
        (generation 1, which took up to 7.5 ms on a busy 2-core machine, only with 4x that slack)."""
        slack = self.t0_s + self.n * self.period_s - self.clock.now()
        if slack >= 4.0 * self.config.gc_min_slack_s and self.n % 64 == 0:
            gc.collect(1)
        elif slack >= self.config.gc_min_slack_s:
            gc.collect(0)

    def _elapse(self, periods: int) -> None:
        """Skipped deadlines pass on the robot too: a real arm's controller keeps tracking its last
        target meanwhile. A driver that keeps its own time in lock-step with its commands (a
        simulator: ``elapse(periods)``) is told, so its world does not wait for a late tick."""
        elapse = getattr(self.driver, "elapse", None)
        if callable(elapse):
            elapse(periods)

    # ------------------------------------------------------------------ queries
    def _query_due(self, n: int, depth: int, delay: int) -> bool:
        """Whether the tick of slot ``n`` (queue ``depth`` there, the latency estimate ``delay`` in
        ticks) starts a query, when none is in flight: the queue or the plan asks for one."""
        if self.config.execution == "sync":
            return depth == 0
        return (self._next_query_slot is None or n >= self._next_query_slot
                or depth <= delay + self.config.prefetch_margin_steps)

    def _maybe_prefetch(self) -> None:
        """After the tick's work: read the observation the next tick's query will observe, if it
        will query, the arm runs, and the slack left before the next deadline covers the read's
        recent time (plus ``gc_min_slack_s``); counted per episode."""
        if self.worker.busy or self.safety.mode is not SafetyMode.RUNNING or self._estop_reason is not None:
            return
        n = self.n
        if not self._query_due(n, self.queue.depth(n), self.latency.delay_steps(self.period_s)):
            return
        left = self.t0_s + self.n * self.period_s - self.clock.now()
        if left < self._prefetch_s + self.config.gc_min_slack_s:
            return
        t0 = time.perf_counter()
        self._prefetch()
        dt = time.perf_counter() - t0
        self._prefetch_s = max(dt, 0.8 * self._prefetch_s + 0.2 * dt)  # a slow read raises it at once
        self._ep["prefetched"] += 1
        self._ep["prefetch_ms"] += 1e3 * dt

    def _maybe_query(self, state: Any, now: float) -> None:
        if self.worker.busy:
            return
        n = self.n
        depth = self.queue.depth(n)
        delay = self.latency.delay_steps(self.period_s)
        if not self._query_due(n, depth, delay):
            return
        obs = dataclasses.replace(self.observer.observe(state), t_s=now)
        p50, p95 = self.latency.stats()
        ctx = QueryContext(
            t_s=now,
            period_s=self.period_s,
            chunk_len=self.horizon,
            queue_depth=depth,
            latency_p50_s=p50,
            latency_p95_s=p95,
            delay_steps=delay,
            query_index=self._query_index,
            last_plan=self._last_plan,
        )
        prefix, frozen, frozen_until = None, 0, None
        if self.queue_config.seam == "rtc" and self.config.execution == "async":
            prefix = self.queue.prefix(n, self.horizon)
            frozen = min(delay, len(prefix))
            frozen_until = n + frozen
        self._query_id += 1
        self._query_index += 1
        executed = None  # slots [previous observation, this one): the command sent, or None
        last = self._last_obs_slot
        if self._tracks_execution and last is not None and self._executed and self._executed[0][0] <= last:
            done = {slot: a for slot, a in self._executed if slot >= last}
            executed = tuple(done.get(slot) for slot in range(last, n))  # a skipped tick: None
        self._last_obs_slot = n
        queued = self.queue.executable(n) if self._tracks_execution else None
        req = QueryRequest(obs, self._query_id, self.worker.epoch, ctx, now, prefix, frozen, frozen_until,
                           executed, queued)
        self._depth_at_query[self._query_id] = depth
        self.worker.submit(req)

    def _collect(self, now: float, in_slack: bool = False) -> None:
        res = self.worker.poll(now)
        if res is None:
            return
        rep = self.queue.merge(res.chunk, self.n, res.request.frozen_until_slot)
        self.latency.add(res.latency_s)
        self._last_plan = res.plan
        self._next_query_slot = self.queue.slot_of(res.request.obs.t_s) + res.plan.next_query_in_steps
        self._ep["queries"] += 1
        self._ep["nfe"] += res.nfe
        if self.recorder is not None:  # built and written after the command is out (see step)
            self._query_records.append((res, rep, self.episode, now, in_slack,
                                        self._depth_at_query.pop(res.request.query_id, None)))

    def _write_query_records(self) -> None:
        if not self._query_records:
            return
        scheduler = getattr(self.worker.scheduler, "name", "?")
        merged, self._query_records = self._query_records, []  # each written once, even if one fails
        for res, rep, ep, t_merged, in_slack, depth in merged:
            self.recorder.query(QueryRecord.from_result(
                res, rep, ep=ep, t_merged_s=t_merged, in_slack=in_slack, seam=self.queue_config.seam,
                scheduler=scheduler, depth_at_query=depth).to_json())

    def reset_latency_stats(self) -> None:
        """Forget the measured latency window (e.g. the device or its latency model changed)."""
        self.latency.clear()

    # ------------------------------------------------------------------ safety plumbing
    def _handle_estop_request(self, now: float) -> None:
        with self._estop_lock:
            reason, self._estop_reason = self._estop_reason, None
        if reason is None or self.safety.mode is SafetyMode.ESTOP:
            return
        self.safety.estop(reason)
        self.driver.estop()
        self._discard_plans()
        self._event("estop", detail=reason)

    def _note_faults(self, decision: Any, now: float) -> None:
        for iv in decision.interventions:
            if iv.kind in ("protective_stop", "watchdog_stop"):
                self._event("fault", detail=f"{iv.kind}: {iv.detail}")
                self._discard_plans()

    def _discard_plans(self) -> None:
        self.worker.cancel()
        if self.queue is not None:
            self.queue.clear()
        self._next_query_slot = None
        self._last_plan = None
        self._query_index = 0
        self._last_obs_slot = None  # the next query's ``executed`` is unknown
        self._executed.clear()

    def _safe_stop(self, err: BaseException) -> None:
        aborted = isinstance(err, EpisodeAborted) or isinstance(err.__cause__, EpisodeAborted)
        (log.info if aborted else log.error)("control loop stopping on %s: %s", type(err).__name__,
                                             "the episode was ended by its owner" if aborted else err)
        try:
            self.driver.hold()
        except Exception as hold_err:  # noqa: BLE001 - whatever broke the hold, fall back to e-stop
            log.error("driver.hold() failed (%s); calling estop()", hold_err)
            self.driver.estop()
        finally:
            self._event("loop_error", detail=f"{type(err).__name__}: {err}")
            if self.recorder is not None and not self.recorder.closed:
                try:
                    self._write_query_records()  # merged before the failure: keep them
                except Exception as rec_err:  # noqa: BLE001 - never mask the error that stopped the loop
                    log.error("query records of the failed tick not written: %s", rec_err)
                self.recorder.flush()

    def _event(self, kind: str, **fields: Any) -> None:
        if self.recorder is not None and not self.recorder.closed:
            self.recorder.event(kind, self.clock.now(), ep=self.episode, **fields)

    def _reset_episode_state(self) -> None:
        self._query_id = getattr(self, "_query_id", 0)
        self._query_index = 0
        self._next_query_slot: int | None = None
        self._last_plan = None
        self._depth_at_query: dict[int, int] = {}
        # (slot, executed action or None) of the last ticks, and the slot the last query observed
        self._executed: deque[tuple[int, Any]] = deque(maxlen=64)
        self._last_obs_slot: int | None = None
        self._ep = {"ticks": 0, "overruns": 0, "starved": 0, "executed": 0, "queries": 0, "nfe": 0}
        if self._prefetch is not None:  # observations read in the slack: how many, and their time
            self._ep.update(prefetched=0, prefetch_ms=0.0)
