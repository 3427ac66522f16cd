"""The one place a control loop is wired: worker + safety supervisor + queue + loop around a driver,
an observation source and a policy. ``edge run``/the episode runner (sim driver, virtual clock) and
the HIL host (firmware-bridge driver, real clock) both build their loop here, so every entry point
runs the same components with the same defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def wire_loop(robot: Any, clock: Any, driver: Any, observer: Any, policy: Any, scheduler: Any,
              recorder: Any = None, *, inference: str = "auto", latency: Any = None, seed: int = 0,
              noise_temperature: float = 0.5, rtc_soft_steps: int = -1, execution: str = "async",
              seam: str = "replace", record_ticks: bool = True,
              policy_factory: Callable[[], Any] | None = None, loop_cpus: str = "",
              inference_cpus: str = "", queue: Any = None, safety: Any = None) -> Any:
    """-> a ControlLoop (not started). ``latency``: an ``edge.clock.LatencyConfig`` (None = measured);
    ``queue``: an ``edge.action_queue.QueueConfig`` (None: ``seam`` with the other defaults);
    ``safety``: an ``edge.safety.SafetyConfig`` (None = the defaults)."""
    from edge.action_queue import QueueConfig
    from edge.clock import LatencyConfig
    from edge.control_loop import ControlLoop, LoopConfig
    from edge.inference_worker import InferenceWorker, WorkerConfig
    from edge.safety import SafetyConfig, SafetySupervisor

    worker = InferenceWorker(policy, scheduler, clock,
                             WorkerConfig(mode=inference, latency=latency or LatencyConfig(), seed=seed,
                                          rtc_soft_steps=rtc_soft_steps, noise_temperature=noise_temperature,
                                          process_cpus=inference_cpus),
                             policy_factory=policy_factory)
    return ControlLoop(LoopConfig(rate_hz=robot.control_rate_hz, execution=execution,
                                  record_ticks=record_ticks and recorder is not None, cpus=loop_cpus),
                       clock, driver, observer, worker, SafetySupervisor(robot, safety or SafetyConfig()),
                       queue or QueueConfig(seam=seam), recorder)
