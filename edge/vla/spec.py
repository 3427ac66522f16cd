"""What a trained VLA needs in order to run, independent of the framework that runs it.

A :class:`ModelSpec` travels inside every checkpoint (``model.pt``) and every export
(``metadata.json``): layouts, control rate, chunk length, cameras, normalisation statistics and the
language encoder id with cached instruction embeddings. Backends read it without importing torch.

Normalisation: the action expert works in normalised units ``(a - action_mean) / action_std``;
the sampling loop maps the chunk back with ``a = x * action_std + action_mean`` (float32). Proprio
is normalised inside the exported encoder graph, so callers pass raw proprio.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edge.errors import EdgeError

SPEC_VERSION = 1


class CheckpointMismatch(EdgeError):
    """A checkpoint was trained for another robot setup (rate, layout, proprio) than configured."""


def _as_layout(value: Any) -> str | tuple[str, ...]:
    return value if isinstance(value, str) else tuple(str(v) for v in value)


EE_DELTA_NAMES = ("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper")


def layout_name(layout: str | tuple[str, ...]) -> str:
    """A layout as recorded (a name or per-dimension names) -> its name ("ee_delta", "joint_pos").

    Unknown per-dimension layouts come back as their comma-joined names.
    """
    if isinstance(layout, str):
        return layout
    names = tuple(layout)
    if names == EE_DELTA_NAMES:
        return "ee_delta"
    if names and names[-1] == "gripper" and all(n == f"q{i}_rad" for i, n in enumerate(names[:-1])):
        return "joint_pos"
    return ",".join(names)


@dataclass(frozen=True)
class ModelSpec:
    """Everything about a trained VLA except its weights. Shapes: H = chunk_len, Da = action_dim."""

    task: str
    action_layout: str | tuple[str, ...]  # as written by the demonstration recorder
    proprio_layout: str | tuple[str, ...]
    action_dim: int  # Da
    proprio_dim: int  # P
    control_rate_hz: float  # the rate consecutive chunk actions are meant for
    chunk_len: int  # H
    cameras: tuple[str, ...]  # image inputs, e.g. ("front",) or ("front", "wrist")
    image_hw: tuple[int, int]
    feature_dim: int  # Df: encoder output per query
    lang_encoder_id: str  # frozen sentence encoder the embeddings came from
    lang_dim: int
    action_mean: tuple[float, ...]  # (Da,) physical units
    action_std: tuple[float, ...]
    proprio_mean: tuple[float, ...]  # (P,)
    proprio_std: tuple[float, ...]
    # Cached instruction embeddings (text -> (lang_dim,)) so known instructions need no encoder.
    instruction_embeddings: dict[str, tuple[float, ...]] = field(default_factory=dict)
    # The encoder takes a per-episode "scene" input (B, 6): the scene locator's output on the
    # episode's first frame (VLAConfig.scene_memory); the runtime policy fills and keeps it.
    scene_memory: bool = False
    version: int = SPEC_VERSION

    def __post_init__(self) -> None:
        if len(self.action_mean) != self.action_dim or len(self.action_std) != self.action_dim:
            raise EdgeError(f"model spec: action stats have {len(self.action_mean)} values, "
                            f"action_dim is {self.action_dim}")
        if len(self.proprio_mean) != self.proprio_dim or len(self.proprio_std) != self.proprio_dim:
            raise EdgeError(f"model spec: proprio stats have {len(self.proprio_mean)} values, "
                            f"proprio_dim is {self.proprio_dim}")
        if min(self.action_std) <= 0 or min(self.proprio_std) <= 0:
            raise EdgeError("model spec: normalisation std must be > 0")

    @property
    def encoder_inputs(self) -> tuple[str, ...]:
        """The encoder's inputs in order (images, proprio, instruction, and scene memory if any)."""
        return (*self.cameras, "proprio", "lang", *(("scene",) if self.scene_memory else ()))

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_rate_hz

    def action_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std), each (Da,) float32."""
        return (np.asarray(self.action_mean, np.float32), np.asarray(self.action_std, np.float32))

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for k, v in out.items():
            if isinstance(v, tuple):
                out[k] = list(v)
        out["instruction_embeddings"] = {k: list(v) for k, v in self.instruction_embeddings.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        if data.get("version") != SPEC_VERSION:
            raise EdgeError(f"model spec version {data.get('version')!r} is not supported "
                            f"(this build reads version {SPEC_VERSION}); re-export or retrain")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise EdgeError(f"model spec has unknown keys {unknown}; was it written by a newer build?")
        d = dict(data)
        d["action_layout"] = _as_layout(d["action_layout"])
        d["proprio_layout"] = _as_layout(d["proprio_layout"])
        for k in ("cameras", "image_hw", "action_mean", "action_std", "proprio_mean", "proprio_std"):
            d[k] = tuple(d[k])
        d["instruction_embeddings"] = {k: tuple(float(x) for x in v)
                                       for k, v in d.get("instruction_embeddings", {}).items()}
        return cls(**d)

    def check_robot(
        self,
        robot: Any = None,
        *,
        control_rate_hz: float | None = None,
        action_layout: str | tuple[str, ...] | list[str] | None = None,
        proprio_layout: str | tuple[str, ...] | list[str] | None = None,
        source: str = "checkpoint",
    ) -> None:
        """Refuse to run on a robot configured for another rate or layout.

        ``robot``: anything with ``control_rate_hz`` and ``action_layout`` (and optionally
        ``action_names``), e.g. :class:`edge.robot_spec.RobotSpec`; explicit values override it.
        Values left None are not checked.
        """
        if robot is not None:
            if control_rate_hz is None:
                control_rate_hz = robot.control_rate_hz
            if action_layout is None:
                # a spec records the layout by name ("ee_delta") or as per-dimension names
                names = tuple(getattr(robot, "action_names", ()) or ())
                action_layout = (robot.action_layout if isinstance(self.action_layout, str) or not names
                                 else names)
        problems = []
        if control_rate_hz is not None and not math.isclose(
            float(control_rate_hz), self.control_rate_hz, rel_tol=1e-6
        ):
            problems.append(f"control rate {self.control_rate_hz:g} Hz, the robot is configured "
                            f"for {float(control_rate_hz):g} Hz")
        if action_layout is not None and _as_layout(action_layout) != self.action_layout:
            problems.append(f"action layout {self.action_layout!r}, the robot uses "
                            f"{_as_layout(action_layout)!r}")
        if proprio_layout is not None and _as_layout(proprio_layout) != self.proprio_layout:
            problems.append(f"proprio layout {self.proprio_layout!r}, the robot provides "
                            f"{_as_layout(proprio_layout)!r}")
        if problems:
            raise CheckpointMismatch(
                f"{source} was trained for " + "; ".join(problems)
                + ". Use a checkpoint trained for this robot setup (edge train vla on demonstrations "
                "recorded at this rate and layout) or change the robot configuration."
            )
