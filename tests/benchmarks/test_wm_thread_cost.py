"""benchmarks/wm_thread_cost.py: the planner's decision time inline (virtual clock) against the real
clock's worker thread (pinned or not, Python's switch interval) and a worker process."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_thread_cost")


@pytest.mark.slow  # every arm (five or six real-clock runs, ~40 s); test_arms_pick_the_arms_run covers two
def test_arms_run_the_same_seeds_and_compare_compute_time(reach_model, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "o.json"
    assert bench.main(["--world-model", str(reach_model), "--simulations", "2", "--episodes", "2", "--block", "2",
                       "--max-steps", "20", "--seed", "11", "--runs-dir", str(tmp_path / "runs"),
                       "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert set(res["arms"]) >= {"virtual", "real"} and res["arms"]["virtual"]["compute_p50_vs_virtual"] == 1.0
    for name, fig in res["arms"].items():
        assert fig["seeds"] == [11, 12] and fig["decisions"] > 0 and fig["compute_ms"]["p50"] > 0
        meta = json.loads((tmp_path / "runs" / name / "meta.json").read_text())
        assert meta["session"]["clock"] == ("virtual" if name == "virtual" else "real")
        assert meta["session"]["plan_simulations"] == 2 and meta["session"]["execution"] == "sync"
        assert fig["compute_p50_vs_virtual"] == pytest.approx(
            fig["compute_ms"]["p50"] / res["arms"]["virtual"]["compute_ms"]["p50"], abs=1e-3)
    assert {"real_process", "real_switch5ms", "real_torch1"} <= set(res["arms"])
    config = {name: json.loads((tmp_path / "runs" / name / "meta.json").read_text())["config"] for name in res["arms"]}
    assert config["real_process"]["worker"]["mode"] == "process" and config["real"]["worker"]["mode"] == "thread"
    assert config["real_switch5ms"]["loop"]["gil_switch_interval_s"] == 0.0
    assert config["real_torch1"]["worker"]["torch_threads"] == 1 and config["real"]["worker"]["torch_threads"] == 0
    assert config["real"]["loop"]["gil_switch_interval_s"] > 0.0
    for fig in res["arms"].values():  # one block of 2 episodes: its p50 is the arm's
        assert fig["compute_p50_ms_by_block"] == [fig["compute_ms"]["p50"]]
    if "real_pinned" in res["arms"]:
        session = json.loads((tmp_path / "runs" / "real_pinned" / "meta.json").read_text())["session"]
        assert session["loop_cpus"] == "0" and session["inference_cpus"] == ""  # a thread is not placed by it


def test_bad_arguments_are_refused_before_any_run(reach_model, tmp_path, capsys):
    out = tmp_path / "o.json"
    (tmp_path / "runs").mkdir()
    for bad, said in ((["--simulations", "0"], "--simulations 0"), (["--runs-dir", str(tmp_path / "runs")], "exists"),
                      (["--arms", "real,threads"], "unknown arm(s) threads")):
        with pytest.raises(SystemExit) as e:
            bench.main(["--world-model", str(reach_model), *bad, "--out", str(out),
                        *([] if "--runs-dir" in bad else ["--runs-dir", str(tmp_path / "n")])])
        assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "n").exists() and not out.exists()


@pytest.mark.slow  # two real-clock runs of two blocks (~19 s); the arms' flags are checked fast below
def test_arms_pick_the_arms_run(reach_model, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "o.json"
    assert bench.main(["--world-model", str(reach_model), "--simulations", "2", "--episodes", "2", "--block", "1",
                       "--max-steps", "20", "--seed", "11", "--arms", "real_torch1", "--runs-dir",
                       str(tmp_path / "runs"), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert list(res["arms"]) == ["virtual", "real_torch1"]  # virtual always: the ratios are to it
    config = {name: json.loads((tmp_path / "runs" / name / "meta.json").read_text()) for name in res["arms"]}
    assert config["real_torch1"]["config"]["worker"]["torch_threads"] == 1
    assert [c["session"]["clock"] for c in config.values()] == ["virtual", "real"]
    assert res["arms"]["virtual"]["compute_p50_vs_virtual"] == 1.0 and res["arms"]["real_torch1"]["seeds"] == [11, 12]
    for fig in res["arms"].values():
        assert len(fig["compute_p50_ms_by_block"]) == 2
        assert all(v is not None and v > 0 for v in fig["compute_p50_ms_by_block"]), fig["compute_p50_ms_by_block"]


def test_each_arm_names_its_one_difference_from_the_thread_arm():
    a = bench.arms(loop_cpu=0)
    thread = ["--clock", "real", "--inference", "thread"]
    assert a["virtual"] == [] and a["real"] == thread
    assert a["real_process"] == ["--clock", "real", "--inference", "process"]
    assert a["real_switch5ms"] == [*thread, "--set", "loop.gil_switch_interval_s=0"]
    assert a["real_torch1"] == [*thread, "--set", "worker.torch_threads=1"]
    assert set(a) <= set(bench.ARM_NAMES) and a.get("real_pinned", [*thread, "--set", "loop_cpus=0"]) == \
        [*thread, "--set", "loop_cpus=0"]
