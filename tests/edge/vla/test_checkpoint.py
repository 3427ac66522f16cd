from types import SimpleNamespace

import numpy as np
import pytest

from edge.backends import make_backend
from edge.errors import EdgeError
from edge.export import example_inputs
from edge.vla.checkpoint import load_model, read_payload
from edge.vla_policy import load_policy
from edge.vla.spec import CheckpointMismatch

ROBOT_20HZ = SimpleNamespace(control_rate_hz=20.0, action_layout="ee_delta",
                             action_names=("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper"))


def test_checkpoint_carries_everything_needed_to_run(tiny_ckpt):
    ckpt, _ = tiny_ckpt
    payload = read_payload(ckpt)
    spec = payload["spec"]
    for key in ("action_mean", "action_std", "proprio_mean", "proprio_std", "action_layout",
                "proprio_layout", "control_rate_hz", "chunk_len", "lang_encoder_id",
                "instruction_embeddings"):
        assert key in spec
    assert spec["lang_encoder_id"] == "hash-ngram-384-v1" and spec["chunk_len"] == 16
    assert payload["config"]["d_model"] == 32


def test_refuses_robot_with_other_control_rate_or_layout(tiny_ckpt):
    ckpt, _ = tiny_ckpt
    load_model(ckpt, robot=ROBOT_20HZ)
    with pytest.raises(CheckpointMismatch, match="20 Hz.*50 Hz"):
        load_model(ckpt, robot=SimpleNamespace(**{**vars(ROBOT_20HZ), "control_rate_hz": 50.0}))
    with pytest.raises(CheckpointMismatch, match="action layout"):
        make_backend("torch", ckpt, robot=SimpleNamespace(control_rate_hz=20.0, action_layout="joint_pos"))


def test_policy_runs_observations_end_to_end(tiny_ckpt):
    ckpt, demos = tiny_ckpt
    from sim.demos import iter_episodes

    ep = next(iter_episodes(demos))
    policy = load_policy(ckpt, robot=ROBOT_20HZ)
    obs = {"front": ep["front"][0], "proprio": ep["proprio"][0], "instruction": ep["instruction"]}
    feats = policy.encode(obs)
    assert feats.shape == (policy.spec.feature_dim,)
    noise = np.random.default_rng(0).standard_normal((16, 5)).astype(np.float32)
    actions = policy.sample(feats, noise, num_steps=4)
    assert actions.shape == (16, 5) and actions.dtype == np.float32
    x = noise
    for i in range(4):  # the contract's step-by-step path gives the same chunk
        x = policy.denoise_step(feats, x, i / 4, 1 / 4)
    np.testing.assert_allclose(policy.to_actions(x), actions, atol=1e-5)
    assert policy.action_layout == "ee_delta"
    assert policy.language.misses == 0  # trained instruction: served from the checkpoint cache


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(EdgeError, match="no manifest.json"):  # nothing to verify it against
        load_model(bad)
    with pytest.raises(EdgeError, match="not a readable VLA checkpoint"):
        load_model(bad, verify=False)
    with pytest.raises(FileNotFoundError, match="edge train vla"):
        load_model(tmp_path / "nowhere")


def test_example_inputs_use_cached_instructions(tiny_ckpt):
    spec = load_model(tiny_ckpt[0]).spec
    lang = example_inputs(spec, batch=2)["lang"]
    assert any(np.allclose(lang[0], v) for v in spec.instruction_embeddings.values())
