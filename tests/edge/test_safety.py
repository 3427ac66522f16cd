import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from edge.config import ConfigError
from edge.contracts import RobotState
from edge.robot_spec import load_robot_spec
from edge.safety import (
    SafetyConfig,
    SafetyConfigError,
    SafetyMode,
    SafetySupervisor,
    cap_acceleration,
    cap_norm,
    cap_step,
    check_compatibility,
    clamp_range,
    decelerate,
    validate_action,
)
from tests.fakes import joint_spec

EE = load_robot_spec("panda")
JOINT = joint_spec()
finite = st.floats(-10, 10, allow_nan=False)
vec7 = arrays(np.float64, 7, elements=finite)


def state(spec, q=None, ee=None, t=0.0, g=0.0):
    q = spec.q_home() if q is None else np.asarray(q, float)
    return RobotState(t, q, np.zeros(7), g, spec.fk(q)[0] if ee is None else np.asarray(ee, float))


def started(spec, **cfg):
    s = SafetySupervisor(spec, SafetyConfig(**cfg))
    s.start(state(spec), 0.0)
    return s


def kinds(decision):
    return [iv.kind for iv in decision.interventions]


# ------------------------------------------------------------------ pure functions


@given(vec7, vec7, vec7)
def test_clamp_range_bounds_and_reports(x, a, b):
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    y, mask = clamp_range(x, lo, hi)
    assert np.all(y >= lo) and np.all(y <= hi)
    np.testing.assert_array_equal(mask, y != x)
    np.testing.assert_array_equal(y[~mask], x[~mask])  # untouched elements are bit-exact


@given(vec7, vec7, st.floats(1e-3, 2.0))
def test_cap_step_limits_distance(target, ref, m):
    y, mask = cap_step(target, ref, m)
    assert np.all(np.abs(y - ref) <= m + 1e-9)
    np.testing.assert_allclose(y[~mask], target[~mask], atol=1e-9)


@given(vec7, vec7, vec7, st.floats(0.1, 50.0))
def test_cap_acceleration_limits_second_difference(target, prev, prev_prev, amax):
    dt = 0.05
    y, _ = cap_acceleration(target, prev, prev_prev, np.full(7, amax), dt)
    acc = ((y - prev) - (prev - prev_prev)) / dt**2
    assert np.all(np.abs(acc) <= amax * (1 + 1e-6) + 1e-6)


@given(arrays(np.float64, 3, elements=finite), st.floats(0.0, 5.0))
def test_cap_norm_keeps_direction(v, m):
    y, changed = cap_norm(v, m)
    assert np.linalg.norm(y) <= m + 1e-9
    if changed and np.linalg.norm(v) > 0:
        assert np.dot(y, v) >= 0


@given(vec7, st.floats(-3, 3))
def test_decelerate_reaches_standstill_monotonically(q, v0):
    prev, prev_prev = q, q - v0 * 0.05
    speeds = []
    for _ in range(200):
        nxt = decelerate(prev, prev_prev, np.full(7, 10.0), 0.05)
        speeds.append(np.abs(nxt - prev).max() / 0.05)
        prev_prev, prev = prev, nxt
    assert speeds[-1] == 0.0
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(speeds))


def test_validate_action():
    assert validate_action(np.zeros(5), 5) is None
    assert "shape" in validate_action(np.zeros(4), 5)
    assert "shape" in validate_action(np.zeros((1, 5)), 5)
    assert "non-finite" in validate_action(np.array([0, np.nan, 0, np.inf, 0.0]), 5)
    assert "dtype" in validate_action(np.array(["a"] * 5), 5)


def test_compatibility_refusal():
    check_compatibility(EE, 20.0, "ee_delta", 5)
    with pytest.raises(SafetyConfigError, match="control rate 10.0 Hz != robot 20.0 Hz"):
        check_compatibility(EE, 10.0, "ee_delta", 5)
    with pytest.raises(SafetyConfigError, match="action layout 'joint_pos'"):
        check_compatibility(EE, 20.0, "joint_pos", 8)
    with pytest.raises(SafetyConfigError, match="action dim 7"):
        check_compatibility(EE, 20.0, "ee_delta", 7)


def test_config_validation():
    with pytest.raises(ConfigError, match="stop_s"):
        SafetyConfig(stale_s=2.0, stop_s=1.0)
    with pytest.raises(ConfigError, match="joint_margin_rad"):
        SafetyConfig(joint_margin_rad=-1)


# ------------------------------------------------------------------ joint layout


def test_joint_limit_clamped_and_counted():
    s = started(JOINT)
    q = JOINT.q_home()
    q[6] = 2.88  # wrist rotation: moves no TCP, so the workspace check stays quiet
    s._prev, s._prev_prev = q.copy(), q - np.eye(7)[6] * 0.04  # already turning at 0.8 rad/s
    a = np.append(q, 0.5)
    a[6] = 2.96  # 1.6 rad/s, within velocity/accel limits, but past 2.9671 - 0.05
    d = s.filter(a, state(JOINT, q=q), 0.05)
    assert kinds(d) == ["joint_limit"]
    assert d.command[6] == pytest.approx(2.9671 - 0.05)
    assert s.counts["joint_limit"] == 1


def test_velocity_accel_and_step_caps():
    s = started(JOINT)
    a = np.append(JOINT.q_home(), 0.0)
    a[0] += 1.0  # 1 rad in one 50 ms tick: far above every cap
    d = s.filter(a, state(JOINT), 0.05)
    assert "accel_cap" in kinds(d)
    dq = d.command[0] - JOINT.q_home()[0]
    assert 0 < dq <= JOINT.qdd_max_rad_s2[0] * 0.05**2 + 1e-6  # accel-limited from standstill
    s2 = started(JOINT, max_joint_step_rad=0.01, accel_scale=1.0)
    s2._prev_prev = s2._prev - 0.1  # moving fast already, so only the step cap binds
    d2 = s2.filter(np.append(JOINT.q_home() + 0.1, 0.0), state(JOINT), 0.05)
    assert "step_cap" in kinds(d2)
    assert np.all(np.abs(d2.command[:7] - JOINT.q_home()) <= 0.01 + 1e-6)


def test_workspace_by_fk_refuses_leaving_and_allows_recovery():
    s = started(JOINT, max_joint_step_rad=3.0)
    q_in = JOINT.q_home()
    q_up = np.array([0.0, 0.0, 0.0, -0.3, 0.0, 0.3, 0.0])  # nearly straight up: TCP above the box
    worse = np.array([0.0, 0.0, 0.0, -0.1, 0.0, 0.1, 0.0])  # straighter still: TCP higher
    assert 0 < s._box_distance(q_up) < s._box_distance(worse) and s._box_distance(q_in) == 0
    s._prev = s._prev_prev = q_up.copy()  # outside, e.g. after a manual move
    back = q_up + 0.004 * (q_in - q_up)  # a small step, within the acceleration cap
    d = s.filter(np.append(back, 0.0), state(JOINT, q=q_up), 0.05)
    assert kinds(d) == ["workspace_outside"]  # recovery allowed, and reported
    np.testing.assert_allclose(d.command[:7], back, atol=1e-6)
    s._prev = s._prev_prev = q_up.copy()
    d = s.filter(np.append(worse, 0.0), state(JOINT, q=q_up), 0.10)
    assert "workspace_reject" in kinds(d)  # (its acceleration was capped first)
    np.testing.assert_allclose(d.command[:7], q_up, atol=1e-6)  # kept the last target


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, 8, elements=st.floats(-4, 4, allow_nan=False)))
def test_joint_nothing_changes_silently(a):
    s = started(JOINT)
    d = s.filter(a, state(JOINT), 0.05)
    assert d.kind == "act"
    if not np.allclose(d.command, a.astype(np.float32), atol=1e-6):
        assert d.interventions, "action changed without an intervention"
    lo, hi = JOINT.limits()
    assert np.all(d.command[:7] >= lo + 0.05 - 1e-6) and np.all(d.command[:7] <= hi - 0.05 + 1e-6)
    assert 0.0 <= d.command[7] <= 1.0


# ------------------------------------------------------------------ end-effector layout


def test_ee_table_plane_and_workspace_clip():
    s = started(EE, ee_accel_max_m_s2=100.0, max_ee_step_m=0.5, ee_speed_max_m_s=3.0)
    ee = np.array([0.5, 0.0, 0.02])
    d = s.filter(np.array([0.0, 0.0, -0.05, 0.0, 1.0]), state(EE, ee=ee), 0.05)
    assert "table_plane" in kinds(d)
    assert ee[2] + d.command[2] == pytest.approx(EE.table_z_m + 0.005)
    s._prev_delta[:] = 0
    ee2 = np.array([0.79, 0.0, 0.3])
    d2 = s.filter(np.array([0.05, 0.0, 0.0, 0.0, 1.0]), state(EE, ee=ee2), 0.1)
    assert "workspace_clip" in kinds(d2)
    assert ee2[0] + d2.command[0] == pytest.approx(0.80)


def test_ee_caps_and_gripper():
    s = started(EE)
    d = s.filter(np.array([0.2, 0.0, 0.0, 0.5, 1.7]), state(EE), 0.05)
    assert {"gripper_range", "accel_cap", "yaw_cap"} <= set(kinds(d))
    assert np.linalg.norm(d.command[:3]) <= 10.0 * 0.05**2 + 1e-7  # accel from standstill
    assert d.command[3] == pytest.approx(0.2) and d.command[4] == 1.0
    s2 = started(EE, ee_accel_max_m_s2=100.0)
    d2 = s2.filter(np.array([0.2, 0.0, 0.0, 0.0, 0.0]), state(EE), 0.05)
    assert "step_cap" in kinds(d2)
    assert np.linalg.norm(d2.command[:3]) == pytest.approx(min(0.04, 0.6 * 0.05), rel=1e-5)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, 5, elements=st.floats(-1, 1, allow_nan=False)),
    arrays(np.float64, 3, elements=st.floats(-0.5, 1.0, allow_nan=False)),
)
def test_ee_target_stays_in_box_or_moves_toward_it(a, ee):
    s = started(EE, ee_accel_max_m_s2=100.0)
    d = s.filter(a, state(EE, ee=ee), 0.05)
    if not np.allclose(d.command, a.astype(np.float32), atol=1e-6):
        assert d.interventions
    lo, hi = s.box_lo, s.box_hi
    target = ee + d.command[:3]
    inside = np.all(ee >= lo) and np.all(ee <= hi)
    if inside:
        assert np.all(target >= lo - 1e-6) and np.all(target <= hi + 1e-6)
    assert np.linalg.norm(d.command[:3]) <= s.ee_step_m + 1e-6


# ------------------------------------------------------------------ supervisor state machine


def test_invalid_in_a_row_leads_to_protective_stop():
    s = started(EE, max_invalid_in_row=3)
    good = np.array([0.01, 0, 0, 0, 0.0])
    s.filter(good, state(EE), 0.0)
    for i in range(2):
        d = s.filter(np.full(5, np.nan), state(EE), 0.05 * (i + 1))
        assert d.kind == "hold" and "invalid_action" in kinds(d)
    d = s.filter(np.zeros(3), state(EE), 0.15)  # wrong shape counts too
    assert "protective_stop" in kinds(d)
    for _ in range(20):
        d = s.filter(good, state(EE), 0.2)
        if d.mode is SafetyMode.FAULT:
            break
    assert d.mode is SafetyMode.FAULT and "ignored_latched" in kinds(d)
    assert np.allclose(d.command[:4], 0)  # standstill
    assert s.counts["invalid_action"] == 3


def test_valid_action_resets_the_invalid_count():
    s = started(EE, max_invalid_in_row=2)
    for t in range(10):
        s.filter(np.full(5, np.nan) if t % 2 else np.zeros(5), state(EE), t * 0.05)
    assert s.mode is SafetyMode.RUNNING


def test_watchdog_stale_then_controlled_stop():
    s = started(JOINT, stale_s=0.2, stop_s=0.5)
    for t in range(5):  # not armed yet: waits forever without a fault
        assert kinds(s.filter(None, state(JOINT), t * 0.05)) == ["wait_first_plan"]
    a = np.append(JOINT.q_home(), 0.0)
    a[0] += 0.003
    s.filter(a, state(JOINT), 0.25)  # moving: arms the watchdog
    s.filter(a + np.eye(8)[0] * 0.003, state(JOINT), 0.30)
    seen, t = [], 0.30
    while s.mode is SafetyMode.RUNNING or s.mode is SafetyMode.STOPPING:
        t += 0.05
        d = s.filter(None, state(JOINT), t)
        seen += kinds(d)
        assert t < 2.0
    assert "watchdog_stale" in seen and "watchdog_stop" in seen
    assert seen.index("watchdog_stale") < seen.index("watchdog_stop")
    assert s.mode is SafetyMode.FAULT


def test_no_first_plan_is_a_fault():
    s = started(EE, first_plan_s=1.0)
    t = 0.0
    while s.mode is not SafetyMode.FAULT:
        t += 0.05
        s.filter(None, state(EE), t)
        assert t < 2.0
    assert s.counts["watchdog_stop"] == 1 and 1.0 <= t < 1.2


def test_estop_latches_and_reset_refuses_old_plans():
    s = started(EE)
    s.estop("button")
    d = s.filter(np.zeros(5), state(EE), 0.1)
    assert d.command is None and d.kind == "none" and "ignored_latched" in kinds(d)
    s.reset(state(EE), now_s=1.0)
    assert s.mode is SafetyMode.RUNNING
    d = s.filter(np.zeros(5), state(EE), 1.05, t_obs_s=0.9)  # planned before the reset
    assert "pre_reset_action" in kinds(d) and d.kind == "hold"
    d = s.filter(np.zeros(5), state(EE), 1.10, t_obs_s=1.05)
    assert d.kind == "act"


def test_a_float32_yaw_at_the_cap_is_not_an_intervention():
    """dyaw 0.2 rad as float32 is 3e-9 above the 0.2 cap: clipped, but not counted (the scripted
    expert's turns at full rate used to log 2-18 yaw_cap interventions per episode)."""
    s = started(EE, ee_accel_max_m_s2=100.0)
    d = s.filter(np.array([0.0, 0.0, 0.0, 0.2, 0.0], np.float32), state(EE), 0.05)
    assert "yaw_cap" not in kinds(d) and abs(d.command[3]) <= 0.2
    d = s.filter(np.array([0.0, 0.0, 0.0, 0.2001, 0.0], np.float32), state(EE), 0.05)
    assert "yaw_cap" in kinds(d) and d.command[3] == pytest.approx(0.2)
