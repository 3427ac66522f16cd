"""benchmarks/planner_device_cost.py: the planner's decision per budget, split, checked and projected."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("planner_device_cost")


def test_budgets_are_measured_split_and_projected(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "c.json"
    assert bench.main(["--simulations", "2", "4", "--episodes", "1", "--steps", "3", "--out", str(out),
                       "--no-progress"]) == 0
    res = json.loads(out.read_text())
    assert res["model_kind"] == "comet" and res["obs"] == "slots" and res["tick_ms"] == 50.0
    assert out.with_suffix(".png").stat().st_size > 1000
    two, four = res["budgets"]
    assert two["measured"]["passes_per_decision"] == [3] and four["measured"]["passes_per_decision"] == [5]
    assert two["measured"]["decisions"] == 3 and two["measured"]["tree_per_simulation_p50_ms"] > 0
    for row in (two, four):
        cpu = row["x86_cpu_model"]
        assert cpu["decision_ms"] > 0 and -1 < cpu["pass_rel_error"] < 10
        for name, p in row["projected"].items():
            assert p["decision_ms"] == pytest.approx(p["networks_ms"] + p["tree_ms"], abs=1e-3)
            assert p["fits_tick"] is (p["decision_ms"] <= 50.0)
    # two more simulations cost two more passes on every device
    assert four["projected"]["orin-nano"]["networks_ms"] > two["projected"]["orin-nano"]["networks_ms"]
    largest = res["largest_budget_within_tick"]
    assert set(largest) >= {"orin-nano", "x86-cpu"} and all(v in (None, 2, 4) for v in largest.values())
    for bad, said in ((["--simulations", "0"], "--simulations 0"), (["--steps", "1"], "--steps 1"),
                      (["--tick-ms", "0"], "--tick-ms 0"), (["--world-model", str(tmp_path / "none")], "--world-model")):
        with pytest.raises(SystemExit) as e:
            bench.main([*bad, "--out", str(out)])
        assert e.value.code == 2 and said in capsys.readouterr().err
