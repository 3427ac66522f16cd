"""One runtime session: sim env -> driver -> loop (+ safety, queue, worker, telemetry), and the one
episode runner every campaign uses (``edge run``, the VLA grid, latency robustness, the EQRL
evaluation, :class:`edge.runtime.query_env.QueryEnv`), so every number comes from the code path
that drives the robot.

    rt = build_runtime(RuntimeConfig.of(num_steps=2, execute=8), out_dir="runs/x")
    ep = rt.run_episode(seed=100000)      # dict: success, steps, queries, nfe, executed, ...
    summary = rt.close()

``run_session(cfg, out, resume=True)`` continues the run in ``out``: the settings must match the ones
it was started with (``meta.json``), episode indices and seeds go on from the episodes it has
finished (the unfinished one's lines are dropped), and so do the query counters the VLA's initial
noise is keyed on (a resumed VLA run on the virtual clock with a constant latency plays the
uninterrupted run's episodes; a scheduler's or the planner's own random draws, and a latency model's,
start afresh), and the summary covers all of them.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge import atomic
from edge.config import to_dict
from edge.runtime.config import (  # noqa: F401 (re-export)
    DEFAULT_CHECKPOINT,
    RuntimeConfig,
    config_from_meta,
    flag_of,
)
from edge.runtime.registry import SCHEDULERS
from edge.runtime.wiring import wire_loop


@dataclass
class SessionResult:
    run_dir: Path | None
    summary: dict[str, Any]
    episodes: list[dict[str, Any]] = field(default_factory=list)


def checkpoint_spec(path: str | Path, verify: bool = True) -> Any:
    """The :class:`edge.vla.spec.ModelSpec` of a checkpoint (dir or model.pt) or an ONNX export
    directory, read without loading (or verifying) the weights: for checks before a run starts. A file
    that cannot be read is named by its manifest's hash where that differs (``verify``), as a verified
    load would; otherwise by why it cannot be read."""
    from edge.errors import EdgeError
    from edge.export import METADATA_FILE, read_metadata
    from edge.vla.spec import ModelSpec

    p = Path(path)
    if p.is_dir() and (p / METADATA_FILE).is_file():
        return ModelSpec.from_dict(read_metadata(p)["spec"])
    from edge.vla.checkpoint import read_payload

    try:
        return ModelSpec.from_dict(read_payload(p, verify=False)["spec"])
    except EdgeError:
        if verify:
            from edge.vla.checkpoint import resolve
            from edge.vla.verify import VerificationError, verify_checkpoint

            try:
                verify_checkpoint(resolve(p))
            except VerificationError as mismatch:
                if "does not match" in str(mismatch):  # a damaged file: its hash says so
                    raise mismatch from None
        raise


def policy_loader(cfg_: RuntimeConfig) -> tuple[Callable[[], Any], Any]:
    """(loader, robot): ``loader()`` builds the session's policy; picklable, so a worker process
    (``inference='process'``) can build its own copy."""
    from edge.robot_spec import load_robot_spec
    from edge.runtime.registry import POLICIES

    robot = load_robot_spec(cfg_.scene.robot)
    return functools.partial(POLICIES.resolve(cfg_.policy.name), cfg_, robot), robot


#: settings a resumed run may change (how many episodes, what is recorded)
RESUMABLE = ("run.episodes", "run.video_episodes", "loop.record_ticks")


def resume_state(cfg_: RuntimeConfig, out_dir: str | Path) -> tuple[dict[str, Any], int]:
    """(meta.json, finished episodes) of the run in ``out_dir`` that ``cfg_`` continues; raises
    EdgeError naming the first setting that differs from the one the run was started with."""
    import json

    from edge.config import ConfigError
    from edge.errors import EdgeError
    from edge.telemetry import read_jsonl

    d = Path(out_dir)
    if not (d / "meta.json").is_file():
        raise EdgeError(f"--resume: {d} is not a run directory (no meta.json); drop --resume to "
                        "start a new run there")
    meta = json.loads((d / "meta.json").read_text())
    if not is_simulated_run(meta):
        what = ("an edge hil host trace" if "hil_host" in meta else "a run on a real arm (edge run --arm bridge)"
                if "arm" in meta else "not a run edge run recorded (no session in meta.json)")
        raise EdgeError(f"--resume: {d} is {what}; edge run resumes only its own runs: choose another --out")
    from edge.records import SCHEMA_VERSION

    version = meta.get("schema_version", 1)  # no key: written before records were versioned
    if str(version) != str(SCHEMA_VERSION):  # its lines and a resume's would be two schemas in one file
        raise EdgeError(f"--resume: {d} was recorded in record schema v{version} (this edge writes v{SCHEMA_VERSION}); "
                        "a resume would mix the two in one file. `edge report` still reads it; continue it "
                        "with the edge that started it, or start a new run (another --out)")
    try:
        old = config_from_meta(meta).dotted()
    except ConfigError as err:
        raise EdgeError(f"--resume: {d}/meta.json holds settings this version cannot read ({err}); "
                        "choose another --out") from None
    new = cfg_.dotted()
    # the planner's own settings matter only to planner runs (runs of other policies recorded before a
    # planner setting existed, or before its default changed, still resume)
    planner = "comet" in (old.get("policy.name"), new.get("policy.name"))
    # likewise an adapter's settings matter only where a scheduler read them (eqrl, or a factory's)
    adapter = any(k == "eqrl" or ":" in str(k) for k in (old.get("scheduler.kind"), new.get("scheduler.kind")))
    # an adapter decides K and C itself: the fixed / dvac sections are read by neither eqrl run
    per_query = old.get("scheduler.kind") == new.get("scheduler.kind") == "eqrl"
    for key in new:
        if key in RESUMABLE or old.get(key, new[key]) == new[key] or (
                not planner and key.startswith("policy.comet.")) or (
                not adapter and key.startswith("scheduler.eqrl.")) or (
                per_query and key.startswith(("scheduler.fixed.", "scheduler.dvac."))):
            continue
        how = flag_of(key)
        if planner and key.startswith(("scheduler.fixed.", "loop.execution")):  # the planner's: from its mode
            how = "--query-mode"
        raise EdgeError(f"--resume: {d} was run with {key}={old[key]!r}, this run has "
                        f"{key}={new[key]!r} ({how}); resume with the settings "
                        "it was started with or choose another --out")
    finished = len(read_jsonl(d / "episodes.jsonl"))
    if cfg_.run.episodes < finished:
        raise EdgeError(f"--episodes {cfg_.run.episodes}: {d} has {finished} episodes already; resume with "
                        f"--episodes {finished + 1} or more to run more (the total, not how many to add)")
    return meta, finished


def _built(name: str, kind: str, factory: Callable[..., Any], args: tuple[Any, ...], members: tuple[str, ...],
           want: str) -> Any:
    """``factory(*args)`` for a registered or user's ``pkg.module:factory`` ``name``; a user's factory that
    cannot be called so, or returns something without ``members``, is an EdgeError naming it (what the
    factory itself raises is raised as it is)."""
    import inspect

    from edge.errors import EdgeError

    if ":" not in name:
        return factory(*args)
    flag = "--policy" if kind == "policy" else "--scheduler"
    try:
        inspect.signature(factory).bind(*args)
    except TypeError as err:
        called = "config, robot" if kind == "policy" else "config, policy"
        raise EdgeError(f"{flag} {name}: cannot be called with ({called}): {err}; "
                        f"a {kind} plug-in is a {want}") from None
    except ValueError:  # no signature to read (a builtin): call it and see
        pass
    obj = factory(*args)
    missing = [m for m in members if not hasattr(obj, m)]
    if missing:
        raise EdgeError(f"{flag} {name}: returned a {type(obj).__name__} without {', '.join(missing)}; a {kind} "
                        f"plug-in is a {want}")
    return obj


class ReadOptions(dict):
    """A user's factory's ``options``, noting which keys it looked up: one it never reads (a misspelt option,
    or one the factory does not have) is reported when the run ends instead of being dropped without a word.
    Iterating over them, or copying them, counts as reading every key."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.read: set[str] = set()

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: Any) -> bool:
        self.read.add(key)
        return super().__contains__(key)

    def _all(self) -> None:
        self.read.update(super().keys())

    def __iter__(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().__iter__()

    def keys(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().keys()

    def items(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().items()

    def values(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().values()

    def copy(self) -> dict:
        self._all()
        return dict(super().items())

    def unread(self) -> list[str]:
        return sorted(k for k in super().keys() if k not in self.read)


def _tracked(cfg_: RuntimeConfig, section: str, trackers: list | None) -> RuntimeConfig:
    """``cfg_`` with ``section``'s options as :class:`ReadOptions` (noted in ``trackers``) when a user's
    factory gets them; else ``cfg_`` as it is."""
    import dataclasses

    sub = getattr(cfg_, section)
    name = sub.kind if section == "scheduler" else sub.name
    if trackers is None or not sub.options or ":" not in name:
        return cfg_
    if section == "policy" and cfg_.worker.mode == "process":  # queries run on a copy built in the worker:
        return cfg_  # what that copy reads later is not seen here, so nothing is said of it
    opts = ReadOptions(sub.options)
    trackers.append((section, name, opts))
    return dataclasses.replace(cfg_, **{section: dataclasses.replace(sub, options=opts)})


def report_unread_options(trackers: list, recorder: Any, t_s: float) -> None:
    """Each ``section.options.KEY`` a user's factory never looked up: a note on stderr and an
    ``option_unread`` event in the run's records (``recorder``, if any)."""
    for section, name, opts in trackers:
        for k in opts.unread():
            line = f"{section}.options.{k}: {name} never read it (a misspelt option, or one it does not have)"
            print(f"note: {line}", file=sys.stderr)
            if recorder is not None:
                recorder.event("option_unread", t_s, detail=line)


def built_policy(cfg_: RuntimeConfig, trackers: list | None = None) -> tuple[Any, Any, Callable[[], Any] | None]:
    """(policy, robot spec, factory): ``cfg_``'s policy built and checked to be one; ``factory`` rebuilds it in a
    worker process (``inference='process'``), else None. ``trackers``: a list to note which of a user's
    factory's ``policy.options`` it reads (:func:`report_unread_options`)."""
    cfg_ = _tracked(cfg_, "policy", trackers)
    loader, robot = policy_loader(cfg_)
    policy = _built(cfg_.policy.name, "policy", loader.func, loader.args,
                    ("spec", "chunk_len", "action_dim", "encode", "sample"),
                    "factory(config, robot) returning a ChunkPolicy (edge.contracts)")
    return policy, robot, (loader if cfg_.worker.mode == "process" else None)


def built_scheduler(cfg_: RuntimeConfig, policy: Any, trackers: list | None = None) -> Any:
    """``cfg_``'s scheduler for ``policy``, built and checked to be one (``trackers``: as for :func:`built_policy`)."""
    cfg_ = _tracked(cfg_, "scheduler", trackers)
    return _built(cfg_.scheduler.kind, "scheduler", SCHEDULERS.resolve(cfg_.scheduler.kind), (cfg_, policy),
                  ("plan", "reset"), "factory(config, policy) returning a Scheduler (edge.contracts)")


def check_policy_task(cfg_: RuntimeConfig, policy: Any) -> None:
    """Refuse a policy trained for another task than the scene's."""
    from edge.errors import EdgeError

    trained_for = getattr(policy.spec, "task", None)
    if trained_for in ("stack", "pick_place", "push", "reach") and trained_for != cfg_.scene.task:
        raise EdgeError(f"--task {cfg_.scene.task}: the checkpoint {cfg_.policy.checkpoint} was trained for task "
                        f"{trained_for!r} (its spec); run --task {trained_for} or pass a checkpoint "
                        f"trained for {cfg_.scene.task!r} (edge train vla --task {cfg_.scene.task})")


def check_execute_fits(cfg_: RuntimeConfig, policy: Any) -> None:
    """Refuse a fixed / dvac C longer than the policy's chunk."""
    from edge.errors import EdgeError

    horizon = int(getattr(policy, "chunk_len", 0) or 0)
    if cfg_.scheduler.kind in ("fixed", "dvac") and horizon and cfg_.execute > horizon:
        flag = "--execute" + (" (scheduler.dvac.max_execute)" if cfg_.scheduler.kind == "dvac" else "")
        raise EdgeError(f"{flag} {cfg_.execute}: --policy {cfg_.policy.name} makes chunks of {horizon} actions "
                        f"(its spec), so at most {horizon} can be executed; choose 1..{horizon}")


def _drop_unfinished(out_dir: Path, finished: int) -> None:
    """Before a resume: remove the tick and query lines of episodes without an episode record (a killed
    run's last) and the truncated last line a killed writer may have left in any stream (the resumed
    run's first line would be glued to it); the interrupted episode's events stay, marked
    ``"interrupted": true`` (its faults are kept, apart from those of the episode that redoes it)."""
    import json

    for name in ("ticks", "queries", "events", "episodes"):
        path = out_dir / f"{name}.jsonl"
        if not path.is_file():
            continue
        tmp = path.with_suffix(".jsonl.tmp")
        changed = False
        with open(path, encoding="utf-8") as src, open(tmp, "w", encoding="utf-8") as dst:
            for line in src:
                ep = _line_episode(line)
                if not line.endswith("\n") or ep is None:
                    changed = True  # the truncated line of a killed writer
                    continue
                if ep >= finished and name in ("ticks", "queries"):
                    changed = True  # the unfinished episode's
                    continue
                if name == "events" and ep >= finished and "ep" in (rec := json.loads(line)) \
                        and not rec.get("interrupted"):
                    line = json.dumps({**rec, "interrupted": True}) + "\n"
                    changed = True
                dst.write(line)
        if changed:
            atomic.commit(tmp, path)
        else:
            tmp.unlink()


def _continue_counters(loop: Any, out_dir: Path, finished: int) -> None:
    """Set the resumed loop to where the uninterrupted run's would stand before episode ``finished``:
    each query's initial noise is keyed on (seed, worker epoch, query id) (an episode starts with one
    cancel, which bumps the epoch), and on the virtual clock the delay estimate reads the latency window
    (on the real clock the resumed worker warms up afresh). A run recorded before these were
    (``carry_over`` absent) starts them afresh."""
    from edge.telemetry import read_jsonl

    last = next((e for e in read_jsonl(out_dir / "episodes.jsonl") if e.get("ep") == finished - 1), None)
    carry = (last or {}).get("carry_over")
    if isinstance(carry, dict):
        loop.worker.epoch = int(carry["epoch"]) + 1
        loop._query_id = int(carry["query_id"])
        if loop.clock.is_virtual:  # on the real clock the resumed worker's first, cold query is warm-up again
            loop.latency.restore(carry["latency_window_s"], int(carry["latencies_seen"]))


def _line_episode(line: str) -> int | None:
    import json

    try:
        return int(json.loads(line).get("ep", 0))
    except (ValueError, AttributeError, TypeError):
        return None  # a truncated last line


def _policy_meta(policy: Any, cfg_: RuntimeConfig) -> dict[str, Any]:
    describe = getattr(policy, "describe", None)
    if callable(describe):
        return describe()
    return {"kind": type(policy).__name__, "checkpoint": cfg_.policy.checkpoint,
            "backend_name": str(getattr(policy, "backend_name", getattr(policy, "backend", "?")))}


def _scheduler_meta(scheduler: Any, cfg_: RuntimeConfig) -> dict[str, Any]:
    # eqrl: no fixed K or C (null): the adapter decides them per query (each query's in queries.jsonl)
    per_query = cfg_.scheduler.kind == "eqrl"
    out = {"name": getattr(scheduler, "name", type(scheduler).__name__), "configured": cfg_.scheduler.kind,
           "num_steps": None if per_query else cfg_.num_steps, "execute": None if per_query else cfg_.execute,
           "noise_temperature": cfg_.worker.noise_temperature, "seam": cfg_.queue.seam,
           "rtc_soft_steps": cfg_.worker.rtc_soft_steps, "adapter": cfg_.scheduler.eqrl.adapter or None}
    describe = getattr(scheduler, "describe", None)
    if callable(describe):
        out["describe"] = describe()
    return out


class Runtime:
    """A built session. :meth:`run_episode` per seed; :meth:`close` writes the summary."""

    def __init__(self, cfg_: RuntimeConfig, env: Any, driver: Any, loop: Any, recorder: Any,
                 scheduler: Any, first_episode: int = 0, option_trackers: list | None = None) -> None:
        self.cfg, self.env, self.driver, self.loop = cfg_, env, driver, loop
        self.recorder, self.scheduler = recorder, scheduler
        self.episodes: list[dict[str, Any]] = []
        self.first_episode = first_episode  # episodes the run directory held before (resume)
        loop.episode = first_episode
        self.max_steps = cfg_.scene.max_steps or env.unwrapped.max_steps
        self._closed = False
        self.option_trackers = option_trackers or []  # (section, factory name, ReadOptions) of a user's factories

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
        # the episode's first observation once before its first tick: a camera's first-frame setup
        # (the simulator's renderer: 81 ms median on a run's first episode) then is not inside tick 0,
        # where it overran the period and delayed the first query (a simulated frame is kept, and
        # tick 0 reads the same picture: nothing moves in between)
        loop.observer.observe(driver.read_state())
        # the deciding policy's own per-episode counts (in process mode the worker process's copy's)
        loop.worker.policy_counts("clip_counts", reset=True)
        loop.worker.policy_counts("episode_stats", reset=True)
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
        counts = loop.worker.policy_counts("clip_counts", reset=True)
        if counts and counts.get("outputs"):
            extra = {"policy_outputs": int(counts["outputs"]), "policy_clipped": int(counts["clipped"]),
                     "policy_clip_max": float(counts["max_abs"])}
        extra.update(loop.worker.policy_counts("episode_stats", reset=True) or {})
        sim_clips = driver.info.get("clip_counts") if isinstance(getattr(driver, "info", None), dict) else None
        if isinstance(sim_clips, dict):  # a simulated arm's controller clamps (not the safety layer's)
            extra.update({f"sim_{k}_clips": int(v) for k, v in sim_clips.items()})
        elapsed = getattr(driver, "elapsed_periods", None)
        if isinstance(elapsed, int) and not loop.clock.is_virtual:  # skipped deadlines the sim stepped through
            extra["sim_elapsed_periods"] = elapsed
        # what the next episode takes over from this one (the query counters the VLA's noise is keyed on, the
        # latency window the delay estimate reads): a resume continues from here
        extra["carry_over"] = {"epoch": int(loop.worker.epoch), "query_id": int(loop._query_id),
                               "latencies_seen": loop.latency.seen, "latency_window_s": list(loop.latency.window)}
        ep = loop.end_episode(success=bool(driver.success), seed=seed, steps=driver.steps,
                              instruction=driver.obs["instruction"], stop_reason=_stop_reason(res.reason, driver),
                              sim_diverged=bool(driver.info.get("sim_diverged")),
                              max_stage=int(driver.info.get("max_stage", 0)),
                              wall_s=time.perf_counter() - t0, **extra)
        self.episodes.append(ep)
        if video and frames and self.out_dir is not None:
            import imageio.v2 as imageio

            gif = [np.asarray(f) for f in frames]  # whole or not at all: a kill mid-write leaves no torn GIF
            atomic.write_with(self.out_dir / f"episode{ep.get('ep', len(self.episodes) - 1)}.gif",
                              lambda f: imageio.mimsave(f, gif, format="GIF", duration=0.1, loop=0))
        return ep

    @staticmethod
    def _warm_up(policy: Any, obs: Any) -> None:
        """Before the episode's first tick: embed its instruction, so an instruction the checkpoint
        has not cached loads the sentence encoder now (seconds, once) and not inside query 1, where
        it would be charged as inference latency. (In process mode the worker process's own copy
        still loads it on its first query.)"""
        language = getattr(policy, "language", None)
        if callable(language) and isinstance(obs, Mapping) and obs.get("instruction") is not None:
            language([str(obs["instruction"])])

    def close(self) -> dict[str, Any]:
        if self._closed:
            return {}
        self._closed = True
        summary: dict[str, Any] = {}
        report_unread_options(self.option_trackers, self.recorder, self.loop.clock.now())
        try:
            self.loop.close(close_driver=True)
        finally:
            if self.recorder is not None:
                summary = self.recorder.close()  # over every episode in the directory (resume too)
            self.env.close()
        return summary


def _stop_reason(loop_reason: str, driver: Any) -> str:
    """Why an episode ended: the loop's own reason (``max_ticks``, ``fault``, ``estop``), or where the
    environment ended it: ``success``, ``sim_diverged``, or ``time_limit`` (its episode length in
    simulated periods ran out)."""
    if loop_reason != "stop_when":
        return loop_reason
    if driver.success:
        return "success"
    info = getattr(driver, "info", None)
    return "sim_diverged" if isinstance(info, dict) and info.get("sim_diverged") else "time_limit"


#: the panda spec's workspace box (lower, upper corner; m) until e95f17e, when it became the sim's
_PANDA_BOX_BEFORE_E95F17E = [[0.25, -0.40, 0.0], [0.80, 0.40, 0.65]]


def _box_before_recorded(cfg_: RuntimeConfig, out_dir: str | Path) -> list | None:
    """The workspace box of a run written before ``meta.json`` recorded it: the panda's of before
    e95f17e for a panda run whose episodes predate the simulated arm's clip counts (fcb4357, landed
    with e95f17e); else unknown (None: not checked)."""
    if cfg_.scene.robot != "panda":
        return None
    ep = _first_episode(out_dir)
    return None if ep is None or "sim_workspace_clips" in ep else _PANDA_BOX_BEFORE_E95F17E


def _world_waited(cfg_: RuntimeConfig, out_dir: str | Path) -> bool:
    """A simulated run on the real clock written before the simulated arm stepped through the
    deadlines a late tick skips (c5792cc): its first episode counts the sim's clips but not
    ``sim_elapsed_periods``, so in its episodes the world waited for a late tick."""
    ep = _first_episode(out_dir) if cfg_.clock.kind == "real" else None
    return ep is not None and "sim_workspace_clips" in ep and "sim_elapsed_periods" not in ep


def _first_episode(out_dir: str | Path) -> dict | None:
    """The run directory's first finished episode record (None: none, or not a record)."""
    import json

    path = Path(out_dir) / "episodes.jsonl"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    try:
        ep = json.loads(first)
    except ValueError:  # no finished episode: nothing to mix
        return None
    return ep if isinstance(ep, dict) else None


def _robot_meta(robot: Any) -> dict[str, Any]:
    """What a run records of its robot spec: the name and the workspace box the safety layer clips at."""
    return {"name": getattr(robot, "name", None),
            "workspace_m": [[float(v) for v in robot.workspace_min_m], [float(v) for v in robot.workspace_max_m]]}


def session_env(cfg_: RuntimeConfig, policy: Any) -> Any:
    """The sim env of ``cfg_``'s scene with the cameras, image size and env settings ``policy``'s spec asks for."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    import sim

    cams = tuple(getattr(policy.spec, "cameras", ("front",)))
    return sim.make_env(cfg_.scene.task, sim=cfg_.scene.sim, distribution=cfg_.scene.distribution,
                        n_blocks=cfg_.scene.n_blocks, instructions=cfg_.scene.instructions,
                        image_size=int(policy.spec.image_hw[0]), wrist_camera="wrist" in cams,
                        # the episode's length: the env truncates there too (0 = the task's default)
                        max_steps=cfg_.scene.max_steps,
                        # the loop reads the cameras once per query, not every tick: render then
                        **{"lazy_images": cfg_.scene.lazy_images, "render_mesh_cell_m": cfg_.scene.render_mesh_cell_m,
                           **dict(getattr(policy.spec, "env", None) or {})})


def is_simulated_run(meta: Any) -> bool:
    """Whether a run directory's ``meta.json`` (parsed) records simulated episodes of ``edge run``
    (not an HIL host trace, a real arm's run, or something without a session)."""
    return isinstance(meta, dict) and "session" in meta and "hil_host" not in meta and "arm" not in meta


def build_runtime(cfg_: RuntimeConfig, out_dir: str | Path | None, policy: Any = None, robot: Any = None,
                  scheduler: Any = None, resume: bool = False) -> Runtime:
    """Wire one session. ``out_dir=None`` records nothing (training collectors); ``scheduler``
    overrides the configured one (e.g. QueryEnv's external planner); ``resume`` continues the run
    in ``out_dir`` (see the module docstring). A policy trained for another task is refused. A
    policy with ``attach_env(env)`` (the scripted expert, which acts from the simulator's state) is
    handed the env once it is made; it learns of each episode from its ``reset()``, called after the
    env was reset with the episode's seed (``env.episode_seed``)."""
    from drivers.sim_arm import SimArmDriver, SimObserver
    from edge.clock import LatencyConfig, RealClock, VirtualClock
    from edge.errors import EdgeError
    from edge.telemetry import RunRecorder

    held = [n for n in ("meta.json", "episodes.jsonl") if out_dir is not None and (Path(out_dir) / n).exists()]
    if held and not resume:  # the CLI refuses a non-empty --out; the library call must not append either
        raise EdgeError(f"{out_dir} already holds a run ({', '.join(held)}); runs never mix: continue it with "
                        "resume=True (edge run --resume) or record into another directory")
    factory = None
    trackers: list = []  # a user's factories' options, to say at the end which they never read
    if policy is None:
        policy, robot, factory = built_policy(cfg_, trackers)
    elif cfg_.worker.mode == "process":
        raise EdgeError("inference='process' builds the policy from the checkpoint in the worker "
                        "process; it cannot take a policy object")
    if robot is None:
        from edge.robot_spec import load_robot_spec

        robot = load_robot_spec(cfg_.scene.robot)
    check_policy_task(cfg_, policy)
    resumed: tuple[dict[str, Any], int] | None = None
    if resume and out_dir is not None:
        resumed = resume_state(cfg_, out_dir)
        old_sha = (resumed[0].get("policy") or {}).get("model_sha256")
        new_sha = getattr(policy, "source", {}).get("model_sha256")
        if old_sha and new_sha and old_sha != new_sha:
            raise EdgeError(f"--resume: {out_dir} was run with model.pt sha256 {old_sha[:12]}…, this "
                            f"checkpoint is {new_sha[:12]}…; resume with the same weights or choose "
                            "another --out")
        old_box = (resumed[0].get("robot") or {}).get("workspace_m") or _box_before_recorded(cfg_, out_dir)
        new_box = _robot_meta(robot)["workspace_m"]
        try:
            same = old_box is None or all(abs(float(u) - v) <= 1e-9 for ou, nu in zip(old_box, new_box, strict=True)
                                          for u, v in zip(ou, nu, strict=True))
        except (TypeError, ValueError):
            raise EdgeError(f"--resume: {out_dir}/meta.json robot.workspace_m {old_box!r} is not two corners of "
                            "three numbers; choose another --out") from None
        if not same:
            raise EdgeError(f"--resume: {out_dir} was run with the robot's workspace box {old_box} (lower, upper "
                            f"corner, m), this robot spec has {new_box} ({cfg_.scene.robot}); the safety layer "
                            "clips at the box, so its episodes and new ones would mix: choose another --out")
        old_policy = resumed[0].get("policy") or {}
        if old_policy.get("kind") == "world_model" and old_policy.get("frame") != _policy_meta(policy, cfg_).get("frame"):
            raise EdgeError(f"--resume: {out_dir} was run when the planner's camera frame was "
                            f"{old_policy.get('frame') or 'not recorded (runs before 8040dcc; those before 6151150 saw the whole 64x64 view)'}"
                            "; its episodes and new ones could mix: choose another --out")
        if (old_policy.get("kind") == "world_model" and cfg_.clock.kind == "real" and old_policy.get("deadline_ms")
                and "deadline_counts" not in old_policy):
            raise EdgeError(f"--resume: {out_dir} ran on the real clock when the planner's deadline counted from the "
                            "worker's start of a decision, not from its request (before c6e426c): its episodes and "
                            "new ones would mix: choose another --out")
        if _world_waited(cfg_, out_dir):
            raise EdgeError(f"--resume: {out_dir} ran on the real clock before the simulated arm stepped through "
                            "the deadlines a late tick skips (c5792cc): in its episodes the world waited for a "
                            "late tick, so they and new ones would mix: choose another --out")
    cams = tuple(getattr(policy.spec, "cameras", ("front",)))
    side = int(policy.spec.image_hw[0])
    if cfg_.scene.image_size and cfg_.scene.image_size != side:
        raise EdgeError(f"--image-size {cfg_.scene.image_size}: --policy {cfg_.policy.name} sees {side}x"
                        f"{int(policy.spec.image_hw[1])} camera images (its spec); drop --image-size")
    needs = getattr(policy.spec, "execution", None)
    if needs and needs != cfg_.loop.execution:
        raise EdgeError(f"--policy {cfg_.policy.name} needs --query-mode {needs} (got {cfg_.loop.execution})")
    if scheduler is None:
        check_execute_fits(cfg_, policy)
    env = session_env(cfg_, policy)
    physics_step_s = env.unwrapped.cfg.physics_step_s
    if resumed is not None:  # runs written before the step was recorded all ran at 2 ms
        old_step = resumed[0].get("physics_step_s", 0.002)
        if abs(old_step - physics_step_s) > 1e-12:
            env.close()
            raise EdgeError(f"--resume: {out_dir} was run with a {old_step * 1e3:g} ms physics step, this "
                            f"build steps {cfg_.scene.sim} at {physics_step_s * 1e3:g} ms (docs/sim.md, Rates); "
                            "episodes of the two would mix: choose another --out")
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
    clock = VirtualClock() if cfg_.clock.kind == "virtual" else RealClock()
    driver = SimArmDriver(env, clock)
    observer = SimObserver(driver, cameras=cams)
    lat = LatencyConfig(kind=cfg_.clock.latency, latency_s=cfg_.clock.latency_ms / 1000.0, device=cfg_.clock.device,
                        checkpoint=cfg_.policy.checkpoint if (Path(cfg_.policy.checkpoint) / "model.pt").is_file() else "")
    if scheduler is None:
        scheduler = built_scheduler(cfg_, policy, trackers)
    recorder = None
    first_episode = 0
    if out_dir is not None:
        from edge.telemetry import machine_info

        meta = {"session": cfg_.short(), "config": to_dict(cfg_), "period_s": 1.0 / robot.control_rate_hz,
                "physics_step_s": physics_step_s, "robot": _robot_meta(robot),
                "policy": _policy_meta(policy, cfg_), "scheduler": _scheduler_meta(scheduler, cfg_)}
        if resumed is not None:
            old, first_episode = resumed
            _drop_unfinished(Path(out_dir), first_episode)
            # the start's meta stays (its machine too); each resume is appended
            meta = {k: v for k, v in old.items() if k != "schema_version"}
            meta["resumed"] = [*old.get("resumed", []), {"episodes_before": first_episode,
                                                        "session": cfg_.short(), "config": to_dict(cfg_),
                                                        "machine": machine_info()}]
        recorder = RunRecorder(Path(out_dir), meta=meta)
    loop = wire_loop(robot, clock, driver, observer, policy, scheduler, recorder, cfg_, latency=lat,
                     seed=cfg_.run.seed, policy_factory=factory)
    if resumed is not None and first_episode > 0:
        _continue_counters(loop, Path(out_dir), first_episode)
    if recorder is not None:  # once per start and per resume
        recorder.event("worker_started", clock.now(), mode=loop.worker.mode, start_s=round(loop.worker.start_s, 4),
                       torch_threads=loop.worker.torch_threads)
    return Runtime(cfg_, env, driver, loop, recorder, scheduler, first_episode=first_episode,
                   option_trackers=trackers)


def progress_label(cfg_: RuntimeConfig, scheduler: Any = None) -> str:
    """What the progress bar says is running: the scheduler a VLA runs under, or the policy that
    decides by itself (the planner with its budget and deadline, the expert)."""
    name = cfg_.policy.name
    if name == "comet":
        c = cfg_.policy.comet
        return (f"comet, {c.plan_simulations or 'the model' + chr(39) + 's'} simulations"
                + (f", deadline {c.plan_deadline_ms:g} ms" if c.plan_deadline_ms else ""))
    if name == "expert":
        return name
    if scheduler is not None:  # a passed-in one
        return str(getattr(scheduler, "name", type(scheduler).__name__))
    return cfg_.scheduler.kind + (f" K={cfg_.num_steps} C={cfg_.execute}" if cfg_.scheduler.kind == "fixed" else "")


def run_session(cfg_: RuntimeConfig, out_dir: str | Path | None, policy: Any = None, robot: Any = None,
                progress: bool = True, scheduler: Any = None, resume: bool = False) -> SessionResult:
    """Run ``cfg_.run.episodes`` episodes (seeds ``cfg_.run.seed`` ..) through the runtime loop; with
    ``resume``, those of them the run in ``out_dir`` has not finished yet."""
    from tqdm import tqdm

    rt = build_runtime(cfg_, out_dir, policy=policy, robot=robot, scheduler=scheduler, resume=resume)
    summary: dict[str, Any] = {}
    try:
        what = progress_label(cfg_, scheduler)
        bar = tqdm(range(rt.first_episode, cfg_.run.episodes), desc=f"run {cfg_.scene.task}/{cfg_.scene.sim} {what}",
                   unit="ep", disable=not progress,
                   initial=rt.first_episode, total=cfg_.run.episodes)
        for i in bar:
            rt.run_episode(cfg_.run.seed + i, video=i < cfg_.run.video_episodes)
            bar.set_postfix(success=f"{sum(e['success'] for e in rt.episodes)}/{len(rt.episodes)}")
    finally:
        summary = rt.close()
    return SessionResult(rt.out_dir, summary, rt.episodes)
