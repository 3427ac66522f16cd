"""Procedural scene randomisation (TerraZero-style: nothing logged, everything drawn per episode).

Two named distributions:

* ``train`` — colours red/blue/green/yellow, cube half-sizes 2.0–2.5 cm, camera jitter ±2 cm,
  at most one distractor (30 % of episodes).
* ``ood`` — held-out colours orange/purple/cyan/magenta, held-out sizes (1.7–1.9 or 2.7–2.9 cm),
  1–2 distractors, camera shifted 4–7 cm and ±3° field of view.

Everything comes from one ``numpy.random.Generator`` seeded by the episode seed, so the same seed
gives the same scene in both engines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.robot_model import Q_HOME_RAD
from sim.scene import BoxObject, Camera, GoalPatch, Light, Scene

COLORS = {
    "red": (0.85, 0.12, 0.10, 1.0),
    "blue": (0.12, 0.25, 0.85, 1.0),
    "green": (0.12, 0.70, 0.20, 1.0),
    "yellow": (0.92, 0.85, 0.10, 1.0),
    "orange": (0.95, 0.50, 0.05, 1.0),
    "purple": (0.50, 0.15, 0.70, 1.0),
    "cyan": (0.10, 0.80, 0.85, 1.0),
    "magenta": (0.90, 0.20, 0.65, 1.0),
}
DISTRIBUTIONS = ("train", "ood")
_PALETTE = {"train": ("red", "blue", "green", "yellow"), "ood": ("orange", "purple", "cyan", "magenta")}
GOAL_RGBA = (0.95, 0.95, 0.95, 1.0)  # a white square marked on the table

# Reachable, camera-visible workspace for object centres (metres, robot base frame).
WORKSPACE_X_M = (0.42, 0.64)
WORKSPACE_Y_M = (-0.20, 0.20)
MIN_SEPARATION_M = 0.085


@dataclass(frozen=True)
class SceneRequest:
    """What a task needs: how many named cubes, goals, and the camera layout."""

    n_cubes: int
    n_goals: int = 0
    top_down: bool = False
    goal_half_m: float = 0.05
    wrist_camera: bool = False
    friction_range: tuple[float, float] = (0.8, 1.2)
    n_distractors: int = -1  # -1: the distribution's default; otherwise exactly this many
    colors: tuple[str, ...] = ()  # fixed colours of the first cubes (the rest drawn from the palette)


def _sample_positions(rng: np.random.Generator, n: int, sep_m: float) -> list[np.ndarray]:
    for _ in range(1000):
        pts = [np.array([rng.uniform(*WORKSPACE_X_M), rng.uniform(*WORKSPACE_Y_M)]) for _ in range(n)]
        if all(np.linalg.norm(a - b) >= sep_m for i, a in enumerate(pts) for b in pts[i + 1:]):
            return pts
    raise RuntimeError(f"could not place {n} objects {sep_m} m apart in the workspace")


def _half_size(rng: np.random.Generator, distribution: str) -> float:
    if distribution == "train":
        return float(rng.uniform(0.020, 0.025))
    return float(rng.uniform(0.017, 0.019) if rng.random() < 0.5 else rng.uniform(0.027, 0.029))


def sample_scene(rng: np.random.Generator, req: SceneRequest, distribution: str = "train") -> Scene:
    """Draw a scene: named cubes first (task objects), then distractors, goals, cameras, lights."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution={distribution!r}; choose one of {DISTRIBUTIONS}")
    palette = list(_PALETTE[distribution])
    n_distractors = (int(rng.random() < 0.3) if distribution == "train" else int(rng.integers(1, 3)))
    if req.n_distractors >= 0:
        if req.n_cubes + req.n_distractors > len(palette):
            raise ValueError(f"{req.n_cubes} cubes + n_distractors={req.n_distractors} exceed the "
                             f"{len(palette)} colours of distribution {distribution!r}")
        n_distractors = req.n_distractors
    n_distractors = min(n_distractors, len(palette) - req.n_cubes)
    if req.colors:
        bad = [c for c in req.colors if c not in COLORS]
        if bad or len(req.colors) > req.n_cubes:
            raise ValueError(f"colors={req.colors!r}: at most n_cubes={req.n_cubes} names from {tuple(COLORS)}")
        rest = [c for c in palette if c not in req.colors]
        colors = list(req.colors) + [rest[i] for i in rng.permutation(len(rest))]
        colors = colors[: req.n_cubes + n_distractors]
    else:
        colors = [palette[i] for i in rng.permutation(len(palette))[: req.n_cubes + n_distractors]]
    n_pts = req.n_cubes + n_distractors + req.n_goals
    sep = max(MIN_SEPARATION_M, req.goal_half_m + 0.06 if req.n_goals else 0.0)
    pts = _sample_positions(rng, n_pts, sep)
    objects = []
    for i, color in enumerate(colors):
        h = _half_size(rng, distribution)
        objects.append(BoxObject(
            name=color, half_size_m=(h, h, h), rgba=COLORS[color], color_name=color,
            mass_kg=float(rng.uniform(0.05, 0.2)), friction=float(rng.uniform(*req.friction_range)),
            pos_m=(float(pts[i][0]), float(pts[i][1]), h),
            yaw_rad=float(rng.uniform(-np.pi / 4, np.pi / 4)), distractor=i >= req.n_cubes,
        ))
    goals = tuple(
        GoalPatch(name=f"goal{j}", center_m=(float(pts[len(colors) + j][0]), float(pts[len(colors) + j][1])),
                  half_size_m=(req.goal_half_m, req.goal_half_m), rgba=GOAL_RGBA)
        for j in range(req.n_goals)
    )
    jitter = 0.02 if distribution == "train" else 0.0
    shift = np.zeros(3) if distribution == "train" else rng.uniform(0.04, 0.07, 3) * rng.choice([-1, 1], 3)
    fov_jitter = 0.0 if distribution == "train" else float(rng.uniform(-3, 3))
    if req.top_down:
        base_pos, target, up, fov = np.array([0.53, 0.0, 0.95]), np.array([0.53, 0.0, 0.0]), (-1.0, 0.0, 0.0), 40.0
    else:
        base_pos, target, up, fov = np.array([1.20, 0.0, 0.62]), np.array([0.50, 0.0, 0.02]), (0.0, 0.0, 1.0), 42.0
    cam_pos = base_pos + rng.uniform(-jitter, jitter, 3) + shift
    cameras = [Camera("front", tuple(map(float, cam_pos)), tuple(map(float, target)), fov + fov_jitter, up)]
    if req.wrist_camera:
        cameras.append(Camera("wrist", (0.0, 0.0, 0.0), (0.0, 0.0, -1.0), 75.0))
    lights = (
        Light(tuple(map(float, rng.uniform([0.2, -0.6, 1.2], [0.8, 0.6, 2.0]))), float(rng.uniform(0.5, 0.8))),
        Light(tuple(map(float, rng.uniform([0.2, -0.6, 1.2], [0.8, 0.6, 2.0]))), float(rng.uniform(0.2, 0.4))),
    )
    grey = float(rng.uniform(0.45, 0.7))
    table = (grey + 0.05, grey, grey - 0.05, 1.0)
    return Scene(objects=tuple(objects), goals=goals, cameras=tuple(cameras), lights=lights,
                 table_rgba=table, q_home_rad=Q_HOME_RAD)
