"""world_models.device_cost: a planner's decision counted by part and timed by part."""

import time

import numpy as np
import pytest

from edge.profiler.flops import count
from world_models.device_cost import count_world_model, measure_decisions
from world_models.policy import SHIPPED_BY_TASK, load_world_model
from world_models.token_model import TokenWorldModel, WorldModelConfig
from world_models.train import Trainer, tiny

REACH = str(SHIPPED_BY_TASK["reach"])


@pytest.fixture(scope="module")
def pixel_model(tmp_path_factory):
    """A tiny pixel world model (its own CNN encoder; tiny()'s pUCT search)."""
    out = tmp_path_factory.mktemp("px") / "wm"
    base = tiny()
    cfg = tiny(env_steps=8, eval_every=8, checkpoint_every=8, obs="pixels",
               model=WorldModelConfig(**{**base.model.__dict__, "kind": "pixels"}))
    Trainer(cfg, out, progress=False).run()
    return out


def test_the_shipped_reach_model_is_counted_by_part():
    cost = count_world_model(REACH)
    for part in (cost.encoder, cost.step, cost.locator):
        assert part.flops > 0 and part.kernels > 0 and part.weight_elems > 0
    # the first frame runs the slot attention's full rounds twice from the learned start: more work
    # than one tracking pass (the shipped model tracks with one round)
    assert cost.locator.flops > 0.5 * cost.encoder.flops
    assert 1e5 < cost.parameters < 1e7 and cost.source == REACH


def test_a_pixel_models_encoder_is_its_cnn_over_the_window_and_the_prediction_check(pixel_model):
    cost = count_world_model(pixel_model)
    cfg, model, _ = load_world_model(pixel_model)
    import torch

    one = count(lambda: model.encode_frames(torch.zeros((1, 32, 32, 3), dtype=torch.uint8)))
    window = cfg.planner.context + 1
    assert cost.locator is None
    assert cost.encoder.flops == pytest.approx((window + 2) * one.flops)  # the CNN is per frame: linear in frames


def test_measured_decisions_count_the_passes_the_gumbel_search_makes(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    frames = np.random.default_rng(0).integers(0, 255, (1, 4, 64, 64, 3), dtype=np.uint8)
    m = measure_decisions(REACH, frames, simulations=3, backend="onnxruntime")
    assert m["passes"] == [4, 4, 4, 4]  # a root and one per simulation
    ahead = measure_decisions(REACH, frames, simulations=3, backend="torch", lookahead=True)
    assert ahead["passes"] == [4, 5, 5, 5]  # after the first, searched from after the previous move
    for rows in (m, ahead):
        assert len(rows["pass_ms"]) == sum(rows["passes"])
        assert all(x > 0 for k in ("encoder_ms", "passes_ms", "tree_ms") for x in rows[k])


def test_a_pixel_models_window_encoding_is_timed_as_encoder_not_tree(pixel_model, monkeypatch):
    """A 30 ms CNN: the root's encoding inside the search must land in the encoder's time."""
    real = TokenWorldModel.encode_frames

    def slow(self, frames):
        time.sleep(0.03)
        return real(self, frames)

    monkeypatch.setattr(TokenWorldModel, "encode_frames", slow)
    frames = np.random.default_rng(0).integers(0, 255, (1, 3, 32, 32, 3), dtype=np.uint8)
    m = measure_decisions(pixel_model, frames, simulations=2, backend="torch")
    assert m["passes"] == [3, 3, 3]  # pUCT: a root and one per simulation
    assert all(t < 25.0 for t in m["tree_ms"])  # the sleeps are not bookkeeping
    # the root's window (and, after the first decision, the prediction check's two frames): >= 30 ms each
    assert m["encoder_ms"][0] >= 30.0 and all(e >= 60.0 for e in m["encoder_ms"][1:])
