"""One runtime session: sim env -> driver -> loop (+ safety, queue, worker, telemetry), and the one
episode runner every campaign uses (``edge run``, the VLA grid, latency robustness, the EQRL
evaluation, :class:`edge.runtime.query_env.QueryEnv`), so every number comes from the code path
that drives the robot.

    rt = build_runtime(SessionConfig(num_steps=2, execute=8), out_dir="runs/x")
    ep = rt.run_episode(seed=100000)      # dict: success, steps, queries, nfe, executed, ...
    summary = rt.close()

``run_session(cfg, out, resume=True)`` continues the run in ``out``: the settings must match the ones
it was started with (``meta.json``), episode indices and seeds go on from the episodes it has
finished (the unfinished one's lines are dropped), and the summary covers all of them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.action_queue import SEAMS
from edge.backends import BACKENDS
from edge.config import cfg, check_fields
from edge.runtime.registry import SCHEDULERS
from edge.runtime.wiring import wire_loop

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "vla" / "checkpoints" / "stack"


@dataclass(frozen=True)
class SessionConfig:
    """One run: which scene, which policy/backend/scheduler, which clock and seam."""

    task: str = cfg("stack", "task", choices=("stack", "pick_place", "push"))
    sim: str = cfg("mujoco", "physics engine", choices=("mujoco", "pybullet"))
    distribution: str = cfg("train", "scene randomisation", choices=("train", "ood"))
    n_blocks: int = cfg(2, "stack: number of cubes", range=(2, 3))
    instructions: str = cfg("train", "instruction phrasings: train (as in the demonstrations) or paraphrase "
                            "(held-out wordings of the same tasks; same scenes per seed)",
                            choices=("train", "paraphrase"))
    image_size: int = cfg(0, "camera image side in pixels for a policy that takes it from the session "
                          "(the expert; 0 = its default, 96); the VLA's comes from its checkpoint",
                          range=(0, 512))
    checkpoint: str = cfg(str(DEFAULT_CHECKPOINT), "VLA checkpoint dir / model.pt / ONNX export dir")
    verify: bool = cfg(True, "check the checkpoint's files against the sha256 in its manifest before loading")
    backend: str = cfg("onnxruntime", "inference backend", choices=BACKENDS)
    policy: str = cfg("vla", "who acts: a registered policy name (vla) or 'pkg.module:factory' "
                      "(factory(session_config, robot_spec) -> ChunkPolicy with a spec.cameras and "
                      "spec.image_hw)")
    scheduler: str = cfg("fixed", "compute scheduler: a registered name or 'pkg.module:factory'")
    adapter: str = cfg("", "eqrl scheduler: adapter checkpoint dir ('' = the shipped adapter)")
    world_model: str = cfg("", "comet policy: world-model checkpoint dir ('' = the shipped push3 model)")
    plan_simulations: int = cfg(0, "comet policy: tree-search simulations per decision (0 = the model's own)",
                                range=(0, 10000))
    adapter_noise: str = cfg("sample", "eqrl scheduler: draw each query's noise from the adapter "
                             "(sample) or take its mode (mean)", choices=("sample", "mean"))
    num_steps: int = cfg(10, "denoising steps K (fixed; dvac: steps per query)", range=(1, 100))
    execute: int = cfg(8, "actions executed per chunk C (fixed)", range=(1, 64))
    seam: str = cfg("replace", "how a new chunk joins what is left of the previous one", choices=SEAMS)
    noise_temperature: float = cfg(0.5, "scale of the initial noise the worker draws for a query when "
                                   "the scheduler leaves it to it (1 = as trained, 0 = deterministic)",
                                   range=(0.0, 4.0))
    rtc_soft_steps: int = cfg(-1, "rtc seam: queued actions after the frozen ones that are softly "
                              "guided (-1 = all, as the RTC paper; 0 = only the frozen ones)",
                              range=(-1, 1024))
    execution: str = cfg("async", "async (never wait on inference) or sync", choices=("async", "sync"))
    clock: str = cfg("virtual", "virtual (deterministic) or real (wall clock)", choices=("virtual", "real"))
    inference: str = cfg("auto", "where queries run: auto (virtual clock: inline, real: thread), "
                         "thread, process (own process: no GIL contention with the loop), inline",
                         choices=("auto", "thread", "process", "inline"))
    latency: str = cfg("measured", "virtual clock: measured, constant, per_step, or device latency "
                       "(the query time projected for --device)",
                       choices=("measured", "constant", "per_step", "device"))
    device: str = cfg("orin-nano", "latency device: the target whose projected query time is charged "
                      "(edge.profiler.device_model)")
    latency_ms: float = cfg(0.0, "constant latency per query (ms)", range=(0.0, 10000.0))
    episodes: int = cfg(3, "episodes", range=(1, 100000))
    seed: int = cfg(100000, "first episode seed (VLA evaluation seeds are disjoint from demo seeds)",
                    range=(0, None))
    max_steps: int = cfg(0, "control steps per episode (0 = the task's default)", range=(0, 100000))
    record_ticks: bool = cfg(True, "write one telemetry line per tick")
    video_episodes: int = cfg(1, "save a GIF of the first N episodes", range=(0, 1000))
    loop_cpus: str = cfg("", "real clock: CPUs the control-loop thread runs on, e.g. '0' or '0,2' "
                         "(empty = leave as is); with "
                         "inference_cpus on the others, inference never shares the loop's core")
    inference_cpus: str = cfg("", "inference=process: CPUs the worker process runs on, e.g. '1' "
                              "(empty = inherit)")

    def __post_init__(self) -> None:
        check_fields(self)
        from edge.clock import parse_cpus

        parse_cpus(self.loop_cpus, "loop_cpus")
        parse_cpus(self.inference_cpus, "inference_cpus")


@dataclass
class SessionResult:
    run_dir: Path | None
    summary: dict[str, Any]
    episodes: list[dict[str, Any]] = field(default_factory=list)


def checkpoint_spec(path: str | Path) -> Any:
    """The :class:`edge.vla.spec.ModelSpec` of a checkpoint (dir or model.pt) or an ONNX export
    directory, read without loading (or verifying) the weights: for checks before a run starts."""
    from edge.export import METADATA_FILE, read_metadata
    from edge.vla.spec import ModelSpec

    p = Path(path)
    if p.is_dir() and (p / METADATA_FILE).is_file():
        return ModelSpec.from_dict(read_metadata(p)["spec"])
    from edge.vla.checkpoint import read_payload

    return ModelSpec.from_dict(read_payload(p, verify=False)["spec"])


def policy_loader(cfg_: SessionConfig) -> tuple[Callable[[], Any], Any]:
    """(loader, robot): ``loader()`` builds the session's policy; picklable, so a worker process
    (``inference='process'``) can build its own copy."""
    from edge.robot_spec import load_robot_spec
    from edge.runtime.registry import POLICIES

    robot = load_robot_spec("panda")
    return functools.partial(POLICIES.resolve(cfg_.policy), cfg_, robot), robot


#: SessionConfig fields whose edge run flag is not the field's name
FLAG_OF = {"execution": "query-mode"}

#: SessionConfig fields a resumed run may change (how many episodes, what is recorded)
RESUMABLE_FIELDS = ("episodes", "video_episodes", "record_ticks")


def resume_state(cfg_: SessionConfig, out_dir: str | Path) -> tuple[dict[str, Any], int]:
    """(meta.json, finished episodes) of the run in ``out_dir`` that ``cfg_`` continues; raises
    EdgeError naming the first setting that differs from the one the run was started with."""
    import json

    from edge.errors import EdgeError
    from edge.telemetry import read_jsonl

    d = Path(out_dir)
    if not (d / "meta.json").is_file():
        raise EdgeError(f"--resume: {d} is not a run directory (no meta.json); drop --resume to "
                        "start a new run there")
    meta = json.loads((d / "meta.json").read_text())
    old = meta.get("session") or {}
    new = dataclasses.asdict(cfg_)
    for key in new:
        if key in RESUMABLE_FIELDS or old.get(key, new[key]) == new[key]:
            continue
        raise EdgeError(f"--resume: {d} was run with {key}={old[key]!r}, this run has "
                        f"{key}={new[key]!r} (--{FLAG_OF.get(key, key.replace('_', '-'))}); resume with the settings "
                        "it was started with or choose another --out")
    return meta, len(read_jsonl(d / "episodes.jsonl"))


def _drop_unfinished(out_dir: Path, finished: int) -> None:
    """Remove the tick and query lines of episodes without an episode record (a killed run's last)."""
    for name in ("ticks", "queries"):
        path = out_dir / f"{name}.jsonl"
        if not path.is_file():
            continue
        tmp = path.with_suffix(".jsonl.tmp")
        changed = False
        with open(path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
            for line in src:
                ep = _line_episode(line)
                if ep is None or ep >= finished or not line.endswith("\n"):
                    changed = True  # unfinished episode, or the truncated line of a killed writer
                    continue
                dst.write(line)
        if changed:
            os.replace(tmp, path)
        else:
            tmp.unlink()


def _line_episode(line: str) -> int | None:
    import json

    try:
        return int(json.loads(line).get("ep", 0))
    except (ValueError, AttributeError, TypeError):
        return None  # a truncated last line


def _policy_meta(policy: Any, cfg_: SessionConfig) -> dict[str, Any]:
    describe = getattr(policy, "describe", None)
    if callable(describe):
        return describe()
    return {"kind": type(policy).__name__, "checkpoint": cfg_.checkpoint,
            "backend_name": str(getattr(policy, "backend_name", getattr(policy, "backend", "?")))}


def _scheduler_meta(scheduler: Any, cfg_: SessionConfig) -> dict[str, Any]:
    out = {"name": getattr(scheduler, "name", type(scheduler).__name__), "configured": cfg_.scheduler,
           "num_steps": cfg_.num_steps, "execute": cfg_.execute,
           "noise_temperature": cfg_.noise_temperature, "seam": cfg_.seam,
           "rtc_soft_steps": cfg_.rtc_soft_steps, "adapter": cfg_.adapter or None}
    describe = getattr(scheduler, "describe", None)
    if callable(describe):
        out["describe"] = describe()
    return out


class Runtime:
    """A built session. :meth:`run_episode` per seed; :meth:`close` writes the summary."""

    def __init__(self, cfg_: SessionConfig, env: Any, driver: Any, loop: Any, recorder: Any,
                 scheduler: Any, first_episode: int = 0) -> None:
        self.cfg, self.env, self.driver, self.loop = cfg_, env, driver, loop
        self.recorder, self.scheduler = recorder, scheduler
        self.episodes: list[dict[str, Any]] = []
        self.first_episode = first_episode  # episodes the run directory held before (resume)
        loop.episode = first_episode
        self.max_steps = cfg_.max_steps or env.unwrapped.max_steps
        self._closed = False

    @property
    def out_dir(self) -> Path | None:
        return None if self.recorder is None else Path(self.recorder.run_dir)

    def run_episode(self, seed: int, video: bool = False,
                    on_tick: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """One episode from ``seed`` through the loop; returns its record (also in episodes.jsonl)."""
        import numpy as np

        driver, loop = self.driver, self.loop
        policy = loop.worker.policy
        driver.reset_episode(seed)
        self._warm_up(policy, driver.obs)
        clips = getattr(policy, "clip_counts", None)
        if callable(clips):
            clips(reset=True)
        frames: list = []
        if not self.episodes and not loop._started:
            loop.start()
        else:
            loop.new_episode()
        t0 = time.perf_counter()

        def stop(rec: dict[str, Any]) -> bool:
            if on_tick is not None:
                on_tick(rec)
            if video and driver.steps % 2 == 0 and driver.obs is not None:
                frames.append(driver.obs["front"])
            return driver.done

        res = loop.run(self.max_steps, stop_when=stop)
        if res.reason in ("fault", "estop"):
            loop.reset()
        extra: dict[str, Any] = {}
        counts = clips(reset=True) if callable(clips) else None
        if counts and counts.get("outputs"):  # None in process mode: the worker's copy clips
            extra = {"policy_outputs": int(counts["outputs"]), "policy_clipped": int(counts["clipped"]),
                     "policy_clip_max": float(counts["max_abs"])}
        ep = loop.end_episode(success=bool(driver.success), seed=seed, steps=driver.steps,
                              instruction=driver.obs["instruction"], stop_reason=res.reason,
                              sim_diverged=bool(driver.info.get("sim_diverged")),
                              max_stage=int(driver.info.get("max_stage", 0)),
                              wall_s=time.perf_counter() - t0, **extra)
        self.episodes.append(ep)
        if video and frames and self.out_dir is not None:
            import imageio.v2 as imageio

            imageio.mimsave(self.out_dir / f"episode{ep.get('ep', len(self.episodes) - 1)}.gif",
                            [np.asarray(f) for f in frames], duration=0.1, loop=0)
        return ep

    @staticmethod
    def _warm_up(policy: Any, obs: Any) -> None:
        """Before the episode's first tick: embed its instruction, so an instruction the checkpoint
        has not cached loads the sentence encoder now (seconds, once) and not inside query 1, where
        it would be charged as inference latency. (In process mode the worker process's own copy
        still loads it on its first query.)"""
        language = getattr(policy, "language", None)
        if callable(language) and isinstance(obs, dict) and obs.get("instruction") is not None:
            language([str(obs["instruction"])])

    def close(self) -> dict[str, Any]:
        if self._closed:
            return {}
        self._closed = True
        summary: dict[str, Any] = {}
        try:
            self.loop.close(close_driver=True)
        finally:
            if self.recorder is not None:
                summary = self.recorder.close()  # over every episode in the directory (resume too)
            self.env.close()
        return summary


def build_runtime(cfg_: SessionConfig, out_dir: str | Path | None, policy: Any = None, robot: Any = None,
                  scheduler: Any = None, resume: bool = False) -> Runtime:
    """Wire one session. ``out_dir=None`` records nothing (training collectors); ``scheduler``
    overrides the configured one (e.g. QueryEnv's external planner); ``resume`` continues the run
    in ``out_dir`` (see the module docstring). A policy trained for another task is refused. A
    policy with ``attach_env(env)`` (the scripted expert, which acts from the simulator's state) is
    handed the env once it is made; it learns of each episode from its ``reset()``, called after the
    env was reset with the episode's seed (``env.episode_seed``)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    import sim
    from drivers.sim_arm import SimArmDriver, SimObserver
    from edge.clock import LatencyConfig, RealClock, VirtualClock
    from edge.errors import EdgeError
    from edge.telemetry import RunRecorder

    factory = None
    if policy is None:
        loader, robot = policy_loader(cfg_)
        policy = loader()
        factory = loader if cfg_.inference == "process" else None
    elif cfg_.inference == "process":
        raise EdgeError("inference='process' builds the policy from the checkpoint in the worker "
                        "process; it cannot take a policy object")
    if robot is None:
        from edge.robot_spec import load_robot_spec

        robot = load_robot_spec("panda")
    trained_for = getattr(policy.spec, "task", None)
    if trained_for in ("stack", "pick_place", "push") and trained_for != cfg_.task:
        raise EdgeError(f"--task {cfg_.task}: the checkpoint {cfg_.checkpoint} was trained for task "
                        f"{trained_for!r} (its spec); run --task {trained_for} or pass a checkpoint "
                        f"trained for {cfg_.task!r} (edge train vla --task {cfg_.task})")
    resumed: tuple[dict[str, Any], int] | None = None
    if resume and out_dir is not None:
        resumed = resume_state(cfg_, out_dir)
        old_sha = (resumed[0].get("policy") or {}).get("model_sha256")
        new_sha = getattr(policy, "source", {}).get("model_sha256")
        if old_sha and new_sha and old_sha != new_sha:
            raise EdgeError(f"--resume: {out_dir} was run with model.pt sha256 {old_sha[:12]}…, this "
                            f"checkpoint is {new_sha[:12]}…; resume with the same weights or choose "
                            "another --out")
    cams = tuple(getattr(policy.spec, "cameras", ("front",)))
    side = int(policy.spec.image_hw[0])
    if cfg_.image_size and cfg_.image_size != side:
        raise EdgeError(f"--image-size {cfg_.image_size}: --policy {cfg_.policy} sees {side}x"
                        f"{int(policy.spec.image_hw[1])} camera images (its spec); drop --image-size")
    needs = getattr(policy.spec, "execution", None)
    if needs and needs != cfg_.execution:
        raise EdgeError(f"--policy {cfg_.policy} needs --query-mode {needs} (got {cfg_.execution})")
    env = sim.make_env(cfg_.task, sim=cfg_.sim, distribution=cfg_.distribution, n_blocks=cfg_.n_blocks,
                       instructions=cfg_.instructions,
                       image_size=side, wrist_camera="wrist" in cams,
                       **dict(getattr(policy.spec, "env", None) or {}))
    # A policy that acts from privileged simulator state (the scripted expert) gets the env it will
    # act in, once, before the loop is wired; per episode it re-reads it after its reset() (the env
    # is reset first, with the episode's seed: env.episode_seed)
    attach = getattr(policy, "attach_env", None)
    if callable(attach):
        try:
            attach(env)
        except BaseException:
            env.close()
            raise
    clock = VirtualClock() if cfg_.clock == "virtual" else RealClock()
    driver = SimArmDriver(env, clock)
    observer = SimObserver(driver, cameras=cams)
    lat = LatencyConfig(kind=cfg_.latency, latency_s=cfg_.latency_ms / 1000.0, device=cfg_.device,
                        checkpoint=cfg_.checkpoint if (Path(cfg_.checkpoint) / "model.pt").is_file() else "")
    if scheduler is None:
        scheduler = SCHEDULERS.resolve(cfg_.scheduler)(cfg_, policy)
    recorder = None
    first_episode = 0
    if out_dir is not None:
        from edge.telemetry import machine_info

        meta = {"session": dataclasses.asdict(cfg_), "period_s": 1.0 / robot.control_rate_hz,
                "policy": _policy_meta(policy, cfg_), "scheduler": _scheduler_meta(scheduler, cfg_)}
        if resumed is not None:
            old, first_episode = resumed
            _drop_unfinished(Path(out_dir), first_episode)
            # the start's meta stays (its machine too); each resume is appended
            meta = {k: v for k, v in old.items() if k != "schema_version"}
            meta["resumed"] = [*old.get("resumed", []), {"episodes_before": first_episode,
                                                        "session": dataclasses.asdict(cfg_),
                                                        "machine": machine_info()}]
        recorder = RunRecorder(Path(out_dir), meta=meta)
    loop = wire_loop(robot, clock, driver, observer, policy, scheduler, recorder, inference=cfg_.inference,
                     latency=lat, seed=cfg_.seed, noise_temperature=cfg_.noise_temperature,
                     rtc_soft_steps=cfg_.rtc_soft_steps, execution=cfg_.execution, seam=cfg_.seam,
                     record_ticks=cfg_.record_ticks, policy_factory=factory,
                     loop_cpus=cfg_.loop_cpus, inference_cpus=cfg_.inference_cpus)
    return Runtime(cfg_, env, driver, loop, recorder, scheduler, first_episode=first_episode)


def run_session(cfg_: SessionConfig, out_dir: str | Path | None, policy: Any = None, robot: Any = None,
                progress: bool = True, scheduler: Any = None, resume: bool = False) -> SessionResult:
    """Run ``cfg_.episodes`` episodes (seeds ``cfg_.seed`` ..) through the runtime loop; with
    ``resume``, those of them the run in ``out_dir`` has not finished yet."""
    from tqdm import tqdm

    rt = build_runtime(cfg_, out_dir, policy=policy, robot=robot, scheduler=scheduler, resume=resume)
    summary: dict[str, Any] = {}
    try:
        bar = tqdm(range(rt.first_episode, cfg_.episodes), desc=f"run {cfg_.task}/{cfg_.sim} "
                   f"{cfg_.scheduler}" + (f" K={cfg_.num_steps} C={cfg_.execute}" if cfg_.scheduler == "fixed" else ""),
                   unit="ep", disable=not progress,
                   initial=rt.first_episode, total=cfg_.episodes)
        for i in bar:
            rt.run_episode(cfg_.seed + i, video=i < cfg_.video_episodes)
            bar.set_postfix(success=f"{sum(e['success'] for e in rt.episodes)}/{len(rt.episodes)}")
    finally:
        summary = rt.close()
    return SessionResult(rt.out_dir, summary, rt.episodes)
