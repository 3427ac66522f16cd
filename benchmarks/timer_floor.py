"""The machine's floor for a periodic loop: what a bare 1 kHz sleep-until loop in Python misses on
this machine, with no runtime in it, alone and with the same inference load ``loop_timing.py``
uses running in another process.

A case runs ``while True: sleep until the next deadline; do a fixed piece of Python work; count an
overrun if the next deadline has already passed`` (the definition ``ControlLoop`` uses: missed
deadlines are skipped, not caught up). Its overruns are what the OS and the hypervisor cost before
the control loop does anything, so ``loop_timing.py``'s overruns can be read against them. The
work is the same computation on every tick (calibrated once to take ``--work-us`` at the median), and
its measured duration per tick is the floor for ``loop_timing.py``'s tick overhead: its p99 over its
p50 is what the machine adds to a tick that never changes.

Axes (one case per combination):

* ``--load none|process``: idle machine, or a torch MLP denoiser answering K=10 queries
  back to back in a child process run as the inference worker is (SCHED_BATCH, niceness 5);
* ``--sched default|fifo``: the loop thread's scheduling class (fifo needs privileges; skipped
  otherwise);
* ``--timer-slack-ns``: the loop thread's timer slack (``prctl(PR_SET_TIMERSLACK)``; Linux
  defaults to 50,000 ns for normal threads and uses 0 for real-time ones).

    python benchmarks/timer_floor.py --seconds 60 --out benchmarks/results/timer_floor_1khz.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import number, whole, writable_file
from edge.clock import set_thread_timer_slack
from edge.clock import thread_timer_slack as get_timer_slack
from edge.telemetry import machine_info


def set_timer_slack(ns: int) -> bool:
    """Set the calling thread's timer slack; False where it cannot be set."""
    return set_thread_timer_slack(ns) is not None


def load_main(stop, hidden: int, K: int, H: int) -> None:
    """The inference load: the loop_timing MLP denoiser, K steps per query, back to back."""
    import torch

    from benchmarks.loop_timing import MLPDenoiser
    from edge.inference_process import deprioritise

    deprioritise(5)
    torch.set_num_threads(1)
    pol = MLPDenoiser(H, 1000.0, hidden)
    img = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    obs = type("O", (), {"images": {"front": img}})()
    noise = np.zeros((H, 5), np.float32)
    while not stop.is_set():
        pol.sample(pol.encode(obs), noise, K)


def fixed_work(n: int) -> float:
    """The same Python computation every call (floats, a list, a dict: a tick's kind of work)."""
    acc, xs, d = 0.0, [0.0] * 8, {}
    for i in range(n):
        xs[i & 7] = acc * 0.5 + i
        acc = min(max(acc + xs[(i + 3) & 7] * 1e-9, -1.0), 1.0)
        d[i & 15] = acc
    return acc + len(d)


def calibrate(work_s: float) -> int:
    """Iterations of :func:`fixed_work` that take ``work_s`` at the median on this machine."""
    n = 100
    while True:
        ts = []
        for _ in range(21):
            t = time.perf_counter()
            fixed_work(n)
            ts.append(time.perf_counter() - t)
        med = float(np.median(ts))
        if med >= work_s or n > 10_000_000:
            return max(1, int(n * work_s / med))
        n *= 2


def run_case(rate_hz: float, seconds: float, work_n: int, sched: str, slack_ns: int | None,
             priority: int) -> dict | None:
    old_slack = get_timer_slack()  # before a real-time class, which reads as 0
    if slack_ns is not None and not set_timer_slack(slack_ns):
        return None
    if sched == "fifo":
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except (PermissionError, AttributeError):
            if old_slack is not None:
                set_timer_slack(old_slack)
            return None
    slack_now = get_timer_slack()
    period = 1.0 / rate_hz
    n_total = int(seconds * rate_hz)
    late, work = np.zeros(n_total), np.zeros(n_total)
    overruns, n, i = 0, 0, 0
    t0 = time.monotonic() + 0.01
    try:
        while i < n_total:
            deadline = t0 + n * period
            remaining = deadline - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
            woke = time.monotonic()
            late[i] = woke - deadline
            t = time.perf_counter()
            fixed_work(work_n)
            work[i] = time.perf_counter() - t
            i += 1
            n += 1
            late_by = time.monotonic() - (t0 + n * period)
            if late_by > 0:
                skipped = int(late_by // period) + 1
                n += skipped
                overruns += skipped
    finally:
        if sched == "fifo":
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        if old_slack is not None:
            set_timer_slack(old_slack)

    def ms(q: float, x: np.ndarray = late) -> float:
        return round(1000.0 * float(np.percentile(x, q)), 4)

    return {"rate_hz": rate_hz, "seconds": seconds, "work_iterations": work_n, "sched": sched,
            "work_p50_ms": ms(50, work), "work_p99_ms": ms(99, work), "work_p999_ms": ms(99.9, work),
            "timer_slack_ns": slack_now, "ticks": n_total, "overruns": overruns,
            "overrun_fraction": round(overruns / n_total, 5),
            "wake_late_p50_ms": ms(50), "wake_late_p99_ms": ms(99), "wake_late_p999_ms": ms(99.9),
            "wake_late_max_ms": round(1000.0 * float(late.max()), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=number(0, lo_open=True), default=1000.0, help="loop rate in Hz")
    ap.add_argument("--seconds", type=number(0, lo_open=True), default=60.0, help="measured time per case")
    ap.add_argument("--work-us", type=number(0, lo_open=True), default=40.0,
                    help="fixed work per tick, calibrated to take this many microseconds at the median "
                         "(default: about the runtime's p50 tick overhead at 1 kHz)")
    ap.add_argument("--load", nargs="+", default=["none", "process"], choices=("none", "process"))
    ap.add_argument("--sched", nargs="+", default=["default", "fifo"], choices=("default", "fifo"))
    ap.add_argument("--timer-slack-ns", nargs="+", default=["default", "1"],
                    help="loop thread timer slack per case: 'default' (unchanged) or nanoseconds")
    ap.add_argument("--priority", type=whole(1, 99), default=10, help="SCHED_FIFO priority (1..99)")
    ap.add_argument("--hidden", type=whole(1), default=2048, help="load: MLP width (as loop_timing.py)")
    ap.add_argument("--out", type=writable_file, default=str(Path(__file__).resolve().parent / "results" / "timer_floor.json"))
    args = ap.parse_args(argv)
    if args.seconds * args.rate < 10:
        ap.error(f"--seconds {args.seconds} at --rate {args.rate}: under 10 ticks per case; measure longer")
    slacks = []
    for s in args.timer_slack_ns:
        if s != "default" and not (s.isdigit() and int(s) >= 1):
            ap.error(f"--timer-slack-ns {s!r}: give 'default' or a whole number of nanoseconds >= 1")
        slacks.append(None if s == "default" else int(s))
    results = []
    load_before = os.getloadavg()[0]
    work_n = calibrate(args.work_us * 1e-6)
    ctx = mp.get_context("spawn")
    for load in args.load:
        stop, proc = ctx.Event(), None
        if load == "process":
            proc = ctx.Process(target=load_main, args=(stop, args.hidden, 10, 400), daemon=True)
            proc.start()
            time.sleep(3.0)  # torch import + warm-up
        try:
            for sched in args.sched:
                for slack in slacks:
                    r = run_case(args.rate, args.seconds, work_n, sched, slack, args.priority)
                    if r is None:
                        print(f"skipping sched={sched} slack={slack}: not permitted here", flush=True)
                        continue
                    r["load"] = load
                    results.append(r)
                    print(f"load {load:7s} {sched:7s} slack {r['timer_slack_ns']!s:>6} ns: overruns "
                          f"{r['overruns']:5d}  work p50/p99 {r['work_p50_ms']:.3f}/{r['work_p99_ms']:.3f} ms  wake late p50/p99/p99.9/max {r['wake_late_p50_ms']:.3f}/"
                          f"{r['wake_late_p99_ms']:.3f}/{r['wake_late_p999_ms']:.3f}/{r['wake_late_max_ms']:.2f} ms",
                          flush=True)
        finally:
            if proc is not None:
                stop.set()
                proc.join(5)
                if proc.is_alive():
                    proc.terminate()
    info = machine_info()
    info.update({"load_average_1m_before": load_before, "load_average_1m_after": os.getloadavg()[0]})
    out = {"benchmark": "timer_floor", "machine": info, "command": " ".join(sys.argv),
           "config": vars(args), "results": results,
           "notes": "a bare sleep-until loop with the same fixed Python work every tick (median about "
                    "--work-us); an overrun is a tick that ends after the next deadline (as ControlLoop "
                    "counts them); work_p99 over work_p50 is the machine's own tail on a constant tick"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
