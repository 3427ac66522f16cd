"""Safety supervisor: the always-on filter between every action and the driver.

THIS IS A SOFTWARE PROTECTIVE LAYER, NOT A RATED SAFETY FUNCTION. It reduces the chance that a bad
policy output, a stalled inference or a bug moves the arm somewhere harmful; it does not replace the
robot's own certified safety controller, a hardware emergency stop or a risk assessment.

What it does, per tick (``SafetySupervisor.filter``):

* rejects NaN/Inf or wrongly shaped actions (hold the last safe command; ``max_invalid_in_row`` in a
  row -> protective stop);
* ``joint_pos`` layout ``[q0..q6 rad, gripper]``: acceleration cap, velocity cap, per-step delta cap
  against the measured position, joint limits shrunk by a margin, and a TCP workspace/table check by
  forward kinematics (a target outside is refused: the arm keeps its last safe target);
* ``ee_delta`` layout ``[dx_m, dy_m, dz_m, dyaw_rad, gripper]``: acceleration and speed caps on the
  translation, a yaw step cap, and clipping of ``current TCP + delta`` into the workspace box and
  above the table plane (the driver's IK must still respect joint limits);
* gripper range for both layouts;
* watchdog, armed by the first valid action: no valid action for ``stale_s`` -> hold (the hold
  decelerates within the acceleration limits, it never replays old actions); for ``stop_s`` ->
  controlled stop (decelerate to standstill) and a latched fault. Before the first valid action the
  arm holds; no first plan within ``first_plan_s`` is a fault too (warm models up before start);
* software e-stop: latched, every command ignored until ``reset``; a reset discards everything
  planned before it (actions whose observation predates the reset are refused), so the interrupted
  chunk never resumes.

Every change to an action is an :class:`Intervention` with a kind and a reason; they are counted in
``counts`` and returned to the loop, which logs them per tick. Nothing is clipped silently.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass
from enum import Enum

import numpy as np

from edge.config import ConfigError, cfg, check_fields
from edge.contracts import RobotState
from edge.errors import EdgeError
from edge.robot_spec import RobotSpec

log = logging.getLogger("edge.safety")
_EPS = 1e-9
# an action arrives as float32: a command at the limit (e.g. dyaw 0.2 rad) is 3e-9 above it after the
# cast; a cap that moves it by less than float32's resolution is clipped but not counted as an intervention
_F32_EPS = 1e-6


class SafetyConfigError(EdgeError):
    """The policy and the robot disagree (rate, layout, dimension): the loop refuses to start."""


class SafetyMode(str, Enum):
    RUNNING = "running"
    STOPPING = "stopping"  # controlled stop in progress; becomes FAULT at standstill
    FAULT = "fault"  # latched protective stop; needs reset()
    ESTOP = "estop"  # latched software e-stop; needs reset()


@dataclass
class SafetyConfig:
    """Limits of the software protective layer (robot limits come from the RobotSpec)."""

    joint_margin_rad: float = cfg(0.05, "shrink every joint limit by this much", range=(0.0, 0.5))
    max_joint_step_rad: float = cfg(0.2, "max |q_target - q_measured| per tick", range=(1e-4, 3.0))
    velocity_scale: float = cfg(1.0, "fraction of the robot's joint velocity limits", range=(0.01, 1.0))
    accel_scale: float = cfg(1.0, "fraction of the robot's joint acceleration limits", range=(0.01, 1.0))
    max_ee_step_m: float = cfg(0.04, "max TCP translation per tick (ee_delta)", range=(1e-5, 0.5))
    max_yaw_step_rad: float = cfg(0.2, "max TCP yaw change per tick (ee_delta)", range=(1e-5, 1.0))
    ee_speed_max_m_s: float = cfg(0.6, "max TCP speed (ee_delta)", range=(1e-3, 3.0))
    ee_accel_max_m_s2: float = cfg(10.0, "max TCP acceleration (ee_delta)", range=(1e-3, 100.0))
    table_clearance_m: float = cfg(0.005, "TCP must stay this far above the table", range=(0.0, 0.5))
    max_invalid_in_row: int = cfg(5, "invalid actions in a row before a protective stop", range=(1, 1000))
    stale_s: float = cfg(0.25, "no valid action for this long -> watchdog hold", range=(0.0, 60.0))
    stop_s: float = cfg(1.0, "no valid action for this long -> controlled stop + fault", range=(0.0, 600.0))
    first_plan_s: float = cfg(
        30.0, "no first valid action this long after start/reset -> fault", range=(0.0, 3600.0)
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.stop_s < self.stale_s:
            raise ConfigError(f"stop_s={self.stop_s} must be >= stale_s={self.stale_s}")


@dataclass(frozen=True)
class Intervention:
    kind: str  # e.g. "joint_limit", "velocity_cap", "invalid_action", "watchdog_stop"
    detail: str  # human-readable reason with the offending values


@dataclass(frozen=True)
class SafetyDecision:
    command: np.ndarray | None  # (Da,) to send, or None (e-stopped: send nothing)
    kind: str  # "act" | "hold" | "stop" | "none"
    interventions: tuple[Intervention, ...]
    mode: SafetyMode


# ----------------------------------------------------------------------------- pure functions


def validate_action(action: object, dim: int) -> str | None:
    """None if ``action`` is a finite float vector of shape (dim,), else the reason it is not."""
    a = np.asarray(action)
    if a.shape != (dim,):
        return f"wrong shape {a.shape}, expected ({dim},)"
    if a.dtype.kind not in "fiu":
        return f"non-numeric dtype {a.dtype}"
    if not all(map(math.isfinite, a.tolist())):  # floats in Python: numpy's per-call cost is ~10 us
        return f"non-finite values at indices {np.flatnonzero(~np.isfinite(a)).tolist()}"
    return None


def _cap_norm3(x: float, y: float, z: float, max_norm: float) -> tuple[float, float, float, bool]:
    """:func:`cap_norm` on three floats (the per-tick ee_delta path)."""
    n = math.sqrt(x * x + y * y + z * z)
    if n <= max_norm + _EPS:
        return x, y, z, False
    k = max_norm / n
    return x * k, y * k, z * k, True


def clamp_range(
    x: np.ndarray, lo: np.ndarray | float, hi: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise clip; returns (clipped, mask of changed elements)."""
    y = np.minimum(np.maximum(x, lo), hi)
    return y, y != x


def cap_step(
    target: np.ndarray, ref: np.ndarray, max_step: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """Limit ``|target - ref|`` elementwise to ``max_step``; returns (capped, changed mask).
    Elements within the cap are returned bit-exact."""
    d = target - ref
    mask = np.abs(d) > max_step
    return np.where(mask, ref + np.sign(d) * max_step, target), mask


def cap_norm(v: np.ndarray, max_norm: float) -> tuple[np.ndarray, bool]:
    """Scale ``v`` down (direction kept) so that ``|v| <= max_norm``."""
    n = math.sqrt(float(np.dot(v, v)))
    if n <= max_norm + _EPS:
        return v, False
    return v * (max_norm / n), True


def cap_velocity(
    target: np.ndarray, prev: np.ndarray, vmax: np.ndarray, dt_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Limit the implied velocity ``(target - prev) / dt`` to ``vmax`` per joint."""
    return cap_step(target, prev, vmax * dt_s)


def cap_acceleration(
    target: np.ndarray, prev: np.ndarray, prev_prev: np.ndarray, amax: np.ndarray, dt_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Limit the implied acceleration of the sequence prev_prev -> prev -> target to ``amax``."""
    step, mask = cap_step(target - prev, prev - prev_prev, amax * dt_s * dt_s)
    return np.where(mask, prev + step, target), mask


def decelerate(prev: np.ndarray, prev_prev: np.ndarray, amax: np.ndarray, dt_s: float) -> np.ndarray:
    """Next target of a stop that brakes at ``amax``: velocity shrinks by amax*dt per tick to zero."""
    v = (prev - prev_prev) / dt_s
    v = np.sign(v) * np.maximum(np.abs(v) - amax * dt_s, 0.0)
    return prev + v * dt_s


def check_compatibility(spec: RobotSpec, control_rate_hz: float, action_layout: str, action_dim: int) -> None:
    """Refuse to run a policy whose rate, layout or action dimension differ from the robot config."""
    problems = []
    if not math.isclose(control_rate_hz, spec.control_rate_hz, rel_tol=1e-6):
        problems.append(f"control rate {control_rate_hz} Hz != robot {spec.control_rate_hz} Hz")
    if action_layout != spec.action_layout:
        problems.append(f"action layout {action_layout!r} != robot {spec.action_layout!r}")
    if action_dim != spec.action_dim:
        problems.append(
            f"action dim {action_dim} != robot {spec.action_dim} ({', '.join(spec.action_names)})"
        )
    if problems:
        raise SafetyConfigError(
            f"refusing to start: policy does not match robot {spec.name!r}: "
            + "; ".join(problems)
            + ". Use a policy trained for this robot config, or fix configs/robots/"
            f"{spec.name}.yaml (control_rate_hz, action_layout)."
        )


# ----------------------------------------------------------------------------- supervisor


class SafetySupervisor:
    """Stateful filter: ``start`` once the driver is active, then ``filter`` every tick."""

    def __init__(self, spec: RobotSpec, config: SafetyConfig | None = None) -> None:
        self.spec = spec
        self.config = config or SafetyConfig()
        c = self.config
        self.dt_s = spec.period_s
        self.dim = spec.action_dim
        lo, hi = spec.limits()
        self.q_lo, self.q_hi = lo + c.joint_margin_rad, hi - c.joint_margin_rad
        self.vmax = np.array(spec.qd_max_rad_s) * c.velocity_scale
        self.amax = np.array(spec.qdd_max_rad_s2) * c.accel_scale
        self.box_lo = np.array(spec.workspace_min_m, dtype=float)
        self.box_lo[2] = max(self.box_lo[2], spec.table_z_m + c.table_clearance_m)
        self.box_hi = np.array(spec.workspace_max_m, dtype=float)
        self.ee_step_m = min(c.max_ee_step_m, c.ee_speed_max_m_s * self.dt_s)
        self.ee_dstep_m = c.ee_accel_max_m_s2 * self.dt_s * self.dt_s
        self._box_lo_f, self._box_hi_f = tuple(self.box_lo.tolist()), tuple(self.box_hi.tolist())
        self._grip_lo, self._grip_hi = (float(v) for v in spec.gripper_range)
        self.counts: Counter[str] = Counter()
        self.mode = SafetyMode.RUNNING
        self.fault_reason = ""
        self._started = False

    # -- lifecycle
    def start(self, state: RobotState, now_s: float) -> None:
        """Initialise the command history from the measured state (driver just activated)."""
        q = np.asarray(state.q_rad, dtype=float)
        self._prev, self._prev_prev = q.copy(), q.copy()  # joint targets (joint_pos)
        self._prev_delta = np.zeros(4)  # last sent [dx, dy, dz, dyaw] (ee_delta)
        self._gripper = float(np.clip(state.gripper, *self.spec.gripper_range))
        self._armed = False  # watchdog arms on the first valid action
        self._last_valid_s = now_s
        self._start_s = now_s
        self._fresh_after_s = -math.inf if not self._started else now_s
        self._invalid_in_row = 0
        self._stale_reported = False
        self._started = True

    def estop(self, reason: str = "software e-stop") -> Intervention:
        self.mode = SafetyMode.ESTOP
        self.fault_reason = reason
        log.warning("E-STOP latched: %s", reason)
        return self._count(Intervention("estop", reason))

    def reset(self, state: RobotState, now_s: float) -> None:
        """Clear a latched fault or e-stop. Only actions observed after ``now_s`` are accepted."""
        if self.mode is SafetyMode.STOPPING:
            raise EdgeError("cannot reset while a controlled stop is in progress; wait for standstill")
        log.warning("safety reset from %s (%s)", self.mode.value, self.fault_reason)
        self.mode = SafetyMode.RUNNING
        self.fault_reason = ""
        self.start(state, now_s)
        self._fresh_after_s = now_s

    # -- per tick
    def filter(
        self, action: np.ndarray | None, state: RobotState, now_s: float, t_obs_s: float | None = None
    ) -> SafetyDecision:
        """Turn the action due now (or None if the queue is dry) into the command to send."""
        if not self._started:
            raise EdgeError("SafetySupervisor.filter called before start(); activate the driver first")
        ivs: list[Intervention] = []
        if self.mode is SafetyMode.ESTOP:
            if action is not None:
                ivs.append(self._count(Intervention("ignored_latched", "e-stop latched")))
            return SafetyDecision(None, "none", tuple(ivs), self.mode)
        if self.mode in (SafetyMode.STOPPING, SafetyMode.FAULT):
            if action is not None:
                ivs.append(
                    self._count(Intervention("ignored_latched", f"{self.mode.value}: {self.fault_reason}"))
                )
            return SafetyDecision(self._brake(state), "stop", tuple(ivs), self._after_brake())

        if action is not None and t_obs_s is not None and t_obs_s < self._fresh_after_s:
            ivs.append(
                self._count(
                    Intervention("pre_reset_action", f"observed at {t_obs_s:.3f} s, before the reset")
                )
            )
            action = None
        if action is not None:
            reason = validate_action(action, self.dim)
            if reason is not None:
                self._invalid_in_row += 1
                ivs.append(self._count(Intervention("invalid_action", reason)))
                action = None
                if self._invalid_in_row >= self.config.max_invalid_in_row:
                    ivs.append(
                        self._begin_stop(
                            "protective_stop", f"{self._invalid_in_row} invalid actions in a row"
                        )
                    )
                    return SafetyDecision(self._brake(state), "stop", tuple(ivs), self._after_brake())
            else:
                self._invalid_in_row = 0
        if action is None:
            return self._hold(state, now_s, ivs)

        self._armed, self._last_valid_s, self._stale_reported = True, now_s, False
        # per-tick path: Python floats, not 5-element numpy arrays (numpy's per-call overhead made
        # this filter ~65 us per tick; it runs on the loop thread every tick)
        a = np.asarray(action, dtype=np.float64).tolist()
        g_in = a[-1]
        g = min(max(g_in, self._grip_lo), self._grip_hi)
        if g != g_in:
            ivs.append(self._count(Intervention("gripper_range", f"gripper {g_in:.3f} -> {g:.3f}")))
        if self.spec.action_layout == "joint_pos":
            body = self._filter_joints(np.asarray(a[:-1]), state, ivs).tolist()
        else:
            body = self._filter_ee(a[:-1], state, ivs)
        self._gripper = g
        return SafetyDecision(np.array([*body, g], np.float32), "act", tuple(ivs), self.mode)

    # -- layouts
    def _filter_joints(self, q: np.ndarray, state: RobotState, ivs: list[Intervention]) -> np.ndarray:
        dt = self.dt_s
        q, m = cap_acceleration(q, self._prev, self._prev_prev, self.amax, dt)
        self._note(ivs, "accel_cap", m, "joint acceleration above limit")
        q, m = cap_velocity(q, self._prev, self.vmax, dt)
        self._note(ivs, "velocity_cap", m, "joint velocity above limit")
        q, m = cap_step(q, np.asarray(state.q_rad, dtype=float), self.config.max_joint_step_rad)
        self._note(ivs, "step_cap", m, f"target more than {self.config.max_joint_step_rad} rad from measured")
        q, m = clamp_range(q, self.q_lo, self.q_hi)
        self._note(ivs, "joint_limit", m, f"outside limits with {self.config.joint_margin_rad} rad margin")
        out = self._box_distance(q)
        if out > 0.0:
            # outside the box: allowed only if it brings the TCP closer (recovery), else refused
            if out > self._box_distance(self._prev) + 1e-6:
                detail = f"target TCP {out:.3f} m outside box/table and moving away; keeping last target"
                ivs.append(self._count(Intervention("workspace_reject", detail)))
                q = self._prev.copy()
            else:
                detail = f"target TCP {out:.3f} m outside box/table; allowed, moving back toward it"
                ivs.append(self._count(Intervention("workspace_outside", detail)))
        self._prev_prev, self._prev = self._prev, q
        return q

    def _box_distance(self, q: np.ndarray) -> float:
        """How far (m) the TCP at joints ``q`` is outside the workspace box / above-table region."""
        p, _ = self.spec.fk(q)
        return float(np.linalg.norm(p - np.minimum(np.maximum(p, self.box_lo), self.box_hi)))

    def _filter_ee(self, d: list[float], state: RobotState, ivs: list[Intervention]) -> list[float]:
        """[dx, dy, dz, dyaw] -> the capped/clipped delta (same rules as cap_norm/clamp_range)."""
        x, y, z, yaw = d
        px, py, pz = self._prev_delta[:3].tolist()
        sx, sy, sz, changed = _cap_norm3(x - px, y - py, z - pz, self.ee_dstep_m)
        if changed:
            ivs.append(
                self._count(
                    Intervention("accel_cap", f"TCP acceleration above {self.config.ee_accel_max_m_s2} m/s^2")
                )
            )
            x, y, z = px + sx, py + sy, pz + sz
        x, y, z, changed = _cap_norm3(x, y, z, self.ee_step_m)
        if changed:
            ivs.append(self._count(Intervention("step_cap", f"TCP step above {self.ee_step_m:.4f} m")))
        m = self.config.max_yaw_step_rad
        yaw_c = min(max(yaw, -m), m)
        if abs(yaw_c - yaw) > _F32_EPS * max(1.0, abs(m)):
            ivs.append(self._count(Intervention("yaw_cap", f"dyaw {yaw:.3f} -> {yaw_c:.3f} rad")))
        ee = self._ee_xyz(state)
        want = (ee[0] + x, ee[1] + y, ee[2] + z)
        target = tuple(min(max(v, lo), hi) for v, lo, hi in zip(want, self._box_lo_f, self._box_hi_f))
        if target != want:
            below = want[2] < self._box_lo_f[2] - _EPS
            kind = "table_plane" if below and target[2] != want[2] else "workspace_clip"
            ivs.append(
                self._count(
                    Intervention(
                        kind,
                        f"TCP target {np.round(want, 3).tolist()} clipped "
                        f"to {np.round(target, 3).tolist()}",
                    )
                )
            )
            x, y, z, changed = _cap_norm3(target[0] - ee[0], target[1] - ee[1], target[2] - ee[2],
                                          self.ee_step_m)
            if changed:
                ivs.append(self._count(Intervention("step_cap", "re-entering the workspace at the step cap")))
        self._prev_delta = np.array([x, y, z, yaw_c])
        return [x, y, z, yaw_c]

    def _ee_xyz(self, state: RobotState) -> tuple[float, float, float]:
        p = state.ee_pos_m if state.ee_pos_m is not None else self._ee_pos(state)
        return float(p[0]), float(p[1]), float(p[2])

    def _ee_pos(self, state: RobotState) -> np.ndarray:
        if state.ee_pos_m is not None:
            return np.asarray(state.ee_pos_m, dtype=float)
        return self.spec.fk(np.asarray(state.q_rad, dtype=float))[0]

    # -- hold, stop, brake
    def _hold(self, state: RobotState, now_s: float, ivs: list[Intervention]) -> SafetyDecision:
        age = now_s - self._last_valid_s
        if self._armed and age >= self.config.stop_s:
            ivs.append(self._begin_stop("watchdog_stop", f"no valid action for {age:.3f} s"))
            return SafetyDecision(self._brake(state), "stop", tuple(ivs), self._after_brake())
        if not self._armed and now_s - self._start_s >= self.config.first_plan_s:
            ivs.append(
                self._begin_stop("watchdog_stop", f"no first plan within {self.config.first_plan_s} s")
            )
            return SafetyDecision(self._brake(state), "stop", tuple(ivs), self._after_brake())
        if self._armed and age >= self.config.stale_s and not self._stale_reported:
            self._stale_reported = True
            ivs.append(
                self._count(Intervention("watchdog_stale", f"no valid action for {age:.3f} s; holding"))
            )
        if self._armed:
            ivs.append(self._count(Intervention("hold", "no valid action due; braking to a hold")))
        else:
            ivs.append(self._count(Intervention("wait_first_plan", "holding until the first valid action")))
        return SafetyDecision(self._brake(state), "hold", tuple(ivs), self.mode)

    def _begin_stop(self, kind: str, reason: str) -> Intervention:
        self.mode = SafetyMode.STOPPING
        self.fault_reason = f"{kind}: {reason}"
        log.warning("controlled stop: %s", self.fault_reason)
        return self._count(Intervention(kind, reason))

    def _brake(self, state: RobotState) -> np.ndarray:
        """One tick of an acceleration-limited stop (a hold at standstill is the same target)."""
        if self.spec.action_layout == "joint_pos":
            q = np.clip(decelerate(self._prev, self._prev_prev, self.amax, self.dt_s), self.q_lo, self.q_hi)
            self._prev_prev, self._prev = self._prev, q
            self._moving = bool(np.any(np.abs(self._prev - self._prev_prev) > _EPS))
            body = q
        else:
            xyz, _ = cap_norm(
                self._prev_delta[:3], max(0.0, float(np.linalg.norm(self._prev_delta[:3])) - self.ee_dstep_m)
            )
            yaw = float(
                np.sign(self._prev_delta[3])
                * max(0.0, abs(self._prev_delta[3]) - self.config.max_yaw_step_rad / 4)
            )
            ee = self._ee_pos(state)
            if np.all(ee >= self.box_lo) and np.all(ee <= self.box_hi):  # coast, but not out of the box
                xyz = np.minimum(np.maximum(ee + xyz, self.box_lo), self.box_hi) - ee
            body = np.append(xyz, yaw)
            self._prev_delta = body
            self._moving = bool(np.any(np.abs(body) > _EPS))
        return np.append(body, self._gripper).astype(np.float32)

    def _after_brake(self) -> SafetyMode:
        if self.mode is SafetyMode.STOPPING and not self._moving:
            self.mode = SafetyMode.FAULT
            log.warning("standstill reached; fault latched (%s); reset() required", self.fault_reason)
        return self.mode

    def _note(self, ivs: list[Intervention], kind: str, mask: np.ndarray, why: str) -> None:
        if mask.any():
            names = [self.spec.joint_names[i] for i in np.flatnonzero(mask)]
            ivs.append(self._count(Intervention(kind, f"{why}: {', '.join(names)}")))

    def _count(self, iv: Intervention) -> Intervention:
        self.counts[iv.kind] += 1
        log.debug("safety %s: %s", iv.kind, iv.detail)
        return iv
