"""The runtime's configuration: one :class:`RuntimeConfig` that nests a section per component.

Every setting is declared once, in its component's section, with its default and help::

    scene      what is simulated (task, engine, randomisation, episode length)
    policy     who acts (a registered name or 'pkg.module:factory'), its checkpoint, comet options
    backend    how the VLA's network runs (edge.backends.BackendConfig)
    scheduler  kind + one section per kind: fixed (K, C), dvac (its thresholds), eqrl (the adapter)
    worker     where queries run, the initial noise's temperature, RTC guidance, worker CPUs
    queue      how chunks are stitched (edge.action_queue.QueueConfig)
    loop       sync/async queries, tick records, loop CPUs
    clock      virtual or real, and how latency is charged on the virtual one
    safety     the protective layer's limits (edge.safety.SafetyConfig)
    run        episodes, first seed, videos

YAML files (``configs/run/*.yaml``) hold the nested form; ``--set`` takes dotted keys
(``--set scheduler.dvac.kappa=2``). The common settings also have a **short name** — the flags of
``edge run`` (``num_steps``, ``execute``, ``seam``, ``backend``, ...; :data:`SHORTCUTS`) — usable as
``--set`` keys, in YAML, and in :meth:`RuntimeConfig.of`::

    RuntimeConfig.of(scheduler="dvac", num_steps=4, **{"scheduler.dvac.kappa": 2.0})

``num_steps`` and ``execute`` address the configured scheduler kind's section (fixed: K and C;
dvac: K and its longest prefix ``max_execute``). :meth:`RuntimeConfig.short` is the flat view by
short names that run directories record as ``meta.json``'s ``session`` (the full nested config is
``meta.json``'s ``config``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge.action_queue import SEAMS, QueueConfig
from edge.backends import BACKENDS, BackendConfig
from edge.config import (
    ConfigError,
    cfg,
    check_fields,
    flatten,
    from_dict,
    parse_override,
    read_yaml,
    source_note,
    to_dict,
)
from edge.safety import SafetyConfig
from edge.schedulers import DvacSchedulerConfig, FixedSchedulerConfig

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "vla" / "checkpoints" / "stack"

TASKS = ("stack", "pick_place", "push", "reach")


@dataclass(frozen=True)
class SceneConfig:
    """The simulated scene."""

    robot: str = cfg("panda", "robot spec: configs/robots/<name>.yaml or a YAML path (limits, rate and "
                     "kinematics for safety and the drivers; the simulated scenes model the Panda)")
    task: str = cfg("stack", "task", choices=TASKS)
    sim: str = cfg("mujoco", "physics engine", choices=("mujoco", "pybullet"))
    distribution: str = cfg("train", "scene randomisation", choices=("train", "ood"))
    n_blocks: int = cfg(2, "stack: number of cubes", range=(2, 3))
    instructions: str = cfg("train", "instruction phrasings: train (as in the demonstrations) or paraphrase "
                            "(held-out wordings of the same tasks; same scenes per seed)",
                            choices=("train", "paraphrase"))
    image_size: int = cfg(0, "camera image side in pixels for a policy that takes it from the session "
                          "(the expert; 0 = its default, 96); the VLA's comes from its checkpoint",
                          range=(0, 512))
    max_steps: int = cfg(0, "control steps per episode (0 = the task's default)", range=(0, 100000))
    lazy_images: bool = cfg(True, "render the cameras when the loop reads them (once per query) instead of "
                            "at every simulator step; the images and every outcome are the same")
    render_mesh_cell_m: float = cfg(0.0, "MuJoCo: draw the robot with its meshes simplified on a grid of this "
                                    "many metres (0.01 renders a 96x96 frame ~3.6x faster on a CPU rasteriser; "
                                    "same physics, slightly different pixels where the robot is in view); "
                                    "0 = the meshes as they are", range=(0.0, 0.05))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.render_mesh_cell_m and self.render_mesh_cell_m < 0.001:
            raise ConfigError(f"render_mesh_cell_m={self.render_mesh_cell_m!r} is out of range; allowed 0 (the "
                              "meshes as they are) or [0.001, 0.05] m")
        if self.render_mesh_cell_m and self.sim != "mujoco":
            raise ConfigError(f"render_mesh_cell_m={self.render_mesh_cell_m!r} applies to sim 'mujoco' only (got "
                              f"sim {self.sim!r}); set it to 0 or use --sim mujoco")


@dataclass(frozen=True)
class CometPolicyConfig:
    """``policy.name: comet``: the slot world model + tree search."""

    world_model: str = cfg("", "world-model checkpoint dir ('' = the shipped model of the run's task: push3 or "
                               "reach3)")
    plan_simulations: int = cfg(0, "tree-search simulations per decision (0 = the model's own)",
                                range=(0, 1000))
    plan_backend: str = cfg("onnxruntime", "what runs the search's model passes: onnxruntime (an ONNX graph "
                                           "exported once per model into the edge cache) or torch",
                            choices=("torch", "onnxruntime"))
    workspace_mask: bool = cfg(True, "the search does not consider root moves the robot's workspace box would "
                                      "cut to under half their length (from the TCP in the proprio)")
    plan_deadline_ms: float = cfg(0.0, "a decision's wall-clock limit (ms; 0 = none): once the decision has run "
                                       "this long the search starts no new simulation and acts on those run "
                                       "(at least one); on a real clock it counts from the query's request; "
                                       "edge run --policy comet sets 40 unless --plan-deadline-ms "
                                       "is given", range=(0.0, 60000.0))
    plan_threads: int = cfg(1, "intra-op threads of the planner: its ONNX Runtime session, and torch (its encoder "
                               "and the torch search; inline process-wide, as backend.threads does for the VLA; a "
                               "worker thread or process takes it unless worker.torch_threads is set); 0 = leave "
                               "torch's count as it is (at start a thread per core; a worker process: 1) and one "
                               "ONNX Runtime thread", range=(0, 256))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class PolicyConfig:
    """Who acts."""

    name: str = cfg("vla", "a registered policy (vla, expert, comet) or 'pkg.module:factory' "
                    "(factory(runtime_config, robot_spec) -> ChunkPolicy with spec.cameras and spec.image_hw)")
    checkpoint: str = cfg(str(DEFAULT_CHECKPOINT), "VLA checkpoint dir / model.pt / ONNX export dir")
    verify: bool = cfg(True, "check the checkpoint's files against the sha256 in its manifest before loading")
    comet: CometPolicyConfig = cfg(default_factory=CometPolicyConfig, help="comet policy options")
    options: dict[str, Any] = cfg(default_factory=dict, help="settings for your own 'pkg.module:factory' "
                                  "policy (it reads runtime_config.policy.options)")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class EqrlSchedulerConfig:
    """``scheduler.kind: eqrl``: the learned adapter."""

    adapter: str = cfg("", "adapter checkpoint dir or a shipped adapter's name ('' = the shipped stack adapter)")
    noise: str = cfg("sample", "draw each query's noise from the adapter (sample) or take its mode (mean)",
                     choices=("sample", "mean"))
    noise_adapter: str = cfg("", "take each query's noise from this adapter (dir or shipped name) and K, C "
                             "from `adapter` ('' = both from `adapter`)")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class SchedulerSettings:
    """Which compute scheduler decides each query's K, C (and noise), with one section per kind."""

    kind: str = cfg("fixed", "fixed, dvac, eqrl, or your own 'pkg.module:factory' "
                    "(factory(runtime_config, policy) -> Scheduler)")
    fixed: FixedSchedulerConfig = cfg(default_factory=FixedSchedulerConfig, help="kind fixed")
    dvac: DvacSchedulerConfig = cfg(default_factory=lambda: DvacSchedulerConfig(max_execute=8),
                                    help="kind dvac")
    eqrl: EqrlSchedulerConfig = cfg(default_factory=EqrlSchedulerConfig, help="kind eqrl")
    options: dict[str, Any] = cfg(default_factory=dict, help="settings for your own 'pkg.module:factory' "
                                  "scheduler (it reads runtime_config.scheduler.options)")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class WorkerSettings:
    """Where and how queries are computed."""

    mode: str = cfg("auto", "auto (virtual clock: inline, real: thread; `edge run --policy comet` sync on the "
                    "real clock sets process), thread, process (own process: no GIL contention with the loop), "
                    "inline", choices=("auto", "thread", "process", "inline"))
    noise_temperature: float = cfg(0.5, "scale of the initial noise the worker draws for a query when "
                                   "the scheduler leaves it to it (1 = as trained, 0 = deterministic)",
                                   range=(0.0, 4.0))
    rtc_soft_steps: int = cfg(-1, "rtc seam: queued actions after the frozen ones that are softly "
                              "guided (-1 = all, as the RTC paper; 0 = only the frozen ones)",
                              range=(-1, 1024))
    cpus: str = cfg("", "mode process: CPUs the worker process runs on, e.g. '1' (empty = inherit)")
    torch_threads: int = cfg(0, "thread/process mode: torch intra-op threads for inference (0 = a thread: as "
                             "many as the thread that built the worker; a process: 1)", range=(0, 1024))
    start_timeout_s: float = cfg(120.0, "process mode: how long the worker process may take to load the policy; "
                                 "thread/process mode: how long an episode's end waits for the query in flight "
                                 "before the policy's counts are read", range=(1.0, 3600.0))

    def __post_init__(self) -> None:
        check_fields(self)
        from edge.clock import parse_cpus

        parse_cpus(self.cpus, "worker.cpus")


@dataclass(frozen=True)
class LoopSettings:
    """The control loop (its rate is the robot's)."""

    execution: str = cfg("async", "async (never wait on inference) or sync", choices=("async", "sync"))
    record_ticks: bool = cfg(True, "write one telemetry line per tick")
    cpus: str = cfg("", "real clock: CPUs the control-loop thread runs on, e.g. '0' or '0,2' (empty = "
                    "leave as is); with worker.cpus on the others, inference never shares the loop's core")
    timer_slack_ns: int = cfg(1, "real clock, Linux: how late the kernel may fire the loop thread's sleeps, in ns "
                              "(Linux gives normal threads 50,000; 0 = leave as is)", range=(0, 10_000_000))
    gil_switch_interval_s: float = cfg(
        0.0005, "real clock: Python's thread switch interval while the loop runs, so the loop thread wakes "
        "on time beside a worker thread (0 = leave Python's as is, 5 ms by default)", range=(0.0, 0.1))

    def __post_init__(self) -> None:
        check_fields(self)
        from edge.clock import parse_cpus

        parse_cpus(self.cpus, "loop.cpus")


@dataclass(frozen=True)
class ClockSettings:
    """Time: the wall clock, or a virtual one that charges inference latency by a model."""

    kind: str = cfg("virtual", "virtual (deterministic) or real (wall clock)", choices=("virtual", "real"))
    latency: str = cfg("measured", "virtual clock: measured, constant, per_step, or device latency "
                       "(the query time projected for clock.device)",
                       choices=("measured", "constant", "per_step", "device"))
    latency_ms: float = cfg(0.0, "latency constant: ms charged per query", range=(0.0, 10000.0))
    device: str = cfg("orin-nano", "latency device: the target whose projected query time is charged "
                      "(edge.profiler.device_model)")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class RunSettings:
    """The campaign of episodes."""

    episodes: int = cfg(3, "episodes", range=(1, 100000))
    seed: int = cfg(100000, "first episode seed (VLA evaluation seeds are disjoint from demo seeds)",
                    range=(0, None))
    video_episodes: int = cfg(1, "save a GIF of the first N episodes", range=(0, 1000))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class RuntimeConfig:
    """One runtime session, a section per component (see the module doc)."""

    scene: SceneConfig = cfg(default_factory=SceneConfig, help="the simulated scene")
    policy: PolicyConfig = cfg(default_factory=PolicyConfig, help="who acts")
    backend: BackendConfig = cfg(default_factory=lambda: BackendConfig(name="onnxruntime", threads=1),
                                 help="how the VLA's network runs")
    scheduler: SchedulerSettings = cfg(default_factory=SchedulerSettings, help="compute scheduler")
    worker: WorkerSettings = cfg(default_factory=WorkerSettings, help="inference worker")
    queue: QueueConfig = cfg(default_factory=lambda: QueueConfig(seam="replace"), help="action queue")
    loop: LoopSettings = cfg(default_factory=LoopSettings, help="control loop")
    clock: ClockSettings = cfg(default_factory=ClockSettings, help="clock and latency")
    safety: SafetyConfig = cfg(default_factory=SafetyConfig, help="software protective layer")
    run: RunSettings = cfg(default_factory=RunSettings, help="episodes")

    @classmethod
    def of(cls, **settings: Any) -> RuntimeConfig:
        """A config from the defaults and ``settings`` keyed by short name (:data:`SHORTCUTS`) or
        dotted path (``**{"scheduler.dvac.kappa": 2.0}``); a section name takes a mapping."""
        return apply_settings(cls(), settings.items())

    def short(self) -> dict[str, Any]:
        """The flat view by short names (``meta.json``'s ``session``)."""
        data = to_dict(self)
        return {name: _get(data, shortcut_path(name, self.scheduler.kind)) for name in SHORTCUTS}

    def dotted(self) -> dict[str, Any]:
        """Every setting by its dotted path (leaves only)."""
        return flatten(to_dict(self), opaque=("options",))

    # the settings most code reads, by the names they had before the sections
    @property
    def num_steps(self) -> int:
        """K of the configured kind (dvac: its steps per query; other kinds: the fixed section's)."""
        return self.scheduler.dvac.num_steps if self.scheduler.kind == "dvac" else self.scheduler.fixed.num_steps

    @property
    def execute(self) -> int:
        """C of the configured kind (dvac: its longest prefix; other kinds: the fixed section's)."""
        return self.scheduler.dvac.max_execute if self.scheduler.kind == "dvac" else self.scheduler.fixed.execute


#: short name -> dotted path ({kind}: the configured scheduler kind, fixed or dvac)
SHORTCUTS: dict[str, str] = {
    "robot": "scene.robot", "task": "scene.task", "sim": "scene.sim", "distribution": "scene.distribution",
    "n_blocks": "scene.n_blocks", "instructions": "scene.instructions", "image_size": "scene.image_size",
    "max_steps": "scene.max_steps",
    "policy": "policy.name", "checkpoint": "policy.checkpoint", "verify": "policy.verify",
    "world_model": "policy.comet.world_model", "plan_simulations": "policy.comet.plan_simulations",
    "plan_backend": "policy.comet.plan_backend", "plan_workspace_mask": "policy.comet.workspace_mask",
    "plan_deadline_ms": "policy.comet.plan_deadline_ms", "plan_threads": "policy.comet.plan_threads",
    "backend": "backend.name",
    "scheduler": "scheduler.kind", "num_steps": "scheduler.{kind}.num_steps",
    "execute": "scheduler.{kind}.execute", "adapter": "scheduler.eqrl.adapter",
    "adapter_noise": "scheduler.eqrl.noise",
    "inference": "worker.mode", "noise_temperature": "worker.noise_temperature",
    "rtc_soft_steps": "worker.rtc_soft_steps", "inference_cpus": "worker.cpus",
    "seam": "queue.seam",
    "execution": "loop.execution", "record_ticks": "loop.record_ticks", "loop_cpus": "loop.cpus",
    "clock": "clock.kind", "latency": "clock.latency", "latency_ms": "clock.latency_ms",
    "device": "clock.device",
    "episodes": "run.episodes", "seed": "run.seed", "video_episodes": "run.video_episodes",
}

#: the flag of ``edge run`` that sets a short name, where it is not ``--short-name``
FLAGS = {"execution": "--query-mode"}
#: short names ``edge run`` has no flag for (``--set name=...``; ``verify`` is turned off by ``--no-verify``)
NO_FLAG = frozenset({"robot", "instructions", "max_steps", "verify", "adapter_noise", "inference_cpus",
                     "record_ticks", "loop_cpus", "video_episodes", "plan_threads"})

SECTIONS = tuple(f.name for f in dataclasses.fields(RuntimeConfig))


def shortcut_path(name: str, kind: str = "fixed") -> str:
    """The dotted path of short name ``name`` under scheduler kind ``kind``."""
    path = SHORTCUTS[name]
    if "{kind}" in path:
        path = path.replace("{kind}", "dvac" if kind == "dvac" else "fixed")
        if kind == "dvac" and name == "execute":
            path = "scheduler.dvac.max_execute"
    return path


def flag_of(path: str) -> str:
    """How a user sets ``path``: its edge run flag where it has one, else ``--set path=...``."""
    for name in SHORTCUTS:
        if name not in NO_FLAG and path in (shortcut_path(name, "fixed"), shortcut_path(name, "dvac")):
            return FLAGS.get(name, "--" + name.replace("_", "-"))
    return f"--set {path}=..."


def _get(data: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        data = data[key]
    return data


def _merge(node: dict[str, Any], value: dict[str, Any]) -> None:
    for k, v in value.items():
        if isinstance(v, dict) and isinstance(node.get(k), dict) and k != "options":
            _merge(node[k], v)
        else:
            node[k] = v


def _kind_of(data: dict[str, Any], items: list[tuple[str, Any]]) -> str:
    """The scheduler kind these settings end at (short-name keys resolve against it)."""
    kind = data["scheduler"]["kind"]
    for key, value in items:
        if key in ("scheduler", "scheduler.kind") and not isinstance(value, dict):
            kind = value
        elif key == "scheduler" and isinstance(value, dict) and "kind" in value:
            kind = value["kind"]
    return str(kind)


def _set(data: dict[str, Any], key: str, value: Any, kind: str) -> None:
    if "." not in key and key in SECTIONS and isinstance(value, dict):
        _merge(data[key], value)
        return
    if "." not in key:
        if key not in SHORTCUTS:
            raise ConfigError(f"unknown key {key}; use a dotted path (sections: {', '.join(SECTIONS)}) "
                              f"or a short name: {', '.join(SHORTCUTS)}")
        key = shortcut_path(key, kind)
    parts = key.split(".")
    node = data
    for i, k in enumerate(parts[:-1]):
        if k not in node:
            raise ConfigError(f"unknown key {'.'.join(parts[:i + 1])} (in {key}); sections: "
                              f"{', '.join(node)}")
        node = node[k]
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(parts[:i + 1])} is a setting, not a section (in {key})")
    if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict) and parts[-1] != "options":
        _merge(node[parts[-1]], value)
    else:
        node[parts[-1]] = value


def apply_settings(base: RuntimeConfig, items: Any) -> RuntimeConfig:
    """``base`` with ``(key, value)`` settings applied in order (short names, dotted paths or whole
    sections), validated."""
    items = [(k, to_dict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v) for k, v in items]
    data = to_dict(base)
    kind = _kind_of(data, items)
    for key, value in items:
        _set(data, key, value, kind)
    return from_dict(RuntimeConfig, data)


def noise_drawn_by(kind: str, policy: str) -> str:
    """Why a run of scheduler ``kind`` / ``policy`` reads no noise temperature (eqrl, expert, comet)."""
    return ("--scheduler eqrl's adapter draws each query's noise (--set adapter_noise=sample|mean)"
            if kind == "eqrl" else f"--policy {policy} draws no flow-matching noise")


def unread_settings(cfg: RuntimeConfig, base: RuntimeConfig | None = None) -> list[tuple[str, str, str]]:
    """Settings asked for (not at their value in ``base``, default: the defaults) that nothing in a run
    of ``cfg`` reads, as (dotted path, why it is not read, what to do with ``edge run``'s flags): a
    seam without a queue to join, the VLA's noise, network or checkpoint check where no VLA runs,
    another scheduler's settings, latency and loop-thread settings of another clock, worker CPUs
    without a worker process. (Custom ``pkg.module:factory`` policies and schedulers may read any.)"""
    default, after = (base or RuntimeConfig()).dotted(), cfg.dotted()
    asked = {k for k, v in after.items() if default.get(k, v) != v}
    policy, kind = cfg.policy.name, cfg.scheduler.kind
    out: list[tuple[str, str, str]] = []
    if cfg.queue.seam != "replace" and cfg.loop.execution == "sync" and "queue.seam" in asked:
        who = ("--policy comet decides one move at a time here" if policy == "comet" else
               "--policy expert decides in sync" if policy == "expert" else "the queries are sync")
        out.append(("queue.seam", f"a seam joins a new chunk to the rest of the queued one; {who}, so a query starts only once "
                    "the queue is empty and there is nothing to join",
                    "drop --seam" if policy in ("comet", "expert") else "use --query-mode async or drop --seam"))
    if "queue.blend_new" in asked and cfg.queue.seam != "weighted":
        out.append(("queue.blend_new", f"the weighted seam's weight of the new chunk; this run's seam is "
                                       f"{cfg.queue.seam}", "add --seam weighted or drop it"))
    if "worker.rtc_soft_steps" in asked and cfg.queue.seam != "rtc":
        out.append(("worker.rtc_soft_steps", f"sets the rtc seam's guidance; this run's seam is {cfg.queue.seam}",
                    "add --seam rtc or drop it"))
    if "worker.noise_temperature" in asked and (kind == "eqrl" or policy in ("expert", "comet")):
        out.append(("worker.noise_temperature", f"scales the VLA's initial noise; {noise_drawn_by(kind, policy)}",
                    "drop it"))
    if policy in ("expert", "comet"):
        who = ("its search runs on --plan-backend onnxruntime|torch" if policy == "comet"
               else "it reads the simulator's state and runs no network")
        out += [(k, f"sets up the VLA's network; --policy {policy} does not run it ({who})", "drop it")
                for k in sorted(asked) if k.startswith("backend.")][:1]
    if policy == "expert" and "policy.verify" in asked:
        out.append(("policy.verify", "checks a checkpoint's files; --policy expert loads none", "drop --no-verify"))
    custom = ":" in kind  # a factory's scheduler may read any section
    own_k_c = policy in ("expert", "comet")  # their K and C are their own (another scheduler: refused apart)
    for section, read in (("scheduler.dvac.", kind == "dvac" or custom),
                          ("scheduler.fixed.", kind not in ("dvac", "eqrl") or own_k_c),
                          ("scheduler.eqrl.noise", kind == "eqrl" or custom)):
        name = section.split(".")[1]
        out += [(k, f"a setting of --scheduler {name}; this run's scheduler is {kind}"
                    + (" (its adapter chooses K and C)" if kind == "eqrl" and name == "fixed" else ""),
                 "drop it" if name == "fixed" else f"add --scheduler {name} or drop it")
                for k in sorted(asked) if k.startswith(section) and not read][:1]
    for section, name, own in (("scheduler", kind, f"scheduler.{kind}.*" if kind in ("dvac", "eqrl") else
                                "scheduler.fixed.*"),
                               ("policy", policy, "policy.comet.*" if policy == "comet" else "")):
        if f"{section}.options" in asked and ":" not in name:  # a registered one reads its own sections only
            out.append((f"{section}.options", f"read only by your own 'pkg.module:factory' {section}; this run's "
                        f"{section} is {name}" + (f" (its settings: {own})" if own else ""), "drop it"))
    if "clock.latency_ms" in asked and cfg.clock.latency != "constant":
        out.append(("clock.latency_ms", f"the charge of --latency constant; this run's latency is {cfg.clock.latency}",
                    "add --latency constant or drop it"))
    if cfg.clock.kind == "virtual":
        out += [(k, "sets up the control loop's thread on the real clock; this run's clock is virtual",
                 "add --clock real or drop it")
                for k in ("loop.cpus", "loop.timer_slack_ns", "loop.gil_switch_interval_s") if k in asked][:1]
    if "worker.torch_threads" in asked and cfg.worker.mode in ("inline", "auto") and (
            cfg.worker.mode == "inline" or cfg.clock.kind == "virtual"):
        out.append(("worker.torch_threads", "sets a worker thread's or process's torch threads; this run's inference "
                                            "runs inline on the loop's thread (backend.threads sets the VLA's there, "
                                            "policy.comet.plan_threads the planner's)",
                    "use --set policy.comet.plan_threads=N instead" if policy == "comet" else
                    "drop it" if policy == "expert" else "add --inference thread|process or drop it"))
    if "policy.comet.plan_threads" in asked and policy != "comet" and ":" not in policy:
        out.append(("policy.comet.plan_threads", f"the planner's threads; this run's policy is {policy}",
                    "add --policy comet or drop it"))
    if "worker.cpus" in asked and cfg.worker.cpus and cfg.worker.mode != "process":
        out.append(("worker.cpus", f"the CPUs of the inference worker process; this run's inference is "
                                   f"{cfg.worker.mode}", "add --inference process or drop it"))
    return out


def load_runtime_config(base: RuntimeConfig | None = None, path: str | Path | None = None,
                        overrides: list[str] | tuple[str, ...] = ()) -> RuntimeConfig:
    """``base`` (default: the defaults) <- YAML file <- ``--set key=value`` overrides, validated;
    errors name the file or the overrides."""
    items: list[tuple[str, Any]] = list(read_yaml(path).items()) if path else []
    for text in overrides:
        keys, value = parse_override(text)
        items.append((".".join(keys), value))
    try:
        return apply_settings(base or RuntimeConfig(), items)
    except ConfigError as err:
        raise ConfigError(f"{err}{source_note(path, overrides)}") from None


def config_from_meta(meta: dict[str, Any]) -> RuntimeConfig:
    """The config a run directory was started with: ``meta.json``'s nested ``config``, or (runs
    written before the sections) its flat ``session``."""
    nested = meta.get("config")
    if isinstance(nested, dict):
        comet = (nested.get("policy") or {}).get("comet")
        if isinstance(comet, dict):  # before plan_backend torch ran; before the mask (the deadline) there was none;
            # before plan_threads torch kept its own thread count
            comet = {"plan_backend": "torch", "workspace_mask": False, "plan_deadline_ms": 0.0, "plan_threads": 0, **comet}
            nested = {**nested, "policy": {**nested["policy"], "comet": comet}}
        return from_dict(RuntimeConfig, nested)
    session = dict(meta.get("session") or {})
    session.setdefault("plan_backend", "torch")  # such runs' planner ran on torch
    session.setdefault("plan_workspace_mask", False)  # ... and without the workspace mask
    session.setdefault("plan_deadline_ms", 0.0)  # ... or a deadline
    session.setdefault("plan_threads", 0)  # ... and torch kept its own thread count
    return RuntimeConfig.of(**session)


def dump_yaml(config: RuntimeConfig) -> str:
    """The nested YAML of ``config`` (reads back with :func:`load_runtime_config` to the same config)."""
    import yaml

    return yaml.safe_dump(to_dict(config), sort_keys=False)


__all__ = ["BACKENDS", "DEFAULT_CHECKPOINT", "SEAMS", "SHORTCUTS", "ClockSettings", "CometPolicyConfig",
           "EqrlSchedulerConfig", "LoopSettings", "PolicyConfig", "RunSettings", "RuntimeConfig",
           "SceneConfig", "SchedulerSettings", "WorkerSettings", "apply_settings", "config_from_meta",
           "dump_yaml", "flag_of", "load_runtime_config", "shortcut_path", "unread_settings"]
