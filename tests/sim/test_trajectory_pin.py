"""The simulated trajectories are pinned: six fixed actions from a fixed seed must end in the same
state as before the step-path speed-ups (docs/speed.md, "Python step path"). The shipped VLA's
measured success rates depend on exact trajectories, so a change that moves these numbers is a
physics/controller change and needs the expert table and the VLA gate re-measured.

The expected values were printed by the code before those speed-ups (commit 80697d6), on which
they are bit-identical; the tolerance (1e-10 absolute) only allows for another machine's BLAS/SIMD
(one machine put PyBullet's push joints 1.9e-12 off; any change to the physics or controller moves
these states by orders of magnitude more).
The fast paths that replaced numpy calls are also checked against the numpy formulas, exactly.
Those pins run at a 2 ms physics step; PyBullet's default step is now 1/300 s, pinned separately
(values printed by the commit that changed it, after the expert table was re-measured).
"""

import math

import numpy as np
import pytest

import sim
from sim import robot_model as rm
from sim.env import _rot_to_quat, _rot_to_quat_floats

ACTIONS = [(0.01, -0.02, -0.01, 0.1, 0.0), (0.05, 0.0, -0.03, -0.3, 0.3), (-0.02, 0.03, 0.0, 0.2, 1.0),
           (0.0, 0.0, -0.05, 0.0, 1.2), (0.03, -0.03, 0.02, -0.1, 0.5), (-0.01, 0.01, 0.01, 0.05, -0.2)]

# (sim, task) -> state after reset(seed=3) and ACTIONS, printed by commit 80697d6
EXPECTED = {
    ("mujoco", "stack"): {
        "q": [-0.009609691701136753, -0.13620070450603816, -0.014911344912916645, -2.2511514365700496,
              -0.004454214172431832, 2.1080069133491697, 0.7023758483686741],
        "qd": [-0.015912742426211136, -0.38323811237164057, -0.006383584439386868, 0.2153719713395059,
               0.17200376026368458, -0.20936418161816112, 0.581914597122909],
        "gw": 0.056931734022796054,
        "poses": {
            "green": [0.5480756479341609, -0.16234854310384034, 0.020451540908906236, 0.9985160799482188,
                      5.121273857237096e-17, -2.6085071762716798e-17, -0.05445767241484312],
            "red": [0.5152879268520243, -0.008379480743666443, 0.022764498995124758, 0.9856712574573504,
                    -1.96646905750576e-15, 7.651579511381629e-16, -0.16867771702997889],
            "yellow": [0.4551425612201573, 0.09383086056368584, 0.02307940954993844, 0.9243267575339718,
                       -9.959812478896013e-16, 7.128583679874723e-16, -0.38160194615165965]},
        "target": [0.4969332000700105, -0.009999999781806233, 0.3224834009863379],
        "yaw": 0.05000016465783119, "grip": 0.0,
    },
    ("mujoco", "push"): {
        "q": [-0.03363255268975313, 0.32393943899952815, 0.0001890389647544392, -2.756952584949972,
              -0.014066729898397027, 3.082505231528224, 0.7529587784809318],
        "qd": [0.07181101419304536, -0.054350501854382435, 0.06363700512066617, -0.06883825039564204,
               0.08473649476762651, 0.07355125796966908, 0.44731747552751944],
        "gw": 0.00012942675506436528,
        "poses": {
            "green": [0.6106166397933166, 0.15051596489754154, 0.02175322457544776, 0.9999491825518051,
                      -2.2302323095365e-15, -5.018965453673438e-16, -0.010081285333565587],
            "red": [0.631737763896989, -0.14572895742811698, 0.02313328302164912, 0.9703365039265351,
                    -6.728932810092761e-16, 2.1486015575556498e-15, 0.24175828661625887],
            "yellow": [0.4453830527926825, 0.15760874264288566, 0.022047148164237248, 0.9851276198975477,
                       6.211240625548767e-17, 8.961515006670482e-18, -0.17182424891438539]},
        "target": [0.37042410027816725, -0.009999999820288742, 0.015],
        "yaw": 4.956838453423545e-11, "grip": 1.0,
    },
    ("pybullet", "stack"): {
        "q": [-0.007082554040756802, -0.14031932045897802, -0.01378330121221433, -2.245911555399871,
              -0.0022502439080462023, 2.1034264200405377, 0.7190695922044743],
        "qd": [0.03686147918686438, -0.26025017565661657, 0.03578446984349763, -0.013496665470788517,
               0.0007120140080837094, -0.12571719704956086, -0.1115631723636101],
        "gw": 0.05746233101261945,
        "poses": {
            "green": [0.5480749115239468, -0.1623484587140407, 0.020557414156382833, 0.9985160398152868,
                      1.261589147718574e-06, -1.7896551989510896e-05, -0.05445840531743733],
            "red": [0.515287255947374, -0.008379304434623567, 0.022923447271533785, 0.9856711382180264,
                    -4.2647866525165404e-07, -1.5269493710131404e-05, -0.16867841311395143],
            "yellow": [0.4551414958487183, 0.09383162329948434, 0.02323198373915163, 0.9243268811835014,
                       -6.597283067591552e-06, -2.702448563433276e-05, -0.3816016456302755]},
        "target": [0.4969332000700105, -0.009999999781806233, 0.3224834009863379],
        "yaw": 0.05000016465783119, "grip": 0.0,
    },
    ("pybullet", "push"): {
        "q": [-0.03324487637224462, 0.324428493275936, 0.00193398590472464, -2.7585699275838196,
              -0.01122971725824913, 3.0819050602191846, 0.7653678073083996],
        "qd": [0.09940117622135462, -0.0421541479993233, -0.00302222379955132, -0.1072277029447163,
               0.016487397457389683, 0.06739563092771497, 0.07038407729388199],
        "gw": 1.6092175950830253e-06,
        "poses": {
            "green": [0.6106158969700992, 0.15051599782319774, 0.02190041093777231, 0.9999491774357017,
                      1.894702095628669e-06, -1.6812560637064592e-05, -0.010081778583735093],
            "red": [0.6317372406975618, -0.14572929648086963, 0.023289480495529192, 0.9703365555028132,
                    5.427626775288726e-06, -1.3100866962919357e-05, 0.24175807919042594],
            "yellow": [0.44538304916130134, 0.1576087439501247, 0.022160996140772066, 0.9851276198954236,
                       -1.4954419827181596e-08, -8.573884125508947e-08, -0.17182424892654163]},
        "target": [0.37042410027816725, -0.009999999820288742, 0.015],
        "yaw": 4.956838453423545e-11, "grip": 1.0,
    },
}
ATOL = 1e-10


# PyBullet at its default physics step (1/300 s, 15 substeps per control step) since the step was
# changed from 2 ms (docs/speed.md, "PyBullet physics step"); the 2 ms trajectories above stay pinned
# with physics_dt_s=0.002. Printed by the commit that changed the default.
EXPECTED_PYBULLET_DEFAULT_STEP = {
    ("pybullet", "push"): {
        "q": [-0.03295639949218484, 0.32434528836074816, 0.0018674253950750497, -2.7587333909130307,
              -0.010771044464236466, 3.0820262858854255, 0.765135220387641],
        "qd": [0.10170497147709094, -0.040562030196565305, -0.0034627583632584023, -0.10607077261330813,
               0.018682961649203248, 0.06559291608940743, 0.06859533083899147],
        "gw": 2.338650904587559e-06,
        "poses": {
            "green": [0.610615521160386, 0.150516032359102, 0.021900104630620976, 0.9999491722236983,
                      2.4634741346122957e-06, -2.555401023113896e-05, -0.01008227702776043],
            "red": [0.631736310458427, -0.14572989933119124, 0.023288556753997228, 0.9703366466830748,
                    1.5078244743940238e-05, -3.639461541595397e-05, 0.24175771042910757],
            "yellow": [0.4453830339374229, 0.15760874945717937, 0.022160979953720083, 0.9851276197998214,
                       -7.767884758048389e-08, -4.4535959493518485e-07, -0.17182424947408978]},
        "target": [0.37042410027816725, -0.009999999820288742, 0.015],
        "yaw": 4.956838453423545e-11, "grip": 1.0,
    },
    ("pybullet", "stack"): {
        "q": [-0.00693454057628375, -0.1407532962907695, -0.01378525215438, -2.2458798348486964,
              -0.0022542293309326623, 2.1031676218734043, 0.718895031732229],
        "qd": [0.0382771027243036, -0.255090152591686, 0.03616069448493798, -0.016562349910526894,
               0.0005289047466907164, -0.12015286867580445, -0.10978677002090802],
        "gw": 0.057534877900410925,
        "poses": {
            "green": [0.5480745388772869, -0.1623484003455157, 0.020557109122421712, 0.9985160072496385,
                      1.5214936864818215e-06, -2.719686844068042e-05, -0.054458998560893736],
            "red": [0.5152860633026102, -0.008378991035491666, 0.022922464667392204, 0.9856709256831803,
                    -1.183869311673291e-06, -4.2414542811192625e-05, -0.16867965041008237],
            "yellow": [0.45514095497677276, 0.09383200654848202, 0.023231469323872243, 0.9243269361410579,
                       -9.856867910281479e-06, -4.073784907923082e-05, -0.3816015112225769]},
        "target": [0.4969332000700105, -0.009999999781806233, 0.3224834009863379],
        "yaw": 0.05000016465783119, "grip": 0.0,
    },
}
# (sim, task, physics_dt_s) -> expected state; 0.0 = the engine's default step
CASES = {(s, t, 0.002): v for (s, t), v in EXPECTED.items()}
CASES |= {(s, t, 0.0): v for (s, t), v in EXPECTED_PYBULLET_DEFAULT_STEP.items()}
CASES[("mujoco", "stack", 0.0)] = EXPECTED[("mujoco", "stack")]  # MuJoCo's default is 2 ms


def _pybullet_available() -> bool:
    try:
        import sim.backends.pybullet_backend  # noqa: F401
    except ImportError:
        return False
    return True


def _reference_proprio(backend, q, qd) -> np.ndarray:
    """The observation's proprio as the code before the speed-ups assembled it."""
    p, R, _ = rm.fk(q)
    return np.concatenate([q, qd, [backend.gripper_width()], p, _reference_rot_to_quat(R)]).astype(np.float32)


def _reference_rot_to_quat(R: np.ndarray) -> np.ndarray:
    """sim.env._rot_to_quat as it was before the speed-ups (numpy scalars)."""
    w = np.sqrt(max(1e-12, 1.0 + R[0, 0] + R[1, 1] + R[2, 2])) / 2
    if w > 1e-3:
        return np.array([w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)])
    i = int(np.argmax(np.diag(R)))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = np.sqrt(max(1e-12, 1.0 + R[i, i] - R[j, j] - R[k, k])) * 2
    q = np.zeros(4)
    q[0] = (R[k, j] - R[j, k]) / s
    q[1 + i] = s / 4
    q[1 + j] = (R[j, i] + R[i, j]) / s
    q[1 + k] = (R[k, i] + R[i, k]) / s
    return q


@pytest.mark.parametrize("sim_name,task,dt", sorted(CASES))
def test_fixed_actions_reach_the_pinned_state(sim_name, task, dt):
    if sim_name == "pybullet" and not _pybullet_available():
        pytest.skip("PyBullet backend not available")
    env = sim.make_env(task, sim=sim_name, render_images=False, physics_dt_s=dt)
    try:
        env.reset(seed=3)
        b = env.unwrapped.backend
        for k, a in enumerate(ACTIONS):
            obs, r, term, trunc, info = env.step(np.array(a, np.float32))
            q, qd = b.arm_state()
            # the observation and info, exactly as the numpy formulas of the code before gave them
            np.testing.assert_array_equal(obs["proprio"], _reference_proprio(b, q, qd))
            for o in env.unwrapped.scene.objects:
                want = np.concatenate(b.object_pose(o.name))
                assert info["object_poses"][o.name].tobytes() == want.tobytes(), (k, o.name)
            assert (r, term, trunc, info["max_stage"]) == (0.0, False, False, 0)
        assert info["clip_counts"] == {"action_box": 3, "workspace": 0}
        want = CASES[(sim_name, task, dt)]
        np.testing.assert_allclose(q, want["q"], rtol=0, atol=ATOL)
        np.testing.assert_allclose(qd, want["qd"], rtol=0, atol=ATOL)
        assert b.gripper_width() == pytest.approx(want["gw"], rel=0, abs=ATOL)
        assert set(info["object_poses"]) == set(want["poses"])
        for name, pose in want["poses"].items():
            np.testing.assert_allclose(info["object_poses"][name], pose, rtol=0, atol=ATOL, err_msg=name)
        target, yaw, grip = env.unwrapped.commanded_target()
        np.testing.assert_allclose(target, want["target"], rtol=0, atol=ATOL)
        assert yaw == pytest.approx(want["yaw"], rel=0, abs=ATOL) and grip == want["grip"]
    finally:
        env.close()


def test_rot_to_quat_floats_equals_the_numpy_formula_bit_for_bit():
    rng = np.random.default_rng(0)
    mats = []
    for _ in range(2000):  # random rotations: mostly the w > 1e-3 branch
        qq = rng.normal(size=4)
        qq /= np.linalg.norm(qq)
        w, x, y, z = qq
        mats.append(np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                              [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                              [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]))
    for yaw in rng.uniform(-np.pi, np.pi, 2000):  # the gripper pointing down: the other branch
        mats.append(rm.down_rotation(float(yaw)))
    mats += [np.diag([-1.0, -1.0, 1.0]), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
             np.full((3, 3), np.nan), np.diag([np.nan, 1.0, -1.0]), np.diag([-1.0, np.nan, np.nan])]
    for R in mats:
        want = _reference_rot_to_quat(R)
        got = np.array(_rot_to_quat_floats(R))
        assert got.tobytes() == want.tobytes(), R
        assert _rot_to_quat(R).tobytes() == want.tobytes()


@pytest.mark.parametrize("sim_name", ["mujoco", "pybullet"])
def test_fast_paths_equal_the_numpy_calls_they_replace(sim_name):
    if sim_name == "pybullet" and not _pybullet_available():
        pytest.skip("PyBullet backend not available")
    from sim.tasks import _norm

    env = sim.make_env("stack", sim=sim_name, render_images=False)
    try:
        env.reset(seed=5)
        b = env.unwrapped.backend
        for _ in range(3):
            env.step(np.array([0.01, 0.01, -0.02, 0.1, 0.5], np.float32))
            for o in env.unwrapped.scene.objects:
                pos, quat = b.object_pose(o.name)
                assert b.object_pose7(o.name).tobytes() == np.concatenate([pos, quat]).tobytes()
                for v in (*b.object_velocity(o.name), pos, quat):
                    assert _norm(v) == float(np.linalg.norm(v))
        # the gripper target's in-range shortcut and np.clip agree, in range and outside it
        for w in (-0.01, -0.0, 0.0, 0.03, 0.08, 0.09):
            b.set_gripper_target(w)
            if sim_name == "mujoco":
                assert b.data.ctrl[7] == float(np.clip(w, 0.0, rm.GRIPPER_MAX_WIDTH_M)) / 2
    finally:
        env.close()
    v32 = np.array([3e-3, 4e-3], np.float32)  # not float64: numpy's own norm (float32 arithmetic)
    assert _norm(v32) == float(np.linalg.norm(v32))
    assert math.isnan(_norm(np.array([np.nan, 1.0])))
