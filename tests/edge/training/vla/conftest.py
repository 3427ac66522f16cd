"""Fixtures for the VLA training tests: a tiny checkpoint trained on synthetic demos."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
    """(checkpoint dir, demo dir) of a tiny model trained 20 steps on synthetic demos."""
    from edge.training.vla.synthetic import tiny_checkpoint

    root = tmp_path_factory.mktemp("vla-training")
    return tiny_checkpoint(root, steps=20), root / "demos"
