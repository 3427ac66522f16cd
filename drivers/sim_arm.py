"""The simulated arm as a :class:`edge.contracts.RobotDriver` (MuJoCo or PyBullet, one class).

Each ``send_command``/``hold`` advances the simulator by exactly one control period, so with the
virtual clock the loop, the physics and the latency model stay in lock-step. On the real clock a tick
that overruns makes the loop skip deadlines; ``elapse(periods)`` advances the simulator through them
with the arm tracking its last target, as a real arm's controller does, so the world does not wait
for a late loop (``elapsed_periods`` counts them per episode). The env clips
commands to its action box and its TCP target into its own workspace box (``sim.env.TARGET_BOX_M``;
the target leads the measured TCP, so this clip can bind where a safety layer's clip of the measured
TCP + the move, into the same box, did not) and counts both; ``send_command`` returns the command
actually applied: clipped to the action box, and for ``ee_delta`` with the move the target made after
the workspace clip (x, y; and z where the task does not hold it), as a real arm's driver reports its
controller's clamps. The episode's counts are in ``info["clip_counts"]``.
"""

from __future__ import annotations

import numpy as np

from edge.contracts import DriverState, Observation, RobotState
from edge.errors import EdgeError
from sim import robot_model as rm


class DriverError(EdgeError):
    """A command in the wrong lifecycle state or a malformed command."""


class SimArmDriver:
    """RobotDriver over :class:`sim.env.TabletopEnv`. The app calls :meth:`reset_episode` per episode."""

    def __init__(self, env, clock=None) -> None:
        self.env = env.unwrapped if hasattr(env, "unwrapped") else env
        mode = self.env.cfg.action_mode
        if mode not in ("ee_delta", "joint_pos"):
            raise DriverError(f"SimArmDriver supports action_mode ee_delta/joint_pos, not {mode!r}")
        self.action_layout = mode
        self.clock = clock
        self.state = DriverState.DISCONNECTED
        self.obs: dict | None = None
        self.info: dict = {}
        self.done = False
        self.success = False
        self.steps = 0
        self.elapsed_periods = 0
        self.reward = 0.0

    # ------------------------------------------------------------------ lifecycle
    def reset_episode(self, seed: int) -> None:
        """New scene from ``seed`` (the lifecycle state is kept; an e-stop stays latched)."""
        self.obs, self.info = self.env.reset(seed=seed)
        self.done = self.success = False
        self.steps = 0
        self.elapsed_periods = 0

    def connect(self) -> None:
        if self.obs is None:
            raise DriverError("SimArmDriver.connect: call reset_episode(seed) first to build the scene")
        self.state = DriverState.PASSIVE

    def activate(self) -> None:
        if self.state not in (DriverState.PASSIVE, DriverState.ESTOPPED):
            raise DriverError(f"activate() from {self.state.value}; connect() first")
        self.state = DriverState.ACTIVE

    def close(self) -> None:
        self.state = DriverState.DISCONNECTED

    # ------------------------------------------------------------------ state
    def read_state(self) -> RobotState:
        q, qd = self.env.backend.arm_state()
        p, R, _ = rm.fk(q)
        grip = 1.0 - self.env.backend.gripper_width() / rm.GRIPPER_MAX_WIDTH_M
        t = self.clock.now() if self.clock is not None else self.steps * self.env.control_dt_s
        return RobotState(t, q, qd, float(np.clip(grip, 0.0, 1.0)), p, rm.tcp_yaw(R))

    # ------------------------------------------------------------------ commands
    def _step(self, command: np.ndarray) -> np.ndarray:
        space = self.env.action_space
        cmd = np.asarray(command, np.float32)
        if cmd.shape != space.shape or not np.all(np.isfinite(cmd)):
            raise DriverError(f"command {cmd!r} must be finite with shape {space.shape}")
        sent = np.clip(cmd, space.low, space.high)  # what the env applies: it clips and counts the same
        self.obs, reward, terminated, truncated, self.info = self.env.step(cmd)
        if self.info.get("workspace_clipped") and self.info.get("target_delta_m") is not None:
            n = 2 if "dz_m" in (self.info.get("ignored_dims") or ()) else 3  # push holds z itself
            sent[:n] = self.info["target_delta_m"][:n]
        self.reward = float(reward)  # the env's reward for this period (read by QueryEnv)
        self.steps += 1
        self.success = self.success or bool(self.info.get("success"))
        self.done = self.done or terminated or truncated
        return sent

    def send_command(self, command: np.ndarray) -> np.ndarray:
        if self.state is not DriverState.ACTIVE:
            raise DriverError(f"command refused: driver is {self.state.value}, not active")
        return self._step(command)

    def hold_command(self) -> np.ndarray:
        """The command that keeps the arm where it is commanded now."""
        tgt, _, grip = self.env.commanded_target()
        if self.action_layout == "ee_delta":
            return np.array([0.0, 0.0, 0.0, 0.0, grip], np.float32)
        return np.append(self.env._q_target, grip).astype(np.float32)

    def hold(self) -> np.ndarray:
        return self._step(self.hold_command())

    def elapse(self, periods: int) -> None:
        """``periods`` control periods passed with no command (the loop missed its deadlines): step
        the simulator through them holding the commanded target, as a real arm's controller keeps
        tracking its last one (e-stopped, as :meth:`estop` holds: the simulated brakes keep the
        target). Only while the arm is active or e-stopped (else nothing is being controlled) and
        until the episode is done."""
        if isinstance(periods, bool) or not isinstance(periods, (int, np.integer)) or periods < 0:
            raise DriverError(f"elapse({periods!r}): periods must be an int >= 0")
        if self.state not in (DriverState.ACTIVE, DriverState.ESTOPPED):
            return
        for _ in range(int(periods)):
            if self.done:
                break
            self._step(self.hold_command())
            self.elapsed_periods += 1

    def estop(self) -> None:
        """Latch ESTOPPED and hold position for one period (the simulated brakes engage)."""
        if self.state is DriverState.DISCONNECTED:
            return
        self._step(self.hold_command())
        self.state = DriverState.ESTOPPED


class SimObserver:
    """ObservationSource: the images and proprio of the driver's latest env observation."""

    def __init__(self, driver: SimArmDriver, cameras: tuple[str, ...] = ("front",)) -> None:
        self.driver = driver
        self.cameras = cameras

    def observe(self, state: RobotState) -> Observation:
        obs = self.driver.obs
        if obs is None:
            raise DriverError("no observation yet: reset_episode() first")
        images = {c: obs[c] for c in self.cameras if c in obs}
        return Observation(images, obs["proprio"], obs["instruction"], state.t_s)

    def prefetch(self) -> None:
        """Render the current observation's camera images now (a lazily rendered frame is kept
        until the simulator steps), so a later :meth:`observe` of the same step only reads them."""
        obs = self.driver.obs
        if obs is not None and not self.driver.done:  # an ended episode's frame is never read
            for c in self.cameras:
                if c in obs:
                    obs[c]  # rendered now and kept
