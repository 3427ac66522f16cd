"""Loop behaviour on the virtual clock: rate, overruns, hand-off, stale drop, seams, watchdog, e-stop."""

import sys

import numpy as np
import pytest

from edge.action_queue import QueueConfig
from edge.clock import ConstantLatency, VirtualClock
from edge.config import ConfigError
from edge.contracts import DriverState
from edge.control_loop import ControlLoop, LoopConfig
from edge.inference_worker import InferenceError, InferenceWorker, WorkerConfig
from edge.safety import SafetyConfig, SafetyConfigError, SafetyMode, SafetySupervisor
from edge.schedulers import fixed
from tests.fakes import (
    FakeDriver,
    FakeObserver,
    JumpPolicy,
    SteppingClock,
    build_loop,
    joint_spec,
    ramp_for,
)

SPEC = joint_spec()
DT = SPEC.period_s


def run(loop, n, **kw):
    loop.start()
    return loop.run(n, **kw)


def executed(loop, driver):
    """(tick time, raw action) pairs that the loop took from the queue."""
    return [(r.t_s, r.raw_action) for r in loop._records if r.raw_action is not None]


@pytest.fixture(autouse=True)
def keep_records(monkeypatch):
    """Collect tick records without a recorder."""
    orig = ControlLoop.step

    def step(self):
        rec = orig(self)
        self.__dict__.setdefault("_records", []).append(rec)
        return rec

    monkeypatch.setattr(ControlLoop, "step", step)


def test_rate_on_virtual_clock():
    loop, driver, _policy, clock = build_loop(latency_s=0.0)
    res = run(loop, 40)
    assert res.ticks == 40 and res.reason == "max_ticks"
    times = [r.t_s for r in loop._records]
    np.testing.assert_allclose(np.diff(times), DT, atol=1e-12)
    assert clock.now() == pytest.approx(39 * DT)
    assert loop.overruns == 0 and max(loop.lateness_s) == 0.0
    assert len(driver.sent) == 40 and driver.state is DriverState.ACTIVE


@pytest.mark.parametrize("seam", ["replace", "weighted", "rtc"])
@pytest.mark.parametrize("latency_s", [0.0, 0.03, 0.08, 0.12])
def test_handoff_executes_each_action_at_its_planned_time(seam, latency_s):
    loop, driver, policy, _ = build_loop(seam=seam, latency_s=latency_s, K=3, C=8)
    run(loop, 80)
    ex = executed(loop, driver)
    assert len(ex) >= 80 - 4  # only the first query's latency is waited for
    for t, raw in ex:  # the ramp is consistent across chunks: time alignment must be exact
        np.testing.assert_allclose(raw, policy.target(t)[0], atol=1e-5)
    d = int(np.ceil(latency_s / DT - 1e-9))
    assert loop.queue.dropped_late == d * loop.latency.seen
    assert loop.queue.starved_ticks == d  # only while waiting for the first chunk


def test_stale_actions_are_dropped_not_replayed():
    loop, _driver, _policy, _ = build_loop(latency_s=0.12, K=2, C=10)  # 3 ticks late
    run(loop, 60)
    qids = [r.query_id for r in loop._records if r.query_id is not None]
    assert qids == sorted(qids)  # never go back to an older chunk
    assert loop.queue.dropped_late == 3 * loop.latency.seen  # exactly the 3 overtaken per chunk
    assert all(r.starved is False for r in loop._records[3:])


def test_starvation_holds_and_counts_when_latency_exceeds_the_chunk():
    loop, _driver, _policy, _ = build_loop(latency_s=0.3, K=2, C=4)  # 6 ticks latency, C=4: expires
    run(loop, 40)
    assert loop.queue.starved_ticks == 40
    assert all(r.kind == "hold" or r.mode != "running" for r in loop._records)
    assert loop.safety.counts["wait_first_plan"] == 40  # never armed: no fault, but counted


def test_seam_strategies_differ_on_disagreeing_chunks():
    jumps, energy = {}, {}
    for seam in ("replace", "weighted", "rtc"):
        base = np.append(SPEC.q_home(), 0.5)
        policy = JumpPolicy(base, np.zeros(8), chunk_len=10, rate_hz=20.0, jump=0.04)
        loop, driver, _, _ = build_loop(
            policy=policy, seam=seam, latency_s=0.08, K=4, C=8, safety=SafetyConfig(accel_scale=1.0)
        )
        run(loop, 60)
        raw = np.array([r for _, r in executed(loop, driver)])[:, 0]
        jumps[seam] = np.abs(np.diff(raw)).max()
        energy[seam] = float(np.sum(np.diff(raw) ** 2))  # jerkiness across all seams
    assert jumps["replace"] == pytest.approx(0.04, abs=1e-5)
    assert jumps["weighted"] == pytest.approx(0.02, abs=1e-5)  # half-way blend on the overlap
    assert energy["rtc"] < energy["weighted"] < energy["replace"]


def test_sync_mode_waits_and_starts_from_the_first_action():
    loop, _driver, policy, _ = build_loop(latency_s=0.1, K=2, C=5, execution="sync")
    run(loop, 21)
    kinds = "".join("a" if r.kind == "act" else "h" for r in loop._records)
    assert kinds == "hhaaaaa" * 3  # robot waits 2 ticks per query, then runs the whole C
    assert loop.queue.dropped_late == 0
    first = next(r for r in loop._records if r.raw_action is not None)
    np.testing.assert_allclose(first.raw_action, policy.target(0.0)[0], atol=1e-5)  # chunk from t=0


def test_overrun_skips_deadlines_without_burst():
    clock = SteppingClock()
    spec = SPEC
    policy = ramp_for(spec)
    worker = InferenceWorker(
        policy, fixed(2, 10), clock, WorkerConfig(mode="inline"), latency_model=ConstantLatency(0.0)
    )

    class SlowDriver(FakeDriver):
        reads = 0
        elapsed: list = []

        def read_state(self):
            self.reads += 1
            if self.reads == 5:  # start() reads once, then ticks 0, 1, 2, 3
                clock.spend(0.12)  # tick 3 takes 2.4 periods
            return super().read_state()

        def elapse(self, periods):  # a simulator is told the deadlines that passed
            self.elapsed.append((periods, clock.now()))

    driver = SlowDriver(clock, spec)
    loop = ControlLoop(
        LoopConfig(),
        clock,
        driver,
        FakeObserver(),
        worker,
        SafetySupervisor(spec),
        QueueConfig(seam="replace"),
    )
    loop.start()
    loop.run(8)
    slots = [r.slot for r in loop._records]
    assert slots == [0, 1, 2, 3, 6, 7, 8, 9]
    assert loop.overruns == 2 and loop._records[3].overrun_ticks == 2
    assert driver.elapsed == [(2, pytest.approx(3 * DT + 0.12))]  # once, right after the late tick
    assert [r.lateness_s for r in loop._records[4:]] == [0.0] * 4  # back on the grid, no catch-up burst
    for r in loop._records:
        if r.raw_action is not None:
            np.testing.assert_allclose(r.raw_action, policy.target(r.slot * DT)[0], atol=1e-5)
    assert loop.queue.skipped == 2  # the actions for slots 4 and 5 were purged, not replayed


@pytest.mark.parametrize("clock_kind, execution, latency_s, enabled, slow_read", [
    ("stepping", "sync", 0.0, True, False), ("stepping", "sync", 0.12, True, False),
    ("stepping", "async", 0.0, True, False), ("stepping", "sync", 0.0, False, False),
    ("virtual", "sync", 0.0, True, False), ("stepping", "sync", 0.0, True, True)])
def test_the_next_observation_is_read_in_the_slack_before_the_tick_that_queries(clock_kind, execution, latency_s,
                                                                                 enabled, slow_read):
    """A real clock (here a stepping one), queries before the command (sync, or an inline worker):
    after a tick whose successor will query, the observer's prefetch() reads the state that tick
    observes; never while a query is in flight, on a virtual clock, or when switched off."""
    clock = SteppingClock() if clock_kind == "stepping" else VirtualClock()
    policy = ramp_for(SPEC)
    worker = InferenceWorker(policy, fixed(2, 3), clock, WorkerConfig(mode="inline"),
                             latency_model=ConstantLatency(latency_s))

    class Prefetching(FakeObserver):
        def __init__(self):
            self.calls = []  # (kind, the commands the driver had taken by then, clock time)

        def observe(self, state):
            self.calls.append(("observe", len(driver.sent), clock.now()))
            return super().observe(state)

        def prefetch(self):
            self.calls.append(("prefetch", len(driver.sent), clock.now()))

    driver, observer = FakeDriver(clock, SPEC), Prefetching()
    loop = ControlLoop(LoopConfig(execution=execution, prefetch_observation=enabled), clock, driver, observer,
                       worker, SafetySupervisor(SPEC), QueueConfig(seam="replace"))
    if slow_read:
        loop._prefetch_s = 1.0  # a read longer than any slack at this rate: not attempted
    try:
        loop.start()
        loop.run(20)
    finally:
        loop.close(close_driver=False)
    calls = observer.calls
    pre = [c for c in calls if c[0] == "prefetch"]
    observes = [c for c in calls if c[0] == "observe"]
    assert len(observes) >= 3
    if clock_kind == "virtual" or not enabled or slow_read:
        assert pre == []
        return
    for i, c in enumerate(calls):
        if c[0] == "observe" and i > 0:  # every query after the first: its state was read just before
            assert calls[i - 1][:2] == ("prefetch", c[1]) and calls[i - 1][2] < c[2]
        if c[0] == "prefetch" and i + 1 < len(calls):  # and only then: each read is observed next
            assert calls[i + 1][:2] == ("observe", c[1])
    assert len(pre) in (len(observes) - 1, len(observes))  # none while a query is in flight
    assert loop._ep["prefetched"] == len(pre) and loop._ep["prefetch_ms"] >= 0.0  # counted per episode


def test_watchdog_stops_when_inference_stalls():
    loop, _driver, _policy, _ = build_loop(
        latency_s=0.0, K=2, C=6, safety=SafetyConfig(stale_s=0.2, stop_s=0.5)
    )
    loop.start()
    loop.run(10)
    loop.worker.latency_model = ConstantLatency(100.0)  # the model "hangs"
    res = loop.run(100)
    assert res.reason == "fault" and res.mode is SafetyMode.FAULT
    c = loop.safety.counts
    assert c["watchdog_stale"] == 1 and c["watchdog_stop"] == 1
    with pytest.raises(Exception, match="reset"):
        loop.new_episode()


def test_nan_chunks_lead_to_protective_stop():
    spec = SPEC
    loop, driver, _policy, _ = build_loop(
        policy=ramp_for(spec, nan_at=2), latency_s=0.0, K=2, C=3, safety=SafetyConfig(max_invalid_in_row=3)
    )
    res = run(loop, 50)
    assert res.reason == "fault"
    assert loop.safety.counts["invalid_action"] == 3 and loop.safety.counts["protective_stop"] == 1
    assert all(np.all(np.isfinite(s)) for s in driver.sent)


def test_inference_error_stops_safely_and_reraises():
    loop, driver, _policy, _ = build_loop(policy=ramp_for(SPEC, fail_at=3), latency_s=0.0, K=2, C=3)
    with pytest.raises(InferenceError, match="fake policy failure"):
        run(loop, 50)
    assert driver.holds == 1


def test_keyboard_interrupt_is_not_swallowed():
    loop, driver, _, _ = build_loop()

    def stop(rec):
        if rec.slot == 5:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        run(loop, 50, stop_when=stop)
    assert driver.holds == 1


def test_estop_latches_and_reset_waits_for_a_fresh_plan():
    loop, driver, policy, clock = build_loop(latency_s=0.1, K=2, C=20)
    run(loop, 10)
    loop.request_estop("test button")
    n_sent = len(driver.sent)
    res = loop.run(5)
    assert res.reason == "estop" and driver.estops == 1 and driver.state is DriverState.ESTOPPED
    res = loop.run(5)  # still latched: nothing is commanded
    assert res.reason == "estop" and len(driver.sent) == n_sent
    assert loop.safety.counts["estop"] == 1
    t_reset = clock.now()
    loop.reset()
    assert driver.state is DriverState.ACTIVE
    res = loop.run(10)
    after = [r for r in loop._records if r.t_s > t_reset]
    assert [r.kind for r in after[:2]] == ["hold", "hold"]  # waits for a fresh plan (100 ms)
    acted = [r for r in after if r.raw_action is not None]
    assert acted and all(policy.queries[r.query_id - 1] >= t_reset for r in acted)


def test_refuses_to_start_on_mismatch():
    clock = VirtualClock()
    with pytest.raises(SafetyConfigError, match="control rate"):
        w = InferenceWorker(_ramp_at(50.0), fixed(2, 2), clock)
        ControlLoop(LoopConfig(), clock, FakeDriver(clock, SPEC), FakeObserver(), w, SafetySupervisor(SPEC))
    ee_policy = _ramp_at(20.0)
    ee_policy.action_layout = "ee_delta"
    with pytest.raises(SafetyConfigError, match="action layout"):
        ControlLoop(
            LoopConfig(),
            clock,
            FakeDriver(clock, SPEC),
            FakeObserver(),
            InferenceWorker(ee_policy, fixed(2, 2), clock),
            SafetySupervisor(SPEC),
        )
    with pytest.raises(ConfigError, match="rate_hz"):
        ControlLoop(
            LoopConfig(rate_hz=50.0),
            clock,
            FakeDriver(clock, SPEC),
            FakeObserver(),
            InferenceWorker(_ramp_at(20.0), fixed(2, 2), clock),
            SafetySupervisor(SPEC),
        )


def _ramp_at(rate_hz):
    p = ramp_for(SPEC)
    p.control_rate_hz = rate_hz
    return p


def test_new_episode_discards_the_previous_plan():
    loop, _driver, policy, clock = build_loop(latency_s=0.05, K=2, C=20)
    run(loop, 5)
    loop.new_episode()
    t_new = clock.now()
    loop.run(5)
    eps = [r for r in loop._records if r.ep == 1]
    assert eps[0].kind == "hold"  # nothing from episode 0 carried over
    assert all(policy.queries[r.query_id - 1] >= t_new for r in eps if r.query_id is not None)


def test_ee_layout_with_the_adaptive_scheduler(tmp_path):
    from edge.robot_spec import load_robot_spec
    from edge.schedulers import DenoisingVarianceScheduler
    from edge.telemetry import RunRecorder

    spec = load_robot_spec("panda")  # ee_delta, 20 Hz
    policy = ramp_for(spec)
    policy.base = np.array([0.002, 0.0, 0.0, 0.0, 1.0])
    policy.slope = np.zeros(5)
    policy.action_dim, policy.action_layout = 5, "ee_delta"
    rec = RunRecorder(tmp_path / "run")
    loop, driver, _, _ = build_loop(
        policy=policy,
        spec=spec,
        scheduler=DenoisingVarianceScheduler(num_steps=4, max_execute=8),
        latency_s=0.05,
        seam="rtc",
        recorder=rec,
    )
    res = run(loop, 60)
    loop.close()
    summary = rec.close()
    assert res.reason == "max_ticks" and driver.state is DriverState.DISCONNECTED
    assert summary["executed_actions"] >= 55 and summary["queries"] >= 7
    moved = driver.ee - spec.fk(spec.q_home())[0]
    assert moved[0] == pytest.approx(0.002 * summary["executed_actions"], rel=0.05)  # 2 mm per action
    assert driver.gripper == 1.0


def test_thread_worker_queries_after_the_command_is_out():
    from edge.clock import RealClock

    clock = RealClock()
    events = []
    worker = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock, WorkerConfig(mode="thread"))
    submit = worker.submit

    def recording_submit(req):
        events.append(("submit", loop.n))
        submit(req)

    worker.submit = recording_submit

    class RecordingDriver(FakeDriver):
        def send_command(self, command):
            events.append(("send", loop.n))
            return super().send_command(command)

    loop = ControlLoop(LoopConfig(rate_hz=SPEC.control_rate_hz), clock, RecordingDriver(clock, SPEC),
                       FakeObserver(), worker, SafetySupervisor(SPEC), QueueConfig(seam="rtc"))
    loop.start()
    try:
        loop.run(16)
    finally:
        loop.close()
    submits = [i for i, (kind, _) in enumerate(events) if kind == "submit"]
    assert len(submits) >= 3
    # the query that a tick starts goes out after that tick's command: the arm never waits on it
    assert all(events[i - 1] == ("send", events[i][1]) for i in submits)
    assert all(0.0 <= r.command_s <= r.tick_overhead_s for r in loop._records)
    assert sum(r.raw_action is not None for r in loop._records) >= 8  # and the chunks still execute


def test_real_clock_loop_collects_garbage_only_in_the_slack():
    import gc

    from edge.clock import RealClock

    clock = RealClock()
    worker = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock, WorkerConfig(mode="thread"))
    loop = ControlLoop(LoopConfig(rate_hz=SPEC.control_rate_hz), clock, FakeDriver(clock, SPEC),
                       FakeObserver(), worker, SafetySupervisor(SPEC), QueueConfig(seam="replace"))
    collections = []

    def note(phase, info):
        if phase == "start":
            collections.append((loop.n, clock.now()))

    gc.enable()
    gc.callbacks.append(note)
    try:
        loop.start()
        assert not gc.isenabled()  # no automatic collection can land inside a tick
        loop.run(12)
    finally:
        loop.close()
        gc.callbacks.remove(note)
    assert gc.isenabled() and gc.get_freeze_count() == 0  # restored
    assert len(collections) >= 10  # one young-generation pass per tick (50 ms ticks leave slack)
    # each ran after its tick's work, before the next deadline
    after_start = [c for c in collections if c[0] > 0]
    assert all(t < loop.t0_s + n * loop.period_s for n, t in after_start)
    # the virtual clock leaves the collector alone (no wall-clock slack to schedule it in)
    vloop = build_loop()[0]
    vloop.start()
    assert gc.isenabled()
    vloop.run(3)
    vloop.close()


def run_real_clock_loop(tmp_path, clock, worker, config, ticks=30):
    """30 ticks of the ramp policy on the fake arm with a recorder: (the loop, its query records)."""
    from edge.telemetry import RunRecorder, read_run

    rec = RunRecorder(tmp_path / "run")
    loop = ControlLoop(config, clock, FakeDriver(clock, SPEC), FakeObserver(), worker, SafetySupervisor(SPEC),
                       QueueConfig(seam="rtc"), rec)
    loop.start()
    try:
        loop.run(ticks)
    finally:
        loop.close()
        rec.close()
    return loop, read_run(tmp_path / "run").queries


@pytest.mark.parametrize("slack_work", [True, False])
def test_real_clock_loop_merges_chunks_that_arrive_between_ticks(tmp_path, slack_work):
    from edge.clock import RealClock

    clock = RealClock()
    policy = ramp_for(SPEC)
    # answers arrive 30 ms after the query, mid-period: while the loop waits for its next deadline
    worker = InferenceWorker(policy, fixed(2, 4), clock, WorkerConfig(mode="thread"),
                             latency_model=ConstantLatency(0.03))
    loop, queries = run_real_clock_loop(tmp_path, clock, worker,
                                        LoopConfig(rate_hz=SPEC.control_rate_hz, slack_work=slack_work))
    assert len(queries) >= 6
    in_slack = [q for q in queries if q["merged_in_slack"]]
    if not slack_work:
        assert not in_slack
    else:
        # one may miss; so may one per tick that woke late (a VM stall shifts the answer past the slack)
        n_late = min(2, sum(r.lateness_s > 0.005 for r in loop._records))  # capped: the check must still bite
        assert len(in_slack) >= len(queries) - 1 - n_late
        # merged for the coming tick, at least slack_margin_s before its deadline
        for q in in_slack:
            assert q["t_merged_s"] <= loop.t0_s + q["merge_slot"] * loop.period_s - loop.config.slack_margin_s
    # either way every action runs at its planned time (the ramp is a function of time) and the
    # queue never runs dry once the first chunk is in
    slope = float(np.abs(policy.slope).max())
    ex = executed(loop, None)
    assert len(ex) >= 30 - 2
    # the ramp is read at the observing tick's wake time and checked at the executing tick's: their
    # lateness on this machine's real clock (a VM stall can be tens of ms) adds to the 10 ms allowed
    late = max(r.lateness_s for r in loop._records)
    for t, raw in ex:
        np.testing.assert_allclose(raw, policy.target(t)[0], atol=slope * (0.01 + late) + 1e-5)
    assert all(b >= o for b, o in zip(loop.busy_s, loop.overhead_s)) and len(loop.busy_s) == 30


def test_process_answers_are_received_in_the_slack_and_merged_on_the_tick(tmp_path):
    """A merge margin wider than any arrival leaves every merge to the tick; the answers that arrive
    between ticks are still taken off the worker's pipe right then (before the receive margin), so
    the tick only merges them."""
    import functools

    from edge.clock import LatencyConfig, RealClock

    clock = RealClock()
    period = 1.0 / SPEC.control_rate_hz
    # answers arrive 30 ms after the query, mid-period at 20 Hz
    worker = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock,
                             WorkerConfig(mode="process", latency=LatencyConfig(kind="constant", latency_s=0.03)),
                             policy_factory=functools.partial(ramp_for, SPEC))
    try:
        loop, queries = run_real_clock_loop(tmp_path, clock, worker, LoopConfig(
            rate_hz=SPEC.control_rate_hz, slack_margin_s=period, slack_receive_margin_s=0.005))
    finally:
        worker.close()
    assert len(queries) >= 6 and not any(q["merged_in_slack"] for q in queries)
    early = [q for q in queries if q["t_received_s"] < q["t_merged_s"]]
    n_late = min(2, sum(r.lateness_s > 0.005 for r in loop._records))  # as above: a late tick may cost one
    assert len(early) >= len(queries) - 1 - n_late
    # received for the coming tick, at least the receive margin before its deadline; a VM stall that
    # makes the ticks late (tens of ms on this real clock) shifts the slack after them by as much
    late = max(r.lateness_s for r in loop._records)
    for q in early:
        assert q["t_ready_s"] <= q["t_received_s"] <= loop.t0_s + q["merge_slot"] * period - 0.005 + late


def test_latency_percentiles_match_numpy():
    from edge.stats import percentiles

    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 20):
        x = rng.exponential(0.05, n).tolist()
        np.testing.assert_allclose(percentiles(x, (50.0, 95.0)), np.percentile(x, (50, 95)), rtol=1e-12)


def test_time_spent_between_episodes_is_not_an_overrun():
    clock = SteppingClock()
    worker = InferenceWorker(ramp_for(SPEC), fixed(2, 10), clock, WorkerConfig(mode="inline"),
                             latency_model=ConstantLatency(0.0))
    loop = ControlLoop(LoopConfig(), clock, FakeDriver(clock, SPEC), FakeObserver(), worker,
                       SafetySupervisor(SPEC), QueueConfig(seam="replace"))
    loop.start()
    loop.run(4)
    clock.spend(1.5)  # an env reset that takes 30 periods of wall time
    loop.new_episode()
    loop.run(4)
    assert loop.overruns == 0
    ep = loop.end_episode()
    assert ep["overruns"] == 0 and ep["ticks"] == 4


def test_loop_thread_runs_on_its_cpus_and_gets_its_affinity_back(tmp_path):
    import os

    from edge.clock import RealClock

    allowed = frozenset(os.sched_getaffinity(0))
    cpu = min(allowed)
    clock = RealClock()
    seen = []

    class Driver(FakeDriver):
        def read_state(self):
            seen.append(frozenset(os.sched_getaffinity(0)))
            return super().read_state()

    worker = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock, WorkerConfig(mode="inline"))
    loop = ControlLoop(LoopConfig(rate_hz=SPEC.control_rate_hz, cpus=str(cpu)), clock, Driver(clock, SPEC),
                       FakeObserver(), worker, SafetySupervisor(SPEC), QueueConfig(seam="rtc"))
    loop.start()
    try:
        loop.run(3)
    finally:
        loop.close()
    assert seen and all(s == {cpu} for s in seen[1:])
    assert frozenset(os.sched_getaffinity(0)) == allowed
    with pytest.raises(ConfigError, match="loop.cpus"):
        LoopConfig(cpus="9999")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timer slack is a Linux thread setting")
def test_loop_thread_gets_its_timer_slack_and_gives_it_back():
    from edge.clock import RealClock, set_thread_timer_slack

    before = set_thread_timer_slack(50_000)  # a known starting point; read back below
    assert before is not None
    clock = RealClock()
    seen = []

    class Driver(FakeDriver):
        def read_state(self):
            seen.append(set_thread_timer_slack(7_000))  # read (and disturb) the loop thread's slack
            set_thread_timer_slack(seen[-1])
            return super().read_state()

    worker = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock, WorkerConfig(mode="inline"))
    loop = ControlLoop(LoopConfig(rate_hz=SPEC.control_rate_hz, timer_slack_ns=1_000), clock, Driver(clock, SPEC),
                       FakeObserver(), worker, SafetySupervisor(SPEC), QueueConfig(seam="rtc"))
    loop.start()
    try:
        loop.run(3)
    finally:
        loop.close()
    assert seen and all(s == 1_000 for s in seen[1:])
    assert set_thread_timer_slack(before) == 50_000  # restored by close()
    with pytest.raises(ConfigError, match="timer_slack_ns"):
        LoopConfig(timer_slack_ns=-1)


class _TrackingRamp:
    """A ramp policy with ``encode_query``: records what each query was told the arm executed and
    what was queued from its observation's slot."""

    def __init__(self, policy):
        self._p, self.seen, self.delays, self.requests = policy, [], [], []

    def __getattr__(self, name):
        return getattr(self._p, name)

    def encode_query(self, obs, queued, executed, delay_steps, t_request_s=None):
        self.requests.append(t_request_s)
        self.seen.append((obs.t_s, None if queued is None else np.array(queued), executed))
        self.delays.append(delay_steps)
        return self._p.encode(obs)


@pytest.mark.parametrize("execution, latency_s", [("sync", 0.1), ("async", 0.03), ("async", 0.12)])
def test_queries_are_told_what_ran_since_their_previous_observation(execution, latency_s):
    spec = SPEC
    policy = _TrackingRamp(ramp_for(spec))
    loop, _driver, _, _ = build_loop(policy=policy, latency_s=latency_s, K=2, C=5, execution=execution)
    run(loop, 40)
    recs = {round(r.t_s / DT): r for r in loop._records}
    slots = [round(t / DT) for t, _, _ in policy.seen]
    assert len(slots) >= 5 and policy.seen[0][2] is None  # the first query: nothing known before it
    for prev, (t, queued, ran) in zip(slots, policy.seen[1:]):
        n = round(t / DT)
        assert len(ran) == n - prev  # one entry per slot from the previous observation on
        for slot, a in zip(range(prev, n), ran):  # the command the safety layer let through, or None
            sent = recs[slot].command if recs[slot].kind == "act" else None
            assert (a is None) == (sent is None) and (a is None or np.allclose(a, sent))
        if execution == "async" and recs[n].raw_action is not None:
            np.testing.assert_allclose(queued[0], recs[n].raw_action)  # the action that runs at its slot
    if execution == "sync":
        assert all(q is None or len(q) == 0 for _, q, _ in policy.seen)  # nothing queued when sync queries
    assert max(policy.delays) == int(np.ceil(latency_s / DT - 1e-9))  # the loop's latency estimate, in ticks
    assert set(policy.requests) == {None}  # a virtual clock's times are not wall time


def test_close_disarms_the_driver_before_stopping_the_worker():
    """An MCU's watchdog (200 ms) is shorter than a worker process's shutdown: the driver is held and closed
    (DISARM) first, then the worker stops — also when the driver's hold or close fails."""
    from edge.contracts import DriverState

    loop, driver, _policy, _ = build_loop(latency_s=0.0)
    loop.run(3)
    order = []
    stop_worker = loop.worker.close

    def worker_close():
        order.append(("worker", driver.state))
        stop_worker()

    loop.worker.close = worker_close
    loop.close(close_driver=True)
    assert order == [("worker", DriverState.DISCONNECTED)] and driver.holds >= 1

    loop, driver, _policy, _ = build_loop(latency_s=0.0)
    loop.run(3)
    stopped = []
    stop_worker = loop.worker.close
    loop.worker.close = lambda: (stopped.append(driver.state), stop_worker())

    def broken_hold():
        raise OSError("link lost")

    driver.hold = broken_hold
    with pytest.raises(OSError, match="link lost"):
        loop.close(close_driver=True)
    assert driver.state is DriverState.DISCONNECTED and stopped == [DriverState.DISCONNECTED]


def test_a_failed_camera_stops_the_arm_at_the_next_tick_not_the_next_query():
    """An observer's ``check()`` (a stale or frozen camera) runs every tick before the command: with a query
    only every 8 ticks the arm still stops at the first tick after the failure, with no command sent in it."""
    from tests.fakes import FakeObserver

    class Camera(FakeObserver):
        def __init__(self):
            self.checks = 0

        def check(self):
            self.checks += 1
            if self.checks > 5:
                raise RuntimeError("camera 'front': newest frame is 0.550 s old (limit 0.5 s)")

    loop, driver, _policy, _ = build_loop(latency_s=0.0, K=2, C=8, observer=Camera())
    with pytest.raises(RuntimeError, match="newest frame is 0.550 s old"):
        loop.run(20)
    assert loop.n == 5 and len(driver.sent) == 5  # ticks 0-4 commanded; tick 5 stopped before its command
    assert driver.holds >= 1  # the loop's safe stop

    # not while the arm is stopped: after an e-stop the loop keeps ticking (holding) and checks nothing
    cam = Camera()
    loop, _driver, _policy, _ = build_loop(latency_s=0.0, K=2, C=8, observer=cam)
    loop.run(2)
    loop.request_estop("test")
    cam.checks = 100  # any check now would raise
    res = loop.run(3)
    assert res.reason == "estop" and cam.checks == 100
