import pytest

from edge.vla.rollout import evaluate, sim_unavailable_reason


@pytest.mark.slow
@pytest.mark.skipif(bool(sim_unavailable_reason()), reason="sim.make_env not available")
def test_evaluate_runs_closed_loop_in_mujoco(tiny_ckpt):
    from edge.vla.policy import load_policy

    policy = load_policy(tiny_ckpt[0])
    result = evaluate(policy, "stack", "mujoco", episodes=1, num_steps=2, execute=8, max_steps=24)
    assert result["episodes"] == 1 and result["mean_steps"] == 24
    assert 0.0 <= result["success_rate"] <= 1.0


@pytest.mark.slow
@pytest.mark.skipif(bool(sim_unavailable_reason()), reason="sim.make_env not available")
def test_evaluate_renders_the_wrist_camera_when_the_model_uses_it(tmp_path):
    from edge.vla.policy import load_policy
    from edge.vla.synthetic import tiny_checkpoint

    ckpt = tiny_checkpoint(tmp_path, steps=2, episodes=2, wrist=True)
    policy = load_policy(ckpt)
    assert policy.spec.cameras == ("front", "wrist")
    result = evaluate(policy, "stack", "mujoco", episodes=1, num_steps=1, execute=8, max_steps=16)
    assert result["mean_steps"] == 16
