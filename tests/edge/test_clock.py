import sys
import time

import pytest

from edge.clock import (
    ConstantLatency,
    GaussianLatency,
    LatencyConfig,
    PerStepLatency,
    RealClock,
    VirtualClock,
    make_latency_model,
    steps_for,
)
from edge.config import ConfigError
from edge.contracts import Clock


def test_virtual_clock_moves_only_when_told():
    c = VirtualClock(1.0)
    assert isinstance(c, Clock)
    assert c.now() == 1.0
    c.sleep_until(0.5)  # deadlines in the past do not move time backwards
    assert c.now() == 1.0
    c.sleep_until(1.25)
    c.advance(0.25)
    assert c.now() == 1.5
    with pytest.raises(ValueError):
        c.advance(-0.1)


def test_real_clock_sleeps_to_absolute_deadline():
    c = RealClock()
    t0 = c.now()
    c.sleep_until(t0 + 0.01)
    assert c.now() >= t0 + 0.01
    c.sleep_until(t0)  # past deadline: returns at once
    assert c.now() - t0 < 0.5
    with pytest.raises(ConfigError):
        RealClock(spin_s=1.0)


def test_latency_models_are_seeded_and_shaped():
    assert ConstantLatency(0.08).sample(10) == 0.08
    per = PerStepLatency(a_ms=20, b_ms=5)
    assert per.sample(1) == pytest.approx(0.025) and per.sample(10) == pytest.approx(0.070)
    a = [GaussianLatency(0.05, 0.01, seed=3).sample(4) for _ in range(2)]
    assert a[0] == a[1]
    g = GaussianLatency(0.0, 1.0, min_s=0.0, seed=1)
    assert all(g.sample(1) >= 0.0 for _ in range(100))
    j1 = PerStepLatency(20, 5, jitter_std_ms=2, seed=7)
    j2 = PerStepLatency(20, 5, jitter_std_ms=2, seed=7)
    assert [j1.sample(4) for _ in range(5)] == [j2.sample(4) for _ in range(5)]


def test_latency_config_factory_and_validation():
    assert make_latency_model(LatencyConfig()) is None  # measured
    m = make_latency_model(LatencyConfig(kind="per_step", a_ms=10, b_ms=2))
    assert m.sample(5) == pytest.approx(0.020)
    with pytest.raises(ConfigError, match="kind"):
        LatencyConfig(kind="warp")
    with pytest.raises(ConfigError, match="latency_s"):
        LatencyConfig(latency_s=-1)


def test_steps_for():
    assert steps_for(0.0, 0.05) == 0
    assert steps_for(float("nan"), 0.05) == 0
    assert steps_for(0.05, 0.05) == 1  # exactly one period, despite float error
    assert steps_for(0.3 * 0.05 * 10 / 3, 0.05) == 1
    assert steps_for(0.051, 0.05) == 2
    assert time.monotonic() > 0


def test_cpu_lists_parse_and_name_the_key_on_error():
    import os

    from edge.clock import parse_cpus

    allowed = sorted(os.sched_getaffinity(0))
    assert parse_cpus("", "loop.cpus") == frozenset()
    assert parse_cpus(str(allowed[0]), "loop.cpus") == {allowed[0]}
    top = allowed[0]  # the contiguous run of allowed CPUs from the first (a cpuset may be e.g. 0,2)
    while top + 1 in allowed:
        top += 1
    assert parse_cpus(f"{allowed[0]}-{top}", "loop.cpus") == set(range(allowed[0], top + 1))
    for bad, words in (("a", "not a CPU list"), ("1-", "not a CPU list"), (str(max(allowed) + 1), "not available")):
        with pytest.raises(ConfigError, match=words) as err:
            parse_cpus(bad, "inference.process_cpus")
        assert "inference.process_cpus" in str(err.value)


def test_pinning_a_thread_leaves_the_others_alone():
    import os
    import threading

    from edge.clock import pin_current_thread

    allowed = frozenset(os.sched_getaffinity(0))
    seen = {}

    def pinned():
        old = pin_current_thread(frozenset({min(allowed)}))
        seen["inside"] = os.sched_getaffinity(0)
        pin_current_thread(old)
        seen["restored"] = os.sched_getaffinity(0)

    t = threading.Thread(target=pinned)
    t.start()
    t.join()
    assert seen["inside"] == {min(allowed)} and seen["restored"] == allowed
    assert os.sched_getaffinity(0) == allowed  # the calling thread was never pinned
    assert pin_current_thread(frozenset()) is None


def test_a_cpu_list_must_be_a_string():
    from edge.clock import parse_cpus

    with pytest.raises(ConfigError, match="loop.cpus=0 must be a string"):
        parse_cpus(0, "loop.cpus")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is a Linux thread setting")
def test_timer_slack_is_per_thread_and_returns_the_old_value():
    import threading

    from edge.clock import set_thread_timer_slack

    old = set_thread_timer_slack(2_000)
    try:
        assert set_thread_timer_slack(3_000) == 2_000
        t = threading.Thread(target=lambda: set_thread_timer_slack(9_000))
        t.start()
        t.join()
        assert set_thread_timer_slack(3_000) == 3_000  # another thread's setting is its own
    finally:
        set_thread_timer_slack(old)
