import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from edge.config import ConfigError
from edge.robot_spec import load_robot_spec

pybullet_data = pytest.importorskip("pybullet_data")


def _urdf_limits():
    root = ET.parse(Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf").getroot()
    out = {}
    for j in root.findall("joint"):
        lim = j.find("limit")
        if j.get("type") == "revolute":
            out[j.get("name")] = (
                float(lim.get("lower")),
                float(lim.get("upper")),
                float(lim.get("velocity")),
            )
    return out


def test_panda_limits_match_the_urdf():
    spec = load_robot_spec("panda")
    urdf = _urdf_limits()
    for i, name in enumerate(spec.joint_names):
        lo, hi, vel = urdf[name]
        assert spec.q_min_rad[i] == pytest.approx(lo)
        assert spec.q_max_rad[i] == pytest.approx(hi)
        assert spec.qd_max_rad_s[i] == pytest.approx(vel)
    assert spec.control_rate_hz == 20.0 and spec.table_z_m == 0.0
    assert spec.action_layout == "ee_delta" and spec.action_dim == 5
    assert spec.action_names == ("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper")


def test_fk_known_poses():
    spec = load_robot_spec("panda")
    p, R = spec.fk(np.zeros(7))  # straight up, flange 0.926 m minus hand+fingers, x offset 0.088
    np.testing.assert_allclose(p, [0.088, 0.0, 0.821], atol=1e-9)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
    p_home, _ = spec.fk(spec.q_home())
    assert np.all(p_home > np.array(spec.workspace_min_m)) and np.all(p_home < np.array(spec.workspace_max_m))


def test_fk_agrees_with_the_sim_model():
    robot_model = pytest.importorskip("sim.robot_model")
    spec = load_robot_spec("panda")
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.uniform(*spec.limits())
        np.testing.assert_allclose(spec.fk(q)[0], robot_model.fk(q)[0], atol=1e-9)


def test_layout_override_and_errors(tmp_path):
    spec = load_robot_spec("panda", ["action_layout=joint_pos"])
    assert spec.action_dim == 8 and spec.action_names[-1] == "gripper"
    with pytest.raises(ConfigError, match="unknown robot 'ur5'.*panda"):
        load_robot_spec("ur5")
    with pytest.raises(ConfigError, match="q_home_rad"):
        load_robot_spec("panda", ["q_home_rad=[9,0,0,0,0,0,0]"])
    with pytest.raises(ConfigError, match="qd_max_rad_s has 2 values"):
        load_robot_spec("panda", ["qd_max_rad_s=[1,2]"])
    with pytest.raises(ConfigError, match="action_layout"):
        load_robot_spec("panda", ["action_layout=torque"])
    bad = tmp_path / "r.yaml"
    bad.write_text("name: x\nbogus_key: 1\n")
    with pytest.raises(ConfigError, match="bogus_key"):
        load_robot_spec(bad)


def test_the_panda_workspace_is_the_simulated_arms_target_box():
    """The safety layer's box (with its table clearance) is the sim controller's own: both clip at the
    same walls (the sim's target leads the measured TCP, so the sim may still clip a move the safety
    layer let through; the sim driver reports that)."""
    env_mod = pytest.importorskip("sim.env")
    from edge.safety import SafetyConfig

    spec = load_robot_spec("panda")
    lo = list(spec.workspace_min_m)
    lo[2] = max(lo[2], spec.table_z_m + SafetyConfig().table_clearance_m)
    assert lo == pytest.approx([b[0] for b in env_mod.TARGET_BOX_M], abs=1e-12)
    assert list(spec.workspace_max_m) == pytest.approx([b[1] for b in env_mod.TARGET_BOX_M], abs=1e-12)
