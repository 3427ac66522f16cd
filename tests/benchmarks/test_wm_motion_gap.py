"""benchmarks/wm_motion_gap.py: TCP step per planner move, runtime records vs the training env."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_motion_gap")
lookahead = load_benchmark("wm_lookahead")


def test_steps_per_move_from_run_records_and_the_training_env(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    assert lookahead.main(["--episodes", "2", "--max-steps", "8", "--simulations", "2", "--latency-ms", "20",
                           "--runs-dir", str(runs), "--out", str(tmp_path / "l.json"), "--no-progress"]) == 0
    out = tmp_path / "o.json"
    assert bench.main(["--runs", str(runs / "sync"), str(runs / "async"), "--train-env", "1", "--simulations", "2",
                       "--out", str(out), "--no-progress"]) == 0
    res = json.loads(out.read_text())
    sync, ahead = res["runtime"][str(runs / "sync")], res["runtime"][str(runs / "async")]
    assert ahead["all"]["steps"] > sync["all"]["steps"] >= 6  # async moves on (nearly) every tick
    assert sum(ahead[c]["steps"] for c in bench.CLASSES) == ahead["all"]["steps"]
    assert 0.0 < ahead["all"]["mean_cm"] < 3.0 and res["train_env"]["random"]["steps"] >= 1
    assert 0.0 < res["train_env"]["planner"]["mean_cm"] < 3.0
    assert ahead["sim_clips_recorded"] is True and sum(ahead["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(v["steps"] for v in ahead["by_reach"]["all"].values()) == ahead["all"]["steps"]
    assert sum(v["share"] for v in ahead["by_reach"]["all"].values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(v["steps"] for v in ahead["clean_by_sim_wall"].values()) == ahead["clean"]["steps"]
    assert 0.0 <= res["train_env"]["sim_clip_share"]["random"]["share"] <= 1.0
    sweep = tmp_path / "s.json"  # 3 equal moves outward along +x, +45 and -45 degrees
    assert bench.main(["--train-env", "0", "--reach-sweep", "3", "--out", str(sweep)]) == 0
    rows = json.loads(sweep.read_text())["reach_sweep"]
    assert set(rows) == {"+x", "+45deg", "-45deg"} and all(len(r) == 3 for r in rows.values())
    assert [r["reach_m"] for r in rows["+x"]] == sorted(r["reach_m"] for r in rows["+x"])  # moving out
    assert 1.0 < rows["+x"][-1]["step_cm"] < 2.5 and not rows["+x"][-1]["clipped"]
    first = tmp_path / "f.json"  # each episode's first 3 moves of the first episode only
    assert bench.main(["--runs", str(runs / "async"), "--train-env", "0", "--first-moves", "3", "--max-episodes", "1",
                       "--out", str(first)]) == 0
    (only,) = json.loads(first.read_text())["runtime"].values()
    assert only["all"]["steps"] == 3 and only["all"]["episodes"] == 1
    for bad, said in ((["--runs", str(tmp_path)], "no ticks.jsonl"), (["--train-env", "0"], "--train-env 0"),
                      (["--reach-bins", "0.6", "0.5"], "--reach-bins 0.6 0.5"), (["--reach-sweep", "-1"], "--reach-sweep -1")):
        with pytest.raises(SystemExit) as e:
            bench.main([*bad, "--out", str(out)])
        assert e.value.code == 2 and said in capsys.readouterr().err
