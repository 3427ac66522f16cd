"""sim.robot_model: the scalar forward kinematics and the one-solve IK against plain reference
implementations written from their definitions (4x4 chain products, explicit pseudo-inverse)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.robot_model as rm


def _fk_reference(q):
    """TCP pose and geometric Jacobian from 4x4 products over the URDF chain."""
    arm, T_7_tcp = rm._chain()
    T = np.eye(4)
    origins, axes = [], []
    for joint, qi in zip(arm, q):
        T = T @ joint.origin_T
        origins.append(T[:3, 3].copy())
        axes.append(T[:3, 2].copy())
        c, s = np.cos(qi), np.sin(qi)
        T = T @ np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    T = T @ T_7_tcp
    p = T[:3, 3]
    J = np.vstack([np.stack([np.cross(a, p - o) for a, o in zip(axes, origins)], 1), np.stack(axes, 1)])
    return p, T[:3, :3], J


def _ik_reference(q, target_p, target_R, damping=0.05, iters=3, rot_weight=0.5):
    lo, hi, _ = rm.arm_limits()
    q = np.array(q, float)
    for _ in range(iters):
        p, R, J = _fk_reference(q)
        e_rot = 0.5 * sum(np.cross(R[:, k], target_R[:, k]) for k in range(3))
        e = np.concatenate([target_p - p, rot_weight * e_rot])
        Jw = J.copy()
        Jw[3:] *= rot_weight
        pinv = Jw.T @ np.linalg.inv(Jw @ Jw.T + damping**2 * np.eye(6))
        null = (np.eye(7) - pinv @ Jw) @ (0.05 * (np.array(rm.Q_HOME_RAD) - q))
        q = np.clip(q + pinv @ e + null, lo, hi)
    return q


@pytest.fixture(scope="module")
def poses():
    rng = np.random.default_rng(7)
    lo, hi, _ = rm.arm_limits()
    return [rng.uniform(lo, hi) for _ in range(50)]


def test_fk_matches_the_4x4_chain(poses):
    for q in poses:
        for got, want in zip(rm.fk(q), _fk_reference(q)):
            np.testing.assert_allclose(got, want, atol=1e-12)
    p, R, J = rm.fk(list(poses[0]))  # plain sequences work too
    assert p.shape == (3,) and R.shape == (3, 3) and J.shape == (6, 7)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)


def test_fk_jacobian_is_the_derivative_of_the_tcp_position(poses):
    eps = 1e-7
    for q in poses[:10]:
        _, _, J = rm.fk(q)
        num = np.stack([(rm.fk(q + eps * np.eye(7)[i])[0] - rm.fk(q - eps * np.eye(7)[i])[0]) / (2 * eps)
                        for i in range(7)], 1)
        np.testing.assert_allclose(J[:3], num, atol=1e-6)


def test_ik_step_matches_the_pseudo_inverse_form_and_converges():
    rng = np.random.default_rng(3)
    for _ in range(30):
        q = np.array(rm.Q_HOME_RAD) + rng.normal(0, 0.3, 7)
        target = rng.uniform((0.3, -0.3, 0.05), (0.7, 0.3, 0.4))
        R = rm.down_rotation(rng.uniform(-1.5, 1.5))
        np.testing.assert_allclose(rm.ik_step(q, target, R), _ik_reference(q, target, R), atol=1e-10)
        np.testing.assert_allclose(rm.ik_step(q, target, R, fk_q=rm.fk(q)), rm.ik_step(q, target, R), atol=0)
    q = np.array(rm.Q_HOME_RAD)
    target = rm.fk(q)[0] + np.array([0.03, -0.02, -0.04])
    for _ in range(10):
        q = rm.ik_step(q, target, rm.down_rotation(0.2))
    assert np.linalg.norm(rm.fk(q)[0] - target) < 1e-4
    assert abs(rm.tcp_yaw(rm.fk(q)[1]) - 0.2) < 1e-3


def test_arm_limits_are_shared_read_only():
    lo, hi, vel = rm.arm_limits()
    assert np.all(lo < hi) and np.all(vel > 0) and lo.shape == (7,)
    with pytest.raises(ValueError):
        lo[0] = 0.0
