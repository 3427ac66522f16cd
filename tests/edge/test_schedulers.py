import numpy as np
import pytest

from edge.clock import VirtualClock
from edge.config import ConfigError
from edge.contracts import (
    DenoiseTrace,
    Observation,
    QueryContext,
    RefiningScheduler,
    Scheduler,
)
from edge.inference_worker import InferenceWorker, QueryRequest, WorkerConfig
from edge.schedulers import (
    DenoisingVarianceScheduler,
    DvacSchedulerConfig,
    FixedSchedulerConfig,
    fixed,
    make_scheduler,
)


def ctx(H=10):
    return QueryContext(
        t_s=0.0,
        period_s=0.05,
        chunk_len=H,
        queue_depth=0,
        latency_p50_s=float("nan"),
        latency_p95_s=float("nan"),
        delay_steps=0,
        query_index=0,
    )


def test_fixed_plan():
    s = fixed(4, 6)
    assert isinstance(s, Scheduler)
    p = s.plan(None, ctx())
    assert (p.num_steps, p.execute, p.next_query_in_steps, p.noise) == (4, 6, 6, None)
    assert fixed(4, 50).plan(None, ctx(H=10)).execute == 10  # clamped to the chunk
    with pytest.raises(ConfigError):
        fixed(0, 5)


def trace_with_spread(spread_per_position, K=5, H=10, Da=2, seed=0):
    rng = np.random.default_rng(seed)
    sd = np.asarray(spread_per_position)[None, :, None]
    return DenoiseTrace(rng.standard_normal((K, H, Da)) * sd)


def test_dvac_executes_the_settled_prefix():
    s = DenoisingVarianceScheduler(num_steps=5, min_execute=2, max_execute=10, kappa=1.5)
    assert isinstance(s, RefiningScheduler)
    plan = s.plan(None, ctx())
    assert plan.execute == 10 and plan.num_steps == 5
    for seed in range(5):  # calibrate the rolling scale on uniformly uncertain chunks
        s.refine(plan, trace_with_spread([1.0] * 10, seed=seed))
    settled_then_wild = [0.1] * 4 + [10.0] * 6
    p = s.refine(plan, trace_with_spread(settled_then_wild, seed=9))
    assert 2 <= p.execute <= 5 and p.next_query_in_steps == p.execute
    assert {"var_first", "var_mean", "var_threshold", "dvac_execute"} <= set(p.signals)
    calm = s.refine(plan, trace_with_spread([0.01] * 10, seed=3))
    assert calm.execute == 10
    s.reset()
    assert s.refine(plan, DenoiseTrace(np.zeros((1, 10, 2)))) is plan  # one step: no variance


def test_scheduler_config_factory():
    f = make_scheduler(FixedSchedulerConfig(num_steps=3, execute=5))
    assert f.name == "fixed" and (f.num_steps, f.execute) == (3, 5)
    d = make_scheduler(DvacSchedulerConfig(max_execute=8, kappa=2.0))
    assert d.name == "dvac" and d.max_execute == 8 and d.kappa == 2.0
    with pytest.raises(ConfigError, match="min_execute=5 > max_execute=2"):
        DvacSchedulerConfig(min_execute=5, max_execute=2)
    with pytest.raises(ConfigError):
        make_scheduler(object())
    with pytest.raises(ConfigError):
        DenoisingVarianceScheduler(min_execute=5, max_execute=2)


class SpreadPolicy:
    """Clean estimates jitter with the noise, more toward the end of the chunk."""

    chunk_len, action_dim, control_rate_hz, action_layout = 10, 2, 20.0, "ee_delta"

    def encode(self, obs):
        return None

    def denoise_step(self, features, x, tau, dtau):
        spread = np.linspace(0.0, 2.0, 10)[:, None] * np.sin(37.0 * (tau + 0.1) * (1 + x))
        return x + dtau * (spread - x) / (1.0 - tau)

    def sample(self, features, noise, num_steps):  # pragma: no cover - denoise_step path is used
        raise AssertionError


def test_dvac_through_the_worker_uses_the_trace():
    clock = VirtualClock()
    w = InferenceWorker(
        SpreadPolicy(),
        DenoisingVarianceScheduler(num_steps=6, max_execute=10),
        clock,
        WorkerConfig(mode="inline"),
    )
    obs = Observation({}, np.zeros(3, np.float32), "", 0.0)
    w.submit(QueryRequest(obs, 1, 0, ctx(), 0.0))
    res = w.poll(10.0)
    assert res.nfe == 6 and "var_mean" in res.plan.signals
    assert res.chunk.execute == res.plan.execute < 10
