"""Fixtures for the VLA tests: a synthetic dataset in the real format and a tiny trained checkpoint."""

from __future__ import annotations

import pytest

from edge.vla.spec import ModelSpec


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: longer than a few seconds (sim rollouts, MiniLM load)")


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
    """(checkpoint dir, demo dir) of a tiny model trained 20 steps on synthetic demos."""
    from edge.training.vla.synthetic import tiny_checkpoint

    root = tmp_path_factory.mktemp("vla")
    return tiny_checkpoint(root, steps=20), root / "demos"


def _make_spec(**kw) -> ModelSpec:
    base = {"task": "stack", "action_layout": ("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper"),
            "proprio_layout": tuple(f"p{i}" for i in range(3)), "action_dim": 5, "proprio_dim": 3,
            "control_rate_hz": 20.0, "chunk_len": 16, "cameras": ("front",), "image_hw": (96, 96),
            "feature_dim": 32, "lang_encoder_id": "hash-ngram-384-v1", "lang_dim": 384,
            "action_mean": (0.0,) * 5, "action_std": (1.0,) * 5, "proprio_mean": (0.0,) * 3,
            "proprio_std": (1.0,) * 3, "instruction_embeddings": {"stack a on b": (0.5,) * 384}}
    base.update(kw)
    return ModelSpec(**base)


@pytest.fixture
def make_spec():
    """A factory for small ModelSpecs (keyword arguments override fields)."""
    return _make_spec
