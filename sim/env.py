"""The tabletop gymnasium env: one class, two engines (MuJoCo / PyBullet), three tasks.

Actions (``action_mode``):

* ``ee_delta`` (default), shape (5,), float32: ``[dx_m, dy_m, dz_m, dyaw_rad, gripper]`` — a change
  of the commanded TCP target per control step in the robot base frame (±0.03 m, ±0.2 rad), and a
  gripper command in [0, 1] (0 = open 8 cm, 1 = closed; force-limited). The env integrates the
  deltas into a target pose, converts it to joint targets by damped-least-squares IK
  (:func:`sim.robot_model.ik_step`) and servos the joints for ``control_dt_s``.
* ``joint_pos``, shape (8,): seven joint targets in rad (within the URDF limits) + gripper [0, 1].
* ``discrete8`` (push and reach only): ``Discrete(8)``, a 2 cm TCP move along one of 8 compass directions
  (0 = +x, counter-clockwise in 45° steps).

Clipping: values outside the action box are clipped to it, and the TCP target is kept inside the
workspace box ``TARGET_BOX_M``; neither is silent — every clip is counted in ``info["clipped"]``
/ ``info["workspace_clipped"]`` and ``info["clip_counts"]`` (per episode). In ``push`` and ``reach``, z, yaw and the gripper are held by the env
(TCP 1.5 cm above the table, gripper closed); ``info["ignored_dims"]`` names those action entries.

Observations: ``front`` (H, W, 3) uint8, optional ``wrist`` (H, W, 3) uint8, ``proprio`` (22,)
float32 = ``PROPRIO_LAYOUT``, ``instruction`` (text). ``info`` carries privileged ground truth for
experts and metrics (``object_poses`` name → (7,) xyz+wxyz, ``success``, ``task``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from sim import robot_model as rm
from sim.randomization import COLORS, DISTRIBUTIONS, sample_scene
from sim.realism import Realism, RealismConfig
from sim.tasks import (
    INSTRUCTION_SETS,
    PLANAR_TASKS,
    TASKS,
    TaskSpec,
    make_spec,
    progress_stage,
    scene_request,
    success_now,
)

SIMS = ("mujoco", "pybullet")
ACTION_MODES = ("ee_delta", "joint_pos", "discrete8")
ACTION_LAYOUT = ("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper")
JOINT_ACTION_LAYOUT = tuple(f"q{i}_rad" for i in range(7)) + ("gripper",)
PROPRIO_LAYOUT = (tuple(f"q{i}_rad" for i in range(7)) + tuple(f"qd{i}_rad_s" for i in range(7))
                  + ("gripper_width_m", "tcp_x_m", "tcp_y_m", "tcp_z_m", "tcp_qw", "tcp_qx", "tcp_qy", "tcp_qz"))
MAX_DPOS_M = 0.03
MAX_DYAW_RAD = 0.2
TARGET_BOX_M = ((0.25, 0.80), (-0.35, 0.35), (0.005, 0.45))
PUSH_Z_M = 0.015
PUSH_START_M = (0.33, 0.0, PUSH_Z_M)
DISCRETE_STEP_M = 0.02
# Physics step per engine (control at 20 Hz: 25 MuJoCo substeps, 15 PyBullet substeps). Bullet's
# own default is 1/240 s; 1/300 s keeps every scripted-expert cell inside its interval
# (docs/speed.md, "PyBullet physics step").
DEFAULT_PHYSICS_DT_S = {"mujoco": 0.002, "pybullet": 1.0 / 300.0}
DEFAULT_MAX_STEPS = {"stack": 220, "pick_place": 200, "push": 200, "reach": 60}
INSTRUCTION_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.:'-"
# TARGET_BOX_M as the (3,) bounds np.clip takes (built once, not per step; read-only)
_TARGET_LO_M = np.array([lo for lo, _ in TARGET_BOX_M])
_TARGET_HI_M = np.array([hi for _, hi in TARGET_BOX_M])
_TARGET_LO_M.flags.writeable = _TARGET_HI_M.flags.writeable = False
_YAW_LO_RAD, _YAW_HI_RAD = -np.pi / 2 - 0.3, np.pi / 2 + 0.3


@dataclass(frozen=True)
class EnvConfig:
    """Env settings; validated on construction (the message names key, value and range)."""

    task: str = "stack"
    sim: str = "mujoco"
    n_blocks: int = 2  # stack only: 2 or 3
    distribution: str = "train"
    instructions: str = "train"  # "paraphrase": held-out phrasings of the same instructions (evaluation)
    control_rate_hz: float = 20.0
    # physics step; 0 = the engine's default (DEFAULT_PHYSICS_DT_S); the control period must be a
    # whole number of steps. Read the resolved value as ``physics_step_s``.
    physics_dt_s: float = 0.0
    image_size: int = 96
    wrist_camera: bool = False
    segmentation: bool = False  # add "front_seg" (H, W) int32 to observations
    depth: bool = False  # add "front_depth" (H, W) float32, metres from the front camera's image plane
    render_images: bool = True  # False: image observations are black (state-only evaluation, benchmarks)
    # True: camera images are rendered when first read, not at every step (an observation is a
    # read-only Mapping; reading an image after the env has stepped on raises). For a consumer that
    # reads the images of some steps only (the runtime loop: one observation per query). Ignored
    # (eager) while realism is on, whose image effects draw from a per-step random stream.
    lazy_images: bool = False
    # MuJoCo: > 0 draws the robot with its meshes simplified on a grid of this many metres (0.01:
    # a 96^2 frame ~3.6x faster on a CPU rasteriser); the physics is the same, the pixels differ
    # slightly where the robot is in view. 0 = the meshes as they are.
    render_mesh_cell_m: float = 0.0
    action_mode: str = "ee_delta"
    max_steps: int = 0  # 0 = task default
    hold_s: float = 0.5  # how long success must hold (0 = one control step)
    push_target_color: str = ""  # push / reach: "" = two cubes, the instruction names one; a colour = one target cube
    push_distractors: int = -1  # push / reach with push_target_color: how many other cubes (default 0)
    realism: RealismConfig = field(default_factory=RealismConfig)

    def __post_init__(self) -> None:
        choices = {"task": TASKS, "sim": SIMS, "distribution": DISTRIBUTIONS, "action_mode": ACTION_MODES,
                   "instructions": INSTRUCTION_SETS}
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"env.{key}={getattr(self, key)!r} is not allowed; choose one of {allowed}")
        ranges = {"n_blocks": (2, 3), "control_rate_hz": (1.0, 100.0), "image_size": (16, 512),
                  "max_steps": (0, 100000), "hold_s": (0.0, 5.0)}
        if self.physics_dt_s != 0.0:
            ranges["physics_dt_s"] = (1e-4, 0.004)
        if self.render_mesh_cell_m != 0.0:
            ranges["render_mesh_cell_m"] = (0.001, 0.05)
            if self.sim != "mujoco":
                raise ValueError(f"env.render_mesh_cell_m={self.render_mesh_cell_m!r} applies to sim 'mujoco' "
                                 f"only (got sim {self.sim!r}); leave it at 0")
        for key, (lo, hi) in ranges.items():
            v = getattr(self, key)
            if not (lo <= v <= hi):
                also = {"physics_dt_s": " (or 0: the engine's default)",
                        "render_mesh_cell_m": " (or 0: the meshes as they are)"}.get(key, "")
                raise ValueError(f"env.{key}={v!r} is out of range; allowed [{lo}, {hi}]{also}")
        n_sub = (1.0 / self.control_rate_hz) / self.physics_step_s
        if abs(n_sub - round(n_sub)) > 1e-6:
            raise ValueError(f"env.control_rate_hz={self.control_rate_hz} with physics_dt_s={self.physics_step_s}"
                             f"{' (the ' + self.sim + ' default)' if self.physics_dt_s == 0.0 else ''}: "
                             "the control period must be a whole number of physics steps")
        if self.push_target_color and (self.task not in PLANAR_TASKS or self.push_target_color not in COLORS):
            raise ValueError(f"env.push_target_color={self.push_target_color!r} needs task 'push' or 'reach' and one of "
                             f"{tuple(COLORS)}")
        if not -1 <= self.push_distractors <= 3:
            raise ValueError(f"env.push_distractors={self.push_distractors!r} is out of range; allowed [-1, 3]")
        if self.action_mode == "discrete8" and self.task not in PLANAR_TASKS:
            raise ValueError("env.action_mode='discrete8' is only offered for tasks 'push' and 'reach'")
        if isinstance(self.realism, dict):
            object.__setattr__(self, "realism", RealismConfig(**self.realism))

    @property
    def physics_step_s(self) -> float:
        """The physics step in seconds: ``physics_dt_s``, or the engine's default when it is 0."""
        return self.physics_dt_s or DEFAULT_PHYSICS_DT_S[self.sim]


def make_backend(sim: str, physics_dt_s: float, render_mesh_cell_m: float = 0.0):
    if sim == "mujoco":
        from sim.backends.mujoco_backend import MuJoCoBackend

        return MuJoCoBackend(physics_dt_s, render_mesh_cell_m=render_mesh_cell_m)
    if sim == "pybullet":
        from sim.backends.pybullet_backend import PyBulletBackend

        return PyBulletBackend(physics_dt_s)
    raise ValueError(f"unknown sim {sim!r}; choose one of {SIMS}")


def _rot_to_quat_floats(R: np.ndarray) -> list[float]:
    """:func:`_rot_to_quat` as four Python floats (wxyz): the same IEEE operations in the same
    order on floats instead of numpy scalars (several times faster on a 3x3)."""
    R = R.tolist()
    w = math.sqrt(max(1e-12, 1.0 + R[0][0] + R[1][1] + R[2][2])) / 2
    if w > 1e-3:
        return [w, (R[2][1] - R[1][2]) / (4 * w), (R[0][2] - R[2][0]) / (4 * w), (R[1][0] - R[0][1]) / (4 * w)]
    d = (R[0][0], R[1][1], R[2][2])
    i = 0  # np.argmax(diag): the first maximum, a NaN counting as the maximum
    for m in (1, 2):
        if d[i] != d[i]:
            break
        if d[m] > d[i] or d[m] != d[m]:
            i = m
    j, k = (i + 1) % 3, (i + 2) % 3
    s = math.sqrt(max(1e-12, 1.0 + R[i][i] - R[j][j] - R[k][k])) * 2
    q = [0.0, 0.0, 0.0, 0.0]
    q[0] = (R[k][j] - R[j][k]) / s
    q[1 + i] = s / 4
    q[1 + j] = (R[j][i] + R[i][j]) / s
    q[1 + k] = (R[k][i] + R[i][k]) / s
    return q


def _rot_to_quat(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (4,) wxyz of a rotation matrix (3, 3)."""
    return np.array(_rot_to_quat_floats(R))


def with_new_env_defaults(old: dict, new: dict) -> dict:
    """``old`` (a recorded ``EnvConfig`` as a dict) with the keys it lacks taken from ``new`` where
    ``new`` has :class:`EnvConfig`'s default there: a setting added after the recording, at its
    default, changes nothing the recording did (for resume checks)."""
    import dataclasses

    defaults = {f.name: f.default for f in dataclasses.fields(EnvConfig)}
    return {**{k: v for k, v in new.items() if k not in old and k in defaults and defaults[k] == v}, **old}


class TabletopEnv(gym.Env):
    """Franka Panda tabletop (see module docstring for spaces, units and clipping)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, config: EnvConfig | None = None, render_mode: str | None = None, **overrides: Any) -> None:
        cfg = config or EnvConfig()
        if overrides:
            cfg = EnvConfig(**{**asdict(cfg), **overrides, "realism": overrides.get("realism", cfg.realism)})
        self.cfg = cfg
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r}; supported: {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.control_dt_s = 1.0 / cfg.control_rate_hz
        self.n_substeps = int(round(self.control_dt_s / cfg.physics_step_s))
        self.max_steps = cfg.max_steps or DEFAULT_MAX_STEPS[cfg.task] + (150 if cfg.n_blocks == 3 else 0)
        self.backend = make_backend(cfg.sim, cfg.physics_step_s, cfg.render_mesh_cell_m)
        self.realism = Realism(cfg.realism)
        self._realism_on = cfg.realism.enabled  # cfg is frozen: evaluated once, not twice per step
        self._obs_serial = 0  # counts observations: a lazily rendered image belongs to one of them
        s = cfg.image_size
        spaces = {
            "front": gym.spaces.Box(0, 255, (s, s, 3), np.uint8),
            "proprio": gym.spaces.Box(-np.inf, np.inf, (len(PROPRIO_LAYOUT),), np.float32),
            "instruction": gym.spaces.Text(max_length=160, min_length=1, charset=INSTRUCTION_CHARS),
        }
        if cfg.wrist_camera:
            spaces["wrist"] = gym.spaces.Box(0, 255, (s, s, 3), np.uint8)
        if cfg.segmentation:
            spaces["front_seg"] = gym.spaces.Box(0, 255, (s, s), np.int32)
        if cfg.depth:
            spaces["front_depth"] = gym.spaces.Box(0.0, np.inf, (s, s), np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        if cfg.action_mode == "ee_delta":
            hi = np.array([MAX_DPOS_M] * 3 + [MAX_DYAW_RAD, 1.0], np.float32)
            lo = -hi.copy()
            lo[4] = 0.0
            self.action_space = gym.spaces.Box(lo, hi, dtype=np.float32)
        elif cfg.action_mode == "joint_pos":
            qlo, qhi, _ = rm.arm_limits()
            self.action_space = gym.spaces.Box(np.append(qlo, 0.0).astype(np.float32),
                                               np.append(qhi, 1.0).astype(np.float32), dtype=np.float32)
        else:
            self.action_space = gym.spaces.Discrete(8)
        self.scene = None
        self.spec_task: TaskSpec | None = None
        # the seed of the current scene (None before the first reset or after a reset without one);
        # an expert that acts from the simulator's state derives its own per-episode draws from it
        self.episode_seed: int | None = None
        self._fk_memo: tuple[bytes, tuple] | None = None

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.episode_seed = None if seed is None else int(seed)
        rng = self.np_random
        req = scene_request(self.cfg.task, self.cfg.n_blocks, self.cfg.wrist_camera,
                            self.cfg.push_target_color, self.cfg.push_distractors)
        self.scene = sample_scene(rng, req, self.cfg.distribution)
        self.spec_task = make_spec(self.cfg.task, self.scene, rng, self.cfg.instructions)
        self.backend.build(self.scene)
        self.realism.reset(np.random.default_rng(rng.integers(2**63)))
        q = np.array(self.scene.q_home_rad)
        if self.cfg.task in PLANAR_TASKS:  # start low, in front of the workspace, gripper closed
            for _ in range(30):
                q = rm.ik_step(q, np.array(PUSH_START_M), rm.down_rotation(0.0))
            self.backend.reset_robot(q, 0.0)
        p, R, _ = rm.fk(q)
        self._target_pos = p.copy()
        self._target_yaw = rm.tcp_yaw(R)
        self._q_target = q
        self._gripper_cmd = 1.0 if self.cfg.task in PLANAR_TASKS else 0.0
        self.backend.set_gripper_target(self._gripper_width_target(self._gripper_cmd))
        self.backend.step(self.n_substeps * 4)  # let the fingers settle / close before step 0
        self.t_step = 0
        self.max_stage = 0
        self._hold_steps = 0
        self.clip_counts = {"action_box": 0, "workspace": 0}
        return self._observe(), self._info(False)

    def step(self, action):
        a, clipped = self._parse_action(action)
        self._workspace_clipped, self._target_delta = False, None
        if self._realism_on:
            hold = np.array([0, 0, 0, 0, self._gripper_cmd], np.float32)
            if self.cfg.action_mode == "joint_pos":
                hold = np.append(self._q_target, self._gripper_cmd).astype(np.float32)
            a = self.realism.action(a, hold)
        self._apply(a)
        self.backend.step(self.n_substeps)
        self.t_step += 1
        ok = success_now(self.spec_task, self.scene, self.backend,
                         self.tcp_pose()[0] if self.cfg.task == "reach" else None)
        self._hold_steps = self._hold_steps + 1 if ok else 0
        success = self._hold_steps > 0 and self._hold_steps * self.control_dt_s >= self.cfg.hold_s - 1e-9
        diverged = bool(getattr(self.backend, "diverged", False))
        truncated = (self.t_step >= self.max_steps or diverged) and not success
        info = self._info(success)
        info["clipped"] = clipped
        # ee_delta: the TCP target was clipped into TARGET_BOX_M this step; target_delta_m is how far
        # the target moved (x, y, z; m) after that clip (None in joint_pos mode, and with realism on,
        # where the action applied may be an earlier one)
        info["workspace_clipped"] = self._workspace_clipped
        info["target_delta_m"] = None if self._realism_on else self._target_delta
        info["sim_diverged"] = diverged  # physics blew up: episode ends, counted as a failure
        self.max_stage = max(self.max_stage, 4 if success else progress_stage(self.spec_task, self.scene, self.backend, placed=ok))
        info["max_stage"] = self.max_stage  # furthest of sim.tasks.PROGRESS_STAGES reached
        return self._observe(), float(success), bool(success), bool(truncated), info

    def render(self):
        if self.render_mode == "rgb_array":
            return self.backend.render("front", 224, 224)
        return None

    def close(self) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _gripper_width_target(cmd: float) -> float:
        return (1.0 - float(cmd)) * rm.GRIPPER_MAX_WIDTH_M

    def _fk(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`sim.robot_model.fk` of the measured joints, memoised: the observation after a
        step and the next step's IK read the same state (results are read-only)."""
        key = q.tobytes()
        if self._fk_memo is None or self._fk_memo[0] != key:
            out = rm.fk(q)
            for a in out:
                a.flags.writeable = False
            self._fk_memo = (key, out)
        return self._fk_memo[1]

    def _parse_action(self, action) -> tuple[np.ndarray, bool]:
        if self.cfg.action_mode == "discrete8":
            if np.ndim(action) != 0 or int(action) != action or not 0 <= int(action) < 8:
                raise ValueError(f"discrete8 action must be an integer in [0, 8), got {action!r}")
            ang = int(action) * np.pi / 4
            return np.array([DISCRETE_STEP_M * np.cos(ang), DISCRETE_STEP_M * np.sin(ang), 0, 0, 1], np.float32), False
        a = np.asarray(action, dtype=np.float32)
        if a.shape != self.action_space.shape:
            raise ValueError(f"action shape {a.shape} != {self.action_space.shape} ({self.cfg.action_mode})")
        # ndarray methods: what np.all / np.clip / np.any call, without their dispatch layers
        if not np.isfinite(a).all():
            raise ValueError(f"action contains NaN/Inf: {a}")
        c = a.clip(self.action_space.low, self.action_space.high)
        clipped = bool((c != a).any())
        self.clip_counts["action_box"] += int(clipped)
        return c, clipped

    def _apply(self, a: np.ndarray) -> None:
        if self.cfg.action_mode == "joint_pos":
            self._q_target = a[:7].astype(float)
            self._gripper_cmd = float(a[7])
        else:
            new = self._target_pos + a[:3]
            if self.cfg.task in PLANAR_TASKS:
                new[2] = PUSH_Z_M
            lim = new.clip(_TARGET_LO_M, _TARGET_HI_M)
            self._workspace_clipped = bool((lim != new).any())
            self.clip_counts["workspace"] += int(self._workspace_clipped)
            self._target_delta = lim - self._target_pos  # the target's move this step, after the clip
            # Keep the target within 6 cm of the real TCP so a blocked arm does not wind up.
            q, _ = self.backend.arm_state()
            fk_q = self._fk(q)
            p = fk_q[0]
            off = lim - p
            n = math.sqrt(off.dot(off))  # what np.linalg.norm computes for a float64 vector
            self._target_pos = p + off * min(1.0, 0.06 / n) if n > 1e-9 else lim
            if self.cfg.task not in PLANAR_TASKS:
                # a numpy scalar's clip is what np.clip calls (same dtype rules and result)
                self._target_yaw = float((self._target_yaw + a[3]).clip(_YAW_LO_RAD, _YAW_HI_RAD))
                self._gripper_cmd = float(a[4])
            self._q_target = rm.ik_step(q, self._target_pos, rm.down_rotation(self._target_yaw), fk_q=fk_q)
        self.backend.set_arm_targets(self._q_target)
        self.backend.set_gripper_target(self._gripper_width_target(self._gripper_cmd))

    def snapshot(self) -> dict:
        """The simulator's and the controller's full state in this episode (physics, warning
        counters, TCP target, step and hold counters), for a planner that searches with the
        simulator itself: after :meth:`restore` the same actions give the same steps, bit for bit.
        MuJoCo only; not with realism on (its noise and delay streams are not part of the state)."""
        if self._realism_on:
            raise ValueError("snapshot() with realism on: its noise and delay streams are not part of the "
                             "simulator state; turn realism off to search with the simulator")
        get_state = getattr(self.backend, "get_state", None)
        if get_state is None:
            raise ValueError(f"sim={self.cfg.sim!r} cannot snapshot its state; use sim='mujoco'")
        if self.scene is None:
            raise ValueError("snapshot() before reset(): there is no episode to snapshot")
        return {"scene": self.scene, "physics": get_state(), "target_pos": self._target_pos.copy(),
                "target_yaw": self._target_yaw, "q_target": np.array(self._q_target, dtype=float),
                "gripper_cmd": self._gripper_cmd, "t_step": self.t_step, "max_stage": self.max_stage,
                "hold_steps": self._hold_steps, "clip_counts": dict(self.clip_counts)}

    def restore(self, snap: dict) -> None:
        """Return to a :meth:`snapshot` taken in the current episode. Lazily rendered images of
        observations made before the restore can no longer be read."""
        if snap.get("scene") is not self.scene:
            raise ValueError("restore() with a snapshot of another episode: snapshots hold within the "
                             "episode (reset) they were taken in")
        self.backend.set_state(snap["physics"])
        self._target_pos, self._target_yaw = snap["target_pos"].copy(), snap["target_yaw"]
        self._q_target, self._gripper_cmd = snap["q_target"].copy(), snap["gripper_cmd"]
        self.t_step, self.max_stage, self._hold_steps = snap["t_step"], snap["max_stage"], snap["hold_steps"]
        self.clip_counts = dict(snap["clip_counts"])
        self._obs_serial += 1  # (the actuators' commands are part of the physics state)

    def commanded_target(self) -> tuple[np.ndarray, float, float]:
        """The env's integrated TCP target (3,) m, target yaw rad and gripper command (for experts)."""
        return self._target_pos.copy(), self._target_yaw, self._gripper_cmd

    def tcp_pose(self) -> tuple[np.ndarray, float]:
        """Measured TCP position (3,) m and yaw rad."""
        q, _ = self.backend.arm_state()
        p, R, _ = self._fk(q)
        return p.copy(), rm.tcp_yaw(R)

    def _observe(self) -> dict:
        self._obs_serial += 1
        q, qd = self.backend.arm_state()
        p, R, _ = self._fk(q)
        buf = np.empty(len(PROPRIO_LAYOUT))  # float64, cast once: what concatenate + astype gave
        buf[:7] = q
        buf[7:14] = qd
        buf[14] = self.backend.gripper_width()
        buf[15:18] = p
        buf[18:22] = _rot_to_quat_floats(R)
        proprio = buf.astype(np.float32)
        s = self.cfg.image_size
        names = ("front", "wrist") if self.cfg.wrist_camera else ("front",)
        if self.cfg.lazy_images and self.cfg.render_images and not self._realism_on:
            render = {n: functools.partial(self.backend.render, n, s, s) for n in names}
            if self.cfg.segmentation:
                render["front_seg"] = functools.partial(self.backend.render_segmentation, "front", s, s)
            if self.cfg.depth:
                render["front_depth"] = functools.partial(self.backend.render_depth, "front", s, s)
            return LazyObservation({"proprio": proprio, "instruction": self.spec_task.instruction}, render,
                                   self, self._obs_serial)
        if self.cfg.render_images:
            imgs = {n: self.backend.render(n, s, s) for n in names}
        else:
            imgs = {n: np.zeros((s, s, 3), np.uint8) for n in names}
        if self._realism_on:
            proprio = self.realism.proprio(proprio)
            imgs = self.realism.images(imgs)
        obs = {**imgs, "proprio": proprio, "instruction": self.spec_task.instruction}
        if self.cfg.segmentation:
            obs["front_seg"] = self.backend.render_segmentation("front", s, s)
        if self.cfg.depth:
            obs["front_depth"] = self.backend.render_depth("front", s, s)
        return obs

    def _info(self, success: bool) -> dict:
        pose7 = self.backend.object_pose7  # the (7,) xyz+wxyz concatenation in one array
        poses = {o.name: pose7(o.name) for o in self.scene.objects}
        return {
            "success": bool(success), "is_success": bool(success), "task": self.cfg.task,
            "object_poses": poses, "order": self.spec_task.order, "goal": self.spec_task.goal,
            "clip_counts": dict(self.clip_counts), "step": self.t_step,
            "ignored_dims": ("dz_m", "dyaw_rad", "gripper") if self.cfg.task in PLANAR_TASKS else (),
        }


class LazyObservation(Mapping):
    """An observation whose camera images are rendered when first read (``EnvConfig.lazy_images``).

    The keys are the eager observation's. An image is rendered from the simulator's state at the
    step that made this observation, so it may only be read before the env steps or resets again;
    a later read raises instead of returning another step's picture. Each image is rendered once.
    """

    def __init__(self, values: dict, render: dict, env: Any, serial: int) -> None:
        self._values = dict(values)
        self._render = dict(render)
        self._env, self._serial = env, serial
        tail = ("front_seg", "front_depth")  # after the values, as in an eager observation
        self._order = (*[k for k in render if k not in tail], *values, *[k for k in tail if k in render])

    def __getitem__(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        fn = self._render.get(key)
        if fn is None:
            raise KeyError(key)
        if self._env._obs_serial != self._serial:
            raise RuntimeError(f"observation image {key!r} read after the env stepped on: a lazily "
                               "rendered image exists only until the next step or reset")
        self._values[key] = value = fn()
        return value

    def __contains__(self, key: object) -> bool:  # without rendering (Mapping's default reads the value)
        return key in self._values or key in self._render

    def __iter__(self):
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def rendered(self) -> tuple[str, ...]:
        """The images rendered so far (for tests and benchmarks)."""
        return tuple(k for k in self._render if k in self._values)
