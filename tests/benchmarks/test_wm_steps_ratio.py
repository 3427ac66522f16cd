"""benchmarks/wm_steps_ratio.py: the steps ratio against a level above a reference policy's score."""

import json

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

wsr = load_benchmark("wm_steps_ratio")
cvm = load_benchmark("comet_vs_monolithic")

STEPS = [0, 500, 1000, 1500, 2000]


def _results(tmp_path, comet, pixels, name="cvm.json", episodes=24):
    """A comet_vs_monolithic.json with the given per-seed curves (lists of success per point)."""
    def entry(curves):
        return {"seeds": list(range(len(curves))), "env_steps": STEPS,
                "per_seed": {str(s): c for s, c in enumerate(curves)}}
    f = tmp_path / name
    f.write_text(json.dumps({"settings": {"eval_episodes": episodes},
                             "tasks": {"reach3": {"methods": {"comet": entry(comet), "pixels": entry(pixels)}}}}))
    return f


def _floor(tmp_path, success, seed0=900_000_000, episodes=24):
    f = tmp_path / "floor.json"
    f.write_text(json.dumps({"settings": {"seed0": seed0}, "tasks": {"reach3": {"constant_action": {
        "best_action": 7, "episodes": episodes, "success": success, "seed0": seed0}}}}))
    return f


def test_level_above_is_the_issues_level_at_floor_zero_and_none_at_or_below_the_floor():
    assert cvm.level_above(0.5) == pytest.approx(0.4)
    assert cvm.level_above(0.5, 0.2) == pytest.approx(0.2 + 0.8 * 0.3)
    assert cvm.level_above(0.2, 0.2) is None and cvm.level_above(0.1, 0.2) is None and cvm.level_above(0.0) is None


def test_a_floor_gives_a_ratio_where_the_issues_level_is_met_at_step_zero():
    x = np.array(STEPS)
    # the pixel model starts at 0.25, above the constant action's 0.2, and ends at 0.3: the issue's level (0.24)
    # is met at step 0, no ratio; above the floor the level is 0.28, reached at 2,000 steps
    mono = (x, np.array([[0.25, 0.2, 0.2, 0.25, 0.3]] * 2))
    comet = (x, np.array([[0.2, 0.3, 0.4, 0.5, 0.5]] * 2))
    rng = np.random.default_rng(0)
    assert cvm.ratio_bootstrap(comet, mono, rng, n=20) == {"resamples": 20, "undefined": 20}
    b = cvm.ratio_bootstrap(comet, mono, rng, n=20, floor=0.2)
    assert b["p2.5_50_97.5"] == [500 / 2000] * 3 and b["share_le_1_3"] == 1.0 and b["share_le_1_4"] == 1.0


def test_main_writes_both_levels_and_the_declared_readings(tmp_path, capsys):
    res = _results(tmp_path, comet=[[0.2, 0.3, 0.4, 0.5, 0.5]] * 3, pixels=[[0.25, 0.2, 0.2, 0.25, 0.3]] * 3)
    out = tmp_path / "out.json"
    assert wsr.main(["--results", str(res), "--floor-from", str(_floor(tmp_path, 0.2)), "--out", str(out),
                     "--resamples", "50"]) == 0
    d = json.loads(out.read_text())
    assert d["floor"]["success"] == 0.2 and d["floor"]["best_action"] == 7
    row = d["rows"][0]
    assert row["issue_level"]["level"] == pytest.approx(0.24) and row["issue_level"]["ratio"] is None
    assert row["issue_level"]["reading"].startswith("missed (the monolithic model is at the level from step 0")
    f = row["floor_level"]
    assert f["level"] == pytest.approx(0.28) and (f["method_steps"], f["monolithic_steps"]) == (500, 2000)
    assert f["ratio"] == pytest.approx(0.25) and f["reading"] == "met robustly"
    assert "met robustly" in capsys.readouterr().out


def test_readings_point_only_missed_and_no_level():
    boot = {"share_le_1_3": 0.6}
    assert wsr.reading({"level": 0.3, "ratio": 0.25, "bootstrap": boot}) == "met on the point estimate only"
    assert wsr.reading({"level": 0.3, "ratio": 0.5, "bootstrap": {"share_le_1_3": 1.0}}) == "missed"
    assert wsr.reading({"level": 0.3, "ratio": None, "bootstrap": boot}) == "missed"
    assert wsr.reading({"level": None}) == "no level"
    # resamples with no ratio count against the goal: 96 % of those with one, but 10 of 100 have none
    part = {"resamples": 100, "undefined": 10, "share_le_1_3": 0.96}
    assert wsr.share_all(part) == pytest.approx(0.864)
    assert wsr.reading({"level": 0.3, "ratio": 0.25, "bootstrap": part}) == "met on the point estimate only"


def test_reading_boundaries():
    at = {"resamples": 100, "undefined": 0}
    assert wsr.reading({"level": 0.3, "ratio": 1 / 3, "bootstrap": {**at, "share_le_1_3": 0.95}}) == "met robustly"
    assert wsr.reading({"level": 0.3, "ratio": 1 / 3, "bootstrap": {**at, "share_le_1_3": 0.94}}) \
        == "met on the point estimate only"
    assert wsr.reading({"level": 0.3, "ratio": 0.34, "bootstrap": {**at, "share_le_1_3": 1.0}}) == "missed"


def test_a_files_figures_do_not_depend_on_the_others_or_their_order(tmp_path):
    a = _results(tmp_path, comet=[[0.2, 0.3, 0.4, 0.5, 0.5], [0.1, 0.1, 0.3, 0.3, 0.4]],
                 pixels=[[0.25, 0.2, 0.2, 0.25, 0.3], [0.1, 0.2, 0.1, 0.3, 0.35]], name="a.json")
    b = _results(tmp_path, comet=[[0.0, 0.1, 0.5, 0.5, 0.6]] * 2, pixels=[[0.1, 0.1, 0.2, 0.2, 0.4]] * 2, name="b.json")
    rows = {}
    for order in ((a, b), (b, a), (a,)):
        out = tmp_path / "o.json"
        assert wsr.main(["--results", *map(str, order), "--floor", "0.1", "--out", str(out), "--resamples", "200"]) == 0
        rows[order] = {r["results"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows[(a, b)][str(a)] == rows[(b, a)][str(a)] == rows[(a,)][str(a)]


def test_a_file_that_is_not_a_results_file_is_named(tmp_path, capsys):
    f = tmp_path / "notes.json"
    f.write_text("not json")
    with pytest.raises(SystemExit) as e:
        wsr.main(["--results", str(f), "--floor", "0.1", "--out", str(tmp_path / "o.json")])
    assert e.value.code == 2 and f"--results {f}: not a comet_vs_monolithic.py output" in capsys.readouterr().err


def test_a_monolithic_model_below_the_floor_sets_no_level(tmp_path):
    res = _results(tmp_path, comet=[[0.2, 0.3, 0.4, 0.5, 0.5]], pixels=[[0.1, 0.1, 0.1, 0.1, 0.15]])
    out = tmp_path / "out.json"
    assert wsr.main(["--results", str(res), "--floor", "0.2", "--out", str(out), "--resamples", "10"]) == 0
    f = json.loads(out.read_text())["rows"][0]["floor_level"]
    assert f["level"] is None and f["reading"] == "no level"


@pytest.mark.parametrize("case, message", [
    ("seed0", "not on the curves' evaluation seeds"),
    ("episodes", "evaluation episodes"),
    ("method", "not in this results file"),
    ("floor", "--floor=1.5"),
])
def test_bad_inputs_are_named(tmp_path, case, message, capsys):
    res = _results(tmp_path, comet=[[0.0] * 5], pixels=[[0.1] * 5])
    argv = ["--results", str(res), "--out", str(tmp_path / "o.json")]
    if case == "seed0":
        argv += ["--floor-from", str(_floor(tmp_path, 0.2, seed0=800_000_000))]
    elif case == "episodes":
        argv += ["--floor-from", str(_floor(tmp_path, 0.2, episodes=100))]
    elif case == "method":
        argv += ["--floor", "0.0", "--method", "flat_slots"]
    else:
        argv += ["--floor", "1.5"]
    with pytest.raises(SystemExit) as exit_:
        wsr.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "o.json").exists()
