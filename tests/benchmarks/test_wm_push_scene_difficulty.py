"""benchmarks/wm_push_scene_difficulty.py: start distances from seeds, the success fit, the expectation."""

import json

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_push_scene_difficulty")


def _arm(name, seeds, success, cell=None):
    a = {"name": name, "task": "push3", "search": "gumbel", "simulations": 16, "per_episode_seed": seeds,
         "per_episode_success": success}
    return {**a, "cell": cell} if cell else a


def test_logistic_fit_and_poisson_binomial_match_known_answers():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.05, 0.35, 4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(1.0 - 12.0 * x)))).astype(float)
    a, b = bench.fit_logistic(x, y)
    assert a == pytest.approx(1.0, abs=0.3) and b == pytest.approx(-12.0, abs=1.5)
    pk = bench.poisson_binomial(np.array([0.5, 0.5, 1.0]))
    assert pk.tolist() == pytest.approx([0.0, 0.25, 0.5, 0.25])


def test_fit_on_one_file_and_predict_another(tmp_path, monkeypatch, capsys):
    seeds = list(range(800_000_000, 800_000_006))
    dist = bench.start_distances(seeds)
    assert set(dist) == set(seeds) and all(0.0 < d[0] < 0.6 and 0.0 < d[1] < 0.8 for d in dist.values())
    near = sorted(seeds, key=lambda s: dist[s][0])
    success = [s in (near[0], near[1], near[3]) for s in seeds]  # mostly the nearest cubes pushed home
    fit_file, pred_file = tmp_path / "fit.json", tmp_path / "pred.json"
    fit_file.write_text(json.dumps({"arms": [_arm("push3:gumbel:16", seeds, success),
                                             _arm("push3:a:agent", seeds, [False] * 5 + [True], cell="agent")]}))
    pred_file.write_text(json.dumps({"arms": [_arm("push3:gumbel:16", near[:2], [True, False])]}))
    out = tmp_path / "o.json"
    assert bench.main(["--fit", str(fit_file), "--predict", str(pred_file), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    sim = res["fits"]["simulator:gumbel:16"]
    assert sim["episodes"] == 6 and sim["successes"] == 3 and sim["slope_per_m"] < 0  # nearer: more successes
    assert set(res["fits"]) == {"simulator:gumbel:16", "agent"}
    p = res["predicted"][str(pred_file)]
    assert list(p) == ["simulator:gumbel:16"]  # no agent arm in that file
    q = p["simulator:gumbel:16"]
    assert q["observed"] == 1 and q["episodes"] == 2 and q["expected"] > 1.0  # the two nearest scenes
    assert q["expected_at_fit_rate"] == pytest.approx(1.0)
    assert q["p_at_most_observed"] + q["p_at_least_observed"] >= 1.0
    assert res["files"][str(pred_file)]["cube_goal_m_p25_p50_p75"][1] < res["files"][str(fit_file)]["cube_goal_m_p25_p50_p75"][1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"arms": []}))
    with pytest.raises(SystemExit) as e:
        bench.main(["--fit", str(bad), "--out", str(out)])
    assert e.value.code == 2 and "bad.json: no 'arms' list" in capsys.readouterr().err
