"""benchmarks/wm_pairs.py: arms of different files paired seed by seed, pooled; bad items refused."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

wp = load_benchmark("wm_pairs")


def _file(path, arms):
    path.write_text(json.dumps({"arms": [{"name": n, "per_episode_seed": s, "per_episode_success": w}
                                         for n, (s, w) in arms.items()]}))
    return str(path)


def test_sides_pool_in_order_and_pair_seed_by_seed(tmp_path):
    f1 = _file(tmp_path / "a.json", {"push3:x_s0:agent": ([10, 11, 12], [1, 1, 0]),
                                     "push3:c_s0:agent": ([10, 11, 12], [0, 1, 0])})
    f2 = _file(tmp_path / "b.json", {"push3:x_s0:agent": ([13, 14], [1, 0]), "push3:c_s0:agent": ([13, 14], [0, 1])})
    res = wp.pair_sides([f"{f1}:push3:x_s0:agent", f"{f2}:push3:x_s0:agent"],
                        [f"{f1}:push3:c_s0:agent", f"{f2}:push3:c_s0:agent"])
    assert (res["episodes"], res["successes_a"], res["successes_b"]) == (5, 3, 2)
    assert (res["only_a"], res["only_b"]) == (2, 1) and res["mcnemar_p"] == 1.0
    with pytest.raises(wp.EdgeError, match="same seeds"):  # the order matters: episodes pair by seed
        wp.pair_sides([f"{f2}:push3:x_s0:agent", f"{f1}:push3:x_s0:agent"],
                      [f"{f1}:push3:c_s0:agent", f"{f2}:push3:c_s0:agent"])
    with pytest.raises(wp.EdgeError, match="has no arm"):
        wp.pair_sides([f"{f1}:push3:y_s0:agent"], [f"{f1}:push3:c_s0:agent"])


def test_cli_writes_json_and_refuses_bad_items(tmp_path, capsys):
    f1 = _file(tmp_path / "a.json", {"A": ([1, 2], [1, 0]), "B": ([1, 2], [0, 0])})
    out = tmp_path / "p.json"
    assert wp.main(["--a", f"{f1}:A", "--b", f"{f1}:B", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["successes_a"] == 1 and res["only_a"] == 1 and res["a"] == [f"{f1}:A"]
    assert wp.main(["--a", "nofile:A", "--b", f"{f1}:B"]) == 2
    assert "expected FILE.json:ARM" in capsys.readouterr().err
    assert wp.main(["--a", str(tmp_path / "missing.json") + ":A", "--b", f"{f1}:B"]) == 2
    assert "no such file" in capsys.readouterr().err
