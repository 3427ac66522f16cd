"""world_models/onnx_search.py: the search's model pass as an ONNX graph (export, parity, cache)."""

import json

import numpy as np
import pytest
import torch

from edge.errors import EdgeError
from world_models import onnx_search as ox
from world_models.planner import History, Planner, PlannerConfig
from world_models.token_model import KINDS, TokenWorldModel, WorldModelConfig


def _model(kind="comet", seed=0):
    torch.manual_seed(seed)
    m = TokenWorldModel(WorldModelConfig(kind=kind, num_slots=3, slot_dim=8, width=8, heads=2, head_heads=2,
                                         support_n=11, image_size=16, cnn_channels=4)).eval()
    with torch.no_grad():  # move every weight off its initialisation (zero-initialised heads included)
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return m


@pytest.mark.parametrize("kind", KINDS)
def test_exported_pass_matches_torch_for_every_kind(kind, tmp_path):
    m = _model(kind)
    meta = ox.export_expand(m, 3, tmp_path)
    assert meta["parity_max_abs"] <= 1e-4 and meta["window"] == 3 and meta["model_digest"] == ox.model_digest(m)
    feeds = ox.example_window(m, 3, batch=2, seed=7)
    got = ox.OrtExpand(tmp_path, 3)(*(torch.as_tensor(feeds[k]) for k in ox.INPUTS))
    with torch.no_grad():
        out = m(*(torch.as_tensor(feeds[k]) for k in ox.INPUTS), heads="last", branch=True)
    want = (out["policy_logits"][:, -1], out["value_logits"][:, -1], out["branch_next_z"],
            out["branch_reward_logits"])
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w, atol=1e-4, rtol=0)
    assert float((want[2] - torch.as_tensor(feeds["z"])[:, -1:]).abs().max()) > 1e-3  # children do move


def test_planner_on_onnxruntime_searches_like_torch(tmp_path):
    m = _model("comet", seed=3)
    cfg = PlannerConfig(search="muzero", num_simulations=12, context=2)
    ox.export_expand(m, 3, tmp_path)
    ort_planner = Planner(m, cfg, ox.OrtExpand(tmp_path, 3))
    torch_planner = Planner(m, cfg)
    rng = np.random.default_rng(0)
    hist = History(4, 2, (3 * 8,), np.float32)
    for i in range(4):
        hist.reset(i, rng.standard_normal(24).astype(np.float32))
        for _ in range(i % 3):
            hist.push(i, int(rng.integers(8)), rng.standard_normal(24).astype(np.float32))
    a = torch_planner.plan(hist, np.random.default_rng(1), explore=False)
    b = ort_planner.plan(hist, np.random.default_rng(1), explore=False)
    np.testing.assert_array_equal(a.action, b.action)
    np.testing.assert_array_equal(a.visit_counts, b.visit_counts)
    # the ONNX search decodes its supports in float64 numpy, torch's in float32 (rounding amplified ~1e3)
    np.testing.assert_allclose(a.root_value, b.root_value, rtol=1e-4, atol=1e-4)


def test_export_cache_is_reused_verified_and_keyed(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    m = _model()
    d = ox.ensure_expand_export(m, 3)
    assert d.parent == tmp_path / "cache" / "onnx" and (d / ox.GRAPH_FILE).is_file()
    calls = []
    real = ox.export_expand
    monkeypatch.setattr(ox, "export_expand", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert ox.ensure_expand_export(m, 3) == d and not calls  # reused: it verifies
    assert ox.ensure_expand_export(m, 4) != d and len(calls) == 1  # another window, another export
    with open(d / ox.GRAPH_FILE, "ab") as f:  # a damaged graph is made again
        f.write(b"\0")
    assert ox.ensure_expand_export(m, 3) == d and len(calls) == 2
    assert json.loads((d / ox.METADATA_FILE).read_text())["files"][ox.GRAPH_FILE] == ox._sha256_file(d / ox.GRAPH_FILE)
    other = _model(seed=5)
    assert ox.ensure_expand_export(other, 3) != d  # other weights, other export


def test_export_refuses_bad_window_and_disagreement(tmp_path):
    m = _model()
    with pytest.raises(EdgeError, match="window=17"):
        ox.export_expand(m, 17, tmp_path / "a")
    with pytest.raises(EdgeError, match="differs from torch.*--plan-backend torch"):
        ox.export_expand(m, 3, tmp_path / "b", tolerance=-1.0)
    ox.export_expand(m, 3, tmp_path / "c")
    with pytest.raises(EdgeError, match="windows of 3 blocks, the planner uses 5"):
        ox.OrtExpand(tmp_path / "c", 5)


def test_the_cache_key_covers_the_config_and_a_reused_graph_is_checked_against_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    m = _model()
    d = ox.ensure_expand_export(m, 3)
    # the same weights under other head counts: another graph, so another key
    other = TokenWorldModel(WorldModelConfig(kind="comet", num_slots=3, slot_dim=8, width=8, heads=1, head_heads=1,
                                             support_n=11)).eval()
    other.load_state_dict(m.state_dict())
    assert ox.model_digest(other) != ox.model_digest(m) and ox.ensure_expand_export(other, 3) != d
    # a graph that verifies by its hash but no longer agrees with torch is made again
    monkeypatch.setattr(ox, "parity", lambda *a, **k: 1.0)
    assert not ox._reusable(d, m, ox.model_digest(m), 3)


def test_a_broken_export_or_session_is_a_clear_error(tmp_path, monkeypatch):
    m = _model()
    with pytest.raises(EdgeError, match="not a world-model search export.*--plan-backend torch"):
        ox.OrtExpand(tmp_path / "nothing", 3)
    ox.export_expand(m, 3, tmp_path / "e")
    (tmp_path / "e" / ox.GRAPH_FILE).write_bytes(b"not onnx")
    with pytest.raises(EdgeError, match="onnxruntime cannot load it.*--plan-backend torch"):
        ox.OrtExpand(tmp_path / "e", 3)

    def broken(*a, **k):
        raise RuntimeError("unsupported op")

    monkeypatch.setattr("torch.onnx.export", broken)
    with pytest.raises(EdgeError, match="RuntimeError: unsupported op.*--plan-backend torch"):
        ox.export_expand(m, 3, tmp_path / "f")


def test_example_windows_pad_every_prefix():
    v = ox.example_window(_model(), 3, batch=4)["valid"]
    assert v.tolist() == [[True, True, True], [False, True, True], [False, False, True], [True, True, True]]


def test_a_fixed_batch_graph_covers_every_padding_and_refuses_other_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    m = _model(seed=2)
    meta = ox.export_expand(m, 3, tmp_path / "b1", batch=1)
    assert meta["batch"] == 1 and meta["parity_max_abs"] <= 1e-4
    ort = ox.OrtExpand(tmp_path / "b1", 3)
    for offset in range(3):  # batch 1 with 0, 1 and 2 padded blocks
        feeds = ox.example_window(m, 3, batch=1, seed=9, offset=offset)
        assert feeds["valid"].sum() == 3 - offset
        got = ort(*(torch.as_tensor(feeds[k]) for k in ox.INPUTS))
        with torch.no_grad():
            want = ox._graph_module(m)(*(torch.as_tensor(feeds[k]) for k in ox.INPUTS))
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=0)
    two = ox.example_window(m, 3, batch=2)
    with pytest.raises(EdgeError, match="batches of 1, called with 2"):
        ort(*(torch.as_tensor(two[k]) for k in ox.INPUTS))
    fixed, dynamic = ox.ensure_expand_export(m, 3, batch=1), ox.ensure_expand_export(m, 3)
    assert fixed != dynamic and fixed.name.endswith("-b1")
    assert ox.ensure_expand_export(m, 3, batch=1) == fixed  # reused
    with pytest.raises(EdgeError, match="batch=0"):
        ox.export_expand(m, 3, tmp_path / "b0", batch=0)


def test_the_numpy_tree_searches_as_the_torch_tree_over_the_same_pass(tmp_path):
    """With the ONNX pass the tree's per-node work runs in numpy (OrtExpand.run); the same pass used
    through its torch interface gives the same moves and visits (Gumbel, batch 1, searching from
    after a queued move, as the runtime does)."""
    m = _model("comet", seed=5)
    cfg = PlannerConfig(search="gumbel", num_simulations=16, context=2)
    ox.export_expand(m, 3, tmp_path, batch=1)
    ort = ox.OrtExpand(tmp_path, 3)

    class TorchGlue:  # the pass without `run`: the planner takes its torch path
        def __call__(self, z, a, v):
            return ort(z, a, v)

    numpy_planner, torch_planner = Planner(m, cfg, ort), Planner(m, cfg, TorchGlue())
    rng = np.random.default_rng(0)
    for i in range(6):
        hist = History(1, 2, (3 * 8,), np.float32)
        hist.reset(0, rng.standard_normal(24).astype(np.float32))
        for _ in range(i % 3):
            hist.push(0, int(rng.integers(8)), rng.standard_normal(24).astype(np.float32))
        after = None if i % 2 else np.array([int(rng.integers(8))])
        a = torch_planner.plan(hist, np.random.default_rng(i), explore=False, after=after)
        b = numpy_planner.plan(hist, np.random.default_rng(i), explore=False, after=after)
        assert isinstance(numpy_planner.last_root.embedding["z"], np.ndarray)
        np.testing.assert_array_equal(a.action, b.action)
        np.testing.assert_array_equal(a.visit_counts, b.visit_counts)
        np.testing.assert_allclose(a.root_value, b.root_value, rtol=1e-4, atol=1e-4)
