import json

import numpy as np
import pytest

from adapters.eqrl import schedule as S
from adapters.eqrl.config import EqrlConfig
from edge.config import ConfigError


def test_unit_integer_mapping_round_trips():
    for lo, hi in ((1, 4), (4, 16), (2, 2)):
        v = np.arange(lo, hi + 1)
        np.testing.assert_array_equal(S.to_int(S.to_unit(v, lo, hi), lo, hi), v)
    assert S.to_int(0.0, 1, 4) == 1 and S.to_int(1.0, 1, 4) == 4 and S.to_int(1.7, 1, 4) == 4


def test_prior_moves_between_anchors_with_difficulty():
    c_def, c_easy, c_hard = np.array([0.33, 0.33]), np.array([0.0, 0.33]), np.array([0.67, 0.33])
    p = S.prior(np.array([-1.0, 0.0, 1.0]), c_def, c_easy, c_hard, gate=1.0, strength=1.0)
    np.testing.assert_allclose(p[:, 0], [0.0, 0.335, 0.67])
    np.testing.assert_allclose(S.prior(np.array([1.0]), c_def, c_easy, c_hard, 0.0, 1.0), [c_def])
    assert S.allocation(p, c_easy, c_hard).tolist() == pytest.approx([-1.0, 0.0, 1.0], abs=0.02)


def test_nfe_per_action_counts_executed_actions():
    assert S.nfe_per_action([2, 2, 1], [8, 8, 4]) == pytest.approx(5 / 20)
    assert S.nfe_per_action([2], [0]) == float("inf")


def test_budget_penalty_band_and_failures():
    # 25 NFE over 100 executed actions against a band of [0.14, 0.20] with 2 NFE of debt: 3 over
    assert S.budget_penalty(25, 100, True, 0.14, 0.20, 2.0, 10.0) == pytest.approx(0.3)
    assert S.budget_penalty(25, 100, False, 0.14, 0.20, 2.0, 10.0) == pytest.approx(0.045)
    inside = S.budget_penalty(15, 100, True, 0.14, 0.20, 2.0, 10.0)
    assert inside == pytest.approx(-0.06 * (0.20 - 0.15) / 0.06)
    assert S.budget_penalty(10, 100, True, 0.14, 0.20, 2.0, 10.0) == pytest.approx(0.15 * 4 / 10)


def test_pad_chunk_repeats_the_last_executed_action():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    p = S.pad_chunk(x, 2)
    np.testing.assert_array_equal(p[2:], np.repeat(x[1:2], 2, 0))
    np.testing.assert_array_equal(p[:2], x[:2])


def test_config_rejects_anchors_outside_the_range():
    with pytest.raises(ConfigError, match="k_hard=9"):
        EqrlConfig(k_hard=9)
    with pytest.raises(ConfigError, match="budget_lo"):
        EqrlConfig(budget_lo=0.5, budget_hi=0.2)


def test_training_latency_list_is_validated_and_drawn_per_episode_seed():
    c = EqrlConfig(query_mode="async", train_latency_ms="0, 100,300")
    assert c.latencies_ms() == [0.0, 100.0, 300.0]
    draws = [c.episode_latency_ms(20_000_000 + i) for i in range(60)]
    assert set(draws) == {0.0, 100.0, 300.0}  # every value is drawn
    assert draws == [c.episode_latency_ms(20_000_000 + i) for i in range(60)]  # resume draws the same
    assert EqrlConfig(train_latency_ms="0").episode_latency_ms(5) == 0.0
    with pytest.raises(ConfigError, match="needs query_mode=async"):
        EqrlConfig(train_latency_ms="0,100")
    with pytest.raises(ConfigError, match="'fast' is not a number"):
        EqrlConfig(query_mode="async", train_latency_ms="0,fast")
    with pytest.raises(ConfigError, match="20000.0 outside"):
        EqrlConfig(query_mode="async", train_latency_ms="20000")
    assert EqrlConfig(query_mode="async", train_latency_ms=300).latencies_ms() == [300.0]  # --set ...=300


def test_shipped_adapters_load_by_name_and_verify():
    from adapters.eqrl.deploy import SHIPPED_ADAPTERS, eqrl_scheduler
    from edge.runtime.config import RuntimeConfig

    for name in ("stack", "stack_efficient", "stack_latency"):
        s = eqrl_scheduler(RuntimeConfig.of(adapter=name, adapter_noise="sample", seed=0))
        assert s.backend == "onnxruntime" and (SHIPPED_ADAPTERS / name / "manifest.json").is_file()
        # what the run records name: the weights and the graph that decides, by file and hash
        files = json.loads((SHIPPED_ADAPTERS / name / "manifest.json").read_text())["files"]
        d = s.describe()
        assert d["adapter"] == str((SHIPPED_ADAPTERS / name / "adapter.pt").resolve())
        assert (d["adapter_sha256"], d["onnx_sha256"]) == (files["adapter.pt"], files["eqrl_decision.onnx"])
    latency = json.loads((SHIPPED_ADAPTERS / "stack_latency" / "manifest.json").read_text())
    assert latency["config"]["train_latency_ms"] == "0,100,200,300" and latency["complete"]


def test_split_scheduler_takes_noise_from_one_adapter_and_the_schedule_from_the_other():
    import numpy as np

    from adapters.eqrl.deploy import SplitScheduler, eqrl_scheduler
    from edge.contracts import QueryContext, QueryPlan
    from edge.runtime.config import RuntimeConfig

    class Fixed:
        def __init__(self, k, c, w, tag):
            self.k, self.c, self.w, self.tag, self.resets = k, c, w, tag, 0

        def plan(self, features, history):
            return QueryPlan(noise=self.w, num_steps=self.k, execute=self.c, next_query_in_steps=self.c,
                             signals={"u": self.tag, self.tag and "a" or "b": 1.0})

        def reset(self):
            self.resets += 1

    w_sched, w_noise = np.zeros((16, 5), np.float32), np.ones((16, 5), np.float32)
    s = SplitScheduler(Fixed(1, 12, w_sched, 1.0), Fixed(3, 4, w_noise, 0.0))
    ctx = QueryContext(t_s=0.0, period_s=0.05, chunk_len=16, queue_depth=0, latency_p50_s=0.0,
                       latency_p95_s=0.0, delay_steps=0, query_index=0, last_plan=None)
    p = s.plan(np.zeros(8, np.float32), ctx)
    assert (p.num_steps, p.execute, p.next_query_in_steps) == (1, 12, 12)
    assert p.noise is w_noise and p.signals["u"] == 1.0  # the schedule's signals win on a clash
    s.reset()
    assert s.schedule.resets == s.noise_source.resets == 1
    split = eqrl_scheduler(RuntimeConfig.of(scheduler="eqrl", adapter="stack_efficient",
                                            **{"scheduler.eqrl.noise_adapter": "stack"}))
    assert isinstance(split, SplitScheduler)
    assert not isinstance(eqrl_scheduler(RuntimeConfig.of(scheduler="eqrl", adapter="stack")), SplitScheduler)
