"""Task definitions: scene request, language instruction, and the success test.

Every success test requires the result to *hold*: the condition must be true with the objects at
rest (|v| < 2 cm/s, |w| < 0.5 rad/s) and — where the task involves grasping — the fingers not
touching the object, continuously for ``hold_s`` (0.5 s by default). The env counts consecutive
control steps; see :class:`sim.env.TabletopEnv`.

* ``stack`` (2 or 3 cubes): each upper cube's centre lies above the cube below (xy offset less
  than that cube's half size) at one cube-height above it (±1 cm).
* ``pick_place``: the named cube's centre lies inside the goal square and the cube rests on the table.
* ``push``: like pick_place, but the cube is pushed (gripper closed, TCP kept in a plane above the
  table), so there is no release condition.
* ``reach``: the ``push`` scene and arm (gripper closed, TCP in the push plane); the measured TCP
  comes within ``REACH_RADIUS_M`` (xy) of the named cube's centre. Nothing needs to be at rest:
  ``hold_s`` counts the control steps the TCP stays there (0 = one step, the world models' reach3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.randomization import SceneRequest
from sim.scene import Scene

LIN_REST_M_S = 0.02
ANG_REST_RAD_S = 0.5
TASKS = ("stack", "pick_place", "push", "reach")
EXPERT_TASKS = ("stack", "pick_place", "push")  # the tasks sim.experts scripts (demonstrations, DAgger)
PLANAR_TASKS = ("push", "reach")  # gripper closed, the TCP kept in the push plane, xy moves only
REACH_RADIUS_M = 0.05  # reach: TCP to the cube centre (xy); closer than ~4 cm the TCP already pushes the cube


@dataclass(frozen=True)
class TaskSpec:
    """A task instance for one episode: which objects play which role, and the instruction."""

    name: str
    instruction: str
    order: tuple[str, ...]  # stack: bottom → top; pick_place/push: (object,)
    goal: str | None = None


_STACK2 = ("stack the {a} block on the {b} block", "put the {a} cube on top of the {b} cube",
           "place the {a} block onto the {b} block")
_STACK3 = ("stack the {a} block on the {b} block, then the {c} block on the {a} block",
           "build a tower: {b} at the bottom, then {a}, then {c}")
_PICK = ("put the {a} block in the white square", "place the {a} cube on the white square",
         "pick up the {a} block and put it on the white target")
_PUSH = ("push the {a} block onto the white square", "slide the {a} cube to the white square")
_REACH = ("move the gripper to the {a} block", "reach for the {a} cube")

# Held-out phrasings for evaluation (instructions="paraphrase"): never in the demonstrations. Each list
# has the length of its training list, so the same seed draws the same index: the scene, the roles and
# everything after are identical, only the wording differs.
_PARAPHRASE = {
    "stack2": ("set the {a} cube down on the {b} one", "move the {a} block so it sits on the {b} block",
               "the {a} block goes on top of the {b} block"),
    "stack3": ("put {a} on {b}, and then {c} on top of {a}", "make a stack with {b} first, {a} next and {c} last"),
    "pick_place": ("move the {a} block into the white square", "drop the {a} cube onto the white target",
                   "carry the {a} block over to the white square"),
    "push": ("nudge the {a} block into the white square", "shove the {a} cube onto the white target"),
    "reach": ("bring the gripper over to the {a} block", "go to the {a} cube"),
}
INSTRUCTION_SETS = ("train", "paraphrase")


def scene_request(task: str, n_blocks: int, wrist_camera: bool, push_target_color: str = "",
                  push_distractors: int = -1) -> SceneRequest:
    """The scene a task needs. ``push_target_color`` (push only): one target cube of that colour and
    ``push_distractors`` other cubes (the object-centric world-model tasks), instead of two cubes
    of which the instruction names one. ``reach`` asks for the ``push`` scene."""
    if task == "reach":
        task = "push"
    if task == "stack":
        return SceneRequest(n_cubes=n_blocks, wrist_camera=wrist_camera)
    if task == "pick_place":
        return SceneRequest(n_cubes=2, n_goals=1, wrist_camera=wrist_camera)
    if task == "push" and push_target_color:
        return SceneRequest(n_cubes=1, n_goals=1, top_down=True, goal_half_m=0.06, wrist_camera=wrist_camera,
                            friction_range=(0.4, 0.6), n_distractors=max(push_distractors, 0),
                            colors=(push_target_color,))
    if task == "push":
        # Lower friction: pushed low on the side, cubes with friction ~1 tip over instead of sliding.
        return SceneRequest(n_cubes=2, n_goals=1, top_down=True, goal_half_m=0.06,
                            wrist_camera=wrist_camera, friction_range=(0.4, 0.6))
    raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")


def make_spec(task: str, scene: Scene, rng: np.random.Generator, instructions: str = "train") -> TaskSpec:
    """Assign roles to the scene's (non-distractor) cubes and phrase the instruction
    (``instructions``: the training phrasings, or held-out ``paraphrase`` ones drawn the same way)."""
    if instructions not in INSTRUCTION_SETS:
        raise ValueError(f"instructions={instructions!r}; choose one of {INSTRUCTION_SETS}")
    para = instructions == "paraphrase"
    cubes = [o.name for o in scene.objects if not o.distractor]
    if task == "stack":
        order = tuple(cubes[i] for i in rng.permutation(len(cubes)))  # bottom first
        if len(order) == 2:
            lst = _PARAPHRASE["stack2"] if para else _STACK2
            text = lst[rng.integers(len(_STACK2))].format(a=order[1], b=order[0])
        else:
            lst = _PARAPHRASE["stack3"] if para else _STACK3
            text = lst[rng.integers(len(_STACK3))].format(a=order[1], b=order[0], c=order[2])
        return TaskSpec("stack", text, order)
    target = cubes[int(rng.integers(len(cubes)))]
    templates = {"pick_place": _PICK, "push": _PUSH, "reach": _REACH}[task]
    lst = _PARAPHRASE[task] if para else templates
    text = lst[rng.integers(len(templates))].format(a=target)
    return TaskSpec(task, text, (target,), goal=scene.goals[0].name)


def _norm(v) -> float:
    """``float(np.linalg.norm(v))``; for a float64 vector its own formula sqrt(v.dot(v)) without
    the dispatch (a control step takes several)."""
    if type(v) is np.ndarray and v.dtype == np.float64 and v.ndim == 1:
        return math.sqrt(v.dot(v))
    return float(np.linalg.norm(v))


def at_rest(lin: np.ndarray, ang: np.ndarray) -> bool:
    return _norm(lin) < LIN_REST_M_S and _norm(ang) < ANG_REST_RAD_S


def success_now(spec: TaskSpec, scene: Scene, backend, tcp_m: np.ndarray | None = None) -> bool:
    """The instantaneous success condition (the env requires it to hold for ``hold_s``); ``reach``
    needs the measured TCP position ``tcp_m`` (3,) m."""
    if spec.name == "reach":
        if tcp_m is None:
            raise ValueError("task 'reach': success_now needs the measured TCP position (tcp_m)")
        pos, _ = backend.object_pose(spec.order[0])
        return _norm(np.asarray(tcp_m[:2], np.float64) - np.asarray(pos[:2], np.float64)) < REACH_RADIUS_M
    for name in spec.order:
        if not at_rest(*backend.object_velocity(name)):
            return False
    if spec.name == "stack":
        for lower, upper in zip(spec.order[:-1], spec.order[1:]):
            (pl, _), (pu, _) = backend.object_pose(lower), backend.object_pose(upper)
            hl, hu = scene.object(lower).half_size_m[0], scene.object(upper).half_size_m[0]
            if _norm(pu[:2] - pl[:2]) > hl or abs((pu[2] - pl[2]) - (hl + hu)) > 0.01:
                return False
        return not backend.fingers_touch(spec.order[-1])
    name = spec.order[0]
    pos, _ = backend.object_pose(name)
    goal = next(g for g in scene.goals if g.name == spec.goal)
    inside = all(abs(pos[i] - goal.center_m[i]) <= goal.half_size_m[i] for i in range(2))
    on_table = abs(pos[2] - scene.object(name).half_size_m[2]) < 0.01
    if not (inside and on_table):
        return False
    return spec.name == "push" or not backend.fingers_touch(name)


PROGRESS_STAGES = ("reach", "grasp", "transport", "place", "success")


def progress_stage(spec: TaskSpec, scene: Scene, backend, placed: bool | None = None) -> int:
    """How far an episode got, from privileged state (for failure analysis of learned policies).

    0 ``reach``: the object to move has not been lifted; 1 ``grasp``: it is lifted ≥ 2 cm;
    2 ``transport``: it is lifted and within 2 cm (xy) of its destination; 3 ``place``: the
    instantaneous success condition holds (at rest, released); 4 ``success`` is set by the env.
    For ``push`` (nothing is lifted) stage 1 means the block moved ≥ 2 cm; ``reach`` has stages 0
    and 3 only (the TCP is at the cube or not). ``placed`` may pass an already computed
    ``success_now`` (the env has it each step; ``reach`` needs it).
    """
    if placed if placed is not None else success_now(spec, scene, backend):
        return 3
    if spec.name == "reach":
        return 0
    name = spec.order[-1] if spec.name == "stack" else spec.order[0]
    pos, _ = backend.object_pose(name)
    obj = scene.object(name)
    if spec.name == "stack":
        dest = np.asarray(backend.object_pose(spec.order[-2])[0][:2])
    else:
        dest = np.asarray(next(g for g in scene.goals if g.name == spec.goal).center_m)
    if spec.name == "push":
        moved = np.linalg.norm(pos[:2] - np.asarray(obj.pos_m[:2])) >= 0.02
        return 2 if moved and np.linalg.norm(pos[:2] - dest) < 0.02 else int(moved)
    lifted = pos[2] >= obj.half_size_m[2] + 0.02
    if not lifted:
        return 0
    return 2 if np.linalg.norm(pos[:2] - dest) < 0.02 else 1
