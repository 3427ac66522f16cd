import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge.records import SCHEMA_VERSION, TickRecord
from edge.telemetry import RunRecorder, format_summary, read_jsonl, read_run, summarize
from tests.fakes import build_loop

REPO = Path(__file__).resolve().parents[2]


def test_run_directory_round_trip(tmp_path):
    rec = RunRecorder(tmp_path / "run", meta={"period_s": 0.05, "task": "test"})
    loop, _driver, _policy, _ = build_loop(latency_s=0.08, K=3, C=6, recorder=rec)
    loop.start()
    loop.run(30)
    loop.end_episode(success=True)
    loop.new_episode()
    loop.run(10)
    loop.end_episode(success=False)
    summary = rec.close({"note": "x"})
    run = read_run(tmp_path / "run")
    assert run.meta["task"] == "test" and "platform" in run.meta["machine"]
    assert run.meta["schema_version"] == SCHEMA_VERSION and run.schema_version == SCHEMA_VERSION
    assert len(run.ticks) == 40 and [t["slot"] for t in run.ticks] == list(range(40))
    tick = run.ticks[10]
    for key in ("t_s", "lateness_s", "tick_overhead_s", "q_rad", "gripper", "raw_action", "command", "sent",
                "kind", "mode", "queue_depth", "starved", "interventions", "overrun_ticks"):
        assert key in tick, key
    typed = run.tick_records()[10]
    assert isinstance(typed, TickRecord) and typed.slot == 10 and typed.to_json().keys() == tick.keys()
    assert len(run.queries) >= 8
    q = run.queries[1]
    for key in (
        "t_obs_s",
        "t_ready_s",
        "latency_s",
        "compute_s",
        "K",
        "C",
        "nfe",
        "signals",
        "backend",
        "dropped_late",
        "scheduler",
        "seam",
    ):
        assert key in q, key
    assert q["latency_s"] == pytest.approx(0.08) and q["K"] == 3 and q["backend"] == "fake"
    assert run.query_records()[1].K == 3
    assert [e["success"] for e in run.episodes] == [True, False]
    assert [e.success for e in run.episode_records()] == [True, False]
    assert {e["kind"] for e in run.events} >= {"start", "episode_start"}
    assert run.summary == summary and summary["note"] == "x"
    assert summary["ticks"] == 40 and summary["successes"] == 1
    assert summary["jitter_p99_ms"] == pytest.approx(0.0, abs=1e-9)
    assert summary["nfe_per_action"] == pytest.approx(summary["nfe_total"] / summary["executed_actions"])
    text = (tmp_path / "run" / "summary.txt").read_text()
    assert "inference latency p50" in text and "wait_first_plan" in text and "success  " in text
    assert format_summary(summary) == text


def test_truncated_last_line_is_tolerated(tmp_path):
    p = tmp_path / "ticks.jsonl"
    p.write_text('{"n": 0}\n{"n": 1}\n{"n": 2, "t"')
    assert read_jsonl(p) == [{"n": 0}, {"n": 1}]
    p.write_text('{"n": 0}\n{"n": 1, "t"\n{"n": 2}\n')
    with pytest.raises(ValueError, match="ticks.jsonl:2"):
        read_jsonl(p)


def test_unwritable_run_dir_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(Exception, match="cannot create run directory"):
        RunRecorder(tmp_path / "file" / "run")


CHILD = """
import sys
from edge.clock import RealClock
from edge.telemetry import RunRecorder
from edge.inference_worker import InferenceWorker, WorkerConfig
from edge.control_loop import ControlLoop, LoopConfig
from edge.safety import SafetySupervisor
from edge.action_queue import QueueConfig
from edge.schedulers import fixed
from tests.fakes import FakeDriver, FakeObserver, joint_spec, ramp_for

spec = joint_spec(control_rate_hz=100.0)
clock = RealClock()
rec = RunRecorder(sys.argv[1], meta={"period_s": spec.period_s})
worker = InferenceWorker(ramp_for(spec), fixed(2, 8), clock, WorkerConfig(mode="thread"))
loop = ControlLoop(LoopConfig(rate_hz=100.0), clock, FakeDriver(clock, spec), FakeObserver(), worker,
                   SafetySupervisor(spec), QueueConfig(seam="rtc"), rec)

def report(r):
    print(r.slot, flush=True)
    return False

loop.run(100000, stop_when=report)
"""


def test_telemetry_survives_sigkill(tmp_path):
    run_dir = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(run_dir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    import queue
    import threading

    lines: queue.Queue = queue.Queue()  # read by a thread: a child that hangs fails the test, not CI
    threading.Thread(target=lambda: [lines.put(x) for x in iter(proc.stdout.readline, "")] + [lines.put("")],
                     daemon=True).start()
    reported = []
    deadline = time.monotonic() + 60
    try:
        while len(reported) < 40 and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if not line:
                break
            reported.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert len(reported) >= 40, proc.stderr.read()
    run = read_run(run_dir)  # no summary.json: killed before it could be written
    assert run.summary is None
    slots = {t["slot"] for t in run.ticks}
    assert set(reported) <= slots  # every tick that had been reported is on disk
    assert run.queries and all(q["t_ready_s"] <= run.ticks[-1]["t_s"] + 1.0 for q in run.queries)
    s = summarize(run)
    assert s["ticks"] >= 40 and s["queries"] >= 1 and s["tick_overhead_p99_ms"] is not None
    json.dumps(s)


def test_a_query_merged_in_a_failing_tick_is_still_recorded(tmp_path):
    rec = RunRecorder(tmp_path / "run", meta={"period_s": 0.05})
    loop, driver, _policy, _ = build_loop(latency_s=0.0, K=2, C=4, recorder=rec)
    loop.start()
    loop.run(6)
    n_before = loop.latency.seen

    def broken_send(command):
        raise OSError("serial link lost")

    driver.send_command = broken_send
    with pytest.raises(OSError):
        loop.run(10)  # the first failing tick merges a fresh chunk before the send raises
    rec.close()
    run = read_run(tmp_path / "run")
    assert loop.latency.seen > n_before
    assert len(run.queries) == loop.latency.seen  # nothing merged was lost
    assert any(e["kind"] == "loop_error" for e in run.events)


def test_machine_info_records_the_result_relevant_package_versions():
    import numpy

    from edge.telemetry import machine_info, package_versions

    info = machine_info()
    assert info["packages"]["numpy"] == numpy.__version__
    assert set(info["packages"]) >= {"mujoco", "onnxruntime", "torch", "numpy"}
    assert package_versions(("no-such-distribution-xyz",)) == {"no-such-distribution-xyz": None}


def test_machine_info_names_the_cpu_model(tmp_path, monkeypatch):
    import builtins

    from edge import telemetry

    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: Test CPU 9000 @ 3.0GHz\nflags\t: fpu\n")
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: real_open(fake if p == "/proc/cpuinfo" else p, *a, **k))
    assert telemetry.machine_info()["cpu_model"] == "Test CPU 9000 @ 3.0GHz"
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: (_ for _ in ()).throw(OSError("no cpuinfo")))
    assert telemetry.cpu_model() is None
