"""benchmarks/worker_startup.py: the worker's recorded start-up per mode, and bad input."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("worker_startup")


def test_records_each_modes_start_and_the_ratio(tmp_path, monkeypatch):
    calls = []

    def fake(policy, task, mode, max_steps, out):
        calls.append(mode)
        return {"process": 1.5, "thread": 0.001}[mode] + 0.1 * len(calls)

    monkeypatch.setattr(bench, "run_once", fake)
    out = tmp_path / "r.json"
    assert bench.main(["--repeats", "2", "--out", str(out)]) == 0
    assert calls == ["process", "thread", "process", "thread"]  # alternating
    res = json.loads(out.read_text())["modes"]
    assert res["process"]["start_s"] == [1.6, 1.8] and res["process"]["median_s"] == pytest.approx(1.7)
    assert res["thread"]["median_over_first_mode"] == pytest.approx(((0.201 + 0.401) / 2) / 1.7, abs=1e-4)


def test_a_real_thread_run_records_one_start(tmp_path):
    start = bench.run_once("comet", "reach", "thread", 4, tmp_path / "run")
    assert 0.0 <= start < 1.0  # a thread starts at once: the policy is built before it


@pytest.mark.parametrize("bad,said", [(["--repeats", "0"], "--repeats: 0"), (["--max-steps", "0"], "--max-steps: 0"),
                                      (["--modes", "thread", "thread"], "a mode given twice")])
def test_bad_input_is_refused_by_name(bad, said, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(bad)
    assert e.value.code == 2 and said in capsys.readouterr().err
