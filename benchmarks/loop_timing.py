"""Control-loop timing on the real clock with inference running concurrently on the same machine.

For each control rate (default 20, 100, 500 Hz) and each execution mode:

* ``async`` — the inference worker thread runs a torch MLP flow-matching denoiser (encode once +
  K Euler steps) while the loop ticks;
* ``process`` — the same, in a separate worker process (``WorkerConfig.mode="process"``): the loop
  thread no longer shares the interpreter lock with inference;
* ``sync``  — the same compute runs inline in the tick when the queue is empty (the blocking
  baseline used by openpi-style runtimes),

it measures tick overhead (the loop's own work per tick, wake-up to the query started: p50/p99),
the loop thread's whole busy time per tick (plus the process-mode query send, the telemetry write
and garbage collection), wake-up lateness, period jitter (|actual period - nominal|, p99), overruns
(missed deadlines, skipped rather than caught up) and inference latency, and writes everything with
machine info to ``benchmarks/results/loop_timing.json``. async and process run twice, with
``LoopConfig.slack_work`` on (chunks that arrive between ticks are merged then) and off (merged on
the next tick: the baseline), side by side.

    python benchmarks/loop_timing.py                    # ~5 min on a 2-core CPU
    python benchmarks/loop_timing.py --seconds 2 --rates 20 100 --sched default

Each configuration runs twice: with default OS scheduling and with SCHED_FIFO for the loop and
worker threads (skipped where not permitted), because a shared development machine preempts a
normal-priority loop; a robot should run the loop with real-time priority.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.action_queue import QueueConfig
from edge.argtypes import number, whole, writable_file
from edge.cli import add_deprecated_alias
from edge.clock import RealClock
from edge.contracts import DriverState, Observation, RobotState
from edge.control_loop import ControlLoop, LoopConfig
from edge.inference_worker import InferenceWorker, WorkerConfig
from edge.robot_spec import load_robot_spec
from edge.safety import SafetySupervisor
from edge.schedulers import fixed
from edge.telemetry import RunRecorder, machine_info, read_run


class MLPDenoiser:
    """Benchmark load: an image encoder MLP + a 3-hidden-layer velocity MLP over the whole chunk."""

    backend_name = "torch-cpu"
    action_layout = "ee_delta"
    action_dim = 5

    def __init__(self, chunk_len: int, rate_hz: float, hidden: int, image_px: int = 64) -> None:
        import torch

        torch.manual_seed(0)
        nn = torch.nn
        self.torch = torch
        self.chunk_len, self.control_rate_hz = chunk_len, rate_hz
        n_act = chunk_len * self.action_dim
        self.encoder = nn.Sequential(
            nn.Flatten(), nn.Linear(3 * image_px * image_px, hidden), nn.GELU(), nn.Linear(hidden, 256)
        ).eval()
        self.velocity = nn.Sequential(
            nn.Linear(n_act + 256 + 1, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, n_act),
        ).eval()

    def encode(self, obs: Observation):
        img = self.torch.from_numpy(obs.images["front"]).float().div(255.0).permute(2, 0, 1)[None]
        with self.torch.no_grad():
            return self.encoder(img)

    def denoise_step(self, features, x: np.ndarray, tau: float, dtau: float) -> np.ndarray:
        t = self.torch
        with t.no_grad():
            inp = t.cat([t.from_numpy(x.reshape(1, -1)), features, t.full((1, 1), tau)], dim=1)
            target = 0.004 * t.tanh(self.velocity(inp)).reshape(x.shape).numpy()
        return x + dtau * (target - x) / max(1.0 - tau, 1e-6)

    def sample(self, features, noise: np.ndarray, num_steps: int) -> np.ndarray:
        x = noise
        for k in range(num_steps):
            x = self.denoise_step(features, x, k / num_steps, 1.0 / num_steps)
        return x


class KinematicArm:
    """Benchmark driver: integrates ee_delta commands, no physics (so only the runtime is timed)."""

    action_layout = "ee_delta"

    def __init__(self, clock: RealClock, spec) -> None:
        self.clock, self.spec = clock, spec
        self.state = DriverState.DISCONNECTED
        self.q = spec.q_home()
        self.ee = spec.fk(self.q)[0]
        self.gripper = 0.0

    def connect(self) -> None:
        self.state = DriverState.PASSIVE

    def activate(self) -> None:
        self.state = DriverState.ACTIVE

    def read_state(self) -> RobotState:
        return RobotState(self.clock.now(), self.q, np.zeros(7), self.gripper, self.ee.copy())

    def send_command(self, command: np.ndarray) -> np.ndarray:
        self.ee = self.ee + command[:3]
        self.gripper = float(command[4])
        return command

    def hold(self) -> np.ndarray:
        return np.zeros(5, np.float32)

    def estop(self) -> None:
        self.state = DriverState.ESTOPPED

    def close(self) -> None:
        self.state = DriverState.DISCONNECTED


class Camera:
    def __init__(self, px: int) -> None:
        self.img = np.random.default_rng(0).integers(0, 255, (px, px, 3), dtype=np.uint8)

    def observe(self, state: RobotState) -> Observation:
        return Observation({"front": self.img}, np.zeros(8, np.float32), "stack the blocks", state.t_s)


def pct(x, q) -> float | None:
    return float(np.percentile(np.asarray(x), q)) if len(x) else None


class TimedRecorder(RunRecorder):
    """Measures the cost of writing each tick record (it runs on the loop thread after the tick)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.write_s: list[float] = []

    def tick(self, record: dict) -> None:
        t0 = time.perf_counter()
        super().tick(record)
        self.write_s.append(time.perf_counter() - t0)


def set_scheduling(kind: str, priority: int) -> bool:
    """SCHED_FIFO for the calling thread (threads it creates inherit it); False if not permitted."""
    if not hasattr(os, "sched_setscheduler"):
        return kind == "default"
    try:
        if kind == "fifo":
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        else:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except PermissionError:
        return False
    return True


def run_case(
    rate_hz: float, execution: str, seconds: float, warmup_s: float, hidden: int, K: int, out_dir: Path,
    spin_s: float = 0.0, slack_work: bool = True, affinity: str = "none", timer_slack_ns: int | None = None,
    slack_margin_s: float | None = None, slack_receive_margin_s: float | None = None,
) -> dict:
    spec = load_robot_spec("panda", [f"control_rate_hz={rate_hz}"])
    H = max(16, round(rate_hz * 0.4))  # chunks cover >= 0.4 s at every rate
    clock = RealClock(spin_s)
    policy = MLPDenoiser(H, rate_hz, hidden)
    cam, arm = Camera(64), KinematicArm(clock, spec)
    policy.sample(policy.encode(cam.observe(arm.read_state())), np.zeros((H, 5), np.float32), 2)  # warm
    mode = {"async": "thread", "process": "process", "sync": "inline"}[execution]
    factory = functools.partial(MLPDenoiser, H, rate_hz, hidden) if mode == "process" else None
    # split: the loop thread on the first CPU, a worker process on the others
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    split = affinity == "split" and len(cpus) > 1
    worker_cpus = ",".join(map(str, cpus[1:])) if split and mode == "process" else ""
    worker = InferenceWorker(policy, fixed(K, H // 2), clock, WorkerConfig(mode=mode, process_cpus=worker_cpus),
                             policy_factory=factory)
    run_dir = out_dir / (f"{int(rate_hz)}hz_{execution}_{'slack' if slack_work else 'noslack'}_{affinity}_{spin_s}"
                         f"_{timer_slack_ns}_{slack_margin_s}_{slack_receive_margin_s}")
    if timer_slack_ns is None:
        timer_slack_ns = LoopConfig().timer_slack_ns
    if slack_margin_s is None:
        slack_margin_s = LoopConfig().slack_margin_s
    if slack_receive_margin_s is None:
        slack_receive_margin_s = LoopConfig().slack_receive_margin_s
    recorder = TimedRecorder(run_dir, meta={"period_s": 1.0 / rate_hz})
    loop = ControlLoop(
        LoopConfig(rate_hz=rate_hz, execution="sync" if execution == "sync" else "async",
                   slack_work=slack_work, cpus=str(cpus[0]) if split else "", timer_slack_ns=timer_slack_ns,
                   slack_margin_s=slack_margin_s, slack_receive_margin_s=slack_receive_margin_s),
        clock,
        arm,
        cam,
        worker,
        SafetySupervisor(spec),
        QueueConfig(seam="rtc"),
        recorder,
    )
    n_warm, n_ticks = int(warmup_s * rate_hz), int((warmup_s + seconds) * rate_hz)
    loop.start()
    try:
        while loop.n < n_ticks:
            loop.step()
    finally:
        loop.close()
        recorder.close()
    run = read_run(run_dir)
    ticks = [t for t in run.tick_records() if t.slot >= n_warm]  # steady state: warm-up excluded
    period = 1.0 / rate_hz
    jitter = [abs((b.t_s - a.t_s) - period) for a, b in itertools.pairwise(ticks) if b.slot == a.slot + 1]
    ovh = [t.tick_overhead_s for t in ticks]
    queries = [q for q in run.query_records() if q.t_obs_s >= loop.t0_s + warmup_s]
    # tick kinds: a query starts on the tick; a chunk is merged on it (not in the slack), after
    # receiving it on the tick or already received in the slack; or neither
    starts = {q.t_obs_s for q in run.query_records()}
    # (only a process worker's answer is received; the others are in memory when ready)
    merges = {q.merge_slot: execution != "process" or q.t_received_s is None or q.t_received_s > q.t_merged_s
              for q in run.query_records() if not q.merged_in_slack}
    kinds: dict[str, list] = {"plain": [], "query_start": [], "merge_receive": [], "merge": []}
    for t in ticks:
        kind = ("plain" if t.t_s not in starts else "query_start") if t.slot not in merges else (
            "merge_receive" if merges[t.slot] else "merge")
        kinds[kind].append(t)
    write = recorder.write_s[-len(ticks) :]
    busy = list(loop.busy_s)[-len(ticks) :]

    def ms(x: float | None) -> float | None:
        return None if x is None else round(1000.0 * x, 4)

    return {
        "rate_hz": rate_hz,
        "execution": execution,
        "ticks": len(ticks),
        "seconds": seconds,
        "chunk_len": H,
        "K": K,
        "execute": H // 2,
        "tick_overhead_p50_ms": ms(pct(ovh, 50)),
        "tick_overhead_p99_ms": ms(pct(ovh, 99)),
        "tick_overhead_max_ms": ms(max(ovh)),
        # the same per tick kind: share of ticks, p50 / p99 (what sets the overall p99)
        # (and its wake-up lateness p99, and the overruns recorded on it: it ended past the next deadline)
        "tick_kinds": {k: {"share": round(len(v) / max(1, len(ticks)), 5),
                           "p50_ms": ms(pct([t.tick_overhead_s for t in v], 50)),
                           "p99_ms": ms(pct([t.tick_overhead_s for t in v], 99)),
                           "lateness_p99_ms": ms(pct([t.lateness_s for t in v], 99)),
                           "overruns": int(sum(t.overrun_ticks for t in v))} for k, v in kinds.items()},
        # tick start -> command handed to the driver (thread/process queries start after it)
        "command_latency_p50_ms": ms(pct([t.command_s for t in ticks], 50)),
        "command_latency_p99_ms": ms(pct([t.command_s for t in ticks], 99)),
        "telemetry_write_p50_ms": ms(pct(write, 50)),
        "telemetry_write_p99_ms": ms(pct(write, 99)),
        # everything the loop thread did per tick after waking: overhead + process query send +
        # telemetry + garbage collection in the slack
        "tick_busy_p50_ms": ms(pct(busy, 50)),
        "tick_busy_p99_ms": ms(pct(busy, 99)),
        # chunks merged while the loop waited for a deadline (LoopConfig.slack_work), and the
        # loop-thread time that took before the tick
        "merged_in_slack": sum(1 for q in queries if q.merged_in_slack),
        # answers taken off the worker's pipe before the tick that merged them
        "received_in_slack": sum(1 for q in queries if execution == "process" and q.t_received_s is not None
                                 and q.t_received_s <= q.t_merged_s),
        "slack_merge_p99_ms": ms(pct([t.slack_s for t in ticks if t.slack_s > 0], 99)),
        "lateness_p99_ms": ms(pct([t.lateness_s for t in ticks], 99)),
        "jitter_p99_ms": ms(pct(jitter, 99)),
        "overruns": int(sum(t.overrun_ticks for t in ticks)),
        "overruns_incl_warmup": loop.overruns,
        "missed_deadline_fraction": round(sum(t.overrun_ticks for t in ticks) / max(1, seconds * rate_hz), 4),
        "queries": len(queries),
        "inference_latency_p50_ms": ms(pct([q.latency_s for q in queries], 50)),
        "inference_latency_p99_ms": ms(pct([q.latency_s for q in queries], 99)),
        "starved_ticks": sum(1 for t in ticks if t.starved),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", type=number(0, lo_open=True), nargs="+", default=[20.0, 100.0, 500.0])
    ap.add_argument("--seconds", type=number(0, lo_open=True), default=4.0,
                    help="measured time per case (at least 200 ticks, so a p99 is not the maximum)")
    ap.add_argument("--warmup", type=number(0), default=0.5, help="seconds excluded at the start of each case")
    ap.add_argument("--hidden", type=whole(1), default=2048, help="MLP width (sets the inference cost)")
    k = ap.add_argument("--num-steps", dest="steps", type=whole(1, 100), default=10, metavar="K",
                        help="denoising steps K per query (as edge run)")
    add_deprecated_alias(ap, "--steps", k)
    ap.add_argument("--threads", type=whole(1), default=1, help="torch intra-op threads")
    ap.add_argument("--executions", nargs="+", default=["async", "process", "sync"],
                    choices=("async", "process", "sync"),
                    help="async = worker thread, process = worker process, sync = inline (blocking)")
    ap.add_argument(
        "--sched",
        nargs="+",
        default=["default", "fifo"],
        choices=["default", "fifo"],
        help="OS scheduling of loop + worker threads (fifo = SCHED_FIFO, needs privileges)",
    )
    ap.add_argument("--priority", type=whole(1, 99), default=10, help="SCHED_FIFO priority (1..99)")
    ap.add_argument("--slack-work", nargs="+", default=["on", "off"], choices=("on", "off"),
                    help="LoopConfig.slack_work for async/process (on = merge arriving chunks and send "
                    "process queries between ticks; off = the baseline that does both on the tick)")
    ap.add_argument("--spin-us", type=number(0), nargs="+", default=[0.0],
                    help="hybrid wait: sleep until this long before each deadline, then spin (0 = pure "
                         "sleep; one case per value; default: 0)")
    ap.add_argument("--affinity", nargs="+", default=["none"], choices=("none", "split"),
                    help="none = OS placement; split = loop thread on the first CPU, a worker process on "
                         "the others (loop.cpus / inference.process_cpus); one case per value (default: none)")
    ap.add_argument("--timer-slack-ns", type=whole(0), nargs="+", default=[LoopConfig().timer_slack_ns],
                    help="loop.timer_slack_ns: the loop thread's timer slack (0 = the OS default, "
                         "50,000 ns for normal threads); one case per value (default: the config's)")
    ap.add_argument("--slack-margin-ms", type=number(0), nargs="+", default=[LoopConfig().slack_margin_s * 1e3],
                    help="loop.slack_margin_s in ms: no merging in the slack later than this before a deadline; "
                         "one case per value (default: the config's)")
    ap.add_argument("--slack-receive-margin-ms", type=number(0), nargs="+",
                    default=[LoopConfig().slack_receive_margin_s * 1e3],
                    help="loop.slack_receive_margin_s in ms: no receiving a worker answer in the slack later than "
                         "this before a deadline; one case per value (default: the config's)")
    ap.add_argument("--out", type=writable_file, default=str(Path(__file__).resolve().parent / "results" / "loop_timing.json"))
    args = ap.parse_args(argv)
    from edge.config import ConfigError

    for flag, key, values, scale in (("--timer-slack-ns", "timer_slack_ns", args.timer_slack_ns, 1),
                                     ("--slack-margin-ms", "slack_margin_s", args.slack_margin_ms, 1e-3),
                                     ("--slack-receive-margin-ms", "slack_receive_margin_s",
                                      args.slack_receive_margin_ms, 1e-3)):
        for v in values:  # every case's loop settings, before the first case runs
            try:
                LoopConfig(**{key: type(getattr(LoopConfig(), key))(v * scale)})
            except (ConfigError, ValueError) as err:
                ap.error(f"{flag} {v}: {err}")
    for rate in args.rates:
        try:
            LoopConfig(rate_hz=rate)
        except (ConfigError, ValueError) as err:
            ap.error(f"--rates {rate}: {err}")
    import torch

    torch.set_num_threads(args.threads)
    results, load_before = [], os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory() as tmp:
        for sched in args.sched:
            if not set_scheduling(sched, args.priority):
                print(f"skipping sched={sched}: not permitted on this machine", flush=True)
                continue
            for rate in args.rates:
                cases = [(e, w == "on", sp, af, ts, mg, rm) for e in args.executions for w in args.slack_work
                         for sp in args.spin_us for af in args.affinity for ts in args.timer_slack_ns
                         for mg in args.slack_margin_ms for rm in args.slack_receive_margin_ms
                         if e != "sync" or w == args.slack_work[0]]  # sync has no slack work
                for execution, slack, spin_us, aff, tslack, margin_ms, recv_ms in cases:
                    r = run_case(
                        rate, execution, max(args.seconds, 200.0 / rate), args.warmup, args.hidden, args.steps,
                        Path(tmp) / sched, spin_s=spin_us * 1e-6, slack_work=slack, affinity=aff,
                        timer_slack_ns=tslack, slack_margin_s=margin_ms * 1e-3,
                        slack_receive_margin_s=recv_ms * 1e-3,
                    )
                    r["sched"], r["slack_work"] = sched, slack and execution != "sync"
                    r["spin_us"], r["affinity"], r["timer_slack_ns"] = spin_us, aff, tslack
                    r["slack_margin_ms"], r["slack_receive_margin_ms"] = margin_ms, recv_ms
                    results.append(r)
                    print(
                        f"{sched:7s} {rate:5.0f} Hz {execution:7s} slack {'on ' if r['slack_work'] else 'off'} "
                        f"spin {spin_us:4.0f} us aff {aff:5s} tslack {tslack:5d} ns margin {margin_ms:.2f} ms receive {recv_ms:.2f} ms"
                        f" overhead p50/p99 "
                        f"{r['tick_overhead_p50_ms']:.3f}/{r['tick_overhead_p99_ms']:.3f} ms  "
                        f"command p99 {r['command_latency_p99_ms']:.3f} ms  busy p99 "
                        f"{r['tick_busy_p99_ms']:.3f} ms  merged / received in slack {r['merged_in_slack']} / {r['received_in_slack']} of {r['queries']}  "
                        f"jitter p99 {r['jitter_p99_ms']:.3f} ms  overruns {r['overruns']:5d}  "
                        f"inference p50 {r['inference_latency_p50_ms']} ms",
                        flush=True,
                    )
                    print("        by tick kind (share, overhead p50/p99 ms, lateness p99 ms, overruns): " + "  ".join(
                        f"{k} {v['share']:.2%} {v['p50_ms']}/{v['p99_ms']} late {v['lateness_p99_ms']} overruns {v['overruns']}"
                        for k, v in r["tick_kinds"].items()),
                        flush=True,
                    )
        set_scheduling("default", 0)
    info = machine_info()
    info.update(
        {
            "torch": torch.__version__,
            "torch_threads": args.threads,
            "load_average_1m_before": load_before,
            "load_average_1m_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        }
    )
    out = {
        "benchmark": "loop_timing",
        "machine": info,
        "config": vars(args),
        "results": results,
        "targets": {"tick_overhead_p99_ms": 0.5, "overruns_20hz_async": 0},
        "notes": "overhead = the loop's own work per tick (read state, merge/queue, safety, driver), "
        "telemetry write measured separately; percentiles exclude the first --warmup seconds; "
        "the machine may be shared (see load averages).",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
