"""The scripted expert as a runtime policy: ``edge run --policy expert`` runs it through the same
control loop, inference worker, action queue, safety supervisor and telemetry as the VLA.

:class:`ExpertPolicy` satisfies ``edge.contracts.ChunkPolicy`` structurally (sim imports nothing
from edge). The expert acts from privileged simulator state (object poses, the commanded target),
so it needs the env the loop drives: the runtime hands it over once, right after it made the env
(``build_runtime`` calls ``policy.attach_env(env)``).

Episodes: the runtime resets the env with the episode's seed (``SimArmDriver.reset_episode(seed)``
-> ``env.reset(seed=seed)``, which records ``env.episode_seed``) and then calls ``policy.reset()``
(``edge.contracts.reset_policy_episode``, at the loop's start / ``new_episode``). The expert is
(re)started at the first query after that, exactly as :func:`sim.rollout.expert_episode` does
after ``env.reset``: ``make_expert(task, ...)`` and ``expert.reset(env, seed)`` with that seed, so
the same seed draws the same grasp yaw, speed profile and pauses. A new scene is also detected by
itself (``env.scene`` is a new object after every reset), so a caller that resets the env without
calling ``reset()`` still gets a fresh expert.

Per query: ``encode(obs)`` runs ``expert.act()`` on the env's current state (the observation's
pixels are not used) and ``sample`` returns that one action as a chunk of length H = 1; the noise
and the number of steps K are ignored (one expert decision = one "function evaluation": run it with
K = 1 and C = 1, so the recorded NFE counts 1 per action). Run it with ``execution="sync"`` (its
``spec.execution``) and inline inference on the loop's thread: ``act`` reads the simulator, which
only the loop's thread may touch while it steps. With zero charged latency (``edge run`` charges
``--latency constant --latency-ms 0`` unless told otherwise) each tick queries and executes one
action, as the expert's own loop does; with a charged latency of a period or more the arm holds
while it waits, like any blocking policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.experts import APPROACH_OFFSET_M, PHASES, make_expert

DEFAULT_IMAGE_SIZE = 96


@dataclass(frozen=True)
class ExpertSpec:
    """What the runtime reads to build the env and the loop around the expert."""

    task: str = "stack"
    cameras: tuple[str, ...] = ("front",)
    image_hw: tuple[int, int] = (DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE)
    action_dim: int = 5
    chunk_len: int = 1
    control_rate_hz: float = 20.0
    env: dict = field(default_factory=dict)  # extra TabletopEnv settings (none)
    execution: str = "sync"  # one decision per query, executed before the next one


class ExpertPolicy:
    """The scripted expert of :mod:`sim.experts` as a ChunkPolicy (H = 1, ``ee_delta``)."""

    action_layout = "ee_delta"
    backend_name = "expert"
    chunk_len = 1
    action_dim = 5

    def __init__(self, task: str, image_size: int = DEFAULT_IMAGE_SIZE,
                 approach_offset_m: float = APPROACH_OFFSET_M, place_held_object: bool = False,
                 control_rate_hz: float = 20.0) -> None:
        if not 16 <= int(image_size) <= 512:
            raise ValueError(f"image_size={image_size} is out of range; allowed [16, 512]")
        make_expert(task, approach_offset_m, place_held_object)  # checks the settings now
        self.task = task
        self.approach_offset_m, self.place_held_object = approach_offset_m, place_held_object
        s = int(image_size)
        self.spec = ExpertSpec(task=task, image_hw=(s, s), control_rate_hz=float(control_rate_hz))
        self.control_rate_hz = float(control_rate_hz)
        self.env: Any = None
        self.expert: Any = None
        self.seed: int | None = None  # the seed the current expert was started with
        self.phase: str | None = None  # the phase of the last action
        self.episodes = 0  # experts started (one per episode)
        self._scene: Any = None  # the env scene the current expert plans in
        self._unseeded = np.random.default_rng(0)  # seeds for scenes reset without a seed

    # ------------------------------------------------------------------ runtime hooks
    def attach_env(self, env: Any) -> None:
        """The env the loop drives (the runtime calls this once, after it made the env)."""
        u = env.unwrapped if hasattr(env, "unwrapped") else env
        if u.cfg.task != self.task:
            raise ValueError(f"the expert was made for task {self.task!r}, the env runs {u.cfg.task!r}")
        if u.cfg.action_mode != self.action_layout:
            raise ValueError(f"the expert emits {self.action_layout} actions; the env takes "
                             f"{u.cfg.action_mode!r}")
        if abs(u.cfg.control_rate_hz - self.control_rate_hz) > 1e-9:
            raise ValueError(f"the expert plans at {self.control_rate_hz:g} Hz; the env runs at "
                             f"{u.cfg.control_rate_hz:g} Hz")
        self.env, self.expert, self._scene = u, None, None

    def reset(self, obs: Any = None) -> None:
        """A new episode starts (the env was reset): the next query starts a fresh expert."""
        self.expert, self._scene = None, None

    def describe(self) -> dict[str, Any]:
        return {"kind": "expert", "name": f"sim.experts ({self.task})",
                "image_hw": list(self.spec.image_hw), "approach_offset_m": self.approach_offset_m,
                "place_held_object": self.place_held_object}

    # ------------------------------------------------------------------ ChunkPolicy
    def encode(self, obs: Any) -> np.ndarray:
        """The expert's next action (Da,) from the simulator's current state; ``obs`` is unused."""
        u = self.env
        if u is None:
            raise RuntimeError("ExpertPolicy acts from the simulator's state: attach_env(env) first "
                               "(the runtime does; the expert runs inline, not in an inference process)")
        if self.expert is None or self._scene is not u.scene:
            self._start(u)
        action, phase = self.expert.act()
        self.phase = PHASES[int(phase)]
        return np.asarray(action, np.float32)

    def sample(self, features: Any, noise: np.ndarray, num_steps: int) -> np.ndarray:
        """The action from :meth:`encode` as a chunk (1, Da); noise and K are ignored."""
        return np.asarray(features, np.float32).reshape(1, self.action_dim).copy()

    @property
    def regrasps(self) -> int:
        """Re-grasps of the current episode's expert."""
        return int(getattr(self.expert, "regrasps", 0))

    # ------------------------------------------------------------------ internals
    def _start(self, u: Any) -> None:
        if u.scene is None:
            raise RuntimeError("the env has no scene yet: reset it before the first query")
        seed = getattr(u, "episode_seed", None)
        if seed is None:  # reset without a seed: still reproducible for this policy object
            seed = int(self._unseeded.integers(2**31 - 1))
        self.expert = make_expert(u.cfg.task, self.approach_offset_m, self.place_held_object)
        self.expert.reset(u, int(seed))
        self.seed, self._scene = int(seed), u.scene
        self.episodes += 1
