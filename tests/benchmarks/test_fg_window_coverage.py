"""benchmarks/fg_window_coverage.py: the loss-foreground shares per window and threshold."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

cov = load_benchmark("fg_window_coverage")


def test_main_writes_one_row_per_window_and_threshold_and_refuses_bad_input(tmp_path, capsys):
    from world_models.slot_pretrain import collect_frames

    collect_frames(8, 5, tmp_path / "d.npz", episode_len=4, progress=False)
    out = tmp_path / "o.json"
    assert cov.main(["--data", str(tmp_path / "d.npz"), "--windows", "9", "17", "--thresholds", "0.15", "0.1",
                     "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    rows = [(r["window"], r["threshold"]) for r in res["windows"]]
    assert rows == [(9, 0.15), (17, 0.15), ("moving", 0.15), (9, 0.1), (17, 0.1), ("moving", 0.1)]
    by = {k: r for k, r in zip(rows, res["windows"])}
    for w in (9, 17, "moving"):  # a lower threshold marks at least as many cells
        for part in ("robot_cells_in_foreground", "table_cells_in_foreground"):
            lo, hi = by[(w, 0.1)][part]["mean"], by[(w, 0.15)][part]["mean"]
            assert lo is None or lo >= hi
    assert res["episodes"] == 2 and res["data_hash"]
    for bad, said in ((["--windows", "8"], "--windows 8"), (["--thresholds", "0"], "--thresholds 0"),
                      (["--res", "2"], "--res 2"), (["--data", str(tmp_path / "no.npz")], "--data")):
        with pytest.raises(SystemExit) as e:
            cov.main(["--data", str(tmp_path / "d.npz"), *bad])
        assert e.value.code == 2 and said in capsys.readouterr().err
    assert cov.main(["--data", str(tmp_path / "d.npz"), "--res", "24", "--out", str(out)]) == 2
    assert "--res 24" in capsys.readouterr().err
