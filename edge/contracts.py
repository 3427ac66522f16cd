"""The contracts between the runtime's parts: frozen records and structural ``typing.Protocol``s.

Everything on the robot side of the project talks through these types, so a policy, a scheduler, a
driver or a clock can be swapped without touching the loop. Implementations satisfy the protocols
structurally (no inheritance needed). This module imports numpy only.

Shapes and units (H = chunk length, Da = action dimension, P = proprio dimension):

* ``Observation``: ``images[name]`` (H_img, W_img, 3) uint8, ``proprio`` (P,) float32,
  ``t_s`` monotonic seconds on the loop's clock (the time the state was read).
* ``ActionChunk``: ``actions`` (H, Da) float32; action ``i`` is meant for time
  ``t_start_s + i * period_s``; only the first ``execute`` are eligible to run.
* Action layouts (see ``configs/robots/*.yaml``):
  ``"ee_delta"`` = ``[dx_m, dy_m, dz_m, dyaw_rad, gripper]`` (gripper 0 = open .. 1 = closed),
  ``"joint_pos"`` = ``[q0_rad .. q6_rad, gripper]``.

Flow-matching convention used by :meth:`DenoisingPolicy.denoise_step` and the RTC guidance:
``tau`` runs from 0 (pure noise) to 1 (clean actions) and ``x_tau = tau * x_clean + (1 - tau) * noise``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import numpy as np

ACTION_LAYOUTS = ("ee_delta", "joint_pos")


@dataclass(frozen=True)
class Observation:
    """One snapshot of what the policy sees. Arrays must not be mutated after construction."""

    images: Mapping[str, np.ndarray]  # name -> (H_img, W_img, 3) uint8
    proprio: np.ndarray  # (P,) float32
    instruction: str
    t_s: float  # monotonic time of the state read, on the loop's clock


@dataclass(frozen=True)
class ActionChunk:
    """A timed chunk of actions produced by one query."""

    actions: np.ndarray  # (H, Da) float32
    period_s: float  # time between consecutive actions
    t_start_s: float  # time action 0 is meant for (= observation time)
    execute: int  # how many actions from the start may run (C <= H)
    query_id: int = -1
    epoch: int = 0  # reset epoch the query belongs to; stale epochs are discarded

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[0])


@dataclass(frozen=True)
class QueryPlan:
    """What the scheduler decided for one query.

    ``noise`` (H, Da) float32 or None (the worker draws seeded Gaussian noise). It is the flow's
    starting point x(0) **in the policy's latent** — for the reference VLA the normalised action space,
    where the training noise is N(0, I) — not in physical action units (a policy maps latent to
    actions itself: ``to_actions``). A steering scheduler (EQRL, DSRL) therefore outputs noise of
    unit scale. ``num_steps`` K >= 1 denoising steps; ``execute`` C in [1, H] actions to run from the chunk start;
    ``next_query_in_steps`` ticks after this query's observation when the next query should start
    (the loop may start it earlier so the queue does not run dry, see ``ControlLoop``);
    ``signals`` free-form numbers that are logged per query (e.g. a variance or an entropy).
    """

    noise: np.ndarray | None
    num_steps: int
    execute: int
    next_query_in_steps: int
    signals: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryContext:
    """The history a scheduler may look at when planning (all measured, windowed)."""

    t_s: float  # observation time of this query
    period_s: float  # control period
    chunk_len: int  # H of the policy
    queue_depth: int  # executable actions left in the queue at query time
    latency_p50_s: float  # windowed inference latency of recent queries (nan before the first)
    latency_p95_s: float
    delay_steps: int  # ceil(latency_p95_s / period_s): actions that run while this query computes
    query_index: int  # 0 for the first query of an episode
    last_plan: QueryPlan | None = None


@dataclass(frozen=True)
class DenoiseTrace:
    """Per-step clean-action estimates from one sampling run, for post-sampling schedulers.

    ``x_clean`` (K, H, Da): estimate of the clean chunk after each of the K steps.
    """

    x_clean: np.ndarray


@dataclass(frozen=True)
class RobotState:
    """Measured robot state at ``t_s``. ``ee_pos_m`` may be None (then safety computes it by FK)."""

    t_s: float
    q_rad: np.ndarray  # (7,)
    qd_rad_s: np.ndarray  # (7,)
    gripper: float  # 0 = open .. 1 = closed
    ee_pos_m: np.ndarray | None = None  # (3,) tool centre point, base frame
    ee_yaw_rad: float | None = None


class DriverState(str, Enum):
    DISCONNECTED = "disconnected"
    PASSIVE = "passive"  # connected, reads state, refuses commands
    ACTIVE = "active"  # takes commands
    ESTOPPED = "estopped"  # latched until activate() is called explicitly


@runtime_checkable
class ChunkPolicy(Protocol):
    """A frozen policy (VLA) or a planner that turns an observation into a chunk of actions.

    Flow-time convention: a query integrates the policy's flow from noise at flow time tau = 0 to
    actions at tau = 1 in K equal Euler steps (tau_k = k / K, dtau = 1 / K); one step is one network
    function evaluation (NFE). ``spec`` describes what the runtime must feed the policy: it reads
    ``spec.image_hw`` (camera image height, width) and ``spec.cameras`` (camera names, default
    ``("front",)``) when it builds a scene (:func:`edge.runtime.session.build_runtime`), and, if present, ``spec.task`` (a checkpoint trained for another task is refused),
    ``spec.execution`` ("sync" for a planner that needs each decision executed first) and
    ``spec.env`` (extra scene settings).
    """

    chunk_len: int  # H
    action_dim: int  # Da
    control_rate_hz: float  # the rate the chunk's actions are meant for
    action_layout: str  # one of ACTION_LAYOUTS
    # spec: read by edge.runtime.build_runtime to set up the scene's cameras (see the class doc); the
    # control loop itself does not need it, so it is not a structural member of the protocol

    def encode(self, obs: Observation) -> Any:
        """Run the expensive part (vision + language prefix) once per query; returns features."""

    def sample(self, features: Any, noise: np.ndarray, num_steps: int) -> np.ndarray:
        """Integrate ``num_steps`` denoising steps from ``noise`` (H, Da); returns actions (H, Da)."""


@runtime_checkable
class DenoisingPolicy(ChunkPolicy, Protocol):
    """A ChunkPolicy that exposes one denoising step, so the worker can run K steps itself (and
    apply real-time-chunking guidance or record a trace)."""

    def denoise_step(self, features: Any, x: np.ndarray, tau: float, dtau: float) -> np.ndarray:
        """One Euler step of the flow from ``tau`` to ``tau + dtau``: ``x`` (H, Da) -> (H, Da).

        ``x`` may live in a normalised latent space; a policy that does so also provides
        ``to_actions(x) -> actions`` and ``to_latent(actions) -> x`` (both (H, Da)), which the worker
        uses to map the RTC guidance target in and the result out. Without them, x is actions.
        """


@runtime_checkable
class Scheduler(Protocol):
    """Decides, per query, the noise, denoising steps K, actions to execute C and the next query."""

    name: str

    def plan(self, features: Any, history: QueryContext) -> QueryPlan: ...

    def reset(self) -> None:
        """Forget per-episode state."""


@runtime_checkable
class ObservingScheduler(Scheduler, Protocol):
    """A scheduler that learns from what its plans produced (feedback hook).

    ``observe(result)`` is called on the loop's thread with every query result the loop accepts
    (an ``edge.inference_worker.QueryResult``: the plan as executed, the chunk, latency, NFE), in
    every execution mode — inline, thread and process (in process mode the worker process plans with
    its own copy; this copy, in the loop's process, is the one that observes).
    """

    def observe(self, result: Any) -> None: ...


@runtime_checkable
class RefiningScheduler(Scheduler, Protocol):
    """A scheduler that revises its plan after sampling, from the denoising trace (e.g. DVAC)."""

    def refine(self, plan: QueryPlan, trace: DenoiseTrace) -> QueryPlan: ...


@runtime_checkable
class RobotDriver(Protocol):
    """A robot arm (simulated or real). Lifecycle: disconnected -> passive -> active.

    Commands are accepted only when active. ``estop`` latches ``ESTOPPED``; only an explicit
    ``activate()`` leaves it (never automatically). A simulated driver advances its physics by one
    control period per ``send_command``/``hold`` call, and may offer ``elapse(periods)``: the loop
    calls it with the deadlines it skipped after an overrun, so the simulated world does not wait.
    """

    action_layout: str
    state: DriverState

    def connect(self) -> None:
        """disconnected -> passive."""

    def activate(self) -> None:
        """passive/estopped -> active (e.g. torque on, servo targets = current position)."""

    def read_state(self) -> RobotState: ...

    def send_command(self, command: np.ndarray) -> np.ndarray:
        """Send one command in ``action_layout``; returns what was actually sent after the
        driver's own clamps (Da,)."""

    def hold(self) -> np.ndarray:
        """Hold the current position for one period; returns what was sent."""

    def estop(self) -> None:
        """Stop now and latch ESTOPPED."""

    def close(self) -> None:
        """Release the hardware; -> disconnected."""


@runtime_checkable
class ObservationSource(Protocol):
    """Builds an Observation from the latest state (cameras must serve a buffered latest frame;
    this is called on the loop thread and must not block for long). Optional ``prefetch()``: read
    the current observation now, so the next :meth:`observe` of the same state only returns it; a
    real-clock loop calls it in a tick's slack when the next tick will observe before its command
    (:attr:`edge.loop_config.LoopConfig.prefetch_observation`). Optional ``check()``: raise if a sensor
    has failed (a stale or frozen camera); the loop calls it every tick the arm runs, before the
    tick's command, so a failed camera stops the arm at the next tick, not at the next query."""

    def observe(self, state: RobotState) -> Observation: ...


@runtime_checkable
class Clock(Protocol):
    """Monotonic time in seconds and absolute-deadline sleeping. ``is_virtual``: time advances only
    when the loop says so (deterministic evaluation; inference latency is charged, not waited for)."""

    is_virtual: bool

    def now(self) -> float: ...

    def sleep_until(self, t_s: float) -> None: ...


def reset_policy_episode(policy: Any, obs: Any = None) -> None:
    """A new episode starts: a policy with per-episode state (``reset(obs=None)``, e.g. the VLA's
    scene memory) forgets it, and starts from ``obs`` if given; other policies are left alone."""
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset(obs)
