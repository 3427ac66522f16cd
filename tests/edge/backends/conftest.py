import pytest


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    """A tiny model trained a few steps on synthetic demos (plumbing tests only)."""
    from edge.training.vla.synthetic import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("backends"), steps=10)
