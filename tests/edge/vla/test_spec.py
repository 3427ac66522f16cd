from types import SimpleNamespace

import pytest

from edge.vla.spec import CheckpointMismatch, ModelSpec, layout_name


def test_round_trip_through_plain_dict(make_spec):
    spec = make_spec()
    assert ModelSpec.from_dict(spec.to_dict()) == spec


def test_rejects_bad_stats_and_unknown_version(make_spec):
    with pytest.raises(Exception, match="std must be > 0"):
        make_spec(action_std=(1.0, 1.0, 0.0, 1.0, 1.0))
    d = make_spec().to_dict()
    d["version"] = 99
    with pytest.raises(Exception, match="version"):
        ModelSpec.from_dict(d)


def test_refuses_other_control_rate(make_spec):
    with pytest.raises(CheckpointMismatch, match=r"control rate 20 Hz.*configured for 50 Hz"):
        make_spec().check_robot(control_rate_hz=50.0)


def test_refuses_other_action_layout_by_name_or_by_dimension_names(make_spec):
    with pytest.raises(CheckpointMismatch, match="action layout"):
        make_spec(action_layout="ee_delta").check_robot(action_layout="joint_pos")
    robot = SimpleNamespace(control_rate_hz=20.0, action_layout="joint_pos",
                            action_names=tuple(f"q{i}_rad" for i in range(7)) + ("gripper",))
    with pytest.raises(CheckpointMismatch, match="action layout"):
        make_spec().check_robot(robot)


def test_accepts_matching_robot(make_spec):
    robot = SimpleNamespace(control_rate_hz=20.0, action_layout="ee_delta",
                            action_names=("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper"))
    make_spec().check_robot(robot)
    make_spec(action_layout="ee_delta").check_robot(robot)


def test_layout_names_follow_the_contracts():
    assert layout_name(("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper")) == "ee_delta"
    assert layout_name(tuple(f"q{i}_rad" for i in range(7)) + ("gripper",)) == "joint_pos"
    assert layout_name("ee_delta") == "ee_delta"


def test_checks_against_the_shipped_panda_robot_spec(make_spec):
    from edge.robot_spec import load_robot_spec

    panda = load_robot_spec("panda")
    make_spec().check_robot(panda)  # demos record per-dimension names; the robot a layout name
    with pytest.raises(CheckpointMismatch, match="10 Hz"):
        make_spec(control_rate_hz=10.0).check_robot(panda)
