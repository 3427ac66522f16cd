"""benchmarks/mujoco_rollout_speed.py: batched and sequential stepping end in the same states."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("mujoco_rollout_speed")


def test_rollout_and_sequential_physics_agree_bit_for_bit(tmp_path):
    out = tmp_path / "r.json"
    assert bench.main(["--envs", "2", "--threads", "1", "2", "--rounds", "1", "--steps", "2", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["end_states_identical"] == {"1": True, "2": True}
    assert r["substeps"] == 25 and set(r["ratio_over_sequential"]) == {"rollout_1_threads", "rollout_2_threads"}


def test_bad_arguments_exit_2():
    with pytest.raises(SystemExit) as e:
        bench.main(["--envs", "0"])
    assert e.value.code == 2


def test_more_threads_than_envs_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--envs", "1", "--threads", "2"])
    assert e.value.code == 2 and "--threads 2" in capsys.readouterr().err
