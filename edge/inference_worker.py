"""Inference worker: owns the policy and runs one query at a time off the control loop's critical path.

A query (``QueryRequest``) carries an observation snapshot taken by the loop. The worker asks the
scheduler for a ``QueryPlan``, runs ``encode`` once and K denoising steps — itself, through
``denoise_step`` with optional real-time-chunking guidance and a trace, when the policy exposes
that step, else through the policy's ``sample`` — and returns a ``QueryResult`` whose chunk is
stamped with the observation time and whose ``t_ready_s`` says when it became available.

Modes (``WorkerConfig.mode``):

* ``thread`` — a background thread; ``t_ready_s`` is the clock time the compute finished (plus an
  optional emulated device latency from a latency model). The loop polls without waiting.
* ``inline`` — the compute runs inside ``submit`` on the caller's thread and the latency is
  *charged* rather than waited for: ``t_ready_s = t_submit_s + latency`` with the latency from the
  latency model or, for ``measured``, the wall time of the compute. On the virtual clock this makes
  runs deterministic; on a real clock it is the synchronous (blocking) baseline.
* ``process`` — a separate worker process (real clock only) that builds its own policy from a
  picklable ``policy_factory`` and owns a copy of the scheduler. The control loop then never
  competes with inference for Python's GIL: in ``thread`` mode the loop thread waits for the
  interpreter lock whenever the worker runs Python between kernels, which is what sets the tick
  overhead tail on a small CPU. Requests and results travel over a pipe (an observation is a few
  tens of kB; pickling costs tens of microseconds on the loop thread).
* ``auto`` — ``inline`` on a virtual clock, ``thread`` on a real one.

The job is split by module: the query itself — encode, plan, K steps with RTC guidance, chunk — is
the pure :func:`edge.query.compute_query` (the same call in every mode); the worker process's entry
point is :mod:`edge.inference_process`; its camera frames travel through
:mod:`edge.shared_frames`. This module holds the execution modes and the loop-facing API.

Failures are never swallowed: an exception in the policy or scheduler is re-raised from ``poll`` as
:class:`InferenceError` (the loop then stops the arm and surfaces it).
"""

from __future__ import annotations

import dataclasses
import select
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge.clock import (
    LatencyConfig,
    LatencyModel,
    RealClock,
    make_latency_model,
    parse_cpus,
)
from edge.config import cfg, check_fields
from edge.contracts import (
    ActionChunk,
    ChunkPolicy,
    Clock,
    QueryPlan,
    Scheduler,
    reset_policy_episode,
)
from edge.errors import EdgeError
from edge.inference_process import backend_name, process_main
from edge.query import (
    InferenceError,
    QueryRequest,
    QueryResult,
    QuerySettings,
    compute_query,
)
from edge.shared_frames import SharedFrames

__all__ = ["InferenceError", "InferenceWorker", "QueryRequest", "QueryResult", "WorkerConfig"]


@dataclass
class WorkerConfig:
    """How queries are executed and how their latency is accounted."""

    mode: str = cfg(
        "auto", "thread | process | inline | auto (inline on a virtual clock, else thread)",
        choices=("auto", "thread", "process", "inline")
    )
    seed: int = cfg(0, "seed for the initial noise (per query: seed, epoch, query id)", range=(0, None))
    noise_temperature: float = cfg(0.5, "scale of the initial noise the worker draws when the "
                                   "scheduler leaves it to it (1 = the training distribution; < 1 "
                                   "samples closer to the policy's typical action, 0 = deterministic; "
                                   "0.5 is the runtime's default everywhere: edge run, edge hil, "
                                   "benchmarks)", range=(0.0, 4.0))
    rtc_guidance: bool = cfg(True, "rtc seam: guide sampling toward the previous chunk's actions")
    rtc_soft_steps: int = cfg(-1, "rtc seam: how many queued actions after the frozen ones are "
                              "softly guided (exponential ramp); -1 = all of the previous chunk's "
                              "remaining actions (the RTC paper), 0 = only the frozen actions that "
                              "run during inference", range=(-1, 1024))
    latency: LatencyConfig = cfg(default_factory=LatencyConfig, help="charged/emulated inference latency")
    torch_threads: int = cfg(
        0,
        "thread/process mode: torch intra-op threads for inference "
        "(0 = thread: same as the thread that built the worker; process: 1)",
        range=(0, 1024),
    )
    start_timeout_s: float = cfg(120.0, "process mode: how long the worker process may take to load "
                                 "the policy before startup fails; thread/process mode: how long an "
                                 "episode's end waits for the query in flight before the policy's "
                                 "counts are read", range=(1.0, 3600.0))
    process_nice: int = cfg(5, "process mode: niceness added to the worker process, which also runs "
                            "as SCHED_BATCH (Linux). Inference is background work next to the loop: "
                            "without this, a query woken on the loop's core preempts the loop for a "
                            "scheduler slice (measured 4 ms inside the submit at 20 Hz on a busy "
                            "2-core machine)", range=(0, 19))
    process_cpus: str = cfg("", "process mode: CPUs the worker process runs on, e.g. '1' or '1-3' "
                            "(empty = all the parent may use). With the control loop pinned to "
                            "other CPUs (loop.cpus), inference never runs on the loop's core")

    def __post_init__(self) -> None:
        check_fields(self)
        parse_cpus(self.process_cpus, "inference.process_cpus")


class InferenceWorker:
    def __init__(
        self,
        policy: ChunkPolicy,
        scheduler: Scheduler,
        clock: Clock,
        config: WorkerConfig | None = None,
        latency_model: LatencyModel | None = None,
        policy_factory: Callable[[], ChunkPolicy] | None = None,
    ) -> None:
        """``policy`` answers the loop's questions about shapes/rate/layout; in ``process`` mode
        the queries run on a policy that ``policy_factory`` (picklable, no arguments) builds in the
        worker process, e.g. ``functools.partial(load_policy, checkpoint, backend)``."""
        self.policy, self.scheduler, self.clock = policy, scheduler, clock
        self.config = config or WorkerConfig()
        self.latency_model = (
            latency_model if latency_model is not None else make_latency_model(self.config.latency)
        )
        mode = self.config.mode
        if mode == "auto":
            mode = "inline" if clock.is_virtual else "thread"
        self.mode = mode
        self.period_s = 1.0 / policy.control_rate_hz
        self.backend = backend_name(policy)
        self.settings = QuerySettings(self.config.seed, self.config.noise_temperature, self.config.rtc_guidance,
                                      self.config.rtc_soft_steps, self.period_s,
                                      wall_clock=isinstance(clock, RealClock))
        self.epoch = 0
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)  # a result or an error was posted
        self._request: QueryRequest | None = None  # submitted, not yet computed
        self._result: QueryResult | None = None
        self._error: BaseException | None = None
        self._inflight = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self._torch_threads = self.config.torch_threads or _current_torch_threads()
        self._proc: Any = None
        self._frames = SharedFrames()  # process mode: camera frames travel through shared memory
        self._pending: QueryRequest | None = None  # process mode: the request in flight
        self._outbox: QueryRequest | None = None  # process mode: submitted, sent by flush()
        self._counts: tuple[bool, Any] | None = None  # process mode: (ok, counts or error) once answered
        self._counts_seq = 0  # process mode: the counts request answers must carry
        self._computing = False  # thread mode: a query is being computed
        t0 = time.perf_counter()
        if self.mode == "process":
            self._start_process(policy_factory)
        if self.mode == "thread":
            self._thread = threading.Thread(target=self._run, name="edge-inference", daemon=True)
            self._thread.start()
        # wall seconds until the worker could take a query (process mode: spawning the process and
        # building its policy); recorded as the run's ``worker_started`` event
        self.start_s = time.perf_counter() - t0

    @property
    def torch_threads(self) -> int:
        """The torch intra-op threads inference runs on: inline, this process's (0: torch is not loaded);
        a thread, the count it sets; a process, its ``torch_threads`` setting (0 means 1 there), which
        applies if its policy loads torch."""
        if self.mode == "process":
            return int(self.config.torch_threads or 1)
        return self._torch_threads if self.mode == "thread" else _current_torch_threads()

    # ------------------------------------------------------------------ loop-facing API
    @property
    def busy(self) -> bool:
        """A query is in flight or its result has not been collected yet."""
        return self._inflight

    def submit(self, request: QueryRequest) -> None:
        if self._inflight:
            raise InferenceError("submit() while a query is in flight; poll() it first")
        self._inflight = True
        if self.mode == "inline":
            t0 = time.perf_counter()
            try:
                out = self.compute(request)
            except Exception as err:  # noqa: BLE001 - re-raised from poll(), like the threaded path
                self._error = err
                return
            compute_s = time.perf_counter() - t0
            latency = self.latency_model.sample(out[0].num_steps) if self.latency_model else compute_s
            self._result = self._make_result(request, out, request.t_submit_s + latency, compute_s)
            return
        if self.mode == "process":
            # copied and sent by flush(): the control loop calls it once the tick's own work is
            # done (0.3-0.4 ms on a cold cache at 20 Hz); poll() and wait_ready() call it too
            self._pending = self._outbox = request
            return
        with self._lock:
            self._request = request
            self._wake.notify()

    def flush(self) -> None:
        """Process mode: hand a submitted query to the worker process (frames into shared memory,
        the small request down the pipe). A no-op otherwise or when nothing is waiting."""
        request, self._outbox = self._outbox, None
        if request is None:
            return
        try:
            self._conn.send(("query", self._frames.pack(request)))
        except (OSError, ValueError) as err:
            self._inflight = False
            raise InferenceError(f"inference process unreachable: {err}") from None

    def wait_ready(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` (wall time) until the query in flight has an answer (a
        result or an error) for :meth:`poll`; True if it has. Returns at once when nothing is in
        flight. For a loop that merges chunks while it waits for its next deadline."""
        if not self._inflight:
            return False
        if self.mode == "process":
            self.flush()
            if self._result is None and self._error is None and self._readable(timeout_s):
                self._drain_process()
            return self._result is not None or self._error is not None
        with self._lock:
            return self._done.wait_for(
                lambda: self._result is not None or self._error is not None or not self._inflight,
                timeout=max(timeout_s, 0.0)) and self._inflight

    def _readable(self, timeout_s: float) -> bool:
        """Whether the answer pipe has data within ``timeout_s``. ``select`` takes the timeout in
        microseconds; ``Connection.poll`` rounds it up to whole milliseconds, which at 1 kHz is a
        whole period."""
        try:
            return bool(select.select([self._conn], [], [], max(timeout_s, 0.0))[0])
        except ValueError:  # a descriptor select() cannot take (>= FD_SETSIZE): the coarser wait
            try:
                return self._conn.poll(max(timeout_s, 0.0))
            except (OSError, EOFError):
                return True
        except OSError:  # closed under us: poll() reports it
            return True

    def poll(self, now_s: float) -> QueryResult | None:
        """The finished query if it is ready at ``now_s``; raises InferenceError if it failed."""
        if not self._inflight:
            return None
        if self.mode == "process":
            self.flush()
            self._drain_process()
        with self._lock:
            err, res = self._error, self._result
            if err is not None:
                self._error, self._inflight = None, False
                if isinstance(err, InferenceError) and self.mode == "process":
                    raise err
                raise InferenceError(f"inference query failed: {type(err).__name__}: {err}") from err
            if res is None or res.t_ready_s > now_s + 1e-9:
                return None
            self._result, self._inflight = None, False
        if res.request.epoch != self.epoch:
            return None  # planned before a reset/e-stop: discard
        observe = getattr(self.scheduler, "observe", None)
        if observe is not None:  # the feedback hook, on the loop's side in every mode
            observe(res)
        return res

    def policy_counts(self, method: str, reset: bool = False, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The deciding policy's own per-episode counts: ``getattr(policy, method)(reset=reset)``
        (``clip_counts``, ``episode_stats``), or None when the policy has no such method. A query
        still being computed is counted first (it belongs to the episode that asked it): a worker
        thread is waited for; in process mode the worker process's copy decides, so the counts are
        asked of it over the pipe and it answers after its query. Raises InferenceError if the
        answer does not come within ``timeout_s`` (default ``start_timeout_s``)."""
        timeout = self.config.start_timeout_s if timeout_s is None else timeout_s
        if self.mode != "process":
            if self.mode == "thread":
                deadline = time.monotonic() + timeout
                with self._lock:  # (re-checked every 0.5 s: a thread that died notifies nobody)
                    while (self._request is not None or self._computing) and self._thread.is_alive():
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._done.wait(min(left, 0.5))
                    idle = self._request is None and not self._computing
                if not self._thread.is_alive():
                    raise InferenceError(f"the inference thread has stopped; the policy's {method} cannot be read "
                                         "(see the error above)")
                if not idle:
                    raise InferenceError(f"the inference thread was still computing a query after {timeout:g} s "
                                         f"when the policy's {method} was asked for (raise worker.start_timeout_s, "
                                         "e.g. --set worker.start_timeout_s=300, for a policy this slow)")
            fn = getattr(self.policy, method, None)
            return fn(reset=reset) if callable(fn) else None
        self.flush()
        self._counts_seq += 1
        self._counts = None
        try:
            self._conn.send(("counts", (self._counts_seq, method, reset)))
        except (OSError, ValueError) as err:
            raise InferenceError(f"inference process unreachable ({err}) when the policy's {method} was asked "
                                 "for; see the worker process's error above, or run with --inference thread") from None
        deadline = time.monotonic() + timeout
        while self._counts is None:
            left = deadline - time.monotonic()
            if self._readable(min(max(left, 0.0), 0.5)):
                self._drain_process()  # (a closed pipe reads as readable: fall through to the checks)
                if self._counts is not None:
                    break
                if self._proc is not None:
                    self._proc.join(min(max(left, 0.0), 0.01))  # no spinning on a closed pipe while it exits
            if self._proc is None or not self._proc.is_alive():
                self._drain_process()  # an answer sent just before it exited
                if self._counts is None:
                    code = self._proc.exitcode if self._proc is not None else None
                    raise InferenceError(f"inference process exited (exit code {code}) before it answered for the "
                                         f"policy's {method}; see its error above, or run with --inference thread")
            elif left <= 0:
                raise InferenceError(f"inference process did not answer for the policy's {method} within "
                                     f"{timeout:g} s (raise worker.start_timeout_s, e.g. --set "
                                     "worker.start_timeout_s=300, for a policy this slow)")
        ok, value = self._counts
        if not ok:
            raise InferenceError(f"the policy's {method} failed in the worker process: {value}")
        return value

    def cancel(self) -> None:
        """Discard whatever is in flight (reset, e-stop, new episode). Bumps the epoch."""
        with self._lock:
            self.epoch += 1
            if self._request is not None or self._outbox is not None:  # not started yet
                self._request = self._outbox = None
                self._inflight = False
            elif self._result is not None or self._error is not None:
                self._result, self._error, self._inflight = None, None, False

    def reset_scheduler(self) -> None:
        """New episode: reset the scheduler's history and the policy's episode memory (scene memory),
        the worker process's copies too."""
        self.scheduler.reset()
        reset_policy_episode(self.policy)
        if self._proc is not None:
            self._conn.send(("reset", None))

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._proc is not None:
            try:
                self._conn.send(("stop", None))
            except (OSError, ValueError):
                pass
            self._proc.join(timeout=5.0)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout=5.0)
            self._conn.close()
            self._proc = None
        self._frames.close()

    # ------------------------------------------------------------------ process mode
    def _start_process(self, factory: Callable[[], ChunkPolicy] | None) -> None:
        import multiprocessing as mp

        if factory is None:
            raise EdgeError("inference mode 'process' needs a policy_factory: a picklable callable "
                            "that builds the policy inside the worker process (e.g. "
                            "functools.partial(load_policy, checkpoint, backend))")
        if self.clock.is_virtual:
            raise EdgeError("--inference process: a worker process runs on wall time; add --clock real, or "
                            "use --inference inline (or auto) on the virtual clock")
        ctx = mp.get_context("spawn")  # never fork a process that may hold torch/OpenMP threads
        self._conn, child = ctx.Pipe(duplex=True)
        cfg_ = dataclasses.replace(self.config, mode="inline", torch_threads=self.config.torch_threads or 1)
        self._proc = ctx.Process(target=process_main, args=(child, factory, self.scheduler, cfg_,
                                                            isinstance(self.clock, RealClock)),
                                 name="edge-inference", daemon=True)
        self._proc.start()
        child.close()
        if not self._conn.poll(self.config.start_timeout_s):
            self.close()
            raise EdgeError(f"inference process did not start within {self.config.start_timeout_s:.0f} s "
                            "(raise worker.start_timeout_s, e.g. --set worker.start_timeout_s=300, for slow "
                            "model loads)")
        kind, detail = self._conn.recv()
        if kind != "ready":
            self.close()
            raise EdgeError(f"inference process failed to start: {detail}")

    def _drain_process(self) -> None:
        """Collect whatever the worker process sent (non-blocking)."""
        try:
            while self._readable(0.0):
                kind, epoch, payload = self._conn.recv()
                t_received = self.clock.now()
                if kind == "counts":  # an answer to policy_counts, tagged with its request (not an epoch)
                    if epoch == self._counts_seq:
                        self._counts = payload
                    continue  # else the late answer to a request that timed out: dropped
                with self._lock:
                    if epoch != self.epoch:  # planned before a cancel: discard
                        self._inflight = False
                    elif kind == "result":
                        out, compute_s, t_ready = payload
                        self._result = self._make_result(self._pending, out, t_ready, compute_s, t_received)
                    else:
                        self._error = InferenceError(payload)
        except (EOFError, OSError):
            pass
        if self._result is None and self._error is None and self._inflight and not self._proc.is_alive():
            self._error = InferenceError(f"inference process died (exit code {self._proc.exitcode})")

    # ------------------------------------------------------------------ compute
    def compute(self, req: QueryRequest) -> tuple[QueryPlan, ActionChunk, int, bool]:
        """One query on this thread (:func:`edge.query.compute_query` with this worker's settings)."""
        return compute_query(self.policy, self.scheduler, req, self.settings)

    def _make_result(
        self,
        req: QueryRequest,
        out: tuple[QueryPlan, ActionChunk, int, bool],
        t_ready_s: float,
        compute_s: float,
        t_received_s: float | None = None,
    ) -> QueryResult:
        plan, chunk, nfe, guided = out
        return QueryResult(
            chunk, plan, req, t_ready_s, t_ready_s - req.obs.t_s, compute_s, nfe, guided, self.backend,
            t_received_s,
        )

    def _run(self) -> None:
        # OpenMP thread settings are per thread: a fresh thread would use every core and, on a
        # small CPU, fight the control loop (measured 5 ms -> 48 ms per MLP call on 2 cores).
        if self._torch_threads and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(self._torch_threads)
        while True:
            with self._lock:
                while self._request is None and not self._stop:
                    self._wake.wait()
                if self._stop:
                    return
                req = self._request
                self._request, self._computing = None, True
            t0 = time.perf_counter()
            try:
                out = self.compute(req)
                compute_s = time.perf_counter() - t0
                if self.latency_model is not None:  # emulate a slower device on a real clock
                    self.clock.sleep_until(req.t_submit_s + self.latency_model.sample(out[0].num_steps))
                result = self._make_result(req, out, self.clock.now(), compute_s)
            except Exception as err:  # noqa: BLE001 - handed to the loop thread, which re-raises it
                with self._lock:
                    if req.epoch == self.epoch:
                        self._error = err
                    else:
                        self._inflight = False
                    self._computing = False
                    self._done.notify_all()
                continue
            with self._lock:
                if req.epoch == self.epoch:
                    self._result = result
                else:
                    self._inflight = False
                self._computing = False
                self._done.notify_all()


def _current_torch_threads() -> int:
    torch = sys.modules.get("torch")  # never import torch here: the policy decides the framework
    return int(torch.get_num_threads()) if torch is not None else 0


