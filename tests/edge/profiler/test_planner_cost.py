"""edge.profiler.planner_cost: the world-model planner's decision, counted, timed and projected."""

import numpy as np
import pytest

from edge.profiler.device_model import DEVICES, CostProfile, DeviceSpec, PartCost, part_time_s
from edge.profiler.planner_cost import (count_world_model, decision_time_s, measure_decisions, project_planner_run,
                                        search_passes)
from world_models.policy import SHIPPED_BY_TASK

REACH = str(SHIPPED_BY_TASK["reach"])


def test_passes_are_a_root_one_per_simulation_and_one_per_advanced_root():
    assert search_passes(1, 16) == 17
    assert search_passes(10, 4, ahead=9) == 10 * 5 + 9
    assert search_passes(0, 64) == 0


def _device(**kw) -> DeviceSpec:
    base = dict(name="d", title="d", fp32_tflops=1.0, fp16_tflops=1.0, bandwidth_gb_s=1e6, power_w=10.0,
                launch_overhead_us=0.0, efficiency=1.0, precision="fp32")
    return DeviceSpec(**{**base, **kw})


def test_decision_and_run_projections_add_up():
    # compute-bound parts on a 1 TFLOP/s device: encoder 2 ms, a pass 1 ms, first frame extra 5 ms
    prof = CostProfile(PartCost(flops=2e9), PartCost(flops=1e9), PartCost(flops=5e9))
    dev = _device()
    assert part_time_s(prof.step, dev) == pytest.approx(1e-3)
    # 8 simulations: encoder + 9 passes (+1 after a queued move) + 8 x 0.5 ms of tree
    assert decision_time_s(prof, dev, 8) == pytest.approx(11e-3)
    assert decision_time_s(prof, dev, 8, ahead=True, tree_s=0.5e-3) == pytest.approx(16e-3)
    assert decision_time_s(prof, dev, 8, first_of_episode=True) == pytest.approx(16e-3)
    # 10 decisions, 95 passes, 2 episodes, 0.04 s of tree, 20 executed actions
    p = project_planner_run(prof, dev, decisions=10, passes=95, episodes=2, executed=20, tree_s=0.04)
    assert p["encoder_s"] == pytest.approx(0.02) and p["steps_s"] == pytest.approx(0.095)
    assert p["locator_s"] == pytest.approx(0.01) and p["total_s"] == pytest.approx(0.165)
    assert p["ms_per_action"] == pytest.approx(8.25) and p["ms_per_decision"] == pytest.approx(16.5)
    assert p["tree_ms_per_action"] == pytest.approx(2.0) and p["energy_j"] == pytest.approx(1.65)
    none = project_planner_run(prof, dev, decisions=0, passes=0, episodes=0, executed=0)
    assert none["ms_per_action"] is None and none["ms_per_decision"] is None and none["total_s"] == 0.0


def test_the_shipped_reach_model_is_counted_by_part():
    cost = count_world_model(REACH)
    for part in (cost.encoder, cost.step, cost.locator):
        assert part.flops > 0 and part.kernels > 0 and part.weight_elems > 0
    # the first frame runs the slot attention's full rounds twice: more work than one tracking pass
    assert cost.locator.flops > 0.5 * cost.encoder.flops
    assert 1e5 < cost.parameters < 1e7 and cost.source == REACH
    # on a launch-bound accelerator a decision grows by one pass's time per simulation
    nano = DEVICES["orin-nano"]
    step = decision_time_s(cost, nano, 32) - decision_time_s(cost, nano, 16)
    assert step == pytest.approx(16 * part_time_s(cost.step, nano))


def test_measured_decisions_count_the_passes_the_planner_makes(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (1, 4, 64, 64, 3), dtype=np.uint8)
    m = measure_decisions(REACH, frames, simulations=3, backend="onnxruntime")
    assert m["passes"] == [4, 4, 4, 4]  # a root and one per simulation
    ahead = measure_decisions(REACH, frames, simulations=3, backend="torch", lookahead=True)
    assert ahead["passes"] == [4, 5, 5, 5]  # after the first, searched from after the previous move
    for rows in (m, ahead):
        assert len(rows["pass_ms"]) == sum(rows["passes"])
        for d, e, s, p, t in zip(rows["decision_ms"], rows["encoder_ms"], rows["search_ms"], rows["passes_ms"],
                                 rows["tree_ms"]):
            assert d == pytest.approx(e + s) and s == pytest.approx(p + t) and e > 0 and p > 0 and t > 0
