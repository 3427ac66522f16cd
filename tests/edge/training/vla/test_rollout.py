import pytest

from edge.training.vla.rollout import evaluate, sim_unavailable_reason


@pytest.mark.slow
@pytest.mark.skipif(bool(sim_unavailable_reason()), reason="sim.make_env not available")
def test_evaluate_runs_closed_loop_in_mujoco(tiny_ckpt):
    from edge.vla_policy import load_policy

    policy = load_policy(tiny_ckpt[0])
    result = evaluate(policy, "stack", "mujoco", episodes=1, num_steps=2, execute=8, max_steps=24)
    assert result["episodes"] == 1 and result["mean_steps"] == 24
    assert 0.0 <= result["success_rate"] <= 1.0


@pytest.mark.slow
@pytest.mark.skipif(bool(sim_unavailable_reason()), reason="sim.make_env not available")
def test_evaluate_renders_the_wrist_camera_when_the_model_uses_it(tmp_path):
    from edge.vla_policy import load_policy
    from edge.training.vla.synthetic import tiny_checkpoint

    ckpt = tiny_checkpoint(tmp_path, steps=2, episodes=2, wrist=True)
    policy = load_policy(ckpt)
    assert policy.spec.cameras == ("front", "wrist")
    result = evaluate(policy, "stack", "mujoco", episodes=1, num_steps=1, execute=8, max_steps=16)
    assert result["mean_steps"] == 16


@pytest.mark.skipif(bool(sim_unavailable_reason()), reason="sim.make_env not available")
def test_dagger_episode_records_the_experts_labels_on_the_policys_states(tiny_ckpt, tmp_path):
    import numpy as np

    import sim
    from edge.training.vla.data import DemoSet
    from edge.vla_policy import load_policy
    from edge.training.vla.rollout import dagger_episode
    from sim import demos
    from tests.fakes import spy_steps

    policy = load_policy(tiny_ckpt[0])
    env = sim.make_env(task="stack", sim="mujoco")
    executed = spy_steps(env)
    try:
        ep = dagger_episode(env, policy, seed=7, num_steps=2, execute=8, max_steps=24)
        assert ep["policy_fraction"] == 1.0 and len(ep["action"]) == 24 == len(ep["front"])
        # the arm ran the (barely trained) policy's actions; the labels are the expert's
        assert np.abs(np.stack(executed) - ep["action"]).max() > 1e-3
        names = [o.name for o in env.unwrapped.scene.objects]
        lower, upper = env.unwrapped.spec_task.order
        assert list(ep["roles"]) == [names.index(upper), names.index(lower)]
        executed.clear()
        driven = dagger_episode(env, policy, seed=7, expert_mix=1.0, max_steps=400)
        assert driven["policy_fraction"] == 0.0 and driven["success"]  # the expert drove it home
        np.testing.assert_array_equal(np.stack(executed), driven["action"])
    finally:
        env.close()
    # relabelled runs are kept for training whatever their outcome
    root = demos.prepare_dir(tmp_path / "d", {"task": "stack", "sim": "mujoco", "dagger": {"K": 2},
                                              "action_layout": ["dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper"],
                                              "proprio_layout": [], "control_rate_hz": 20.0})
    demos.write_episode(root, 7, {k: v for k, v in ep.items() if k != "policy_fraction"})
    assert not ep["success"] and DemoSet.load(root).n_episodes == 1
