"""The runtime policy's per-episode scene memory: localise once at the episode's first query."""

import numpy as np
import pytest

from edge.errors import EdgeError
from edge.vla_policy import load_policy
from tests.edge.vla.conftest import tiny_ckpt  # noqa: F401 - the shared fixture (edge/vla_policy.py serves edge/vla/ models)


@pytest.fixture(scope="module")
def scene_ckpt(tmp_path_factory):
    from edge.training.vla.synthetic import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("scene"), steps=3, scene_memory=True)


def _obs(seed: int, instruction: str = "stack the red block on the blue block") -> dict:
    rng = np.random.default_rng(seed)
    return {"front": rng.integers(0, 256, (96, 96, 3), dtype=np.uint8),
            "proprio": rng.standard_normal(22).astype(np.float32), "instruction": instruction}


class CountingLocate:
    """Counts the backend's locator runs (the memory must make it once per episode)."""

    def __init__(self, backend):
        self.inner, self.calls = backend.locate, 0
        backend.locate = self

    def __call__(self, inputs):
        self.calls += 1
        return self.inner(inputs)


def test_memory_is_taken_at_the_first_query_and_kept_until_reset(scene_ckpt):
    policy = load_policy(scene_ckpt, "torch")
    count = CountingLocate(policy.backend)
    a, b = _obs(1), _obs(2)
    first = policy.encode(a)
    scene_a = policy.scene.copy()
    # later queries of the episode reuse the memory: b encoded now differs from b as a first frame
    later = policy.encode(b)
    assert count.calls == 1 and np.array_equal(policy.scene, scene_a)
    np.testing.assert_allclose(policy.encode(a), first, atol=1e-6)
    policy.reset()
    fresh = policy.encode(b)
    assert count.calls == 2 and not np.allclose(fresh, later)
    # reset(obs) localises at once; encode_batch treats rows as first frames unless given memories
    policy.reset(a)
    assert count.calls == 3 and np.allclose(policy.scene, scene_a, atol=1e-6)
    rows = policy.encode_batch([a, b])
    np.testing.assert_allclose(rows[1], fresh, atol=1e-5)
    np.testing.assert_allclose(policy.encode_batch([b], scenes=scene_a[None])[0], later, atol=1e-5)


def test_backend_locate_is_refused_for_a_model_without_memory(tiny_ckpt):  # noqa: F811 - the fixture
    policy = load_policy(tiny_ckpt[0], "torch")
    with pytest.raises(EdgeError, match="no scene memory"):
        policy.backend.locate({"front": np.zeros((1, 96, 96, 3), np.uint8), "lang": np.zeros((1, 384), np.float32)})
    policy.reset(_obs(0))  # harmless without memory
    assert policy.scene is None


def test_gripper_is_clipped_to_the_model_contract_and_counted(tiny_ckpt):  # noqa: F811 - the fixture
    """Un-normalise + clip (the output contract): only the gripper, counted; safety sees no -0.0009."""
    from edge.vla_policy import GRIPPER_RANGE

    policy = load_policy(tiny_ckpt[0], "torch")
    g = policy.gripper_dim
    assert g == 4 and policy.backend_name == "torch[cpu]"
    x = np.zeros((16, 5), np.float32)
    raw = x * policy._std + policy._mean
    x[:4, g] = (GRIPPER_RANGE[0] - 0.0009 - policy._mean[g]) / policy._std[g]  # just below "open"
    x[4:6, g] = (1.3 - policy._mean[g]) / policy._std[g]
    x[:, 0] = (-5.0 - policy._mean[0]) / policy._std[0]  # far outside any action bound: left alone
    policy.clip_counts(reset=True)
    a = policy.to_actions(x)
    assert a[:4, g] == pytest.approx(0.0) and a[4:6, g] == pytest.approx(1.0)
    np.testing.assert_allclose(a[6:, g], raw[6:, g], atol=1e-6)
    np.testing.assert_allclose(a[:, 0], -5.0, atol=1e-5)  # no other dimension is touched
    c = policy.clip_counts(reset=True)
    assert c["outputs"] == 16 and c["clipped"] == 6 and c["max_abs"] == pytest.approx(0.3, abs=1e-5)
    assert policy.clip_counts()["outputs"] == 0
    feats = policy.encode(_obs(0))
    chunk = policy.sample(feats, None, num_steps=2)
    assert GRIPPER_RANGE[0] <= chunk[:, g].min() and chunk[:, g].max() <= GRIPPER_RANGE[1]
    d = policy.describe()
    assert d["output_clip"] == {"dim": 4, "name": "gripper", "range": [0.0, 1.0]}
    assert d["model_sha256"] and d["checkpoint"] == str(tiny_ckpt[0])
