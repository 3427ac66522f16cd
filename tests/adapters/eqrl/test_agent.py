"""The learner's arithmetic on a tiny agent with a stand-in VLA (the real one is exercised by the
tiny training run in test_train.py)."""

import numpy as np
import pytest
import torch

from adapters.eqrl.agent import EqrlAgent
from adapters.eqrl.config import EqrlConfig
from adapters.eqrl.deploy import EqrlScheduler
from adapters.eqrl.train import Replay
from edge.contracts import QueryContext

H, DA, D, X = 16, 5, 12, 8


def tiny(**kw):
    return EqrlAgent(EqrlConfig(hidden=16, feature_proj=8, n_critics=3, batch_size=8, distill_batch=4, **kw),
                     D, X, H, DA)


def fake_vla(features, noise, ks):
    return np.tanh(noise * 0.5 + features[:, :1, None]).astype(np.float32)


def batch(rng, n=8):
    r = Replay(32, D, X, H, DA)
    for _ in range(32):
        r.add(features=rng.normal(size=D), context=rng.random(X), w=rng.normal(size=(H, DA)),
              c=rng.random(2), chunk=rng.normal(size=(H, DA)), reward=rng.random(), ticks=rng.integers(1, 17),
              done=float(rng.random() < 0.2), features2=rng.normal(size=D), context2=rng.random(X))
    return r.sample(rng, n)


def test_target_discounts_by_gamma_to_the_executed_ticks():
    agent, rng = tiny(gamma=0.9), np.random.default_rng(0)
    b = {k: torch.as_tensor(v) for k, v in batch(rng).items()}
    b["done"] = torch.zeros_like(b["done"])
    torch.manual_seed(1)
    y4 = agent.td_target({**b, "ticks": torch.full_like(b["ticks"], 4.0)}, 0.0)
    torch.manual_seed(1)
    y8 = agent.td_target({**b, "ticks": torch.full_like(b["ticks"], 8.0)}, 0.0)
    boot4, boot8 = y4 - b["reward"], y8 - b["reward"]
    torch.testing.assert_close(boot8, boot4 * 0.9 ** 4)
    done = {**b, "done": torch.ones_like(b["done"])}
    torch.testing.assert_close(agent.td_target(done, 0.0), b["reward"])


def test_update_runs_and_moves_the_critics():
    agent, rng = tiny(), np.random.default_rng(0)
    before = [p.clone() for p in agent.qa.parameters()]
    out = agent.update(batch(rng), 0.5, fake_vla, rng)
    assert all(np.isfinite(v) for v in out.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.qa.parameters()))


@pytest.mark.parametrize("mode", ["full", "noise_only", "steps_only", "chunk_only", "prior_only", "residual_only"])
def test_modes_keep_fixed_dimensions_at_the_default(mode):
    agent, rng = tiny(mode=mode), np.random.default_rng(0)
    a = agent.act(rng.normal(size=(6, D)), rng.random((6, X)), gate=1.0)
    assert a["w"].shape == (6, H, DA) and np.all(np.abs(a["w"]) <= agent.cfg.noise_magnitude)
    k_fixed = mode in ("noise_only", "chunk_only", "prior_only") and mode != "prior_only"
    c_fixed = mode in ("noise_only", "steps_only")
    if k_fixed:
        assert set(a["K"]) == {agent.cfg.k_default}
    if c_fixed:
        assert set(a["C"]) == {agent.cfg.c_default}
    assert a["K"].min() >= agent.cfg.k_min and a["K"].max() <= agent.cfg.k_max
    assert a["C"].min() >= agent.cfg.c_min and a["C"].max() <= agent.cfg.c_max


def test_deployed_decisions_equal_training_time_decisions():
    agent, rng = tiny(), np.random.default_rng(3)
    agent.update(batch(rng), 0.7, fake_vla, rng)
    sched = EqrlScheduler(agent, gate=0.7, seed=5)
    ctx = QueryContext(t_s=0.0, period_s=0.05, chunk_len=H, queue_depth=0, latency_p50_s=float("nan"),
                       latency_p95_s=float("nan"), delay_steps=0, query_index=0)
    from edge.runtime.query_env import context_vector

    f = rng.normal(size=D).astype(np.float32)
    plan = sched.plan(f, ctx)
    eps = np.random.default_rng(5).standard_normal(H * DA)  # the scheduler's first draws
    want = agent.act(f[None], context_vector(ctx, 0.0)[None], 0.7, deterministic=True, noise_eps=eps[None])
    np.testing.assert_array_equal(plan.noise, want["w"][0])
    assert (plan.num_steps, plan.execute) == (int(want["K"][0]), int(want["C"][0]))
    assert plan.signals["u"] == pytest.approx(float(want["u"][0]))


def test_mean_noise_is_the_actors_mode():
    agent, rng = tiny(), np.random.default_rng(1)
    f, x = rng.normal(size=(1, D)), rng.random((1, X))
    a = EqrlScheduler(agent, gate=0.0, noise="mean").decide(f, x)
    b = agent.act(f, x, 0.0, deterministic=True)
    np.testing.assert_array_equal(a["w"], b["w"])
    with pytest.raises(Exception, match="noise="):
        EqrlScheduler(agent, gate=0.0, noise="bogus")


def test_gap_difficulty_is_hard_minus_easy_value():
    agent, rng = tiny(difficulty="gap"), np.random.default_rng(2)
    s = agent.state(torch.as_tensor(rng.normal(size=(4, D)), dtype=torch.float32),
                    torch.as_tensor(rng.random((4, X)), dtype=torch.float32))
    w = torch.zeros(4, H * DA)
    ctl = agent.controls
    q = lambda c: agent.qw(torch.cat([s, w, torch.as_tensor(c, dtype=torch.float32).expand(4, 2)], -1)).min(0).values  # noqa: E731
    torch.testing.assert_close(agent.difficulty_signal(s, w), q(ctl.c_hard) - q(ctl.c_easy))


def test_prior_only_is_the_prior_without_a_residual():
    """prior_only learns no residual: its controls are the difficulty prior itself (the residual
    heads start at the default schedule, not at 0.5, so applying them would shift C by one)."""
    from adapters.eqrl import schedule as S

    agent, rng = tiny(mode="prior_only"), np.random.default_rng(1)
    ctl = agent.controls
    u = rng.uniform(-1, 1, 5)
    c = ctl.final(rng.random((5, 2)), u, gate=1.0)
    np.testing.assert_allclose(c, S.prior(u, ctl.c_def, ctl.c_easy, ctl.c_hard, 1.0, agent.cfg.prior_strength))
