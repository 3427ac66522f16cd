"""benchmarks/sim_speed.py: peers run as subprocesses, their printed figures parsed, ratios per round."""

import sys
from pathlib import Path

import pytest

from tests.benchmarks._load import load_benchmark

sim_speed = load_benchmark("sim_speed")


def _fake_peer(tmp_path, rate: float) -> Path:
    script = tmp_path / sim_speed.PEER_SCRIPTS["panda-gym"]
    script.write_text("print('argv[0]=--background_color_red=0.87')\n"
                      f"print('panda-gym PandaStack-v3 control steps/s (no render): {rate:.0f}')\n"
                      "print('render 96x96 Tiny fps: 20.5 (96, 96, 3)')\n")
    return script


def test_peer_figures_are_parsed_from_their_output(tmp_path):
    figs = sim_speed.run_peer(sys.executable, _fake_peer(tmp_path, 500))
    assert figs["panda-gym PandaStack-v3 control steps/s (no render)"] == 500.0
    assert figs["render 96x96 Tiny fps"] == 20.5
    assert not any("argv" in k for k in figs)


def test_a_peer_that_prints_nothing_or_fails_is_an_error(tmp_path):
    script = tmp_path / "p.py"
    script.write_text("print('hello')\n")
    with pytest.raises(RuntimeError, match="no 'steps/s'"):
        sim_speed.run_peer(sys.executable, script)
    script.write_text("raise SystemExit(3)\n")
    with pytest.raises(RuntimeError, match="exit 3"):
        sim_speed.run_peer(sys.executable, script)


def test_ratios_are_taken_within_each_round(tmp_path):
    label = "panda-gym PandaStack-v3 control steps/s (no render)"
    rounds = [{"mujoco": {"control_steps_per_s_no_render": m}, "panda-gym": {label: p}}
              for m, p in ((1000.0, 500.0), (600.0, 400.0), (900.0, 300.0))]
    out = sim_speed.summarise(rounds, {"panda-gym": None})
    r = out["ratios"]["mujoco_no_render_over_panda-gym"]
    assert r["per_round"] == [2.0, 1.5, 3.0] and r["median"] == 2.0
    assert out["median"]["mujoco"]["control_steps_per_s_no_render"] == 900.0


def test_bad_peer_arguments_name_the_flag(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="NAME=PYTHON"):
        sim_speed._parse_peers(["pandagym"], tmp_path)
    with pytest.raises(SystemExit, match="is not a file"):
        sim_speed._parse_peers(["panda-gym=/nonexistent/python"], tmp_path)
    with pytest.raises(SystemExit, match="--anchors"):
        sim_speed._parse_peers([f"panda-gym={sys.executable}"], tmp_path)
    _fake_peer(tmp_path, 1)
    bare = tmp_path / "python"  # a Python without panda-gym: refused before round 1
    bare.write_text("#!/bin/sh\nexit 1\n")
    bare.chmod(0o755)
    with pytest.raises(SystemExit, match="panda_gym is not installed"):
        sim_speed._parse_peers([f"panda-gym={bare}"], tmp_path)
    monkeypatch.setattr(sim_speed, "peer_version", lambda python, package: "3.0.7")
    assert sim_speed._parse_peers([f"panda-gym={sys.executable}"], tmp_path)["panda-gym"][0] == sys.executable


def test_a_sim_is_measured_at_its_default_step_or_a_named_one():
    assert sim_speed.parse_sim("mujoco") == ("mujoco", 0.0)
    assert sim_speed.parse_sim("pybullet:0.002") == ("pybullet", 0.002)
    for bad in ("bullet", "pybullet:fast", "mujoco:-1"):
        with pytest.raises(SystemExit, match="--sims"):
            sim_speed.parse_sim(bad)


def test_each_measured_variant_gets_its_ratio():
    label = "panda-gym PandaStack-v3 control steps/s (no render)"
    rounds = [{"pybullet": {"control_steps_per_s_no_render": 900.0},
               "pybullet:0.002": {"control_steps_per_s_no_render": 600.0}, "panda-gym": {label: 750.0}}]
    r = sim_speed.summarise(rounds, {"panda-gym": None})["ratios"]
    assert r["pybullet_no_render_over_panda-gym"]["median"] == 1.2
    assert r["pybullet:0.002_no_render_over_panda-gym"]["median"] == 0.8


@pytest.mark.parametrize("spec", ["pybullet:nan", "pybullet:inf", "pybullet:0.01", "pybullet:0.003"])
def test_a_physics_step_the_env_refuses_names_the_flag(spec):
    with pytest.raises(SystemExit, match="--sims"):
        sim_speed.parse_sim(spec)
