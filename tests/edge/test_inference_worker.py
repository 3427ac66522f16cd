import time

import numpy as np
import pytest

from edge.clock import ConstantLatency, PerStepLatency, RealClock, VirtualClock
from edge.contracts import Observation, QueryContext, QueryPlan
from edge.errors import EdgeError
from edge.inference_worker import (
    InferenceError,
    InferenceWorker,
    QueryRequest,
    WorkerConfig,
)
from edge.schedulers import fixed
from tests.fakes import BlackBoxRampPolicy, joint_spec, ramp_for

SPEC = joint_spec()


def request(t_obs, qid=1, epoch=0, prefix=None, frozen=0):
    obs = Observation({}, np.zeros(8, np.float32), "", t_obs)
    ctx = QueryContext(t_obs, 0.05, 10, 0, float("nan"), float("nan"), frozen, qid - 1)
    return QueryRequest(obs, qid, epoch, ctx, t_obs, prefix, frozen, None)


def test_inline_charges_latency_in_virtual_time():
    clock = VirtualClock()
    policy = ramp_for(SPEC)
    w = InferenceWorker(
        policy, fixed(10, 6), clock, WorkerConfig(mode="auto"), latency_model=PerStepLatency(a_ms=20, b_ms=6)
    )  # 80 ms at K=10
    assert w.mode == "inline"
    w.submit(request(1.0))
    assert w.busy
    assert w.poll(1.05) is None  # not ready before t_obs + latency
    res = w.poll(1.08)
    assert res is not None and not w.busy
    assert res.t_ready_s == pytest.approx(1.08) and res.latency_s == pytest.approx(0.08)
    assert res.nfe == 10 and res.chunk.execute == 6 and res.chunk.t_start_s == 1.0
    np.testing.assert_allclose(res.chunk.actions, policy.target(1.0), atol=1e-5)
    assert policy.steps == 10 and policy.queries == [1.0]  # encode once, K steps
    assert res.backend == "fake"


def test_noise_is_deterministic_per_query():
    outs = []
    for _ in range(2):
        seen = []

        class Spy(BlackBoxRampPolicy):
            def sample(self, features, noise, num_steps, seen=seen):
                seen.append(noise.copy())
                return super().sample(features, noise, num_steps)

        w = InferenceWorker(Spy(np.zeros(8), np.zeros(8)), fixed(2, 2), VirtualClock(), WorkerConfig(seed=5))
        for qid in (1, 2):
            w.submit(request(0.0, qid=qid))
            w.poll(1.0)
        outs.append(seen)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    assert not np.array_equal(outs[0][0], outs[0][1])


def test_noise_temperature_scales_the_drawn_noise():
    seen = {}
    for temp in (1.0, 0.5, 0.0):
        class Spy(BlackBoxRampPolicy):
            def sample(self, features, noise, num_steps, temp=temp):
                seen[temp] = noise.copy()
                return super().sample(features, noise, num_steps)

        w = InferenceWorker(Spy(np.zeros(8), np.zeros(8)), fixed(2, 2), VirtualClock(),
                            WorkerConfig(seed=5, noise_temperature=temp))
        w.submit(request(0.0))
        w.poll(0.0)
    assert np.abs(seen[1.0]).max() > 0.5
    np.testing.assert_allclose(seen[0.5], 0.5 * seen[1.0], rtol=1e-6)
    assert not seen[0.0].any()


def test_black_box_policy_uses_sample_and_is_never_guided():
    policy = BlackBoxRampPolicy(np.zeros(8), np.zeros(8))
    w = InferenceWorker(policy, fixed(3, 3), VirtualClock(), latency_model=ConstantLatency(0.0))
    w.submit(request(0.0, prefix=np.ones((5, 8), np.float32), frozen=2))
    res = w.poll(0.0)
    assert not res.guided and policy.steps == 3


def test_rtc_guidance_applied_with_a_prefix():
    policy = ramp_for(SPEC)
    w = InferenceWorker(policy, fixed(5, 5), VirtualClock(), latency_model=ConstantLatency(0.0))
    prefix = policy.target(0.0)[:4] + 0.01
    w.submit(request(0.0, prefix=prefix, frozen=2))
    res = w.poll(0.0)
    assert res.guided
    np.testing.assert_allclose(res.chunk.actions[:2], prefix[:2], atol=1e-5)


def test_rtc_soft_steps_limit_guidance_to_the_frozen_actions():
    policy = ramp_for(SPEC)
    prefix = policy.target(0.0)[:6] + 0.3  # the previous chunk disagrees with the new plan
    chunks = {}
    for soft in (-1, 0):
        w = InferenceWorker(policy, fixed(5, 5), VirtualClock(), WorkerConfig(rtc_soft_steps=soft),
                            latency_model=ConstantLatency(0.0))
        w.submit(request(0.0, prefix=prefix, frozen=2))
        res = w.poll(0.0)
        assert res.guided
        chunks[soft] = res.chunk.actions
        np.testing.assert_allclose(chunks[soft][:2], prefix[:2], atol=1e-5)  # frozen: always equal
    free = policy.target(0.0)
    # soft = 0: the rest of the chunk is the policy's own plan; soft = -1 pulls slot 2 toward the prefix
    np.testing.assert_allclose(chunks[0][2:], free[2:], atol=1e-5)
    assert np.abs(chunks[-1][2] - free[2]).max() > 0.05


def test_errors_surface_from_poll():
    w = InferenceWorker(ramp_for(SPEC, fail_at=1), fixed(2, 2), VirtualClock())
    w.submit(request(0.0))
    with pytest.raises(InferenceError, match="fake policy failure") as info:
        w.poll(0.0)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert not w.busy

    class BadScheduler:
        name = "bad"

        def plan(self, features, history):
            return QueryPlan(None, 0, 3, 3)

        def reset(self):
            pass

    w2 = InferenceWorker(ramp_for(SPEC), BadScheduler(), VirtualClock())
    w2.submit(request(0.0))
    with pytest.raises(InferenceError, match="num_steps=0"):
        w2.poll(0.0)
    with pytest.raises(InferenceError, match="in flight"):
        w3 = InferenceWorker(ramp_for(SPEC), fixed(1, 1), VirtualClock(), latency_model=ConstantLatency(1.0))
        w3.submit(request(0.0))
        w3.submit(request(0.0, qid=2))


def test_cancel_discards_in_flight_results():
    w = InferenceWorker(ramp_for(SPEC), fixed(2, 2), VirtualClock(), latency_model=ConstantLatency(0.1))
    w.submit(request(0.0))
    w.cancel()
    assert not w.busy and w.poll(1.0) is None and w.epoch == 1


def test_thread_mode_never_blocks_the_caller():
    class Slow(BlackBoxRampPolicy):
        def sample(self, features, noise, num_steps):
            time.sleep(0.5)
            return super().sample(features, noise, num_steps)

    clock = RealClock()
    w = InferenceWorker(Slow(np.zeros(8), np.zeros(8)), fixed(2, 2), clock, WorkerConfig(mode="auto"))
    try:
        assert w.mode == "thread"
        t0 = clock.now()
        w.submit(request(t0))
        assert w.poll(clock.now()) is None
        # submit + poll returned while the query computes (0.5 s; the margin absorbs VM stalls)
        assert clock.now() - t0 < 0.25
        res = None
        while res is None and clock.now() - t0 < 5.0:
            time.sleep(0.005)
            res = w.poll(clock.now())
        assert res is not None and res.latency_s >= 0.5 and res.compute_s >= 0.5
        w.submit(request(clock.now(), qid=2))
        w.cancel()  # the thread finishes the computation, the result is dropped
        time.sleep(0.6)  # longer than the 0.5 s compute: the dropped result has arrived
        assert w.poll(clock.now()) is None and not w.busy
    finally:
        w.close()


@pytest.mark.parametrize("mode", ["inline", "thread", "process"])
def test_a_real_clock_tells_an_encode_query_policy_when_its_query_was_asked_for(mode):
    """A planner's deadline counts from the request: the request's own time (not the observation's)
    reaches ``encode_query`` where the loop's clock is the real one, in every mode; a virtual or any
    other clock's times do not (they are not ``time.monotonic()``)."""
    import dataclasses
    import functools

    from tests.fakes import SteppingClock, request_timed_ramp_for

    clocks = [RealClock(), SteppingClock()] if mode != "inline" else [RealClock(), VirtualClock()]
    for clock in clocks:
        w = InferenceWorker(request_timed_ramp_for(SPEC), fixed(2, 2), clock, WorkerConfig(mode=mode),
                            policy_factory=functools.partial(request_timed_ramp_for, SPEC))
        try:
            t = clock.now()
            w.submit(dataclasses.replace(request(t - 0.5), t_submit_s=t))  # observed 0.5 s before the request
            res, t_end = None, time.monotonic() + 10.0
            while res is None and time.monotonic() < t_end:  # a manual clock: any result is ready
                res = w.poll(clock.now() if isinstance(clock, RealClock) else float("inf"))
                time.sleep(0.002)
            assert res is not None
            seen = w.policy_counts("episode_stats", timeout_s=5.0)["requests"]
            assert seen == ([t] if isinstance(clock, RealClock) else [None])
        finally:
            w.close()


def test_thread_mode_error_is_reraised():
    clock = RealClock()
    w = InferenceWorker(ramp_for(SPEC, fail_at=1), fixed(2, 2), clock, WorkerConfig(mode="thread"))
    try:
        w.submit(request(clock.now()))
        deadline = time.monotonic() + 5
        with pytest.raises(InferenceError):
            while time.monotonic() < deadline:
                w.poll(clock.now())
                time.sleep(0.005)
    finally:
        w.close()


def test_latent_policies_are_mapped_in_and_out():
    class Latent(type(ramp_for(SPEC))):
        """Works in a latent scaled by 10: the worker must convert the target and the result."""

        def denoise_step(self, features, x, tau, dtau):
            self.steps += 1
            return x + dtau * (self.target(features["t"]) * 10.0 - x) / max(1.0 - tau, 1e-9)

        def to_actions(self, x):
            return x / 10.0

        def to_latent(self, a):
            return a * 10.0

    base = ramp_for(SPEC)
    policy = Latent(base.base, base.slope)
    w = InferenceWorker(policy, fixed(4, 4), VirtualClock(), latency_model=ConstantLatency(0.0))
    prefix = policy.target(0.0)[:3] + 0.01
    w.submit(request(0.0, prefix=prefix, frozen=2))
    res = w.poll(0.0)
    np.testing.assert_allclose(res.chunk.actions[:2], prefix[:2], atol=1e-5)
    np.testing.assert_allclose(res.chunk.actions[5:], policy.target(0.0)[5:], atol=1e-5)


def _wait_result(w, clock, timeout_s=10.0):
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        res = w.poll(clock.now())
        if res is not None:
            return res
        time.sleep(0.002)
    raise AssertionError("no result")


def test_process_mode_matches_inline_and_discards_cancelled_queries():
    import functools

    clock = RealClock()
    w = InferenceWorker(ramp_for(SPEC), fixed(3, 4), clock, WorkerConfig(mode="process", seed=2),
                        policy_factory=functools.partial(ramp_for, SPEC))
    try:
        t0 = clock.now()
        w.submit(request(t0))
        assert w.busy and clock.now() - t0 < 0.02  # submit does not wait for the compute
        res = _wait_result(w, clock)
        inline = InferenceWorker(ramp_for(SPEC), fixed(3, 4), VirtualClock(), WorkerConfig(seed=2))
        assert w.start_s > 0.05 > inline.start_s  # the process was spawned and built its policy first
        inline.submit(request(t0))
        ref = inline.poll(1e9)
        np.testing.assert_array_equal(res.chunk.actions, ref.chunk.actions)
        assert res.nfe == 3 and res.chunk.execute == 4 and res.t_ready_s >= t0 and not w.busy
        w.reset_scheduler()
        w.submit(request(clock.now(), qid=2))
        w.cancel()  # the process finishes, the loop never sees the stale chunk
        t_end = time.monotonic() + 5
        while w.busy and time.monotonic() < t_end:
            assert w.poll(clock.now()) is None
            time.sleep(0.002)
        assert not w.busy
        w.submit(request(clock.now(), qid=3, epoch=w.epoch))
        assert _wait_result(w, clock).request.query_id == 3
    finally:
        w.close()
    assert w._proc is None


def test_process_mode_errors_surface_and_bad_setups_are_refused():
    import functools

    clock = RealClock()
    w = InferenceWorker(ramp_for(SPEC), fixed(2, 2), clock, WorkerConfig(mode="process"),
                        policy_factory=functools.partial(ramp_for, SPEC, fail_at=1))
    try:
        w.submit(request(clock.now()))
        with pytest.raises(InferenceError, match="worker process"):
            _wait_result(w, clock)
    finally:
        w.close()
    with pytest.raises(EdgeError, match="policy_factory"):
        InferenceWorker(ramp_for(SPEC), fixed(2, 2), clock, WorkerConfig(mode="process"))
    with pytest.raises(EdgeError, match="virtual clock"):
        InferenceWorker(ramp_for(SPEC), fixed(2, 2), VirtualClock(), WorkerConfig(mode="process"),
                        policy_factory=functools.partial(ramp_for, SPEC))
    with pytest.raises(EdgeError, match="failed to start"):
        InferenceWorker(ramp_for(SPEC), fixed(2, 2), clock, WorkerConfig(mode="process"),
                        policy_factory=functools.partial(ramp_for, "not a spec"))


@pytest.mark.parametrize("mode", ["inline", "thread", "process"])
def test_policy_counts_come_from_the_copy_that_decides(mode):
    """The policy's own per-episode counts (episode_stats, clip_counts) are the deciding copy's: in
    process mode the worker process's, asked over the pipe, not the parent's idle copy."""
    import functools

    from tests.fakes import counting_ramp_for

    clock = VirtualClock() if mode == "inline" else RealClock()
    parent = counting_ramp_for(SPEC)
    w = InferenceWorker(parent, fixed(3, 4), clock, WorkerConfig(mode=mode),
                        policy_factory=functools.partial(counting_ramp_for, SPEC) if mode == "process" else None)
    try:
        for qid in (1, 2):
            w.submit(request(clock.now(), qid=qid))
            if mode == "inline":
                assert w.poll(1e9) is not None
            else:
                _wait_result(w, clock)
        assert w.policy_counts("episode_stats", reset=True) == {"ramp_queries": 2, "ramp_steps": 6}
        assert w.policy_counts("episode_stats") == {"ramp_queries": 0, "ramp_steps": 0}  # reset
        assert w.policy_counts("clip_counts") is None  # the policy has none
        if mode == "process":
            assert parent.queries == [] and parent.steps == 0  # the parent's copy never decided
    finally:
        w.close()


@pytest.mark.parametrize("mode", ["thread", "process"])
@pytest.mark.parametrize("cancelled", [False, True])
def test_policy_counts_include_the_query_in_flight(mode, cancelled):
    """Asked while a query is computed (an episode's end): the counts include it, and the query's
    result still reaches poll (or, cancelled, is discarded)."""
    import functools

    from tests.fakes import counting_ramp_for

    clock = RealClock()
    slow = functools.partial(counting_ramp_for, SPEC, encode_sleep_s=0.3)
    w = InferenceWorker(slow(), fixed(3, 4), clock, WorkerConfig(mode=mode),
                        policy_factory=slow if mode == "process" else None)
    try:
        w.submit(request(clock.now()))
        if cancelled:  # once its compute started (cancelled before, it is never computed)
            w.flush()  # process mode: sent to the worker process
            t_end = time.monotonic() + 5
            while mode == "thread" and not w._computing and time.monotonic() < t_end:
                time.sleep(0.001)
            w.cancel()
        assert w.policy_counts("episode_stats", reset=True) == {"ramp_queries": 1, "ramp_steps": 3}
        if cancelled:
            assert w.poll(clock.now()) is None and not w.busy
        else:
            assert _wait_result(w, clock, timeout_s=2.0).request.query_id == 1
        assert w.policy_counts("episode_stats") == {"ramp_queries": 0, "ramp_steps": 0}
    finally:
        w.close()


def test_thread_mode_policy_counts_wait_for_the_query_within_the_timeout():
    from tests.fakes import counting_ramp_for

    w = InferenceWorker(counting_ramp_for(SPEC, encode_sleep_s=1.0), fixed(2, 2), RealClock(),
                        WorkerConfig(mode="thread"))
    try:
        w.submit(request(RealClock().now()))
        t0 = time.monotonic()
        with pytest.raises(InferenceError, match="still computing a query after 0.2 s .*worker.start_timeout_s"):
            w.policy_counts("episode_stats", timeout_s=0.2)
        assert time.monotonic() - t0 < 0.9
        assert w.policy_counts("episode_stats", timeout_s=5.0) == {"ramp_queries": 1, "ramp_steps": 2}
    finally:
        w.close()


@pytest.mark.parametrize("fake, said", [
    ({"fail": True}, "episode_stats failed in the worker process: RuntimeError: fake counting"),
    ({"exit_code": 4}, "exited \\(exit code 4\\) before it answered for the policy's episode_stats"),  # not a timeout
])
def test_process_mode_policy_counts_errors_surface(fake, said):
    import functools

    from tests.fakes import counting_ramp_for

    w = InferenceWorker(ramp_for(SPEC), fixed(2, 2), RealClock(), WorkerConfig(mode="process"),
                        policy_factory=functools.partial(counting_ramp_for, SPEC, **fake))
    try:
        with pytest.raises(InferenceError, match=said):
            w.policy_counts("episode_stats", timeout_s=20.0)
    finally:
        w.close()


def test_process_mode_policy_counts_time_out_and_drop_the_late_answer():
    import functools

    from tests.fakes import counting_ramp_for

    w = InferenceWorker(ramp_for(SPEC), fixed(2, 2), RealClock(), WorkerConfig(mode="process"),
                        policy_factory=functools.partial(counting_ramp_for, SPEC, count_sleep_s=0.6))
    try:
        with pytest.raises(InferenceError, match="did not answer for the policy's episode_stats within 0.2 s"):
            w.policy_counts("episode_stats", timeout_s=0.2)
        assert w.policy_counts("clip_counts", timeout_s=5.0) is None  # not the late episode_stats answer
        assert w.policy_counts("episode_stats", timeout_s=5.0) == {"ramp_queries": 0, "ramp_steps": 0}
    finally:
        w.close()


def test_process_mode_reports_a_dead_worker_process():
    import functools

    from tests.fakes import dying_ramp_for

    clock = RealClock()
    w = InferenceWorker(ramp_for(SPEC), fixed(2, 2), clock, WorkerConfig(mode="process"),
                        policy_factory=functools.partial(dying_ramp_for, SPEC))
    try:
        w.submit(request(clock.now()))
        with pytest.raises(InferenceError, match="died \\(exit code 3\\)"):
            _wait_result(w, clock)
    finally:
        w.close()


def test_process_mode_frames_travel_through_shared_memory_intact():
    import dataclasses
    import functools

    from edge.shared_frames import SharedFrames
    from tests.fakes import ImageRampPolicy

    rng = np.random.default_rng(0)
    frames = SharedFrames()
    img = {"front": rng.integers(0, 256, (96, 96, 3), np.uint8), "wrist": rng.integers(0, 256, (8, 4, 3), np.uint8)}
    req = dataclasses.replace(request(1.0), obs=Observation(img, np.zeros(8, np.float32), "", 1.0))
    small, layout = frames.pack(req)
    assert small.obs.images == {}  # only the layout is pickled
    back = SharedFrames().unpack((small, layout))
    for k, v in img.items():
        np.testing.assert_array_equal(back.obs.images[k], v)
    name = layout[0]
    frames.pack(dataclasses.replace(req, obs=Observation({"front": img["wrist"]}, req.obs.proprio, "", 1.0)))
    assert frames._shm.name != name  # another layout: a new block, the old one unlinked
    frames.close()
    assert frames._shm is None

    policy = functools.partial(ImageRampPolicy, np.zeros(8), np.full(8, 0.01))
    clock = RealClock()
    w = InferenceWorker(policy(), fixed(3, 4), clock, WorkerConfig(mode="process"), policy_factory=policy)
    try:
        w.submit(req)
        res = _wait_result(w, clock)
        assert res.request is req  # the loop keeps its own request; only the answer came back
    finally:
        w.close()
    inline = InferenceWorker(policy(), fixed(3, 4), VirtualClock(), WorkerConfig())
    inline.submit(req)
    np.testing.assert_array_equal(res.chunk.actions, inline.poll(1e9).chunk.actions)
    dark = dataclasses.replace(req, obs=Observation({"front": np.zeros_like(img["front"])}, req.obs.proprio, "", 1.0))
    inline.submit(dark)
    assert not np.array_equal(res.chunk.actions, inline.poll(1e9).chunk.actions)  # pixels matter


def test_wait_ready_wakes_on_the_answer_and_process_queries_go_out_on_flush():
    import functools

    clock = RealClock()
    w = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock, WorkerConfig(mode="thread"),
                        latency_model=ConstantLatency(0.3))
    try:
        assert not w.wait_ready(1.0)  # nothing in flight: returns at once
        t0 = clock.now()
        w.submit(request(t0))
        assert not w.wait_ready(0.01) and clock.now() - t0 < 0.2  # timed out, well before the answer
        assert w.wait_ready(2.0)
        waited = clock.now() - t0
        assert 0.295 <= waited < 1.5  # woke on the answer, not at the timeout (2 s)
        assert w.poll(clock.now()).request.query_id == 1
    finally:
        w.close()
    p = InferenceWorker(ramp_for(SPEC), fixed(2, 4), clock, WorkerConfig(mode="process"),
                        policy_factory=functools.partial(ramp_for, SPEC))
    try:
        p.submit(request(clock.now()))
        assert p.wait_ready(10.0)  # sends the submitted query, then waits for its answer
        assert p.poll(clock.now()).request.query_id == 1
        p.submit(request(clock.now(), qid=2))
        p.cancel()  # before the loop flushed it: it never leaves the parent
        assert not p.busy and not p.wait_ready(0.2)
        p.submit(request(clock.now(), qid=3, epoch=p.epoch))
        p.flush()
        assert p.wait_ready(10.0) and p.poll(clock.now()).request.query_id == 3
        # a sub-millisecond wait on the pipe keeps its length (Connection.poll would round it up to
        # 1 ms: a whole period at 1 kHz); min of 5, as a loaded machine can only make it later
        waits = []
        for _ in range(5):
            t0 = time.perf_counter()
            assert not p._readable(0.0002)
            waits.append(time.perf_counter() - t0)
        assert 0.0002 <= min(waits) < 0.0009
    finally:
        p.close()


def test_new_episode_resets_the_policy_episode_memory():
    class Remembering(BlackBoxRampPolicy):
        resets = 0

        def reset(self, obs=None):
            self.resets += 1

    policy = Remembering(np.zeros(8), np.zeros(8))
    w = InferenceWorker(policy, fixed(2, 2), VirtualClock(), WorkerConfig())
    w.reset_scheduler()
    assert policy.resets == 1
    # a policy without per-episode state is left alone
    InferenceWorker(ramp_for(SPEC), fixed(2, 2), VirtualClock(), WorkerConfig()).reset_scheduler()


@pytest.mark.parametrize("mode", ["inline", "thread", "process"])
def test_scheduler_feedback_hook_sees_every_result_in_every_mode(mode):
    import functools

    from tests.fakes import ObservingFixed

    sched = ObservingFixed(3, 4)
    clock = VirtualClock() if mode == "inline" else RealClock()
    factory = functools.partial(ramp_for, SPEC) if mode == "process" else None
    w = InferenceWorker(ramp_for(SPEC), sched, clock, WorkerConfig(mode=mode), policy_factory=factory)
    try:
        for qid in (1, 2):
            w.submit(request(clock.now(), qid=qid, epoch=w.epoch))
            if mode == "inline":
                assert w.poll(1e9) is not None
            else:
                _wait_result(w, clock)
        assert sched.seen == [(1, 3), (2, 3)]  # this (the loop's) copy observed both, in order
    finally:
        w.close()
