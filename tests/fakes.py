"""Small test fixtures shared by the tests: a deterministic ramp policy, a driver that tracks its
targets perfectly, an observation source, and a builder that wires a control loop on a virtual clock.

These are test doubles at the boundaries (policy, robot), not product code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edge.action_queue import QueueConfig
from edge.clock import ConstantLatency, VirtualClock
from edge.contracts import DriverState, Observation, RobotState
from edge.control_loop import ControlLoop, LoopConfig
from edge.inference_worker import InferenceWorker, WorkerConfig
from edge.robot_spec import RobotSpec, load_robot_spec
from edge.safety import SafetyConfig, SafetySupervisor
from edge.schedulers import fixed


def joint_spec(**overrides: Any) -> RobotSpec:
    """The Panda spec with the joint-position layout (8-D actions)."""
    ov = ["action_layout=joint_pos"] + [f"{k}={v}" for k, v in overrides.items()]
    return load_robot_spec("panda", ov)


class RampPolicy:
    """TEST FIXTURE. Emits a known ramp in absolute time: action i of a chunk observed at t is
    ``base + slope * (t + i * dt)``, whatever the noise and the number of steps. So, whatever the
    latency and seam, a correctly time-aligned loop executes ``base + slope * t_tick`` at every tick.

    ``denoise_step`` is the exact flow-matching velocity toward that target, so K Euler steps land
    on it exactly; ``fail_at``/``nan_at`` make a given query (1-based) raise or return NaNs.
    """

    backend_name = "fake"

    def __init__(
        self,
        base: np.ndarray,
        slope: np.ndarray,
        chunk_len: int = 10,
        rate_hz: float = 20.0,
        layout: str = "joint_pos",
        fail_at: int | None = None,
        nan_at: int | None = None,
    ) -> None:
        self.base, self.slope = np.asarray(base, np.float64), np.asarray(slope, np.float64)
        self.chunk_len, self.action_dim = chunk_len, len(self.base)
        self.control_rate_hz, self.action_layout = rate_hz, layout
        self.fail_at, self.nan_at = fail_at, nan_at
        self.queries: list[float] = []  # observation times seen by encode
        self.steps = 0

    def target(self, t_obs: float) -> np.ndarray:
        i = np.arange(self.chunk_len)[:, None]
        return (self.base + self.slope * (t_obs + i / self.control_rate_hz)).astype(np.float32)

    def encode(self, obs: Observation) -> dict[str, Any]:
        self.queries.append(obs.t_s)
        if self.fail_at == len(self.queries):
            raise RuntimeError("fake policy failure")
        return {"t": obs.t_s, "nan": self.nan_at is not None and len(self.queries) >= self.nan_at}

    def denoise_step(self, features: dict[str, Any], x: np.ndarray, tau: float, dtau: float) -> np.ndarray:
        self.steps += 1
        if features["nan"]:
            return np.full_like(x, np.nan)
        v = (self.target(features["t"]) - x) / max(1.0 - tau, 1e-9)
        return x + dtau * v

    def sample(self, features: dict[str, Any], noise: np.ndarray, num_steps: int) -> np.ndarray:
        x = np.array(noise, np.float32)
        for k in range(num_steps):
            x = self.denoise_step(features, x, k / num_steps, 1.0 / num_steps)
        return x


class BlackBoxRampPolicy(RampPolicy):
    """TEST FIXTURE. The same ramp behind ``sample`` only (no ``denoise_step`` attribute)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "denoise_step":
            raise AttributeError(name)
        return super().__getattribute__(name)

    def sample(self, features: dict[str, Any], noise: np.ndarray, num_steps: int) -> np.ndarray:
        self.steps += num_steps
        return self.target(features["t"])


class ImageRampPolicy(RampPolicy):
    """TEST FIXTURE. The ramp, shifted in time by the mean of the ``front`` image: the chunk
    depends on the pixels (to check that frames reach a worker process intact)."""

    def encode(self, obs: Observation) -> dict[str, Any]:
        features = super().encode(obs)
        features["t"] += float(np.mean(obs.images["front"])) / 100.0
        return features


@dataclass
class FakeDriver:
    """TEST FIXTURE. Tracks joint targets perfectly; ``ee_delta`` commands move ``ee_pos_m``."""

    clock: Any
    spec: RobotSpec
    state: DriverState = DriverState.DISCONNECTED
    sent: list[np.ndarray] = field(default_factory=list)
    estops: int = 0
    holds: int = 0

    def __post_init__(self) -> None:
        self.action_layout = self.spec.action_layout
        self.q = self.spec.q_home()
        self.gripper = 0.0
        self.ee = self.spec.fk(self.q)[0]

    def connect(self) -> None:
        self.state = DriverState.PASSIVE

    def activate(self) -> None:
        assert self.state in (DriverState.PASSIVE, DriverState.ESTOPPED), self.state
        self.state = DriverState.ACTIVE

    def read_state(self) -> RobotState:
        return RobotState(self.clock.now(), self.q.copy(), np.zeros(7), self.gripper, self.ee.copy())

    def send_command(self, command: np.ndarray) -> np.ndarray:
        if self.state is not DriverState.ACTIVE:
            raise RuntimeError(f"command while {self.state.value}")
        c = np.asarray(command, np.float64)
        if self.action_layout == "joint_pos":
            self.q = c[:7].copy()
            self.ee = self.spec.fk(self.q)[0]
        else:
            self.ee = self.ee + c[:3]
        self.gripper = float(c[-1])
        self.sent.append(np.array(command, np.float32))
        return np.array(command, np.float32)

    def hold(self) -> np.ndarray:
        self.holds += 1
        return np.append(self.q, self.gripper).astype(np.float32)

    def estop(self) -> None:
        self.estops += 1
        self.state = DriverState.ESTOPPED

    def close(self) -> None:
        self.state = DriverState.DISCONNECTED


class FakeObserver:
    """TEST FIXTURE. A tiny black image and the joint state as proprio."""

    def observe(self, state: RobotState) -> Observation:
        img = np.zeros((4, 4, 3), np.uint8)
        proprio = np.append(state.q_rad, state.gripper).astype(np.float32)
        return Observation({"front": img}, proprio, "test", state.t_s)


def ramp_for(spec: RobotSpec, slope_rad_s: float = 0.05, **kw: Any) -> RampPolicy:
    """A slow ramp on joint 0 from the home posture, gripper at 0.5."""
    base = np.append(spec.q_home(), 0.5)
    slope = np.zeros(8)
    slope[0] = slope_rad_s
    return RampPolicy(base, slope, rate_hz=spec.control_rate_hz, **kw)


def build_loop(
    policy: Any = None,
    seam: str = "replace",
    latency_s: float = 0.0,
    K: int = 4,
    C: int = 6,
    execution: str = "async",
    scheduler: Any = None,
    recorder: Any = None,
    safety: SafetyConfig | None = None,
    spec: RobotSpec | None = None,
    observer: Any = None,
    **loop_kw: Any,
):
    """A loop on a VirtualClock with constant charged latency. Returns (loop, driver, policy, clock)."""
    spec = spec or joint_spec()
    clock = VirtualClock()
    policy = policy or ramp_for(spec)
    worker = InferenceWorker(
        policy,
        scheduler or fixed(K, C),
        clock,
        WorkerConfig(mode="inline"),
        latency_model=ConstantLatency(latency_s),
    )
    driver = FakeDriver(clock, spec)
    loop = ControlLoop(
        LoopConfig(rate_hz=spec.control_rate_hz, execution=execution, **loop_kw),
        clock,
        driver,
        observer if observer is not None else FakeObserver(),
        worker,
        SafetySupervisor(spec, safety or SafetyConfig()),
        QueueConfig(seam=seam),
        recorder,
    )
    return loop, driver, policy, clock


class JumpPolicy(RampPolicy):
    """TEST FIXTURE. The ramp plus an offset that changes with every query (``jump`` per query on
    every joint), so consecutive chunks disagree and the seam strategy is visible."""

    def __init__(self, *args: Any, jump: float = 0.02, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.jump = jump

    def encode(self, obs: Observation) -> dict[str, Any]:
        f = super().encode(obs)
        f["offset"] = self.jump * (len(self.queries) % 2)  # alternate: 0, jump, 0, jump, ...
        return f

    def target_for(self, features: dict[str, Any]) -> np.ndarray:
        t = self.target(features["t"])
        t[:, :7] += features["offset"]
        return t

    def denoise_step(self, features: dict[str, Any], x: np.ndarray, tau: float, dtau: float) -> np.ndarray:
        self.steps += 1
        return x + dtau * (self.target_for(features) - x) / max(1.0 - tau, 1e-9)


class SteppingClock:
    """TEST FIXTURE. A manual clock that behaves like a real one for the loop (``is_virtual`` is
    False, so overruns are detected); ``spend(dt)`` simulates work that takes time."""

    is_virtual = False

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep_until(self, t_s: float) -> None:
        self.t = max(self.t, t_s)

    def spend(self, dt_s: float) -> None:
        self.t += dt_s


def counting_ramp_for(spec: RobotSpec, fail: bool = False, exit_code: int | None = None,
                      count_sleep_s: float = 0.0, encode_sleep_s: float = 0.0) -> RampPolicy:
    """TEST FIXTURE. A ramp policy with its own per-episode counts (``episode_stats``: the queries
    and denoising steps it ran since the last reset); ``fail``: counting raises; ``exit_code``: the
    process exits when asked to count; ``count_sleep_s`` / ``encode_sleep_s``: counting / each
    query's encode takes that long."""

    class Counting(RampPolicy):
        def encode(self, obs: Observation) -> dict[str, Any]:
            time.sleep(encode_sleep_s)
            return super().encode(obs)

        def episode_stats(self, reset: bool = False) -> dict[str, int]:
            if fail:
                raise RuntimeError("fake counting failure")
            if exit_code is not None:
                import os

                os._exit(exit_code)
            time.sleep(count_sleep_s)
            out = {"ramp_queries": len(self.queries), "ramp_steps": self.steps}
            if reset:
                self.queries, self.steps = [], 0
            return out

    base = ramp_for(spec)
    return Counting(base.base, base.slope, rate_hz=spec.control_rate_hz)


def request_timed_ramp_for(spec: RobotSpec) -> RampPolicy:
    """TEST FIXTURE. A ramp policy with ``encode_query`` (as a planner has): records the request time
    each query was given (``t_request_s``, absent: None) and reports them in ``episode_stats``."""

    class Timed(RampPolicy):
        def encode_query(self, obs, queued, executed, delay_steps, t_request_s=None):
            self.requests.append(t_request_s)
            return self.encode(obs)

        def episode_stats(self, reset: bool = False) -> dict[str, Any]:
            out = {"requests": list(self.requests)}
            if reset:
                self.requests = []
            return out

    base = ramp_for(spec)
    pol = Timed(base.base, base.slope, rate_hz=spec.control_rate_hz)
    pol.requests = []
    return pol


def dying_ramp_for(spec: RobotSpec) -> RampPolicy:
    """TEST FIXTURE. A ramp policy whose process exits (as on a segfault) when it is queried."""

    class Dying(RampPolicy):
        def encode(self, obs: Any) -> Any:
            import os

            os._exit(3)

    base = ramp_for(spec)
    return Dying(base.base, base.slope, rate_hz=spec.control_rate_hz)


def spy_steps(env: Any) -> list[np.ndarray]:
    """Make ``env.step`` also append each executed action (float32) to the returned list; ``del
    env.step`` restores the original."""
    executed: list[np.ndarray] = []
    step = env.step

    def spy(action: Any) -> Any:
        executed.append(np.array(action, np.float32))
        return step(action)

    env.step = spy
    return executed


class ObservingFixed:
    """TEST FIXTURE. A fixed(K, C) scheduler with the feedback hook: records the query ids and NFE
    of every result it is told about (picklable, so process mode can copy it)."""

    name = "observing"

    def __init__(self, k: int, c: int) -> None:
        from edge.schedulers import FixedScheduler

        self.inner = FixedScheduler(k, c)
        self.seen: list[tuple[int, int]] = []

    def plan(self, features: Any, history: Any) -> Any:
        return self.inner.plan(features, history)

    def reset(self) -> None:
        pass

    def observe(self, result: Any) -> None:
        self.seen.append((result.request.query_id, result.nfe))


def campaign_square(job: dict) -> dict:
    """TEST FIXTURE for campaigns (importable by Ray workers): the seed squared and the worker's pid."""
    import os

    return {"seed": job["seed"], "value": job["seed"] ** 2, "pid": os.getpid()}


class _HoldSpec:
    cameras = ("front",)
    image_hw = (64, 64)


def broken_factory(cfg: Any, robot: Any) -> Any:
    """TEST FIXTURE. A policy factory with a bug of its own."""
    raise AttributeError("the user's own bug")


def spec_only(cfg: Any, robot: Any) -> _HoldSpec:
    """TEST FIXTURE. A policy factory that returns something that is not a policy."""
    return _HoldSpec()


class HoldPolicy:
    """TEST FIXTURE. A user's own ChunkPolicy for the sim: every chunk holds the arm still."""

    chunk_len, action_dim, control_rate_hz, action_layout = 8, 5, 20.0, "ee_delta"
    backend_name = "hold"
    spec = _HoldSpec()

    def encode(self, obs: Any) -> np.ndarray:
        return np.zeros(4, np.float32)

    def sample(self, features: Any, noise: Any, num_steps: int) -> np.ndarray:
        return np.zeros((8, 5), np.float32)


def hold_policy(cfg: Any, robot: Any) -> HoldPolicy:
    """TEST FIXTURE: ``--policy tests.fakes:hold_policy``."""
    return HoldPolicy()


CUSTOM_BACKEND_CALLS: list[str] = []


def counting_backend(config: Any, model_path: Any, robot: Any = None, verify: bool = True) -> Any:
    """TEST FIXTURE: ``--backend tests.fakes:counting_backend`` — the built-in torch backend, with each
    ``encode`` call recorded in :data:`CUSTOM_BACKEND_CALLS` (shows a user's backend is the one used)."""
    from edge.backends.factories import torch_backend

    backend = torch_backend(config, model_path, robot=robot, verify=verify)
    encode = backend.encode

    def counted(inputs: Any) -> Any:
        CUSTOM_BACKEND_CALLS.append(config.name)
        return encode(inputs)

    backend.encode = counted
    return backend


def options_scheduler(cfg: Any, policy: Any) -> Any:
    """TEST FIXTURE: ``--scheduler tests.fakes:options_scheduler``, a fixed schedule whose K it reads from
    ``scheduler.options.k`` (and nothing else there)."""
    from edge.schedulers import FixedScheduler

    k = int(cfg.scheduler.options.get("k", 2))
    return FixedScheduler(num_steps=k, execute=8)
