"""Fixtures shared by the benchmark scripts' tests."""

import pytest

from world_models.token_model import WorldModelConfig
from world_models.train import Trainer, tiny


@pytest.fixture(scope="session")
def reach_model(tmp_path_factory):
    """A tiny reach3 world model over a tiny slot encoder (seconds), for the runtime benchmarks."""
    from edge.cli import main

    d = tmp_path_factory.mktemp("wm")
    assert main(["train", "slot-encoder", "--out", str(d / "slots"), "--preset", "tiny", "--frames", "48",
                 "--eval-frames", "24", "--steps", "2"]) == 0
    base = tiny()
    cfg = tiny(obs="slots", encoder=str(d / "slots"), env_steps=8, eval_every=8, checkpoint_every=8,
               model=WorldModelConfig(**{**base.model.__dict__, "num_slots": 4, "slot_dim": 16}))
    Trainer(cfg, d / "reach", progress=False).run()
    return d / "reach"
