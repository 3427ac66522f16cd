"""edge.profiler.planner_cost: a world-model planner's decision and run projected on a device."""

import pytest

from edge.profiler.device_model import CostProfile, DeviceSpec, PartCost, part_time_s
from edge.profiler.planner_cost import decision_time_s, project_planner_run, search_passes


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
    assert p["tree_ms_per_action"] == pytest.approx(2.0)
    assert p["energy_j"] == pytest.approx(1.25)  # the networks' 0.125 s at 10 W: the tree's CPU time not in it
    none = project_planner_run(prof, dev, decisions=0, passes=0, episodes=0, executed=0)
    assert none["ms_per_action"] is None and none["ms_per_decision"] is None and none["total_s"] == 0.0
