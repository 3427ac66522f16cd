"""benchmarks/wm_runtime_reach.py: a reach3 model in its own env and in the runtime loop, paired seeds."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_runtime_reach")


def test_every_arm_plays_the_same_seeds(reach_model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "o.json"
    assert bench.main(["--world-model", str(reach_model), "--episodes", "3", "--block", "2", "--async-ticks", "6",
                       "--sync-ticks", "8", "--simulations", "2", "--latency-ms", "20", "--seed", "5",
                       "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--no-progress"]) == 0
    res = json.loads(out.read_text())
    arms = res["arms"]
    assert set(arms) == {"train_env", "constant", "async", "sync"}
    assert arms["async"]["label"] == "comet-ahead+mask:2 / onnxruntime" and arms["sync"]["label"] == "comet+mask:2 / onnxruntime"
    for name in ("async", "sync"):
        assert arms[name]["per_episode"]["seed"] == [5, 6, 7]
        eps = [json.loads(x) for x in (tmp_path / "runs" / name / "episodes.jsonl").read_text().splitlines()]
        assert [e["success"] for e in eps] == arms[name]["per_episode"]["success"]
        assert all(e["ticks"] <= arms[name]["ticks_per_episode"] for e in eps)
        meta = json.loads((tmp_path / "runs" / name / "meta.json").read_text())
        assert meta["session"]["task"] == "reach" and meta["session"]["plan_workspace_mask"] is True
        assert [r["episodes_before"] for r in meta["resumed"]] == [2]
    assert arms["async"]["moves_per_tick"] > 0.8 and arms["sync"]["moves_per_tick"] < 0.6
    # the move budgets: async moves on every tick after the first, sync on every other tick
    for name, moves in (("async", 5), ("sync", 4)):
        pe = arms[name]["per_episode"]
        assert all(m == moves for m, won in zip(pe["moves"], pe["success"]) if not won), (name, pe["moves"])
    assert all(m <= 6 for m in arms["train_env"]["per_episode"]["moves"])  # the tiny task's 6 moves
    for k, p in res["paired"].items():
        a, b = k.split("_minus_")
        d = sum(arms[a]["per_episode"]["success"]) - sum(arms[b]["per_episode"]["success"])
        assert p["difference"] == pytest.approx(d / 3, abs=1e-4) and p["only_first"] - p["only_second"] == d
        assert 0.0 <= p["mcnemar_exact_p"] <= 1.0 and p["ci95"][0] <= p["difference"] <= p["ci95"][1]
    from world_models.policy import SHIPPED

    for bad, said in ((["--episodes", "1"], "--episodes 1"), (["--runs-dir", str(tmp_path / "runs")], "exists"),
                      (["--async-ticks", "0"], "argument --async-ticks: 0: must be"), (["--world-model", str(SHIPPED)], "a push3 model")):
        with pytest.raises(SystemExit) as e:
            bench.main(["--world-model", str(reach_model), *bad, "--out", str(out),
                        *([] if "--runs-dir" in bad else ["--runs-dir", str(tmp_path / "n")])])
        assert e.value.code == 2 and said in capsys.readouterr().err
