"""HIL harness: the scenario catalogue, the trace checks (they must be able to fail), and
representative scenarios end to end in real time (loop + safety + bridge driver + pty + fault proxy
+ emulated MCU + MuJoCo physics)."""

import dataclasses
import signal

import pytest

from edge.hil.harness import (
    HilContext,
    HilScenario,
    expand,
    load_catalogue,
    load_rig,
    run_scenario,
)
from edge.hil.report import judge
from edge.telemetry import RunRecorder

REQUIRED = {
    "bit_flip", "truncated_frame", "garbage_burst", "duplicate", "reorder_stale", "drops_isolated",
    "drops_watchdog", "link_cut", "latency_sweep", "jitter", "mcu_reboot", "host_sigint", "host_sigkill",
    "one_way_link", "version_mismatch", "nan_action", "joint_limit", "workspace_violation", "inference_stall",
    "frozen_camera", "estop_release", "cpu_hog",
}


def test_catalogue_is_complete_and_valid():
    scenarios = load_catalogue()
    names = {s.name.split("@")[0] for s in scenarios}
    assert REQUIRED <= names
    for s in scenarios:
        assert s.fault and s.expected, s.name
        if s.expect == "stop":
            assert s.stop_bound_s > 0, s.name
    assert load_rig().watchdog_ms > 1000 / 20  # W longer than one control period


def test_expand_repeats_windows_and_sweeps():
    sc = HilScenario(name="x", fault="f", expected="e", link_faults=({"kind": "drop", "start_s": 1.0, "end_s": 1.1},),
                     repeat=3, repeat_every_s=0.5, delay_sweep_ms=(0, 100), sweep_stop_above_ms=50)
    rows = expand(sc)
    assert [r.name for r in rows] == ["x@0ms", "x@100ms"]
    assert [r.expect for r in rows] == ["none", "stop"]
    starts = [r["start_s"] for r in rows[1].link_faults if r["kind"] == "drop"]
    assert starts == [1.0, 1.5, 2.0]


def _synthetic(tmp_path, applied_q=None, seqs=(10, 11), age_s=0.01):
    """A minimal consistent run: two commands written by the host and applied by the MCU."""
    rec = RunRecorder(tmp_path / "host", meta={"period_s": 0.05})
    rec.event("start", 100.0)
    for n in range(10):
        rec.tick({"slot": n, "t_s": 100.0 + 0.05 * n, "overrun_ticks": 0, "mode": "running", "kind": "act"})
    rec.close()
    q = [0.0, -0.3, 0.0, -2.3, 0.0, 2.0, 0.78, 0.04]
    with open(tmp_path / "host" / "commands.jsonl", "w") as f:
        f.writelines(f'{{"seq": {s}, "t": 100.1, "q": {q}}}\n' for s in (10, 11))
    t_apply = 100.1 + age_s
    applied = [(t_apply, 1, s, int(100.1 * 1e6) & 0xFFFFFFFF, 0, 0, tuple(applied_q or q), (0.0,) * 8, t_apply)
               for s in seqs]
    trace = {"modes": [(99.9, 1, 0, "armed")], "applied": applied, "nacks": {}, "errors": [],
             "samples": [(100.0 + 0.01 * i, 1, tuple(q), tuple(q), (0.0,) * 8) for i in range(60)],
             "counters": {"link": {}}, "rig_overruns": 0}
    host = {"t0": 100.0, "t_motion_end": 100.5, "error": None, "overruns": 0,
            "driver_counts": {"commands_sent": 2}, "safety_counts": {}}
    sc = HilScenario(name="synthetic", fault="f", expected="e", duration_s=0.5, fault_at_s=0.2)
    return judge(sc, load_rig(), host, trace, tmp_path)


def test_checks_pass_a_clean_trace_and_catch_bad_commands(tmp_path):
    assert _synthetic(tmp_path)["pass"]
    bad = _synthetic(tmp_path / "a", applied_q=[0.0, -0.3, 0.0, -2.3, 0.0, 2.0, 0.79, 0.04])
    assert "commands_intact" in bad["failed"]
    dup = _synthetic(tmp_path / "b", seqs=(11, 11))
    assert "seq_monotonic" in dup["failed"]
    out = _synthetic(tmp_path / "c", applied_q=[0.0, -0.3, 0.0, 0.5, 0.0, 2.0, 0.78, 0.04])
    assert "within_limits" in out["failed"]
    old = _synthetic(tmp_path / "d", age_s=0.5)
    assert "command_age" in old["failed"]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    c = HilContext(load_rig(), policy="replay")
    # One untimed run first: a fresh install's first real-time run stalls at start-up (2 of 2
    # fresh-clone CI runs, 0 of 10 warm ones), so the timed scenarios below start warm and their
    # retry is left for a stall of their own.
    try:
        run_scenario(_scenario("bit_flip"), c, tmp_path_factory.mktemp("hil_warmup") / "bit_flip")
    except Exception:  # noqa: BLE001 - a warm-up only: the timed scenarios report any real problem themselves
        pass
    yield c
    c.close()


def _scenario(name):
    return next(s for s in load_catalogue() if s.name == name)


def _run_timed(scenario, ctx, out):
    """Run a real-time scenario; on failure run it once more. The rig (emulator + physics + proxy)
    shares this interpreter and the machine's 2 cores with the host process, and on a cold first
    run after a fresh install (measured: 2 of 2 fresh-clone CI runs, 0 of 10 warm runs) a start-up
    stall can shift the timeline by ~100 ms. A real regression fails both attempts."""
    row = run_scenario(scenario, ctx, out)
    if not row["pass"]:
        row = run_scenario(scenario, ctx, out.with_name(out.name + "_retry"))
    return row


@pytest.mark.parametrize("name", ["bit_flip", "link_cut", "nan_action"])
def test_scenario_end_to_end(ctx, tmp_path, name):
    row = _run_timed(_scenario(name), ctx, tmp_path / name)
    assert row["pass"], row["failed"]
    assert row["applied_commands"] > 0
    if name != "bit_flip":
        assert row["time_to_safe_s"] is not None


def test_host_sigint_is_honoured_when_inherited_ignored(ctx, tmp_path):
    # A background job of a non-interactive shell (CI, `edge hil --all &`) starts with SIGINT
    # ignored; the host child inherits that. It must still stop on Ctrl-C (regression: it ran on
    # to the end of its motion, DISARM 2 s late, exit 0).
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        row = _run_timed(_scenario("host_sigint"), ctx, tmp_path / "int")
    finally:
        signal.signal(signal.SIGINT, old)
    assert row["pass"], row["failed"]
    assert row["time_to_safe_s"] < 0.13


def test_host_sigterm_stops_the_arm_under_control(ctx, tmp_path):
    """A supervisor's SIGTERM to the host process: a controlled stop, then DISARM, exit 130 (as Ctrl-C)."""
    row = _run_timed(_scenario("host_sigterm"), ctx, tmp_path / "term")
    assert row["pass"], row["failed"]
    assert row["time_to_safe_s"] < 0.13


@pytest.mark.slow
def test_host_sigkill_subprocess(ctx, tmp_path):
    row = run_scenario(_scenario("host_sigkill"), ctx, tmp_path / "kill")
    assert row["pass"], row["failed"]


@pytest.mark.slow
def test_whole_catalogue(ctx, tmp_path):
    rows = [run_scenario(sc, ctx, tmp_path / sc.name.replace("@", "_")) for sc in load_catalogue()]
    failed = {r["scenario"]: r["failed"] for r in rows if not r["pass"]}
    assert not failed


def test_scenario_validation():
    from edge.config import ConfigError

    with pytest.raises(ConfigError, match="host_signal needs host: subprocess"):
        HilScenario(name="x", host_signal="SIGKILL")
    with pytest.raises(ConfigError, match="needs start_s"):
        HilScenario(name="x", link_faults=({"kind": "drop"},))
    assert dataclasses.replace(_scenario("bit_flip"), repeat=1).repeat == 1


def test_hil_cli_set_changes_the_rig_and_is_recorded(tmp_path, capsys):
    """``edge hil --set KEY=V`` layers over the catalogue's rig.yaml; the report records the rig
    it ran on and the command."""
    import json

    from edge.cli import main

    code = main(["hil", "--scenario", "estop_release", "--policy", "replay", "--set", "watchdog_ms=400",
                 "--set", "margin_s=0.05", "--set", "safety.max_ee_step_m=0.03", "--out", str(tmp_path / "h")])
    report = json.loads((tmp_path / "h" / "hil_report.json").read_text())
    assert report["meta"]["rig"]["watchdog_ms"] == 400 and report["meta"]["rig"]["margin_s"] == 0.05
    assert "--set watchdog_ms=400" in report["meta"]["command"]
    assert "W = 400 ms" in report["meta"]["rig_summary"]
    host = json.loads((tmp_path / "h" / "estop_release" / "host" / "meta.json").read_text())
    assert host["config"]["safety"]["max_ee_step_m"] == 0.03  # the host's safety layer ran with it
    assert host["config"]["clock"]["kind"] == "real" and host["config"]["worker"]["mode"] == "thread"
    assert code in (0, 1)  # judged on the trace; the rig settings are what this test checks


@pytest.mark.parametrize("how", ["ctrl-c", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_the_campaign_after_a_controlled_stop(tmp_path, capsys, monkeypatch, how):
    """Ctrl-C (or SIGTERM, a supervisor's stop) during an inline scenario: the arm stops under control (the
    host's result says so), the remaining scenarios do not run, the finished ones are reported, and edge hil
    exits 130."""
    import _thread
    import json
    import signal
    import threading

    import edge.hil.host as host_module
    from edge.cli import main

    real = host_module.run_host
    main_thread = threading.main_thread().ident
    timers: list[threading.Timer] = []

    def interrupted(spec, policy, cam, on_start=None):
        def start(t0):
            on_start(t0)
            stop = (_thread.interrupt_main if how == "ctrl-c"  # as Ctrl-C: KeyboardInterrupt in the main thread
                    else lambda: signal.pthread_kill(main_thread, signal.SIGTERM))
            timers.append(threading.Timer(0.3, stop))
            timers[-1].start()
        return real(spec, policy, cam, on_start=start)

    monkeypatch.setattr(host_module, "run_host", interrupted)
    out = tmp_path / "h"
    try:
        code = main(["hil", "--scenario", "estop_release", "--scenario", "link_cut", "--policy", "replay",
                     "--out", str(out)])
    finally:
        for t in timers:  # never let the signal land after the campaign (in pytest itself)
            t.cancel()
            t.join()
    assert code == 130 and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler given back
    assert "interrupted in estop_release: 0 of 2 scenario runs finished" in capsys.readouterr().err
    host = json.loads((out / "estop_release" / "host" / "host_result.json").read_text())
    assert host["interrupted"] and host["error_type"] == "KeyboardInterrupt" and host["driver_counts"]
    assert not (out / "link_cut").exists()  # the campaign stopped
    report = json.loads((out / "hil_report.json").read_text())
    assert report["rows"] == [] and any("interrupted (Ctrl-C or SIGTERM)" in n for n in report["meta"]["notes"])


def test_ctrl_c_reaches_a_host_subprocess_once_and_it_stops_under_control(tmp_path, capsys, monkeypatch):
    """With the host in a subprocess (its own session), a Ctrl-C on the campaign is forwarded to it once:
    it stops the arm and writes its result before the campaign ends (exit 130)."""
    import _thread
    import json
    import threading

    import edge.hil.harness as harness
    from edge.cli import main

    real = harness._read_t0

    def started(proc, timeout_s):
        t0 = real(proc, timeout_s)
        threading.Timer(0.3, _thread.interrupt_main).start()  # before the scenario's own signal
        return t0

    monkeypatch.setattr(harness, "_read_t0", started)
    out = tmp_path / "h"
    code = main(["hil", "--scenario", "host_sigint", "--scenario", "link_cut", "--policy", "replay", "--out", str(out)])
    assert code == 130
    host = json.loads((out / "host_sigint" / "host" / "host_result.json").read_text())
    assert host["interrupted"] and host["error_type"] == "KeyboardInterrupt" and host["t_closed"] > host["t0"]
    assert (out / "host_sigint" / "bench.json").is_file() and not (out / "link_cut").exists()
