"""Object tasks for the world models: the tabletop ``push`` scene with one target and distractors.

Two tasks over the same scene (a top-down camera, the Panda's TCP moved by ``discrete8`` actions,
2 cm per step in one of 8 compass directions, a white goal square, one red target cube and
``distractors`` cubes of other colours):

* ``push3``: push the red cube onto the goal square (the sim's push success test, held for
  ``hold_s``). Reward: +1 on success, plus potential-based shaping
  ``10·Δ(-|red − goal|) + 2·Δ(-|tcp − red|)`` (metres), which leaves the optimal policy unchanged.
  With ``approach="behind"`` the second term pulls the TCP to the pushing point instead,
  ``BEHIND_M`` behind the cube on the goal–cube line: ``2·Δ(-|tcp − (red − BEHIND_M·u)|)``, u the
  unit vector from the cube to the goal (still a potential of the state, so still policy-invariant;
  the pushing point jumps to the other side when the cube crosses the goal's centre).
* ``reach3``: bring the TCP within ``REACH_RADIUS_M`` (xy) of the red cube (the distractors do not
  count). Reward: +1 on success plus ``2·Δ(-|tcp − red|)``.

Observations (dict): ``frame`` (S, S, 3) uint8 from the top-down camera, the centre 1/``crop`` of
its view (the workspace; objects ~1.5x larger than in the full view at the same S); ``oracle`` (N_ENTITIES, F)
float32 object states (F = 8, see :data:`ORACLE_LAYOUT`) in a fixed entity order (robot TCP, goal, target,
distractors...), used by the oracle-slot mode; with ``oracle_state="control"`` four more features per
entity (:data:`ORACLE_CONTROL`): the arm's lag behind its commanded target (the TCP trails the
integrated ``discrete8`` target by 0.5–1.5 cm, so positions alone do not say where the next step
takes it) and each cube's yaw as (cos 4ψ, sin 4ψ) (a cube looks the same every quarter turn); ``seg`` (S, S) int32 when ``segmentation`` is on
(``sim.backends.base`` segment ids: background / table, robot, objects). With ``depth`` on, ``frame``
is RGB-D, (S, S, 4) uint8: the fourth channel is the camera's z-depth mapped linearly from
[``depth_near_m``, ``depth_far_m``] to [255, 0] (near is bright; :func:`depth_to_uint8`), as an RGB-D
camera on a real arm would give it; pixels outside that range are counted (``depth_clipped``).
``info`` carries ``success`` and the sim's privileged state.

The normalised score of an evaluation is its success rate (a random policy scores ≈ 0 on push3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.config import ConfigError

TASKS = ("push3", "reach3")
DEFAULT_MAX_STEPS = {"push3": 60, "reach3": 30}
N_ACTIONS = 8
BEHIND_M = 0.06  # push3, approach="behind": the pushing point's distance behind the cube centre
APPROACHES = ("cube", "behind")
REACH_RADIUS_M = 0.05  # TCP–cube centre (xy); closer than ~4 cm the TCP already pushes the cube
ORACLE_LAYOUT = ("x", "y", "z", "is_robot", "is_goal", "is_target", "is_distractor", "bias")
ORACLE_CONTROL = ("lag_x", "lag_y", "cos4yaw", "sin4yaw")  # appended with oracle_state="control"
ORACLE_STATES = ("pose", "control")
_CENTER_M = np.array([0.53, 0.0, 0.0])
_SCALE_M = np.array([0.15, 0.2, 0.05])


@dataclass(frozen=True)
class ObjectTaskConfig:
    """Settings of an object task (validated; messages name the key, value and range)."""

    task: str = "push3"  # one of TASKS
    sim: str = "mujoco"  # mujoco | pybullet
    image_size: int = 64  # side of the square top-down frame in pixels
    distractors: int = 2  # cubes besides the red target (0..3)
    max_steps: int = 0  # 0 = the task default (DEFAULT_MAX_STEPS)
    segmentation: bool = False  # add "seg" to observations (for slot-encoder metrics)
    hold_s: float = 0.1  # push3: how long the cube must rest on the goal
    crop: float = 1.5  # render at round(image_size·crop) and keep the centre (the workspace); 1 = full view
    approach: str = "cube"  # push3 shaping pulls the TCP to: the cube centre, or the pushing point behind it
    oracle_state: str = "pose"  # oracle slots: positions and kinds (pose), or also the arm's lag and cube yaw (control)
    depth: bool = False  # RGB-D frames: a fourth channel with the camera's z-depth (see the module docstring)
    # the depth range mapped to [255, 0]: in the push scene's crop the table lies at 0.93–0.97 m,
    # the cubes' tops at ~0.89 m and the arm's links at 0.76–0.93 m from the front camera
    depth_near_m: float = 0.6
    depth_far_m: float = 1.0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"task={self.task!r} is not allowed; choose one of {TASKS}")
        if self.sim not in ("mujoco", "pybullet"):
            raise ConfigError(f"sim={self.sim!r} is not allowed; choose mujoco or pybullet")
        if self.approach not in APPROACHES:
            raise ConfigError(f"approach={self.approach!r} is not allowed; choose one of {APPROACHES}")
        if self.oracle_state not in ORACLE_STATES:
            raise ConfigError(f"oracle_state={self.oracle_state!r} is not allowed; choose one of {ORACLE_STATES}")
        if self.approach != "cube" and self.task != "push3":
            raise ConfigError(f"approach={self.approach!r} shapes push3 only; task={self.task!r} takes approach='cube'")
        if not 0.0 < self.depth_near_m < self.depth_far_m <= 10.0:
            raise ConfigError(f"depth_near_m={self.depth_near_m!r}, depth_far_m={self.depth_far_m!r}: need "
                              "0 < depth_near_m < depth_far_m <= 10 (metres)")
        for key, (lo, hi) in {"image_size": (16, 256), "distractors": (0, 3), "max_steps": (0, 10000),
                              "crop": (1.0, 3.0)}.items():
            v = getattr(self, key)
            if not lo <= v <= hi:
                raise ConfigError(f"{key}={v!r} is out of range; allowed [{lo}, {hi}]")

    @property
    def steps(self) -> int:
        return self.max_steps or DEFAULT_MAX_STEPS[self.task]

    @property
    def n_entities(self) -> int:
        return 3 + self.distractors

    @property
    def oracle_layout(self) -> tuple[str, ...]:
        """The features of one oracle slot, in order."""
        return ORACLE_LAYOUT + (ORACLE_CONTROL if self.oracle_state == "control" else ())


def render_side(image_size: int, crop: float) -> int:
    """Side of the camera render whose centre ``image_size`` square is the frame (``crop``: see
    :class:`ObjectTaskConfig`)."""
    return round(image_size * crop)


def depth_to_uint8(depth_m: np.ndarray, near_m: float, far_m: float) -> tuple[np.ndarray, int]:
    """Depth (H, W) metres -> (H, W) uint8, ``near_m`` -> 255 and ``far_m`` -> 0 (linear, rounded);
    returns the image and how many pixels lay outside [near_m, far_m] (those are saturated)."""
    d = np.asarray(depth_m, dtype=np.float64)
    outside = int(np.count_nonzero((d < near_m) | (d > far_m)))
    v = np.clip((far_m - d) / (far_m - near_m), 0.0, 1.0)
    return np.rint(v * 255.0).astype(np.uint8), outside


def center_crop(img: np.ndarray, size: int) -> np.ndarray:
    """The centre ``size`` x ``size`` of an (H, W, ...) image (what the world models see of a
    :func:`render_side` render)."""
    o = (img.shape[0] - size) // 2
    return np.ascontiguousarray(img[o:o + size, o:o + size])


class ObjectTaskEnv:
    """A gymnasium-style env (``reset(seed=)``, ``step(a)``) over :class:`sim.env.TabletopEnv`."""

    def __init__(self, config: ObjectTaskConfig | None = None, frames: bool = True) -> None:
        """``frames=False``: observations carry ``oracle`` only (nothing rendered: an oracle-slot run's)."""
        from sim.env import TabletopEnv

        self.cfg = config or ObjectTaskConfig()
        self.frames = frames
        self._full = render_side(self.cfg.image_size, self.cfg.crop)
        self.env = TabletopEnv(task="push", sim=self.cfg.sim, action_mode="discrete8",
                               image_size=self._full, segmentation=self.cfg.segmentation, depth=self.cfg.depth,
                               push_target_color="red", push_distractors=self.cfg.distractors,
                               max_steps=10000, hold_s=self.cfg.hold_s,
                               lazy_images=True)  # rendered when read: step() reads them, simulate() does not
        self.t = 0
        self._potential = 0.0
        self.depth_clipped = 0  # depth pixels outside [depth_near_m, depth_far_m] over all frames so far

    # ------------------------------------------------------------------ gym-style API
    def reset(self, *, seed: int | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed)
        self.t = 0
        self._potential = self._phi(info)
        return self._obs(obs, info), self._info(info, False)

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        obs, info, reward, success = self._advance(action)
        truncated = self.t >= self.cfg.steps and not success
        return self._obs(obs, info), reward, success, truncated, self._info(info, success)

    def simulate(self, action: int) -> tuple[float, bool]:
        """One step without an observation (nothing rendered): ``(reward, success)``. For a planner
        that searches with the simulator (:meth:`snapshot` / :meth:`restore`); the step limit is
        not applied."""
        _, _, reward, success = self._advance(action)
        return reward, success

    def snapshot(self) -> dict:
        """The episode's full state (simulator, controller, step count, shaping potential)."""
        return {"env": self.env.snapshot(), "t": self.t, "potential": self._potential}

    def restore(self, snap: dict) -> None:
        """Return to a :meth:`snapshot` of the current episode: the same actions then give the same
        rewards and observations."""
        self.env.restore(snap["env"])
        self.t, self._potential = snap["t"], snap["potential"]

    def _advance(self, action: int) -> tuple[dict, dict, float, bool]:
        if np.ndim(action) != 0 or int(action) != action or not 0 <= int(action) < N_ACTIONS:
            raise ConfigError(f"action must be an integer in [0, {N_ACTIONS}), got {action!r}")
        obs, _, sim_success, _, info = self.env.step(int(action))
        self.t += 1
        success = bool(sim_success) if self.cfg.task == "push3" else self._reached(info)
        phi = self._phi(info)
        reward = float(success) + phi - self._potential
        self._potential = phi
        return obs, info, reward, success

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ helpers
    def _tcp(self) -> np.ndarray:
        return self.env.tcp_pose()[0]

    def _goal(self) -> np.ndarray:
        g = self.env.scene.goals[0].center_m
        return np.array([g[0], g[1]])

    def _reached(self, info: dict) -> bool:
        red = info["object_poses"]["red"][:2]
        return bool(np.linalg.norm(self._tcp()[:2] - red) < REACH_RADIUS_M)

    def _phi(self, info: dict) -> float:
        red = info["object_poses"]["red"][:2]
        to_goal = self._goal() - red
        dist_goal = float(np.linalg.norm(to_goal))
        aim = red
        if self.cfg.task == "push3" and self.cfg.approach == "behind" and dist_goal > 1e-6:
            aim = red - BEHIND_M * to_goal / dist_goal
        phi = -2.0 * float(np.linalg.norm(self._tcp()[:2] - aim))
        if self.cfg.task == "push3":
            phi -= 10.0 * dist_goal
        return phi

    def oracle(self, info: dict) -> np.ndarray:
        """(N_ENTITIES, F) float32 in the fixed order robot, goal, red target, distractors; F features
        as :attr:`ObjectTaskConfig.oracle_layout`."""
        poses = info["object_poses"]
        cubes = [poses["red"]] + [poses[o.name] for o in self.env.scene.objects if o.distractor]
        tcp = self._tcp()
        rows = [(tcp, 0), (np.array([*self._goal(), 0.0]), 1)] + [(c[:3], 2 if i == 0 else 3) for i, c in enumerate(cubes)]
        out = np.zeros((self.cfg.n_entities, len(self.cfg.oracle_layout)), np.float32)
        for i, (pos, kind) in enumerate(rows):
            out[i, :3] = (np.asarray(pos, float) - _CENTER_M) / _SCALE_M
            out[i, 3 + kind] = 1.0
            out[i, 7] = 1.0
        if self.cfg.oracle_state == "control":
            from sim.env import DISCRETE_STEP_M

            target, _, _ = self.env.commanded_target()
            out[0, 8:10] = (target[:2] - tcp[:2]) / DISCRETE_STEP_M  # in action steps
            for i, c in enumerate(cubes):
                w, x, y, z = (float(v) for v in c[3:7])
                yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))  # heading (ill-defined if tipped over)
                out[2 + i, 10:12] = np.cos(4.0 * yaw), np.sin(4.0 * yaw)
        return out

    def oracle_now(self) -> np.ndarray:
        """:meth:`oracle` of the simulator's current state (also after :meth:`simulate`)."""
        pose7 = self.env.backend.object_pose7
        return self.oracle({"object_poses": {o.name: pose7(o.name) for o in self.env.scene.objects}})

    def _crop(self, img: np.ndarray) -> np.ndarray:
        return center_crop(img, self.cfg.image_size)

    def _obs(self, obs: dict, info: dict) -> dict:
        if not self.frames:
            return {"oracle": self.oracle(info)}
        out = {"frame": self._crop(obs["front"]), "oracle": self.oracle(info)}
        if self.cfg.depth:
            d8, outside = depth_to_uint8(self._crop(obs["front_depth"]), self.cfg.depth_near_m, self.cfg.depth_far_m)
            self.depth_clipped += outside
            out["frame"] = np.concatenate([out["frame"], d8[..., None]], axis=-1)
        if self.cfg.segmentation:
            out["seg"] = self._crop(obs["front_seg"])
        return out

    def _info(self, info: dict, success: bool) -> dict:
        return {"success": bool(success), "object_poses": info["object_poses"], "step": self.t,
                "goal_m": self._goal()}
