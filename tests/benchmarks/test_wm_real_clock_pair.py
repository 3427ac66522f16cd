"""benchmarks/wm_real_clock_pair.py: two arms of two wm_real_clock results paired by seed."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_real_clock_pair")


def _result(path, seeds, success, inference="thread"):
    arm = {"per_episode": {"seed": seeds, "success": success}, "successes": sum(success),
           "decision_ms": {"p50": 1.0, "p99": 2.0}, "moves_per_tick": 0.5}
    path.write_text(json.dumps({"benchmark": "wm_real_clock", "command": "python x", "git": {"commit": "abc"},
                                "real_inference": inference, "arms": {"real": arm, "virtual": arm}}))
    return path


def test_pairs_by_seed_whatever_the_order(tmp_path, capsys):
    a = _result(tmp_path / "a.json", [1, 2, 3, 4], [True, True, False, True], "process")
    b = _result(tmp_path / "b.json", [4, 3, 2, 1], [False, False, True, False])  # seed 1 lost, 2 won, 4 lost
    out = tmp_path / "o.json"
    assert bench.main([f"{a}:real", f"{b}:real", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    p = res["paired_first_minus_second"]
    assert (p["only_first"], p["only_second"], p["episodes"]) == (2, 0, 4) and p["difference"] == pytest.approx(0.5)
    assert res["arms"]["first"]["real_inference"] == "process" and res["arms"]["second"]["successes"] == 1
    assert res["seeds"] == [1, 4]
    c = _result(tmp_path / "c.json", [1, 2, 3, 5], [True] * 4)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"benchmark": "wm_thread_cost", "arms": {"real": {}}}))
    for bad, said in (([f"{a}:real", f"{c}:real"], "different seeds"), ([f"{a}:nope", f"{b}:real"], "arm 'nope'"),
                      ([str(a), f"{b}:real"], "give RESULT.json:ARM"),
                      ([f"{other}:real", f"{b}:real"], "not a wm_real_clock result"),
                      ([f"{tmp_path / 'missing.json'}:real", f"{b}:real"], "cannot read")):
        with pytest.raises(SystemExit) as e:
            bench.main([*bad, "--out", str(out)])
        assert e.value.code == 2 and said in capsys.readouterr().err
