"""benchmarks/bridge_pair.py: two bridge_deploy runs on the same seeds, scene by scene."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bp = load_benchmark("bridge_pair")


def _work(path, bridge, sim, settings=None):
    """A bridge_deploy work directory: per seed (success, ticks) for each arm."""
    path.mkdir()
    with open(path / "episodes.jsonl", "w") as f:
        for arm, recs in (("bridge", bridge), ("sim", sim)):
            for seed, (ok, ticks) in enumerate(recs):
                f.write(json.dumps({"arm": arm, "seed": 100 + seed, "success": ok, "ticks": ticks}) + "\n")
        f.write('{"arm": "bridge", "se')  # a line cut by a kill
    (path / "settings.json").write_text(json.dumps(settings or {"seed": 100}))


def test_pairs_by_seed_and_reports_ratios(tmp_path):
    _work(tmp_path / "on", [(True, 110), (True, 120), (False, 220), (True, 100)],
          [(True, 100), (True, 100), (True, 90), (False, 220)], {"seed": 100, "mcu": {"x": 0}})
    _work(tmp_path / "off", [(True, 140), (True, 150), (False, 220), (False, 220)],
          [(True, 100), (True, 100), (True, 90), (False, 220)], {"seed": 100})
    out = tmp_path / "p.json"
    assert bp.main(["--run", f"on={tmp_path}/on", "--run", f"off={tmp_path}/off", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    c = res["comparisons"]["bridge: on over off"]
    assert (c["successes_a"], c["successes_b"], c["only_a"], c["only_b"]) == (3, 2, 1, 0)
    t = c["ticks_to_success"]
    assert t["scenes"] == 2 and t["ratio_p50"] == pytest.approx((110 / 140 + 120 / 150) / 2, abs=1e-4)
    assert t["ratio_p50_ci95"][1] < 1 and t["a_shorter"] == 2
    assert t["a_minus_b_mean"] == pytest.approx(-30.0) and t["within_5_ticks"] == 0
    assert res["comparisons"]["on: bridge over sim"]["ticks_to_success"]["scenes"] == 2
    assert res["settings_that_differ"] == ["mcu"]


@pytest.mark.parametrize("runs, said", [
    (["a=X", "a=Y"], "the two labels must differ"),
    (["a=X"], "give exactly two runs"),
    (["X", "b=Y"], "give LABEL=WORK"),
    (["a=X", "b=MISSING"], "episodes.jsonl not found"),
])
def test_bad_runs_name_the_flag(tmp_path, capsys, runs, said):
    _work(tmp_path / "X", [(True, 100)], [(True, 100)])
    _work(tmp_path / "Y", [(True, 100)], [(True, 100)])
    argv = [x for r in runs for x in ("--run", r.replace("=", f"={tmp_path}/", 1) if "=" in r else r)]
    with pytest.raises(SystemExit):
        bp.main([*argv, "--out", str(tmp_path / "p.json")])
    assert said in capsys.readouterr().err
