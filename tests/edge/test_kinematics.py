"""edge.kinematics: the one FK/Jacobian/IK implementation (used by RobotSpec.fk and the safety layer,
the firmware-bridge driver, and sim.robot_model).

* Golden values: ``FK_GOLDEN``/``IK_GOLDEN`` were produced by ``sim.robot_model`` *before* the algorithm
  moved here (its own scalar-float fk and ik_step). The sim's trajectories depend on them bit for bit,
  so fk must reproduce them exactly. ik_step goes through BLAS/LAPACK (matmul, solve), whose kernels
  differ between CPUs, so it is held to 1e-12 (a changed algorithm - damping, gain, limits - moves the
  result by far more; on the machine that produced the values it is exact).
* The chain built from the robot spec YAML agrees with the one built from the URDF.
* Jacobian = finite differences of the pose; ik_step reduces the pose error; bad chains are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from edge.config import ConfigError
from edge.kinematics import SerialChain, down_rotation, origin_transform, tcp_yaw
from edge.robot_spec import load_robot_spec

FK_GOLDEN = [  # (q, p, R, J)
    (
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.088, -1.7431856342122419e-12, 0.821],
        [
            [0.7071067811868645, 0.7071067811862305, 0.0],
            [0.7071067811862305, -0.7071067811868645, -9.793177720293495e-12],
            [-6.92482237538144e-12, 6.924822375387649e-12, -1.0],
        ],
        [
            [1.7431856342122419e-12, 0.48799999999999993, 1.9586355440586966e-13, -0.17199999999999993, 2.076153676702221e-12, 0.21199999999999997, -4.0389678347315804e-28],
            [0.088, 4.3089981969291376e-13, 0.088, 2.6931238730807066e-14, 0.088, 4.3089981969291376e-13, 0.0],
            [-0.0, -0.088, -0.0, 0.005499999999999991, -0.0, 0.088, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, -1.0, 0.0, -1.0, -9.793177720293495e-12],
            [1.0, 4.8965888601467475e-12, 1.0, 4.8965888601467475e-12, 1.0, 4.8965888601467475e-12, -1.0],
        ],
    ),
    (
        [0.0, -0.3, 0.0, -2.3, 0.0, 2.0, 0.785398],
        [0.4569332009640802, -5.3236509890326255e-12, 0.3624834000922682],
        [
            [0.9999999999999867, 1.6339410585652914e-07, 1.1102228829138644e-16],
            [1.6339410585652914e-07, -0.9999999999999867, -9.355780020688294e-12],
            [1.094935960753368e-16, 9.355780020706309e-12, -1.0],
        ],
        [
            [5.3236509890326255e-12, 0.029483400092268186, 3.614112787612187e-12, 0.2967833475209839, 1.057995719791746e-12, 0.21199999999999997, 4.0389678347315804e-28],
            [0.4569332009640802, 2.23741402167191e-12, 0.4452379004622953, 1.24360368849884e-12, 0.15615013287089596, -2.2113654147208407e-13, 2.3536725117773923e-17],
            [-0.0, -0.4569332009640802, 1.0160507341882684e-12, 0.471502325916201, -1.2093240704823774e-12, 0.08799999999999997, -2.2020442260930156e-28],
            [0.0, 0.0, -0.29552020666133955, -2.8940819037723596e-12, 0.9092974268256817, -2.894081903772359e-12, 1.1102228829138644e-16],
            [0.0, 1.0, 2.186988498026007e-13, -1.0, -9.383848383288069e-12, -1.0, -9.355780020688294e-12],
            [1.0, 4.8965888601467475e-12, 0.955336489125606, 4.459191160541546e-12, -0.4161468365471423, 4.459191160541546e-12, -1.0],
        ],
    ),
    (
        [0.4, -0.7, 0.3, -2.0, 0.5, 1.6, -0.4],
        [0.19204694158867555, 0.3377490036443084, 0.6254396884688183],
        [
            [-0.32487055429814476, 0.9456607060190498, 0.013599707407460358],
            [0.8708936762895054, 0.29351618972294846, 0.3941984918406875],
            [0.3687862898061245, 0.13990738172832146, -0.918924696038233],
        ],
        [
            [-0.3377490036443084, 0.2693547901453299, -0.3316890851124627, -0.07062903672447345, -0.13744040111406378, 0.15868671545914373, 1.3877787807814457e-17],
            [0.19204694158867555, 0.11388137870972576, 0.3204087228205328, 0.06350987130317966, 0.14584126711352105, 0.0923790627208569, 6.5052130349130266e-18],
            [0.0, -0.30841260403044446, -0.1522291750860938, 0.47942905519465956, 0.06052863585382815, 0.13774118885651007, 3.2526065174565133e-18],
            [0.0, -0.3894183423086505, -0.5933637833618358, 0.5802095800579348, 0.7542429345713048, 0.6565413728442403, 0.013599707407460358],
            [0.0, 0.9210609940028851, -0.2508701838489537, -0.7919043809453671, 0.6106346924070409, -0.6966716114827171, 0.3941984918406875],
            [1.0, 4.8965888601467475e-12, 0.7648421872844885, 0.19037934407001772, 0.2413355922325281, -0.2891402626717263, -0.918924696038233],
        ],
    ),
    (
        [-1.2, 0.9, -2.1, -0.8, 2.3, 3.1, 2.5],
        [-0.22098381803028833, -0.5209300390345395, 1.0367026981445404],
        [
            [-0.7507535111174516, 0.48751150750814765, -0.4457596836771491],
            [-0.19274847965806985, -0.8070994392359625, -0.558066769100703],
            [-0.6318363626243122, -0.33305108501869224, 0.6998998397153341],
        ],
        [
            [0.5209300390345395, 0.25499212952138295, -0.18995191045853085, 0.5193156327248275, -0.06430512758066079, -0.040249520188142734, 8.326672684688674e-17],
            [-0.22098381803028833, -0.6558784195723905, -0.33710794090977436, -0.2899003072190889, -0.005940529990170015, 0.22430482055705744, -4.163336342344337e-17],
            [0.0, -0.40545195735748657, -0.30920153042684584, 0.08079484132622765, -0.04569203176348977, 0.02748315119287649, 6.938893903907228e-18],
            [0.0, 0.9320390859672263, 0.28384457999549406, 0.27610254212902874, -0.4609622827354342, -0.8128695346547187, -0.4457596836771491],
            [0.0, 0.3623577544766736, -0.7300912968620602, 0.6830480113633448, -0.5232222296281558, -0.07509316955818657, -0.558066769100703],
            [1.0, 4.8965888601467475e-12, 0.6216099682706644, 0.6761751255425387, 0.7167651444638465, -0.5775847431467754, 0.6998998397153341],
        ],
    ),
]
IK_GOLDEN = [  # (q, target position, target yaw, keyword arguments, ik_step result)
    ([0.0, -0.3, 0.0, -2.3, 0.0, 2.0, 0.785398], [0.5, 0.05, 0.3], 0.3, {},
     [0.07191141659809916, -0.10506141018975215, 0.02732408366534049, -2.2624070070981723, 0.0033244588746899114, 2.1573768797366286, 0.5827471207193748]),
    ([0.4, -0.7, 0.3, -2.0, 0.5, 1.6, -0.4], [0.45, -0.1, 0.2], -0.5, {},
     [0.4217169947888945, -0.40442701484863636, -0.17918378475523095, -3.036393862507222, 0.7106936194661176, 3.195620005451994, 0.2200310414578644]),
    ([0.1, -0.2, 0.05, -2.4, 0.1, 2.1, 0.6], [0.6, 0.2, 0.1], 1.0, {"damping": 0.1, "iters": 5, "rot_weight": 0.3},
     [0.2047148964461219, 0.555899074361975, 0.12331263583980642, -1.9056518392849198, -0.10721198219538663, 2.456815350021313, 0.18124842544920033]),
]


@pytest.fixture(scope="module")
def urdf_chain() -> SerialChain:
    pytest.importorskip("pybullet_data")
    from sim import robot_model

    return robot_model.serial_chain()


@pytest.fixture(scope="module")
def spec_chain() -> SerialChain:
    return load_robot_spec("panda").kinematics


def _random_q(chain: SerialChain, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(chain.q_min, chain.q_max) for _ in range(n)]


def _rot_error(R: np.ndarray, target_R: np.ndarray) -> float:
    """Angle (rad) between two rotations."""
    return float(np.arccos(np.clip((np.trace(target_R @ R.T) - 1.0) / 2.0, -1.0, 1.0)))


def test_urdf_chain_reproduces_the_pre_refactor_fk_bit_for_bit(urdf_chain):
    from sim import robot_model

    for q, p, R, J in FK_GOLDEN:
        for got in (urdf_chain.fk(np.array(q)), robot_model.fk(np.array(q)), urdf_chain.fk(q), urdf_chain.fk(tuple(q))):
            np.testing.assert_array_equal(got[0], p)
            np.testing.assert_array_equal(got[1], R)
            np.testing.assert_array_equal(got[2], J)
        pose = urdf_chain.fk_pose(np.array(q))
        np.testing.assert_array_equal(pose[0], p)
        np.testing.assert_array_equal(pose[1], R)


def test_urdf_chain_reproduces_the_pre_refactor_ik_step(urdf_chain):
    from sim import robot_model

    for q, target, yaw, kw, want in IK_GOLDEN:
        q, target = np.array(q), np.array(target)
        for got in (urdf_chain.ik_step(q, target, down_rotation(yaw), **kw),
                    robot_model.ik_step(q, target, robot_model.down_rotation(yaw), **kw),
                    urdf_chain.ik_step(q, target, down_rotation(yaw), fk_q=urdf_chain.fk(q), **kw)):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_spec_chain_agrees_with_the_urdf_chain(urdf_chain, spec_chain):
    assert spec_chain.n_joints == urdf_chain.n_joints == 7
    np.testing.assert_allclose(spec_chain.q_min, urdf_chain.q_min, atol=1e-9)
    np.testing.assert_allclose(spec_chain.q_max, urdf_chain.q_max, atol=1e-9)
    np.testing.assert_allclose(spec_chain.q_home, urdf_chain.q_home, atol=1e-9)
    for q in _random_q(spec_chain, 200, seed=1):
        for a, b in zip(spec_chain.fk(q), urdf_chain.fk(q), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    rng = np.random.default_rng(2)
    for q in _random_q(spec_chain, 20, seed=3):
        target, R = rng.uniform((0.3, -0.3, 0.05), (0.7, 0.3, 0.5)), down_rotation(rng.uniform(-1.5, 1.5))
        np.testing.assert_allclose(spec_chain.ik_step(q, target, R), urdf_chain.ik_step(q, target, R), rtol=0, atol=1e-9)


def test_robot_spec_fk_is_the_chain(spec_chain):
    spec = load_robot_spec("panda")
    assert spec.kinematics is spec.kinematics  # cached per spec instance
    for q in _random_q(spec_chain, 20, seed=4):
        p, R = spec.fk(q)
        p2, R2, _ = spec.kinematics.fk(q)
        np.testing.assert_array_equal(p, p2)
        np.testing.assert_array_equal(R, R2)
        assert spec.tcp_yaw(q) == tcp_yaw(R)
    with pytest.raises(ValueError, match="got 6 joint positions"):
        spec.fk(np.zeros(6))


def test_spec_with_a_bad_chain_is_refused_at_load():
    with pytest.raises(ConfigError, match="kinematic chain"):
        load_robot_spec("panda", ["tcp_xyz_m=[.nan, 0.0, 0.1]"])


def test_jacobian_matches_finite_differences(spec_chain):
    eps = 1e-6
    for q in _random_q(spec_chain, 20, seed=5):
        _, R, J = spec_chain.fk(q)
        assert J.shape == (6, 7)
        for i in range(7):
            dq = np.zeros(7)
            dq[i] = eps
            (p1, R1, _), (p0, R0, _) = spec_chain.fk(q + dq), spec_chain.fk(q - dq)
            np.testing.assert_allclose((p1 - p0) / (2 * eps), J[:3, i], atol=1e-7)
            W = (R1 - R0) / (2 * eps) @ R.T  # skew matrix of the angular velocity per unit dq_i
            np.testing.assert_allclose((W[2, 1], W[0, 2], W[1, 0]), J[3:, i], atol=1e-7)


def test_ik_step_reduces_the_pose_error_and_converges(spec_chain):
    rng = np.random.default_rng(6)
    for _ in range(30):
        q = spec_chain.q_home + rng.normal(0.0, 0.2, 7)
        p0, _ = spec_chain.fk_pose(q)
        target = p0 + rng.uniform(-0.05, 0.05, 3)
        target_R = down_rotation(rng.uniform(-1.0, 1.0))
        p, R = spec_chain.fk_pose(q)
        q1 = spec_chain.ik_step(q, target, target_R)
        p1, R1 = spec_chain.fk_pose(q1)
        err0 = np.linalg.norm(target - p) + 0.5 * _rot_error(R, target_R)
        err1 = np.linalg.norm(target - p1) + 0.5 * _rot_error(R1, target_R)
        assert err1 < err0
        assert np.all(q1 >= spec_chain.q_min) and np.all(q1 <= spec_chain.q_max)
    q = spec_chain.q_home.copy()
    target = spec_chain.fk_pose(q)[0] + np.array([0.03, -0.02, -0.04])
    for _ in range(10):
        q = spec_chain.ik_step(q, target, down_rotation(0.2))
    p, R = spec_chain.fk_pose(q)
    assert np.linalg.norm(p - target) < 1e-4
    assert abs(tcp_yaw(R) - 0.2) < 1e-3
    np.testing.assert_allclose(R, down_rotation(0.2), atol=1e-3)


def test_a_planar_two_link_chain_has_the_textbook_fk():
    """Generic n: two unit links in the x-y plane, TCP at the end of the second."""
    link = origin_transform((1.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    chain = SerialChain([np.eye(4), link], link, (-3.0, -3.0), (3.0, 3.0), (0.0, 0.5))
    a, b = 0.3, 0.9
    p, R, J = chain.fk([a, b])
    np.testing.assert_allclose(p, [np.cos(a) + np.cos(a + b), np.sin(a) + np.sin(a + b), 0.0], atol=1e-15)
    assert abs(tcp_yaw(R) - (a + b)) < 1e-15
    assert J.shape == (6, 2)
    np.testing.assert_allclose(J[:2], [[-np.sin(a) - np.sin(a + b), -np.sin(a + b)],
                                       [np.cos(a) + np.cos(a + b), np.cos(a + b)]], atol=1e-15)
    np.testing.assert_allclose(J[5], [1.0, 1.0])
    q = chain.ik_step(np.array([a, b]), np.array([1.2, 1.0, 0.0]), R, rot_weight=0.0)
    assert np.linalg.norm(chain.fk_pose(q)[0] - [1.2, 1.0, 0.0]) < np.linalg.norm(p - [1.2, 1.0, 0.0])


def test_refuses_what_it_cannot_model():
    eye = [np.eye(4)] * 2
    lim = {"q_min": (-1.0, -1.0), "q_max": (1.0, 1.0), "q_home": (0.0, 0.0)}
    SerialChain(eye, np.eye(4), **lim, axes=[(0, 0, 1), (0.0, 0.0, 1.0)])
    with pytest.raises(ValueError, match=r"joint b: axis \[0.0, 1.0, 0.0\] is not the local z axis"):
        SerialChain(eye, np.eye(4), **lim, joint_names=("a", "b"), axes=[(0, 0, 1), (0, 1, 0)])
    with pytest.raises(ValueError, match="axis"):
        SerialChain(eye, np.eye(4), **lim, axes=[(0, 0, -1), (0, 0, 1)])  # reversed axis: not modelled
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        SerialChain([np.eye(3)] * 2, np.eye(4), **lim)
    skewed = np.eye(4)
    skewed[0, 1] = 0.5
    with pytest.raises(ValueError, match="not a proper rotation"):
        SerialChain(eye, skewed, **lim)
    mirrored = np.diag([1.0, 1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="not a proper rotation"):
        SerialChain([mirrored, np.eye(4)], np.eye(4), **lim)
    bottom = np.eye(4)
    bottom[3, 0] = 1.0
    with pytest.raises(ValueError, match="last row"):
        SerialChain(eye, bottom, **lim)
    with pytest.raises(ValueError, match="non-finite"):
        SerialChain([np.full((4, 4), np.nan), np.eye(4)], np.eye(4), **lim)
    with pytest.raises(ValueError, match="q_min: expected 2"):
        SerialChain(eye, np.eye(4), q_min=(-1.0,), q_max=(1.0, 1.0), q_home=(0.0, 0.0))
    with pytest.raises(ValueError, match="q_min 1.0 >= q_max"):
        SerialChain(eye, np.eye(4), q_min=(-1.0, 1.0), q_max=(1.0, 1.0), q_home=(0.0, 1.0))
    with pytest.raises(ValueError, match="q_home"):
        SerialChain(eye, np.eye(4), q_min=(-1.0, -1.0), q_max=(1.0, 1.0), q_home=(0.0, 2.0))
    with pytest.raises(ValueError, match="at least one joint"):
        SerialChain([], np.eye(4), (), (), ())
    with pytest.raises(ValueError, match="got 3 joint positions"):
        SerialChain(eye, np.eye(4), **lim).fk([0.0, 0.0, 0.0])


def test_exposed_arrays_are_read_only(spec_chain):
    for a in (spec_chain.q_min, spec_chain.q_max, spec_chain.q_home, spec_chain.tcp, *spec_chain.joint_origins):
        with pytest.raises(ValueError):
            a[0] = 1.0


def test_sim_urdf_with_a_non_z_axis_is_refused(urdf_chain):
    """sim.robot_model passes the URDF's axes; the chain refuses any that is not local z."""
    from sim import robot_model

    arm, tcp = robot_model._chain()
    with pytest.raises(ValueError, match="panda_joint3: axis"):
        SerialChain([j.origin_T for j in arm], tcp, urdf_chain.q_min, urdf_chain.q_max, urdf_chain.q_home,
                    joint_names=robot_model.ARM_JOINTS, axes=[(0, 0, 1)] * 2 + [(1, 0, 0)] + [(0, 0, 1)] * 4)
