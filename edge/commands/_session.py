"""Composition of one runtime session: sim env → driver → loop (+ safety, queue, worker, telemetry).

This is the app layer (DESIGN.md: "composition happens in one place"), shared by ``edge run``,
the evaluation grid and the latency benchmarks, so every number comes from the code path that
drives the robot.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.config import cfg, check_fields

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "vla" / "checkpoints" / "stack"


@dataclass(frozen=True)
class SessionConfig:
    """One run: which scene, which policy/backend/scheduler, which clock and seam."""

    task: str = cfg("stack", "task", choices=("stack", "pick_place", "push"))
    sim: str = cfg("mujoco", "physics engine", choices=("mujoco", "pybullet"))
    distribution: str = cfg("train", "scene randomisation", choices=("train", "ood"))
    n_blocks: int = cfg(2, "stack: number of cubes", range=(2, 3))
    checkpoint: str = cfg(str(DEFAULT_CHECKPOINT), "VLA checkpoint dir / model.pt / ONNX export dir")
    backend: str = cfg("onnxruntime", "inference backend", choices=("torch", "onnxruntime", "tensorrt"))
    scheduler: str = cfg("fixed", "compute scheduler", choices=("fixed", "dvac"))
    num_steps: int = cfg(10, "denoising steps K (fixed; dvac: steps per query)", range=(1, 100))
    execute: int = cfg(8, "actions executed per chunk C (fixed)", range=(1, 64))
    seam: str = cfg("replace", "chunk seam strategy (replace: measured best with the shipped VLA, see "
                    "benchmarks/results/latency_robustness.json)", choices=("replace", "weighted", "rtc"))
    noise_temperature: float = cfg(0.5, "scale of the initial noise of each query (1 = as trained, "
                                   "0 = deterministic; 0.5 measured best with the shipped VLA, see "
                                   "README)", range=(0.0, 4.0))
    rtc_soft_steps: int = cfg(-1, "rtc seam: queued actions after the frozen ones that are softly "
                              "guided (-1 = all, as the RTC paper; 0 = only the frozen ones)",
                              range=(-1, 1024))
    execution: str = cfg("async", "async (never wait on inference) or sync", choices=("async", "sync"))
    clock: str = cfg("virtual", "virtual (deterministic) or real (wall clock)", choices=("virtual", "real"))
    inference: str = cfg("auto", "where queries run: auto (virtual clock: inline, real: thread), "
                         "thread, process (own process: no GIL contention with the loop), inline",
                         choices=("auto", "thread", "process", "inline"))
    latency: str = cfg("measured", "virtual clock: measured, constant, or per_step latency",
                       choices=("measured", "constant", "per_step"))
    latency_ms: float = cfg(0.0, "constant latency per query (ms)", range=(0.0, 10000.0))
    episodes: int = cfg(3, "episodes", range=(1, 100000))
    seed: int = cfg(100000, "first episode seed (VLA evaluation seeds are disjoint from demo seeds)",
                    range=(0, None))
    max_steps: int = cfg(0, "control steps per episode (0 = the task's default)", range=(0, 100000))
    record_ticks: bool = cfg(True, "write one telemetry line per tick")
    video_episodes: int = cfg(1, "save a GIF of the first N episodes", range=(0, 1000))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class SessionResult:
    run_dir: Path
    summary: dict[str, Any]
    episodes: list[dict[str, Any]] = field(default_factory=list)


def _policy_loader(cfg_: SessionConfig):
    """(loader, robot): ``loader()`` builds the session's policy; picklable, so a worker process
    (``inference='process'``) can build its own copy."""
    import functools

    from edge.backends import BackendConfig
    from edge.robot_spec import load_robot_spec
    from edge.vla.policy import load_policy

    robot = load_robot_spec("panda")
    return functools.partial(load_policy, cfg_.checkpoint, BackendConfig(name=cfg_.backend, threads=1),
                             robot=robot), robot


def run_session(cfg_: SessionConfig, out_dir: str | Path, policy=None, robot=None,
                progress: bool = True) -> SessionResult:
    """Run ``cfg_.episodes`` episodes through the runtime loop; returns the summary."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    import numpy as np
    from tqdm import tqdm

    import sim
    from drivers.sim_arm import SimArmDriver, SimObserver
    from edge.action_queue import QueueConfig
    from edge.clock import LatencyConfig, RealClock, VirtualClock
    from edge.control_loop import ControlLoop, LoopConfig
    from edge.inference_worker import InferenceWorker, WorkerConfig
    from edge.safety import SafetyConfig, SafetySupervisor
    from edge.schedulers import SchedulerConfig, make_scheduler
    from edge.telemetry import RunRecorder

    factory = None
    if policy is None:
        loader, robot = _policy_loader(cfg_)
        policy = loader()
        factory = loader if cfg_.inference == "process" else None
    elif cfg_.inference == "process":
        from edge.errors import EdgeError

        raise EdgeError("inference='process' builds the policy from the checkpoint in the worker "
                        "process; it cannot take a policy object")
    out = Path(out_dir)
    cams = tuple(getattr(policy.spec, "cameras", ("front",)))
    env = sim.make_env(cfg_.task, sim=cfg_.sim, distribution=cfg_.distribution, n_blocks=cfg_.n_blocks,
                       image_size=int(policy.spec.image_hw[0]),
                       wrist_camera="wrist" in cams)
    clock = VirtualClock() if cfg_.clock == "virtual" else RealClock()
    driver = SimArmDriver(env, clock)
    observer = SimObserver(driver, cameras=cams)
    lat = LatencyConfig(kind=cfg_.latency, latency_s=cfg_.latency_ms / 1000.0)
    scheduler = make_scheduler(SchedulerConfig(kind=cfg_.scheduler, num_steps=cfg_.num_steps,
                                               execute=cfg_.execute))
    worker = InferenceWorker(policy, scheduler, clock,
                             WorkerConfig(mode=cfg_.inference, latency=lat, seed=cfg_.seed,
                                          rtc_soft_steps=cfg_.rtc_soft_steps,
                                          noise_temperature=cfg_.noise_temperature),
                             policy_factory=factory)
    meta = {"session": dataclasses.asdict(cfg_), "period_s": 1.0 / robot.control_rate_hz}
    recorder = RunRecorder(out, meta=meta)
    loop = ControlLoop(LoopConfig(rate_hz=robot.control_rate_hz, execution=cfg_.execution,
                                  record_ticks=cfg_.record_ticks),
                       clock, driver, observer, worker, SafetySupervisor(robot, SafetyConfig()),
                       QueueConfig(seam=cfg_.seam), recorder)
    episodes = []
    max_steps = cfg_.max_steps or env.unwrapped.max_steps
    try:
        bar = tqdm(range(cfg_.episodes), desc=f"run {cfg_.task}/{cfg_.sim} K={cfg_.num_steps}",
                   unit="ep", disable=not progress)
        for i in bar:
            seed = cfg_.seed + i
            driver.reset_episode(seed)
            frames: list = []
            if i == 0:
                loop.start()
            else:
                loop.new_episode()
            t0 = time.perf_counter()
            want_video = i < cfg_.video_episodes

            def stop(_rec: dict[str, Any]) -> bool:
                if want_video and driver.steps % 2 == 0 and driver.obs is not None:
                    frames.append(driver.obs["front"])
                return driver.done

            res = loop.run(max_steps, stop_when=stop)
            if res.reason in ("fault", "estop"):
                loop.reset()
            ep = loop.end_episode(success=bool(driver.success), seed=seed, steps=driver.steps,
                                  instruction=driver.obs["instruction"], stop_reason=res.reason,
                                  sim_diverged=bool(driver.info.get("sim_diverged")),
                                  max_stage=int(driver.info.get("max_stage", 0)),
                                  wall_s=time.perf_counter() - t0)
            episodes.append(ep)
            bar.set_postfix(success=f"{sum(e['success'] for e in episodes)}/{len(episodes)}")
            if want_video and frames:
                import imageio.v2 as imageio

                imageio.mimsave(out / f"episode{i}.gif", [np.asarray(f) for f in frames], duration=0.1, loop=0)
    finally:
        loop.close(close_driver=True)
        summary = recorder.close({"success_rate": sum(e["success"] for e in episodes) / max(1, len(episodes))})
        env.close()
    return SessionResult(out, summary, episodes)
