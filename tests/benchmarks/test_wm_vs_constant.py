"""benchmarks/wm_vs_constant.py: final agents paired with the best constant action."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

wvc = load_benchmark("wm_vs_constant")


def _constant(tmp_path, per_episode, seed0=800_000_000):
    f = tmp_path / "const.json"
    f.write_text(json.dumps({"tasks": {"reach3": {"constant_action": {
        "best_action": 7, "select_success_per_action": [0.1] * 7 + [0.3], "select_seed0": 611_000_000,
        "select_episodes": 50, "seed0": seed0, "episodes": len(per_episode), "successes": sum(per_episode),
        "success": sum(per_episode) / len(per_episode), "wilson95": [0.0, 1.0],
        "per_episode_success": per_episode}}}}))
    return f


def _final(tmp_path, runs, name="final.json", seed0=800_000_000):
    f = tmp_path / name
    f.write_text(json.dumps({"settings": {"task": "reach3"}, "methods": {"comet": {"runs": {
        str(s): {"per_episode": pe, "episodes": len(pe), "seed0": seed0} for s, pe in runs.items()}}}}))
    return f


def test_pairs_each_training_seed_with_the_same_constant_episodes(tmp_path):
    const = _constant(tmp_path, [True, False, False, True])
    final = _final(tmp_path, {0: "1100", 1: "0110"})
    out = tmp_path / "out.json"
    assert wvc.main(["--constant", str(const), "--final", f"x={final}", "--out", str(out)]) == 0
    r = json.loads(out.read_text())["comparisons"]["x"]["comet"]
    # seed 0: 1100 vs 1001 -> +1 (ep 1) / -1 (ep 3); seed 1: 0110 vs 1001 -> +2 / -2
    assert (r["only_method"], r["only_constant"], r["episodes"]) == (3, 3, 8)
    assert r["success"] == 0.5 and r["constant_success"] == 0.5 and r["mcnemar_p"] == 1.0
    assert r["training_seeds"] == [0, 1]


def test_refuses_episodes_on_other_seeds(tmp_path):
    const = _constant(tmp_path, [True, False], seed0=610_000_000)
    final = _final(tmp_path, {0: "10"})
    with pytest.raises(wvc.EdgeError, match="share seeds"):
        wvc.main(["--constant", str(const), "--final", f"x={final}", "--out", str(tmp_path / "o.json")])


def test_bad_arguments_name_the_flag(tmp_path):
    const = _constant(tmp_path, [True])
    with pytest.raises(wvc.EdgeError, match="LABEL=FILE"):
        wvc.main(["--constant", str(const), "--final", "nolabel.json"])
    with pytest.raises(wvc.EdgeError, match="--constant"):
        wvc.main(["--constant", str(tmp_path / "missing.json"), "--final", "x=y.json"])
    (tmp_path / "noconst.json").write_text(json.dumps({"tasks": {"reach3": {"successes": 1}}}))
    with pytest.raises(wvc.EdgeError, match="--constant-select-episodes"):
        wvc.main(["--constant", str(tmp_path / "noconst.json"), "--final", "x=y.json"])
