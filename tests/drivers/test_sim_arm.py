import numpy as np
import pytest

import sim
from drivers.sim_arm import DriverError, SimArmDriver, SimObserver
from edge.contracts import DriverState, RobotDriver


@pytest.fixture(params=["mujoco", "pybullet"])
def driver(request):
    d = SimArmDriver(sim.make_env("stack", sim=request.param, image_size=32))
    d.reset_episode(seed=2)
    return d


def test_lifecycle_and_commands(driver):
    assert isinstance(driver, RobotDriver)
    with pytest.raises(DriverError, match="not active"):
        driver.send_command(np.zeros(5, np.float32))
    driver.connect()
    with pytest.raises(DriverError, match="not active"):
        driver.send_command(np.zeros(5, np.float32))
    driver.activate()
    s0 = driver.read_state()
    sent = driver.send_command(np.array([0.5, 0, 0, 0, 0], np.float32))  # clipped to the action box
    np.testing.assert_allclose(sent, [0.03, 0, 0, 0, 0])
    assert driver.info["clip_counts"]["action_box"] == 1  # the env clipped it too, and counted it
    for _ in range(5):
        driver.hold()
    s1 = driver.read_state()
    assert 0.02 < s1.ee_pos_m[0] - s0.ee_pos_m[0] < 0.04
    driver.estop()
    assert driver.state is DriverState.ESTOPPED
    with pytest.raises(DriverError):
        driver.send_command(np.zeros(5, np.float32))
    driver.activate()  # explicit re-activation only
    driver.send_command(np.zeros(5, np.float32))
    with pytest.raises(DriverError, match="finite"):
        driver.send_command(np.array([np.nan, 0, 0, 0, 0], np.float32))


def test_observer_returns_env_images(driver):
    driver.connect()
    obs = SimObserver(driver).observe(driver.read_state())
    assert obs.images["front"].shape == (32, 32, 3) and obs.proprio.shape == (22,)
    assert obs.instruction.startswith(("stack", "put", "place", "build"))


@pytest.mark.parametrize("sim_name", ["mujoco", "pybullet"])
def test_prefetch_renders_the_frame_the_next_observe_reads(sim_name):
    driver = SimArmDriver(sim.make_env("stack", sim=sim_name, image_size=32, lazy_images=True))
    driver.reset_episode(seed=2)  # a lazy env (the runtime's): a step's images are rendered when read
    driver.connect()
    driver.activate()
    backend, renders = driver.env.backend, []
    real = backend.render
    backend.render = lambda *a, **k: (renders.append(a[0]), real(*a, **k))[1]
    driver.hold()  # a new step: its frame not rendered yet
    assert renders == []
    obs_src = SimObserver(driver)
    obs_src.prefetch()
    assert renders == ["front"]
    img = obs_src.observe(driver.read_state()).images["front"]
    assert renders == ["front"] and img is driver.obs["front"]  # read, not rendered again
    driver.hold()  # the world moved: the next observe renders the new step
    obs_src.observe(driver.read_state())
    assert renders == ["front", "front"]


def test_send_command_reports_the_sim_workspace_clip():
    """A move that takes the TCP target out of the sim's own box (TARGET_BOX_M, y <= 0.35) is
    clipped by the env; the driver returns the move the target made, and the env counts it."""
    from sim.env import TARGET_BOX_M

    d = SimArmDriver(sim.make_env("push", sim="mujoco", image_size=32))
    d.reset_episode(seed=3)
    d.connect()
    d.activate()
    cmd = np.array([0.0, 0.03, 0.0, 0.0, 1.0], np.float32)
    clipped = 0
    for _ in range(25):
        y0 = d.env.commanded_target()[0][1]
        sent = d.send_command(cmd)
        y1 = d.env.commanded_target()[0][1]
        if d.info["workspace_clipped"]:
            clipped += 1
            assert sent[1] < cmd[1] - 1e-6 and sent[0] == 0.0 and sent[2] == 0.0  # push holds z
        else:
            np.testing.assert_array_equal(sent, cmd)
        assert y1 <= TARGET_BOX_M[1][1] + 1e-9
        # what the driver reports is the target's own move (before the env's 6 cm leash)
        assert sent[1] == pytest.approx(min(y0 + 0.03, TARGET_BOX_M[1][1]) - y0, abs=1e-6)
    assert clipped >= 10 and d.info["clip_counts"]["workspace"] == clipped


def test_elapse_steps_the_world_through_skipped_periods(driver):
    """Deadlines the loop skipped pass in the simulator too: the arm keeps tracking its last target
    (as a hold does), one period per skipped deadline, only while it is controlled."""
    driver.elapse(3)  # passive: nothing is being controlled, nothing is stepped
    assert driver.steps == 0 and driver.elapsed_periods == 0
    driver.connect()
    driver.activate()
    s0 = driver.read_state()
    driver.send_command(np.array([0.03, 0, 0, 0, 0], np.float32))
    after_move = driver.read_state()
    driver.elapse(5)
    s1 = driver.read_state()
    assert driver.steps == 6 and driver.elapsed_periods == 5
    assert s1.ee_pos_m[0] - s0.ee_pos_m[0] > after_move.ee_pos_m[0] - s0.ee_pos_m[0] + 0.002  # it kept moving
    np.testing.assert_allclose(driver.env.commanded_target()[0][0], s0.ee_pos_m[0] + 0.03, atol=0.01)  # to its target
    driver.elapse(0)
    assert driver.steps == 6
    driver.estop()  # e-stopped: the simulated brakes hold, time still passes
    held = driver.env.commanded_target()[0].copy()
    driver.elapse(2)
    assert driver.steps == 9 and driver.elapsed_periods == 7
    np.testing.assert_allclose(driver.env.commanded_target()[0], held)
    driver.activate()
    for bad in (-1, 1.5, True):
        with pytest.raises(DriverError, match="elapse"):
            driver.elapse(bad)
    driver.done = True  # the episode ended: nothing more is stepped
    driver.elapse(4)
    assert driver.steps == 9 and driver.elapsed_periods == 7
    driver.reset_episode(seed=3)
    assert driver.elapsed_periods == 0
