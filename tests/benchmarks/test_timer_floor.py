"""benchmarks/timer_floor.py: the bare loop counts overruns as ControlLoop does; argument errors."""

import json
import sys

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("timer_floor")


def test_fixed_work_is_calibrated_and_the_case_is_reported(tmp_path):
    n = bench.calibrate(20e-6)
    assert n >= 1
    out = tmp_path / "f.json"
    assert bench.main(["--seconds", "0.2", "--rate", "200", "--load", "none", "--sched", "default",
                       "--timer-slack-ns", "default", "--out", str(out)]) == 0
    r = json.loads(out.read_text())["results"][0]
    assert r["ticks"] == 40 and r["overruns"] >= 0 and r["work_p50_ms"] > 0
    assert r["wake_late_p50_ms"] <= r["wake_late_p99_ms"] <= r["wake_late_max_ms"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is a Linux thread setting")
def test_timer_slack_is_set_for_the_case_and_restored():
    before = bench.get_timer_slack()
    r = bench.run_case(200.0, 0.05, 10, "default", 1, 10)
    assert r["timer_slack_ns"] == 1
    assert bench.get_timer_slack() == before


def test_bad_timer_slack_names_the_flag(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--timer-slack-ns", "fast"])
    assert e.value.code == 2 and "--timer-slack-ns" in capsys.readouterr().err
