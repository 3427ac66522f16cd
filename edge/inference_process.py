"""The inference worker process (``WorkerConfig.mode == "process"``): its entry point builds the
policy from a picklable factory and answers queries until told to stop.

Parent <-> child messages over one duplex pipe (the camera frames go through
:class:`edge.shared_frames.SharedFrames`, only a small request is pickled):

* parent -> child: ``("query", (request without images, frame layout))``, ``("reset", None)`` (new
  episode: scheduler history and the policy's episode memory), ``("counts", (seq, method, reset))``
  (the policy's own per-episode counts, e.g. ``episode_stats``), ``("stop", None)``;
* child -> parent: ``("ready", backend)`` or ``("error", message)`` once at start; per query
  ``("result", epoch, ((plan, chunk, nfe, guided), compute_s, t_ready_s))`` or ``("error", epoch,
  message)``; per counts request ``("counts", seq, (True, dict or None))`` or ``("counts", seq,
  (False, message))``.

The process runs as SCHED_BATCH with extra niceness and on its own CPUs if configured, so a query
waking up never preempts the control loop.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from edge.clock import RealClock, make_latency_model, parse_cpus, pin_current_thread
from edge.contracts import ChunkPolicy, Scheduler, reset_policy_episode
from edge.query import QueryRequest, QuerySettings, compute_query
from edge.shared_frames import SharedFrames


def backend_name(policy: Any) -> str:
    return str(getattr(policy, "backend_name", getattr(policy, "backend", "unknown")))


def process_main(conn: Any, factory: Callable[[], ChunkPolicy], scheduler: Scheduler, config: Any,
                 wall_clock: bool = True) -> None:
    """Worker-process entry (``config``: the parent's ``WorkerConfig``): build the policy, then
    answer queries until told to stop. ``wall_clock``: the parent's request times are
    ``time.monotonic()`` (its clock is a :class:`edge.clock.RealClock`), as this process's."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the loop's to handle
        deprioritise(config.process_nice)
        pin_current_thread(parse_cpus(config.process_cpus, "inference.process_cpus"))
        policy = factory()
        if "torch" in sys.modules:  # only if the policy uses it
            sys.modules["torch"].set_num_threads(config.torch_threads)
        clock = RealClock()
        latency = make_latency_model(config.latency)
        settings = QuerySettings(config.seed, config.noise_temperature, config.rtc_guidance,
                                 config.rtc_soft_steps, 1.0 / policy.control_rate_hz, wall_clock=wall_clock)
    except Exception as err:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(err).__name__}: {err}"))
        return
    conn.send(("ready", backend_name(policy)))
    frames = SharedFrames()
    while True:
        try:
            kind, msg = conn.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            return
        if kind == "reset":
            scheduler.reset()
            reset_policy_episode(policy)
            continue
        if kind == "counts":
            seq, method, reset = msg
            fn = getattr(policy, method, None)
            try:
                reply = (True, fn(reset=reset) if callable(fn) else None)
            except Exception as err:  # noqa: BLE001 - raised in the parent, as it would be in thread mode
                reply = (False, f"{type(err).__name__}: {err}")
            try:
                conn.send(("counts", seq, reply))
            except (EOFError, OSError):
                return  # the parent is gone
            except Exception as err:  # noqa: BLE001 - counts that cannot be pickled (nothing was written)
                conn.send(("counts", seq, (False, f"its counts cannot be sent: {type(err).__name__}: {err}")))
            continue
        try:
            req: QueryRequest = frames.unpack(msg)
        except (OSError, ValueError) as err:
            conn.send(("error", msg[0].epoch, f"inference worker process cannot read the frames: {err}"))
            continue
        t0 = time.perf_counter()
        try:
            out = compute_query(policy, scheduler, req, settings)
        except Exception as err:  # noqa: BLE001 - handed to the loop, which stops the arm
            conn.send(("error", req.epoch, (f"inference query failed in the worker process: "
                                            f"{type(err).__name__}: {err}")))
            continue
        compute_s = time.perf_counter() - t0
        if latency is not None:
            clock.sleep_until(req.t_submit_s + latency.sample(out[0].num_steps))
        # the parent keeps its own request: only the (small) answer travels back
        conn.send(("result", req.epoch, (out, compute_s, clock.now())))


def deprioritise(nice: int) -> None:
    """Worker process: never preempt the control loop on wake-up (SCHED_BATCH), lower priority."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError:
            pass  # not permitted here: niceness alone
    if nice and hasattr(os, "nice"):
        os.nice(nice)
