"""Scripted experts: waypoints + the env's IK, driven by privileged object poses.

Each expert emits ``ee_delta`` actions and a per-step phase label (``PHASES``). To make the
demonstrations as varied as human teleoperation, every episode the expert draws (from its own
seeded generator) among equally good options:

* grasp yaw — any of the cube's symmetric grasps (yaw + k·90°) inside the gripper's yaw range;
* approach side — the descent starts from a via-point offset 0–4 cm to either side of the object
  (``approach_offset_m``; 0 = straight above it. The via-point is a hidden variable: a policy that
  sees one frame cannot tell "heading out to the via-point" from "coming back from it");
* transport path — straight diagonal, or "up, over, down" through a higher via-point;
* speed profile — a top speed of 1.0–2.4 cm per step, slower in the fine phases;
* small pauses — 0–5 idle steps at some phase boundaries;
* push strategy — straight push, or an L-shaped push (x first or y first).

The expert re-reads object poses every step, so it corrects drift and re-grasps after a slip.
"""

from __future__ import annotations

import numpy as np

from sim.env import MAX_DPOS_M, MAX_DYAW_RAD, PUSH_Z_M, TabletopEnv
from sim.tasks import EXPERT_TASKS

PHASES = ("transport", "approach", "grasp", "lift", "place", "release", "retreat")
PHASE_ID = {p: i for i, p in enumerate(PHASES)}
CONTACT_PHASES = ("grasp", "place", "release")
APPROACH_OFFSET_M = 0.04  # default largest side offset of the approach via-point, per axis


def _yaw_of(quat_wxyz: np.ndarray) -> float:
    w, x, y, z = quat_wxyz
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


class _Segment:
    """Move the commanded TCP to ``pos`` / ``yaw`` with a speed cap, optionally set the gripper."""

    def __init__(self, phase: str, pos, yaw: float, grip: float, speed: float, tol_m: float = 0.004,
                 wait: int = 0, held: tuple[str, float] | None = None, carried: str | None = None) -> None:
        self.phase, self.pos, self.yaw, self.grip = phase, np.asarray(pos, float), yaw, grip
        self.speed, self.tol_m, self.wait = speed, tol_m, wait
        # (object, desired object-centre z): on entry, the TCP z is corrected by the measured
        # TCP-to-object offset, so a cube grasped high or low is still set down gently.
        self.held = held
        # object in the hand: on entry, the TCP xy is shifted by the measured TCP-to-object xy
        # offset, so the object's centre (not the hand's) arrives over the target
        self.carried = carried


class ScriptedExpert:
    """Expert for ``stack`` (2 or 3 blocks), ``pick_place`` and ``push``.

    Usage: ``expert.reset(env, seed)`` after ``env.reset``, then ``action, phase = expert.act()``
    each step.
    """

    def __init__(self, approach_offset_m: float = APPROACH_OFFSET_M, place_held_object: bool = False,
                 regrasp_off_centre_m: float = 0.0) -> None:
        if not 0.0 <= approach_offset_m <= 0.1:
            raise ValueError(f"approach_offset_m={approach_offset_m} must lie in [0, 0.1] m")
        if not 0.0 <= regrasp_off_centre_m <= 0.03:
            raise ValueError(f"regrasp_off_centre_m={regrasp_off_centre_m} must lie in [0, 0.03] m "
                             "(0 = off; e.g. 0.01)")
        self.env: TabletopEnv | None = None
        self.approach_offset_m = approach_offset_m
        # carry and place the held object's centre over the target (compensating an off-centre
        # grasp) rather than the TCP; off = the original expert (its own grasps are centred)
        self.place_held_object = place_held_object
        # DAgger labels: a grasp the policy closes with the block further than this off the TCP
        # along the fingers (where closing cannot centre it) is opened and re-approached over the
        # block's centre instead of finished; 0 = off (the original expert finishes any grasp)
        self.regrasp_off_centre_m = regrasp_off_centre_m
        self.relabel = False  # set by act_from_state: the plan follows the state, no segment timeout

    # ------------------------------------------------------------------ episode setup
    def reset(self, env: TabletopEnv, seed: int) -> None:
        self.env = env.unwrapped if hasattr(env, "unwrapped") else env
        self.rng = np.random.default_rng(seed + 7919)
        self.v_max = float(self.rng.uniform(0.010, 0.024))
        self.plan: list = []
        self.k = 0
        self.wait_left = 0
        self.stage = 0  # index of the current pick-and-place / push leg
        self.regrasps = 0
        self.steps_in_seg = 0
        task = self.env.cfg.task
        if task == "reach":
            raise ValueError("task 'reach' has no scripted expert")
        self.legs = []
        order = self.env.spec_task.order
        if task == "stack":
            self.legs = [("stack", upper, lower) for lower, upper in zip(order[:-1], order[1:])]
        elif task == "pick_place":
            self.legs = [("place", order[0], self.env.spec_task.goal)]
        else:
            self.legs = [("push", order[0], self.env.spec_task.goal)]
        self._plan_leg()

    # ------------------------------------------------------------------ planning
    def _pose(self, name: str) -> tuple[np.ndarray, float, float]:
        pos, quat = self.env.backend.object_pose(name)
        return pos, _yaw_of(quat), self.env.scene.object(name).half_size_m[2]

    def _grasp_yaw(self, obj_yaw: float) -> float:
        _, cur_yaw, _ = self.env.commanded_target()
        cands = [obj_yaw + k * np.pi / 2 for k in range(-4, 5)]
        cands = [c for c in cands if -np.pi / 2 <= c <= np.pi / 2]
        return float(self.rng.choice(cands)) if cands else cur_yaw

    def _pause(self) -> int:
        return int(self.rng.integers(1, 6)) if self.rng.random() < 0.3 else 0

    def _plan_leg(self) -> None:
        self.plan, self.k, self.steps_in_seg = [], 0, 0
        if self.stage >= len(self.legs):
            tgt, yaw, grip = self.env.commanded_target()
            self.plan = [_Segment("retreat", tgt, yaw, grip, self.v_max, wait=10**6)]
            return
        kind, obj, dest = self.legs[self.stage]
        if kind == "push":
            self._plan_push(obj, dest)
        else:
            self._plan_pick_place(obj, dest, kind)

    def _plan_pick_place(self, obj: str, dest: str, kind: str) -> None:
        v, rng = self.v_max, self.rng
        pos, oyaw, h = self._pose(obj)
        gyaw = self._grasp_yaw(oyaw)
        if kind == "stack":
            place_xy, place_z = self._place_target(obj, dest, kind)
        else:
            goal = next(g for g in self.env.scene.goals if g.name == dest)
            jitter = rng.uniform(-0.3, 0.3, 2) * (np.array(goal.half_size_m) - h)
            place_xy, place_z = np.array(goal.center_m) + jitter, h + 0.006
        tgt, _, _ = self.env.commanded_target()
        hover = float(rng.uniform(0.06, 0.10))
        high = float(rng.uniform(0.16, 0.24))
        # drawn at the default scale either way, so the other draws of an episode stay the same
        side = rng.uniform(-APPROACH_OFFSET_M, APPROACH_OFFSET_M, 2) * (self.approach_offset_m / APPROACH_OFFSET_M)
        segs = []
        if rng.random() < 0.5:  # "up, over, down" via a high point
            segs.append(_Segment("transport", [tgt[0], tgt[1], max(tgt[2], high)], gyaw, 0.0, v, 0.01))
        segs += [
            _Segment("transport", [pos[0] + side[0], pos[1] + side[1], pos[2] + hover], gyaw, 0.0, v, 0.008),
            _Segment("approach", [pos[0], pos[1], pos[2] + 0.03], gyaw, 0.0, 0.6 * v, 0.004, self._pause()),
            _Segment("approach", [pos[0], pos[1], max(pos[2] - 0.004, 0.012)], gyaw, 0.0, 0.4 * v, 0.003),
            _Segment("grasp", [pos[0], pos[1], max(pos[2] - 0.004, 0.012)], gyaw, 1.0, 0.4 * v, 0.003, 8),
            _Segment("lift", [pos[0], pos[1], pos[2] + hover], gyaw, 1.0, 0.6 * v, 0.008),
        ]
        self.plan = segs + self._carry_segments(obj, place_xy, place_z, gyaw)

    def _place_target(self, obj: str, dest: str, kind: str) -> tuple[np.ndarray, float]:
        """Where the carried object's centre goes (xy) and the height it is released at (for a
        re-planned carry: the goal's centre, without the first plan's random jitter)."""
        _, _, h = self._pose(obj)
        if kind == "stack":
            dpos, _, dh = self._pose(dest)
            return dpos[:2], dpos[2] + dh + h + 0.006
        goal = next(g for g in self.env.scene.goals if g.name == dest)
        return np.array(goal.center_m[:2], float), h + 0.006

    def _carry_segments(self, obj: str, place_xy, place_z: float, gyaw: float) -> list[_Segment]:
        v, rng = self.v_max, self.rng
        carry = max(place_z + 0.05, float(rng.uniform(0.10, 0.18)))
        held = obj if self.place_held_object else None
        return [
            _Segment("transport", [place_xy[0], place_xy[1], carry], gyaw, 1.0, v, 0.006, self._pause(),
                     carried=held),
            _Segment("place", [place_xy[0], place_xy[1], place_z + 0.02], gyaw, 1.0, 0.5 * v, 0.003,
                     held=(obj, place_z - 0.006 + 0.02), carried=held),
            _Segment("place", [place_xy[0], place_xy[1], place_z], gyaw, 1.0, 0.3 * v, 0.002, 4,
                     held=(obj, place_z - 0.006 + 0.003), carried=held),
            _Segment("release", [place_xy[0], place_xy[1], place_z], gyaw, 0.0, 0.3 * v, 0.002, 8,
                     carried=held),
            _Segment("retreat", [place_xy[0], place_xy[1], place_z + float(rng.uniform(0.05, 0.10))],
                     gyaw, 0.0, 0.6 * v, 0.01, self._pause()),
        ]

    def _plan_push(self, obj: str, goal_name: str) -> None:
        v, rng = self.v_max, self.rng
        pos, _, h = self._pose(obj)
        goal = np.array(next(g for g in self.env.scene.goals if g.name == goal_name).center_m)
        err = goal - pos[:2]
        if rng.random() < 0.5 or min(abs(err)) < 0.03:
            direction = err / max(np.linalg.norm(err), 1e-6)
        else:  # L-shaped: first along the axis with the larger (or a random) error component
            axis = int(rng.integers(2)) if rng.random() < 0.5 else int(np.argmax(abs(err)))
            direction = np.zeros(2)
            direction[axis] = np.sign(err[axis])
        behind = pos[:2] - direction * (h + 0.035)
        tgt, _, _ = self.env.commanded_target()
        segs = []
        # Go around the block: via a point beside it if the straight path would hit it.
        to_behind = behind - tgt[:2]
        rel = pos[:2] - tgt[:2]
        t = np.clip(rel @ to_behind / max(to_behind @ to_behind, 1e-9), 0, 1)
        if np.linalg.norm(tgt[:2] + t * to_behind - pos[:2]) < h + 0.04:
            perp = np.array([-direction[1], direction[0]])
            perp = perp if rng.random() < 0.5 else -perp
            via = pos[:2] + perp * (h + 0.06)
            segs.append(_Segment("transport", [via[0], via[1], PUSH_Z_M], 0.0, 1.0, v, 0.01))
            segs.append(_Segment("transport", [via[0] - direction[0] * (h + 0.035), via[1] - direction[1] * (h + 0.035), PUSH_Z_M], 0.0, 1.0, v, 0.01))
        segs.append(_Segment("approach", [behind[0], behind[1], PUSH_Z_M], 0.0, 1.0, 0.7 * v, 0.005, self._pause()))
        # Push far enough to put the block centre on the goal centre along this direction.
        dist = float(err @ direction)
        end = pos[:2] + direction * dist - direction * (h + 0.012)
        segs.append(_Segment("place", [end[0], end[1], PUSH_Z_M], 0.0, 1.0, 0.5 * v, 0.004))
        back = end - direction * 0.03
        segs.append(_Segment("retreat", [back[0], back[1], PUSH_Z_M], 0.0, 1.0, 0.6 * v, 0.006))
        self.plan = segs

    # ------------------------------------------------------------------ acting
    def _leg_done(self) -> bool:
        kind, obj, dest = self.legs[self.stage]
        pos, _, h = self._pose(obj)
        if kind == "push":
            goal = next(g for g in self.env.scene.goals if g.name == dest)
            return all(abs(pos[i] - goal.center_m[i]) < goal.half_size_m[i] - 0.015 for i in range(2))
        if kind == "stack":
            dpos, _, dh = self._pose(dest)
            return np.linalg.norm(pos[:2] - dpos[:2]) < dh and abs(pos[2] - dpos[2] - dh - h) < 0.012
        goal = next(g for g in self.env.scene.goals if g.name == dest)
        return all(abs(pos[i] - goal.center_m[i]) < goal.half_size_m[i] for i in range(2)) and pos[2] < h + 0.01

    def _holding(self, obj: str) -> bool:
        pos, _, _ = self._pose(obj)
        tcp, _ = self.env.tcp_pose()
        return np.linalg.norm(pos - tcp) < 0.04 and self.env.backend.gripper_width() > 0.01

    def act(self) -> tuple[np.ndarray, int]:
        """Next ``ee_delta`` action (5,) float32 and the phase id of this step."""
        seg = self.plan[self.k]
        tgt, yaw, _ = self.env.commanded_target()
        kind, obj, _ = self.legs[min(self.stage, len(self.legs) - 1)]
        # Slip / miss detection: after lifting, the object must be between the fingers.
        if self.stage < len(self.legs) and kind != "push" and seg.phase in ("lift", "transport") \
                and self.k > 4 and not self._holding(obj):
            self.regrasps += 1
            self._plan_leg()
            seg = self.plan[self.k]
        if seg.held is not None and self.steps_in_seg == 0:
            name, z_obj = seg.held
            seg.pos[2] = z_obj + (tgt[2] - self._pose(name)[0][2])
            seg.held = None
        if seg.carried is not None and self.steps_in_seg == 0:
            seg.pos[:2] += tgt[:2] - self._pose(seg.carried)[0][:2]
            seg.carried = None
        delta = seg.pos - tgt
        n = np.linalg.norm(delta)
        step = delta * min(1.0, seg.speed / n) if n > 1e-9 else delta
        step = np.clip(step, -MAX_DPOS_M, MAX_DPOS_M)
        dyaw = float(np.clip(np.angle(np.exp(1j * (seg.yaw - yaw))), -MAX_DYAW_RAD, MAX_DYAW_RAD))
        action = np.array([*step, dyaw, seg.grip], np.float32)
        phase = PHASE_ID[seg.phase]
        self.steps_in_seg += 1
        tcp, tcp_yaw = self.env.tcp_pose()
        arrived = (n - np.linalg.norm(step) < 1e-6 and abs(seg.yaw - yaw - dyaw) < 1e-3
                   and np.linalg.norm(tcp - seg.pos) < max(seg.tol_m, 0.004) + 0.004)
        if arrived or (self.steps_in_seg > 60 and not self.relabel):
            if self.wait_left < seg.wait:
                self.wait_left += 1
            else:
                self.wait_left, self.steps_in_seg = 0, 0
                self.k += 1
                if self.k >= len(self.plan):
                    if self.stage < len(self.legs) and self._leg_done():
                        self.stage += 1
                    self._plan_leg()  # next leg, or retry this one (e.g. the block slipped)
        return action, phase

    # ------------------------------------------------------------------ relabelling (DAgger)
    def act_from_state(self) -> tuple[np.ndarray, int]:
        """The expert's action for the state the env is in now, whoever drove it there.

        For labelling the states a learned policy visits (DAgger, Ross et al. 2011): the plan
        follows the state rather than the expert's own progress. A block the policy closed the
        gripper on is grasped (the plan jumps to its grasp segment) or, once lifted, carried (the
        carry is re-planned from here); a block it dropped while placing is approached again
        (a drop while lifting or carrying already re-plans, see :meth:`act`); plan segments the arm
        has already got past are skipped; a segment never times out.
        """
        self.relabel = True
        if self.stage < len(self.legs):
            kind, obj, dest = self.legs[self.stage]
            if kind != "push":
                self._follow_state(obj, dest, kind)
        return self.act()

    def _follow_state(self, obj: str, dest: str, kind: str) -> None:
        seg = self.plan[self.k]
        _, yaw, grip = self.env.commanded_target()
        pos, _, h = self._pose(obj)
        near = grip > 0.5 and self._holding(obj)  # commanded closed with the block between the fingers
        closed_on = near and self.env.backend.gripper_width() < 2 * h + 0.006
        lifted = pos[2] > h + 0.01  # off the table, where every block to move starts
        ahead = seg.phase not in ("release", "retreat")
        phases = [sg.phase for sg in self.plan]
        if near and not lifted and ahead and self._off_centre(pos):
            if seg.grip > 0.5 or seg.phase not in ("transport", "approach"):
                self.regrasps += 1  # open, and go back above the block's centre
                self._plan_leg()
                self.k = [sg.phase for sg in self.plan].index("approach")
            else:
                self._skip_passed()  # already re-approaching
                return
        elif closed_on and lifted and ahead and (seg.grip < 0.5 or seg.phase == "grasp"):
            place_xy, place_z = self._place_target(obj, dest, kind)  # carry it from here
            self.plan, self.k = self._carry_segments(obj, place_xy, place_z, yaw), 0
        elif near and ahead and seg.grip < 0.5 and "grasp" in phases:
            self.k = phases.index("grasp")  # the policy is closing on it: finish the grasp
        elif seg.phase == "grasp" and closed_on and self.steps_in_seg >= seg.wait:
            self.k += 1  # closed for as long as the expert waits itself: lift
        elif seg.phase == "place" and not self._holding(obj):
            self.regrasps += 1
            self._plan_leg()  # dropped while placing: approach it again
            return
        else:
            self._skip_passed()
            return
        self.steps_in_seg = self.wait_left = 0

    def _off_centre(self, pos: np.ndarray) -> bool:
        """The block's centre lies more than ``regrasp_off_centre_m`` off the TCP along the hand's
        x axis (along the fingers; they close along y, which centres the block on that axis)."""
        if not self.regrasp_off_centre_m:
            return False
        tcp, tcp_yaw = self.env.tcp_pose()
        along = float(np.dot(pos[:2] - tcp[:2], [np.cos(tcp_yaw), np.sin(tcp_yaw)]))
        return abs(along) > self.regrasp_off_centre_m

    def _skip_passed(self) -> None:
        """Advance past plan segments the arm is already beyond: nearer the next target than the
        segment's own target is. Before a vertical move (a descent onto an object or a base) the
        arm must also be within 1 cm of its line: a misaligned arm goes back to the point above,
        as the expert itself always does, instead of cutting the corner toward a collision."""
        tcp, _ = self.env.tcp_pose()
        while self.k + 1 < len(self.plan):
            seg, nxt = self.plan[self.k], self.plan[self.k + 1]
            if seg.grip != nxt.grip or seg.phase in ("grasp", "release"):
                break
            if np.linalg.norm(tcp - nxt.pos) >= np.linalg.norm(seg.pos - nxt.pos):
                break
            vertical = np.linalg.norm(seg.pos[:2] - nxt.pos[:2]) < 0.01
            if vertical and np.linalg.norm(tcp[:2] - nxt.pos[:2]) > 0.01:
                break
            self.k += 1
            self.steps_in_seg = self.wait_left = 0


def make_expert(task: str, approach_offset_m: float = APPROACH_OFFSET_M,
                place_held_object: bool = False, regrasp_off_centre_m: float = 0.0) -> ScriptedExpert:
    """The scripted expert for ``task`` (one class serves stack, pick_place and push; none for reach)."""
    if task not in EXPERT_TASKS:
        raise ValueError(f"task {task!r} has no scripted expert (it is the world-model planner's task: "
                         "edge run --policy comet --task reach)")
    return ScriptedExpert(approach_offset_m, place_held_object, regrasp_off_centre_m)
