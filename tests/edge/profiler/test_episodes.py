"""edge.profiler.episodes: rows from run records and the pooled numbers the profile, the EQRL
evaluation and the VLA grid all report."""

import pytest

from edge.profiler.episodes import FAILURE_STAGES, best_cell, episode_rows, pool, versus
from edge.stats import wilson
from edge.telemetry import read_jsonl, read_run


def test_rows_and_pool_equal_the_records(profiled):
    out, _ = profiled
    for run_dir in sorted((out / "runs").iterdir()):
        rows = episode_rows(read_run(run_dir))
        eps, queries = read_jsonl(run_dir / "episodes.jsonl"), read_jsonl(run_dir / "queries.jsonl")
        assert [r["seed"] for r in rows] == [e["seed"] for e in eps]
        for r, e in zip(rows, eps):
            qs = [q for q in queries if q["ep"] == e["ep"]]
            assert r["K"] == [q["K"] for q in qs] and r["C"] == [q["C"] for q in qs]
            assert r["compute_s"] == pytest.approx(sum(q["compute_s"] for q in qs))
        p = pool(rows)
        acts = sum(e["executed"] for e in eps)
        assert p["nfe_per_action"] == pytest.approx(sum(q["nfe"] for q in queries) / acts)
        assert p["inference_ms_per_action"] == pytest.approx(1e3 * sum(q["compute_s"] for q in queries) / acts)
        assert p["queries_per_episode"] == len(queries) / len(eps)


def _row(seed, success, nfe=10, executed=8, stage=4, ks=(2,), cs=(8,)):
    return {"seed": seed, "success": success, "steps": 40, "nfe": nfe, "executed": executed, "queries": len(ks),
            "max_stage": stage, "sim_diverged": False, "compute_s": 0.01, "K": list(ks), "C": list(cs)}


def test_pool_sorts_by_seed_and_counts_failure_stages():
    p = pool([_row(3, True), _row(1, False, stage=1), _row(2, False, stage=0, ks=(1, 3), cs=(8, 4))])
    assert p["success_by_seed"] == "001" and (p["episodes"], p["successes"]) == (3, 1)
    assert p["ci95"] == pytest.approx(list(wilson(1, 3)))
    assert p["failure_stage"] == dict(zip(FAILURE_STAGES, (1, 1, 0, 0)))
    assert p["K_hist"] == {"1": 1, "2": 2, "3": 1} and p["mean_C"] == pytest.approx(7.0)
    assert p["nfe_per_action"] == pytest.approx(30 / 24)
    with pytest.raises(ValueError, match="no episodes"):
        pool([])


def test_versus_pairs_on_seeds_and_best_cell_breaks_ties_by_compute():
    a = pool([_row(s, s % 2 == 0, nfe=5) for s in range(10)])
    b = pool([_row(s, s < 3) for s in range(10)])
    v = versus(a, b, "b")
    assert (v["only_this"], v["only_ref"]) == (3, 1) and v["relative_nfe"] == pytest.approx(0.5)
    assert 0 < v["mcnemar_p"] <= 1
    with pytest.raises(ValueError, match="same seeds"):
        versus(a, pool([_row(0, True)]), "c")
    cheap = pool([_row(s, s < 3, nfe=2) for s in range(10)])
    assert best_cell({"a": a, "b": b, "cheap": cheap}, ["b", "cheap", "missing"]) == "cheap"
