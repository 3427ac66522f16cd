"""The one place a control loop is wired: worker + safety supervisor + queue + loop around a driver,
an observation source and a policy, from a :class:`edge.runtime.config.RuntimeConfig`'s worker,
queue, loop and safety sections. ``edge run``/the episode runner (sim driver, virtual clock) and
the HIL host (firmware-bridge driver, real clock) both build their loop here, so every entry point
runs the same components with the same defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def wire_loop(robot: Any, clock: Any, driver: Any, observer: Any, policy: Any, scheduler: Any,
              recorder: Any, cfg: Any, *, latency: Any = None, seed: int = 0,
              policy_factory: Callable[[], Any] | None = None) -> Any:
    """-> a ControlLoop (not started). ``cfg``: the RuntimeConfig whose ``worker``, ``queue``,
    ``loop`` and ``safety`` sections are used; ``latency``: an ``edge.clock.LatencyConfig``
    (None = measured); ``seed``: the worker's noise seed."""
    from edge.clock import LatencyConfig
    from edge.control_loop import ControlLoop, LoopConfig
    from edge.inference_worker import InferenceWorker, WorkerConfig
    from edge.safety import SafetySupervisor

    w = cfg.worker
    worker = InferenceWorker(policy, scheduler, clock,
                             WorkerConfig(mode=w.mode, latency=latency or LatencyConfig(), seed=seed,
                                          rtc_soft_steps=w.rtc_soft_steps, noise_temperature=w.noise_temperature,
                                          process_cpus=w.cpus, torch_threads=w.torch_threads or _plan_threads(cfg),
                                          start_timeout_s=w.start_timeout_s),
                             policy_factory=policy_factory)
    return ControlLoop(LoopConfig(rate_hz=robot.control_rate_hz, execution=cfg.loop.execution,
                                  record_ticks=cfg.loop.record_ticks and recorder is not None, cpus=cfg.loop.cpus,
                                  timer_slack_ns=cfg.loop.timer_slack_ns,
                                  gil_switch_interval_s=cfg.loop.gil_switch_interval_s),
                       clock, driver, observer, worker, SafetySupervisor(robot, cfg.safety), cfg.queue, recorder)


def _plan_threads(cfg: Any) -> int:
    """The planner's own torch threads for its worker thread or process (``policy.comet.plan_threads``;
    0 for other policies: the worker's default)."""
    policy = getattr(cfg, "policy", None)
    return int(policy.comet.plan_threads) if policy is not None and policy.name == "comet" else 0
