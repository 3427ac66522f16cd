"""benchmarks/edge_run_revisions.py: the same `edge run` at two code revisions, paired seeds."""

import json
import subprocess

import numpy as np
import pytest

from tests.benchmarks._load import BENCHMARKS, load_benchmark

bench = load_benchmark("edge_run_revisions")
ROOT = BENCHMARKS.parent


def _edge_run_args(reach_model, tmp_path, monkeypatch) -> list[str]:
    """The `edge run` both arms play (a tiny planner run); skips outside a git checkout."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("not a git checkout")
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    return ["--policy", "comet", "--task", "reach", "--world-model", str(reach_model), "--plan-simulations", "2",
            "--latency", "constant", "--latency-ms", "10", "--set", "max_steps=4"]


@pytest.mark.slow  # a worktree and two `edge run`s (~14 s)
def test_the_same_revision_twice_plays_the_same_episodes(reach_model, tmp_path, monkeypatch):
    run = _edge_run_args(reach_model, tmp_path, monkeypatch)
    out = tmp_path / "o.json"
    monkeypatch.chdir(tmp_path)  # a relative --runs-dir: the same directory for both arms
    assert bench.main(["--before", "HEAD", "--episodes", "2", "--block", "2", "--seed", "11",
                       "--runs-dir", "runs", "--out", str(out), "--", *run]) == 0
    res = json.loads(out.read_text())
    b, a = res["arms"]["before"], res["arms"]["after"]
    assert b["per_episode"] == a["per_episode"] and b["per_episode"]["seed"] == [11, 12]
    assert res["revisions"]["before"] == res["revisions"]["after"]  # HEAD both (after: this checkout)
    assert res["paired_after_minus_before"]["success"]["difference"] == 0.0
    lat = res["paired_after_minus_before"]["decision_latency"]
    assert lat["p50_ms"]["difference"] == 0.0 and lat["p99_ms"]["ci95"] == [0.0, 0.0]  # 10 ms charged per query
    assert b["decision_ms"]["p50"] == pytest.approx(10.0)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    assert res["revisions"]["after_dirty"] is bool(status.strip())  # uncommitted or untracked changes
    assert (tmp_path / "runs" / "before" / "episodes.jsonl").is_file()
    listed = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "edge_before_" not in listed  # the before arm's worktree is gone


@pytest.mark.slow  # two more `edge run`s, each from a worktree (~13 s)
def test_both_arms_from_worktrees_play_the_same_episodes(reach_model, tmp_path, monkeypatch):
    run = _edge_run_args(reach_model, tmp_path, monkeypatch)
    out = tmp_path / "o.json"
    assert bench.main(["--before", "HEAD", "--episodes", "2", "--block", "2", "--seed", "11",
                       "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--", *run]) == 0
    a = json.loads(out.read_text())["arms"]["after"]
    assert bench.main(["--before", "HEAD", "--after", "HEAD", "--episodes", "2", "--block", "2", "--seed", "11",
                       "--runs-dir", str(tmp_path / "runs2"), "--out", str(out), "--", *run]) == 0
    res2 = json.loads(out.read_text())  # both arms from worktrees: the same episodes again
    assert res2["arms"]["after"]["per_episode"] == a["per_episode"] and res2["revisions"]["after_dirty"] is False
    listed = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "edge_before_" not in listed


def test_latency_difference_resamples_episodes_in_pairs():
    after = {1: np.array([10.0, 12.0]), 2: np.array([30.0])}
    before = {1: np.array([20.0, 22.0]), 2: np.array([40.0])}
    d = bench.latency_difference(after, before, [1, 2], np.random.default_rng(0), n_boot=200)
    assert d["p50_ms"] == {"difference": -10.0, "ci95": [-10.0, -10.0]}  # every episode 10 ms faster


@pytest.mark.parametrize("argv, needle", [
    (["--before", "HEAD"], "give the `edge run` arguments after `--`"),
    (["--before", "HEAD", "--", "--episodes", "3"], "--episodes after `--`"),
    (["--before", "no-such-rev-xyz", "--", "--policy", "comet"], "--before no-such-rev-xyz: not a commit"),
])
def test_bad_arguments_are_refused(argv, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        bench.main([*argv, "--runs-dir", str(tmp_path / "r")] if "--" not in argv else
                   [*argv[: argv.index("--")], "--runs-dir", str(tmp_path / "r"), *argv[argv.index("--"):]])
    assert err.value.code == 2 and needle in capsys.readouterr().err
