"""benchmarks/wm_lookahead.py: the planner sync against async with lookahead, paired seeds."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_lookahead")


def test_sync_and_lookahead_arms_run_the_same_seeds(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "o.json"
    assert bench.main(["--episodes", "2", "--max-steps", "10", "--simulations", "2", "--latency-ms", "20", "--runs-dir",
                       str(tmp_path / "runs"), "--out", str(out), "--no-progress"]) == 0
    res = json.loads(out.read_text())
    sync, ahead = res["arms"]["sync"], res["arms"]["async"]
    assert (sync["label"], ahead["label"]) == ("comet:2 / onnxruntime", "comet-ahead:2 / onnxruntime")
    assert sync["per_episode"]["seed"] == ahead["per_episode"]["seed"] == [300000, 300001]
    assert sync["moves_per_tick"] <= 0.5 < 0.85 <= ahead["moves_per_tick"]  # holds vs a move every tick
    assert ahead["planner"]["ahead"] >= 15 and sync["planner"]["ahead"] == 0
    assert sync["planner"]["transitions"] >= 6 and sync["planner"]["R_pooled"] > 0
    assert 0.0 <= res["success_paired"]["mcnemar_exact_p"] <= 1.0 and res["decision_p50_ratio_async_over_sync"] > 0
    assert res["paired_async_minus_sync"]["moves_per_tick"]["episodes"] == 2
    ref = tmp_path / "ref.json"  # the planner in its own training env: the reference for R
    assert bench.main(["--train-env", "2", "--train-env-only", "--simulations", "2", "--out", str(ref),
                       "--no-progress"]) == 0
    te = json.loads(ref.read_text())["train_env"]
    assert te["episodes"] == 2 and te["transitions"] >= 2 and te["R_pooled"] > 0 and te["R_per_episode"]["episodes"] == 2
    with pytest.raises(SystemExit) as e:  # two runs never mix
        bench.main(["--episodes", "2", "--runs-dir", str(tmp_path / "runs"), "--out", str(out)])
    assert e.value.code == 2 and "--runs-dir" in capsys.readouterr().err
    for bad, said in ((["--episodes", "1"], "--episodes 1"), (["--world-model", str(tmp_path / "none")], "--world-model"),
                      (["--train-env-only"], "--train-env 0")):
        with pytest.raises(SystemExit) as e:
            bench.main([*bad, "--runs-dir", str(tmp_path / "new"), "--out", str(out)])
        assert e.value.code == 2 and said in capsys.readouterr().err


def test_p50_ratio_is_none_where_an_arm_had_no_decision():
    assert bench.p50_ratio({"decision_ms": {"p50": 30.0}}, {"decision_ms": {"p50": 20.0}}) == 1.5
    assert bench.p50_ratio({"decision_ms": {"p50": None}}, {"decision_ms": {"p50": 20.0}}) is None
    assert bench.p50_ratio({"decision_ms": {"p50": 30.0}}, {"decision_ms": {"p50": None}}) is None
