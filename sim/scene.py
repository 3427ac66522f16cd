"""Engine-neutral scene description: what a backend must build. Produced by :mod:`sim.randomization`.

Frames: world = robot base frame; x forward (away from the robot base), y left, z up; table top at
z = 0; lengths in metres, angles in radians, colours RGBA in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class BoxObject:
    """A dynamic cube/box. ``half_size_m`` is (hx, hy, hz); pose is its centre and yaw."""

    name: str
    half_size_m: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    mass_kg: float
    friction: float
    pos_m: tuple[float, float, float]
    yaw_rad: float
    color_name: str = ""
    distractor: bool = False


@dataclass(frozen=True)
class GoalPatch:
    """A flat coloured patch on the table (visual only, no collision)."""

    name: str
    center_m: tuple[float, float]
    half_size_m: tuple[float, float]
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class Camera:
    """Pinhole camera looking from ``pos_m`` at ``target_m``; ``fovy_deg`` vertical field of view."""

    name: str
    pos_m: tuple[float, float, float]
    target_m: tuple[float, float, float]
    fovy_deg: float
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)


@dataclass(frozen=True)
class Light:
    pos_m: tuple[float, float, float]
    diffuse: float


@dataclass(frozen=True)
class Scene:
    objects: tuple[BoxObject, ...]
    goals: tuple[GoalPatch, ...]
    cameras: tuple[Camera, ...]
    lights: tuple[Light, ...]
    table_rgba: tuple[float, float, float, float]
    q_home_rad: tuple[float, ...]
    extras: dict = field(default_factory=dict)

    def object(self, name: str) -> BoxObject:
        for obj in self.objects:
            if obj.name == name:
                return obj
        raise KeyError(f"scene has no object {name!r}; objects: {[o.name for o in self.objects]}")


def look_at(pos: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Rotation matrix (columns = camera x right, y up, z backward) for an OpenGL-style camera."""
    z = pos - target
    z = z / np.linalg.norm(z)
    x = np.cross(up, z)
    if np.linalg.norm(x) < 1e-9:  # looking straight down: pick any right vector
        x = np.cross(np.array([0.0, 1.0, 0.0]) if abs(z[1]) < 0.9 else np.array([1.0, 0, 0]), z)
        x = -x if up[0] < 0 else x
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    return np.stack([x, y, z], axis=1)
