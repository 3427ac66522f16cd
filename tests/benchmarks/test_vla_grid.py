"""benchmarks/vla_grid.py: pooling a cell's shards (the part that turns episodes into the grid's numbers)."""


import pytest

from tests.benchmarks._load import load_benchmark

vla_grid = load_benchmark("vla_grid")


def _ep(seed, success, stage, nfe=20, executed=16, steps=40):
    return {"seed": seed, "success": success, "max_stage": stage, "steps": steps, "nfe": nfe,
            "executed": executed, "sim_diverged": False}


def test_cell_from_shards_pools_episodes_in_seed_order():
    late = {"episodes": [_ep(12, True, 4), _ep(13, False, 2)], "wall_s": 2.0}
    early = {"episodes": [_ep(10, False, 0, nfe=10, executed=4), _ep(11, True, 4)], "wall_s": 1.0}
    cell = vla_grid.cell_from_shards(10, 8, [late, early])
    assert (cell["episodes"], cell["successes"]) == (4, 2)
    assert cell["success_by_seed"] == "0110"
    assert cell["nfe_per_action"] == pytest.approx(70 / 52)
    assert cell["failure_stage"] == {"reach": 1, "grasp": 0, "transport": 1, "place": 0}
    lo, hi = cell["ci95"]
    assert lo < 0.5 < hi and cell["wall_s"] == 3.0


def test_every_invocation_records_its_command_machine_and_git_revision():
    res = vla_grid.stamp({"cells": {}}, ["python", "benchmarks/vla_grid.py", "--episodes", "3"])
    assert res["command"] == "python benchmarks/vla_grid.py --episodes 3" and "platform" in res["machine"]
    first = res["invocations"][0]
    assert first["command"] == res["command"] and first["machine"] == res["machine"]
    git = first["git"]  # this checkout's revision (or why it could not be read)
    assert (len(git["commit"]) == 40 and isinstance(git["dirty"], bool)) if git["commit"] else git["error"]
    vla_grid.stamp(res, ["python", "benchmarks/vla_grid.py", "--episodes", "3", "--resume"])  # a resume adds one
    assert len(res["invocations"]) == 2 and res["invocations"][1]["command"].endswith("--resume")
    assert res["invocations"][0]["command"].endswith("3")  # the first one's record is kept
    # a file with results from before invocations were recorded says so first
    old = vla_grid.stamp({"cells": {"K2_C8": {}}}, ["python", "benchmarks/vla_grid.py"])
    assert "unrecorded" in old["invocations"][0] and old["invocations"][1]["command"] == "python benchmarks/vla_grid.py"


def test_a_cell_names_the_invocations_that_ran_its_shards():
    a = {"episodes": [_ep(10, True, 4)], "wall_s": 1.0, "invocation": 0}
    b = {"episodes": [_ep(11, False, 1)], "wall_s": 1.0, "invocation": 2}
    assert vla_grid.cell_from_shards(2, 8, [b, a])["invocations"] == [0, 2]


@pytest.mark.parametrize("argv, said", [
    (["--ks", "0"], "--ks 0: each in [1, 100]"),
    (["--cs", "20"], "--cs 20: each in [1, 16] (C: at most the checkpoint's chunk of 16)"),
    (["--ks", "a"], "--ks a: a comma-separated list"),
    (["--shard", "0"], "--shard 0: must be >= 1"),
    (["--checkpoint", "/nonexist"], "--checkpoint /nonexist: no VLA checkpoint there"),
])
def test_bad_arguments_stop_before_any_shard(argv, said, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "vla_grid.py"), *argv, "--out",
                          str(tmp_path / "g.json")], capture_output=True, text=True, timeout=120, cwd=root)
    assert res.returncode == 2 and said in res.stderr, res.stderr
