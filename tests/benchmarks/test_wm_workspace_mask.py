"""benchmarks/wm_workspace_mask.py: the planner with and without the workspace mask, paired seeds."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_workspace_mask")


def test_mask_and_no_mask_arms_run_the_same_seeds(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "o.json"
    assert bench.main(["--episodes", "3", "--block", "2", "--max-steps", "10", "--simulations", "2", "--latency-ms",
                       "20", "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--no-progress"]) == 0
    res = json.loads(out.read_text())
    a, m = res["arms"]["async"], res["arms"]["async+mask"]
    assert (a["label"], m["label"]) == ("comet-ahead:2 / onnxruntime", "comet-ahead+mask:2 / onnxruntime")
    assert a["per_episode"]["seed"] == m["per_episode"]["seed"] == [410000, 410001, 410002]
    eps = {k: [json.loads(x) for x in (tmp_path / "runs" / k / "episodes.jsonl").read_text().splitlines()]
           for k in ("async", "async+mask")}
    assert all("planner_masked" in e for e in eps["async+mask"]) and not any("planner_masked" in e for e in eps["async"])
    assert m["planner"]["masked"] == sum(e["planner_masked"] for e in eps["async+mask"])
    for arm in (a, m):
        assert all(0.0 <= c <= 1.0 for c in arm["per_episode"]["cut_share"] + arm["per_episode"]["into_wall_share"])
        assert all(0.0 < s < 3.0 for s in arm["per_episode"]["step_cm"]) and arm["moves_per_tick"] > 0.8
    assert res["paired_mask_minus_no_mask"]["R"]["episodes"] <= 3
    assert set(res["paired_mask_minus_no_mask"]) == {"into_wall_share", "cut_share", "step_cm", "moves_per_tick", "R"}
    assert 0.0 <= res["success_paired"]["mcnemar_exact_p"] <= 1.0 and res["decision_p50_ratio_mask_over_no_mask"] > 0
    meta = json.loads((tmp_path / "runs" / "async+mask" / "meta.json").read_text())
    assert meta["session"]["plan_workspace_mask"] is True
    assert [r["episodes_before"] for r in meta["resumed"]] == [2]  # blocks of 2: one resume per arm
    for bad, said in ((["--episodes", "1"], "--episodes 1"), (["--runs-dir", str(tmp_path / "runs")], "exists")):
        with pytest.raises(SystemExit) as e:
            bench.main([*bad, "--out", str(out), *([] if "--runs-dir" in bad else ["--runs-dir", str(tmp_path / "n")])])
        assert e.value.code == 2 and said in capsys.readouterr().err
