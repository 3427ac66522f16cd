"""`edge run`: the main job — the default scene (MuJoCo ``stack``) driven by the shipped VLA through
the on-robot runtime (control loop, inference worker, action queue, safety supervisor, telemetry).

``--policy expert`` runs the scripted expert instead (a reference, and the fallback when no
checkpoint is available) through the same runtime (:mod:`sim.expert_policy`, registered as
``expert``): one action per query, computed from the simulator's state, so it always runs with
``--query-mode sync``, K = C = 1 (NFE counts 1 per action), inline inference and, unless
``--latency`` is given, no charged latency (every tick executes one expert action, as its own loop
did). It writes the same run directory (meta.json, ticks.jsonl, queries.jsonl, episodes.jsonl,
summary.json, summary.txt, episode0.gif).

``--arm bridge`` runs the policy on a real arm behind the firmware bridge instead (:func:`edge.runtime.arm.deploy`:
the MCU on ``--port``, OpenCV cameras from ``--camera NAME=SOURCE``, for ``--duration`` seconds on the real clock,
after a confirmation; docs/deploy.md); the simulated episodes' flags are refused there.

Run directories never mix: ``--out DIR`` that already holds files is refused unless ``--resume``
continues that run (same settings; episode indices and seeds go on; the summary covers all), and the
default ``runs/<timestamp>`` gets a ``-2``, ``-3`` ... suffix if it exists. A run that fails before
its first tick leaves no directory behind.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge.action_queue import SEAMS
from edge.backends import BACKENDS
from edge.cli import add_deprecated_alias, add_subparser
from edge.commands._sim_args import TASKS, add_env_args
from edge.errors import EdgeError
from edge.runtime.registry import SCHEDULERS
from edge.runtime.session import DEFAULT_CHECKPOINT

# --policy comet: a decision's default wall-clock limit, 0.8 of the planner's 20 Hz control period
# (docs/world_models.md, "A default deadline for `edge run --policy comet`")
PLANNER_DEADLINE_MS = 40.0

if TYPE_CHECKING:
    from collections.abc import Callable

    from edge.runtime.config import RuntimeConfig


class _Given(argparse.Action):
    """Store the value and note that the flag was given on the command line (``args.given``), so
    a setting the scripted expert fixes is refused only when the user asked for another value."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def register(sub) -> None:
    p = add_subparser(sub, "run", "Run the default scene (MuJoCo stack, shipped VLA), or the policy on a real arm "
                      "(--arm bridge), and write a run directory.", """
  edge run                                           # 3 stack episodes, shipped VLA, virtual clock
  edge run --episodes 20 --num-steps 5 --execute 8   # fewer denoising steps per query
  edge run --clock real --backend torch              # wall-clock loop, inference in a thread
  edge run --scheduler dvac --seam weighted
  edge run --scheduler eqrl                          # the shipped EQRL adapter picks noise, K and C
  edge run --latency constant --latency-ms 100       # what happens at 100 ms inference latency
  edge run --policy expert --task pick_place --sim pybullet
  edge run --arm bridge --port /dev/ttyACM0 --camera front=/dev/video0 --camera wrist=/dev/video2 \\
      --instruction "stack the red block on the blue block" --duration 60   # a real arm (docs/deploy.md)""")
    add_env_args(p, episodes=3, tasks=TASKS, task_action=_Given)
    for action in p._actions:  # a resumed run finishes the episodes it was started with unless told more
        if action.dest == "episodes":
            action.default, action.help = None, "number of episodes (seeds) (default 3; --resume: the run's own)"
    p.set_defaults(seed=100000)
    p.add_argument("--policy", default="auto", metavar="NAME", action=_Given,
                   help="who acts: auto (the VLA if the checkpoint exists, else the scripted expert), "
                        "vla, expert (the scripted expert, through the same runtime: one action per "
                        "query, --query-mode sync, K = C = 1, no charged latency unless --latency is "
                        "given), comet, or your own 'pkg.module:factory' (factory(runtime_config, "
                        "robot_spec) -> ChunkPolicy)")
    p.add_argument("--checkpoint", default=None, metavar="CKPT",
                   help=f"VLA checkpoint or ONNX export dir (default: the shipped one, {DEFAULT_CHECKPOINT}; "
                        "only the default falls back to the expert when it is missing)")
    p.add_argument("--backend", default="onnxruntime", metavar="NAME",
                   help=f"inference backend for the VLA: {' | '.join(BACKENDS)} (`edge doctor` shows which "
                        "can run here) or your own 'pkg.module:factory' (factory(backend_config, model_path, "
                        "robot, verify) -> edge.backends.base.Backend)")
    p.add_argument("--scheduler", default="fixed", metavar="NAME",
                   help=f"compute scheduler: {' | '.join(SCHEDULERS.names())} or your own "
                        "'pkg.module:factory' (factory(runtime_config, policy) -> Scheduler)")
    p.add_argument("--adapter", default="", metavar="DIR",
                   help="--scheduler eqrl: the adapter checkpoint dir, or a shipped one by name: stack "
                        "(the default), stack_efficient (trained to spend fewer denoising steps; docs/eqrl.md) "
                        "or stack_latency (trained with 0-300 ms inference latency)")
    p.add_argument("--config", metavar="YAML",
                   help="runtime settings (edge.runtime.config.RuntimeConfig: nested sections, or the "
                        "flags' short names; e.g. configs/run/default.yaml) applied on top of the flags "
                        "(default: none)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting after --config by dotted path or short name, e.g. "
                        "--set max_steps=50, or with --scheduler dvac --set scheduler.dvac.kappa=2; a setting "
                        "this run would not read is refused (repeatable; default: none)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    p.add_argument("--no-verify", action="store_true",
                   help="load the checkpoint even if its files do not match its manifest's sha256")
    p.add_argument("--num-steps", type=int, default=10, action=_Given,
                   help="denoising steps K per query (--policy expert: always 1, it refuses another value; "
                        "--policy comet has none and refuses the flag)")
    p.add_argument("--execute", type=int, default=8, action=_Given,
                   help="actions executed per chunk C (dvac: the longest prefix it may execute; "
                        "--policy expert: always 1, it refuses another value; --policy comet: set by "
                        "--query-mode, it refuses the flag)")
    p.add_argument("--seam", default="replace", choices=SEAMS,
                   help="async queries: how a new chunk joins what is left of the previous one: replace (the new "
                        "one supersedes it), weighted (blend the two on their overlap), rtc (keep the "
                        "actions due while the query ran, guide the new chunk toward them); in sync the queue is "
                        "empty when a chunk arrives, so only replace applies")
    p.add_argument("--noise-temperature", type=float, default=0.5, action=_Given,
                   help="the VLA's flow-matching noise: scale of each query's initial noise (1 = as trained, "
                        "0 = deterministic; default 0.5); --scheduler eqrl's adapter, --policy expert and comet "
                        "draw none and refuse it")
    p.add_argument("--rtc-soft-steps", type=int, default=-1,
                   help="rtc: queued actions after the frozen ones that are softly guided "
                        "(-1 = all, as the RTC paper; 0 = only the frozen ones)")
    mode = p.add_argument("--query-mode", default=None, choices=("async", "sync"),
                          help="async: the arm keeps executing queued actions while a query runs; "
                               "sync: it waits for each query (the blocking baseline) (default: async; "
                               "sync for --policy expert, which needs it; --policy comet: async, deciding "
                               "every tick from after the move that runs meanwhile, where inference is inline "
                               "(the virtual clock's default) and the seam is not weighted, else sync; "
                               "--resume: as the run was started)")
    p.add_argument("--world-model", default="", metavar="DIR",
                   help="--policy comet: the world-model checkpoint (default: the shipped model for --task: push3 or reach3)")
    p.add_argument("--plan-simulations", type=int, default=0,
                   help="--policy comet: tree-search simulations per decision, at most 1000 (default 0 = the "
                        "model's own)")
    p.add_argument("--plan-deadline-ms", type=float, default=None,
                   help="--policy comet: a decision's wall-clock limit in ms (at most 60000): once it has run this "
                        "long the search starts no new simulation and acts on those run, at least one, so a "
                        "decision can overrun it by one simulation and the search's end; on --clock real it "
                        "counts from the query's request, the handover to a worker included (default "
                        f"{PLANNER_DEADLINE_MS:g}, 0.8 of the planner's 20 Hz period; 0 = none; --resume: as the "
                        "run was started)")
    p.add_argument("--plan-backend", default=None, choices=("onnxruntime", "torch"),
                   help="--policy comet: what runs the search's model passes (default onnxruntime: an ONNX "
                        "graph exported once per model into the edge cache and checked against torch)")
    p.add_argument("--plan-workspace-mask", default=None, choices=("on", "off"),
                   help="--policy comet: on = the search does not consider a move the robot's workspace box "
                        "would cut to under half its length, from the TCP position in the proprio (default on; "
                        "--resume: as the run was started)")
    add_deprecated_alias(p, "--execution", mode)
    p.add_argument("--clock", default="virtual", choices=("virtual", "real"), action=_Given,
                   help="virtual: deterministic, one period per tick, inference latency charged by "
                        "--latency; real: the wall clock")
    p.add_argument("--inference", default="auto", choices=("auto", "thread", "process", "inline"),
                   help="where queries run: auto = inline on the virtual clock, a thread on the real "
                        "one (--policy comet, sync there by default: a worker process; --policy expert: "
                        "always inline, it reads the simulator the loop steps; --resume: as the run was "
                        "started); process = a separate worker process (no GIL contention with the loop)")
    p.add_argument("--latency", default="measured", choices=("measured", "constant", "per_step", "device"),
                   action=_Given,
                   help="how inference latency is charged on the virtual clock, or emulated on the real "
                        "clock (a query's result is held until then; measured: the compute's own time) "
                        "(device: the query time projected for --device, 'as if on' that computer) (default: measured; "
                        "--policy expert: constant, --latency-ms 0 unless given)")
    p.add_argument("--device", default="orin-nano", metavar="NAME",
                   help="--latency device: the target computer (orin-nano, orin-nx, agx-orin, thor, "
                        "x86-cpu, x86-gpu; see edge/profiler/README.md)")
    p.add_argument("--latency-ms", type=float, default=None,
                   help="--latency constant: ms charged per query (default 0)")
    p.add_argument("--out", default=None,
                   help="run directory (default runs/<timestamp>); must not hold files unless --resume")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out (same settings): its finished episodes are kept, "
                        "the rest of --episodes run with the next seeds")
    arm = p.add_argument_group("a real arm (--arm bridge)")
    arm.add_argument("--arm", default="sim", choices=("sim", "bridge"),
                     help="sim: the simulated arm of --sim, episode by episode (default); bridge: an arm behind "
                          "MCU motor controllers speaking the firmware bridge protocol (firmware_bridge/PROTOCOL.md) "
                          "on --port, seen through --camera, for --duration seconds on the real clock")
    arm.add_argument("--port", default="", metavar="PORT",
                     help="--arm bridge: the MCU's serial port (/dev/ttyACM0, /dev/serial/by-id/..., a pty, or a "
                          "pyserial URL) (required there; default: none)")
    arm.add_argument("--camera", action="append", default=[], metavar="NAME=SOURCE",
                     help="--arm bridge: one camera the policy sees, by its name in the checkpoint's spec, and its "
                          "OpenCV source: a device index (0), a device path (/dev/video0), a stream URL or a video "
                          "file (played at its frame rate) (repeatable: one per camera; default: none)")
    arm.add_argument("--duration", type=float, default=30.0, metavar="S", action=_Given,
                     help=f"--arm bridge: how long the policy drives the arm, in seconds (default 30; at most "
                          f"{int(MAX_ARM_DURATION_S)}); then it stops under control and disarms (Ctrl-C does so earlier)")
    arm.add_argument("--instruction", default="", metavar="TEXT",
                     help="--arm bridge: the task in words, as the policy was trained on them, e.g. 'stack the red "
                          "block on the blue block' (default: none; required for the VLA; --policy comet reads none)")
    arm.add_argument("--yes", action="store_true",
                     help="--arm bridge: arm without asking (the command otherwise asks on the terminal once the "
                          "arm has answered, and refuses to arm without a terminal)")
    p.set_defaults(func=run)
    for action in p._actions:  # the VLA's image size is its checkpoint's; only the expert takes one
        if action.dest == "image_size":
            action.default = argparse.SUPPRESS  # unset unless given (and no "(default: None)")
            action.help = (f"--policy expert: camera image side in pixels (default {EXPERT_IMAGE_SIZE}); "
                           "the VLA's comes from its checkpoint")


EXPERT_IMAGE_SIZE = 96  # = sim.expert_policy.DEFAULT_IMAGE_SIZE (not imported: edge run stays light)
MAX_ARM_DURATION_S = 86400.0  # = edge.runtime.arm.MAX_DURATION_S


class RunDir:
    """The run directory of one ``edge run``: chosen, checked and created before anything runs;
    :meth:`discard_if_empty` removes what this command created when the run failed before its first
    tick (nothing to keep)."""

    def __init__(self, args: argparse.Namespace) -> None:
        if args.resume and not args.out:
            raise EdgeError("--resume continues an existing run: pass its directory with --out DIR")
        if args.out:
            out = Path(args.out)
            if out.exists() and not out.is_dir():
                raise EdgeError(f"--out {out}: exists and is not a directory; choose another --out")
            entries = sorted(x.name for x in out.iterdir()) if out.is_dir() else []
            if args.resume and not (out / "meta.json").is_file():
                raise EdgeError(f"--resume: --out {out} holds no run to continue (no meta.json); "
                                + ("choose another --out (it holds other files)" if entries
                                   else "drop --resume to start one there"))
            if entries and not args.resume:
                shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
                raise EdgeError(f"--out {out}: the directory is not empty ({shown}); runs never mix: "
                                "pass --resume to continue that run or choose another --out")
        else:
            from edge.commands._out import make_default_run_dir

            self.path, self.created = make_default_run_dir()
            return
        self.path = out
        # the topmost directory this command creates (removed again if the run leaves nothing)
        self.created = next((q for q in reversed((out, *out.parents)) if not q.exists()), None)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise EdgeError(f"--out {out}: cannot create the run directory ({err.strerror}); "
                            "choose another --out") from None

    def discard_if_empty(self) -> None:
        """Remove the run directory this command made if the run recorded nothing: no tick, episode or
        arm command, and no fault, e-stop or loop error (those stay with their run); then each folder above
        it this command made, while it is empty (another run may be recording beside it)."""
        if self.created is None:
            return
        for name in ("ticks.jsonl", "episodes.jsonl", "commands.jsonl"):  # commands: what a real arm was sent
            f = self.path / name
            if f.is_file() and f.stat().st_size > 0:
                return
        from edge.telemetry import read_jsonl

        events = self.path / "events.jsonl"
        if events.is_file() and any(e.get("kind") in ALARM_EVENTS for e in read_jsonl(events)):
            return
        shutil.rmtree(self.path, ignore_errors=True)
        for parent in self.path.parents:
            if parent == self.created.parent:
                break
            try:
                parent.rmdir()  # only if empty
            except OSError:
                break


#: event kinds that keep a run directory whose run recorded nothing else (the safety layer's, the loop's
#: and the bridge driver's alarms)
ALARM_EVENTS = frozenset({"fault", "estop", "loop_error", "driver_fault", "driver_safe_stop", "driver_estop",
                          "driver_estop_link_down", "driver_disarm_failed"})


def _checkpoint(args: argparse.Namespace) -> str:
    """Decide who acts (``args.policy``) and return the checkpoint path. Only the implicit default
    falls back to the expert when it is missing; an explicit --checkpoint must exist."""
    explicit = args.checkpoint is not None
    ckpt = args.checkpoint if explicit else str(DEFAULT_CHECKPOINT)
    if args.policy == "expert":
        if explicit:
            raise EdgeError(f"--checkpoint {ckpt}: --policy expert runs the scripted expert, which "
                            "takes no checkpoint; drop one of them")
        return ckpt
    if not Path(ckpt).exists():
        if args.policy == "auto" and not explicit:
            print(f"no VLA checkpoint at {ckpt}: running the scripted expert instead")
            args.policy = "expert"
            return ckpt
        raise EdgeError(f"--checkpoint {ckpt}: checkpoint not found; train one with `edge train vla` "
                        "or run the scripted expert with `edge run --policy expert`")
    args.policy = "vla"
    return ckpt


def _check_vla_args(args: argparse.Namespace, ckpt: str) -> None:
    """Refuse flags that the VLA path would silently ignore or that its checkpoint contradicts."""
    from edge.runtime.session import checkpoint_spec

    spec = checkpoint_spec(ckpt, verify=not args.no_verify)
    h, w = (int(x) for x in spec.image_hw)
    size = getattr(args, "image_size", None)
    if size is not None and (size, size) != (h, w):
        raise EdgeError(f"--image-size {size}: the VLA's camera images are {h}x{w}, fixed by "
                        f"its checkpoint {ckpt}; drop --image-size (it sets the scene for --policy expert)")
    if spec.task in ("stack", "pick_place", "push", "reach") and spec.task != args.task:
        other = ("run the world-model planner there (--policy comet --task reach)" if args.task == "reach"
                 else f"pass a checkpoint trained for {args.task!r} (edge train vla --task {args.task})")
        raise EdgeError(f"--task {args.task}: the checkpoint {ckpt} was trained for task {spec.task!r} "
                        f"(its spec); run --task {spec.task} or {other}")


def _expert_settings(args: argparse.Namespace) -> dict:
    """The session settings of ``--policy expert`` (:data:`edge.runtime.factories.EXPERT_SETTINGS`:
    sync, K = C = 1, inline, no charged latency unless --latency is given); refuses a flag that asks
    for something the expert cannot do instead of ignoring it."""
    from edge.runtime.factories import EXPERT_SETTINGS

    given = getattr(args, "given", set())
    for key, flag in (("num_steps", "--num-steps"), ("execute", "--execute")):
        if key in given and getattr(args, key) != 1:
            raise EdgeError(f"{flag} {getattr(args, key)}: --policy expert makes one action per query "
                            f"(chunk length 1, one evaluation), so {flag} is always 1; drop {flag}")
    if args.query_mode not in (None, "sync"):
        raise EdgeError(f"--query-mode {args.query_mode}: --policy expert decides one action from the "
                        "state it saw, executed before the next decision; use --query-mode sync")
    if args.inference not in ("auto", "inline"):
        raise EdgeError(f"--inference {args.inference}: --policy expert reads the simulator's state, which "
                        "the control loop steps, so it runs inline on the loop's thread; drop --inference")
    if args.scheduler != "fixed":
        raise EdgeError(f"--scheduler {args.scheduler}: --policy expert makes one action per query; there "
                        "is no K or C to schedule; drop --scheduler")
    size = getattr(args, "image_size", None)
    size = EXPERT_IMAGE_SIZE if size is None else size
    if not 16 <= size <= 512:
        raise EdgeError(f"--image-size={size} is out of range; allowed [16, 512]")
    out = {**EXPERT_SETTINGS, "image_size": size}
    if "latency" in given:  # an explicit latency model is charged like any policy's
        out["latency"], out["latency_ms"] = args.latency, args.latency_ms or 0.0
    else:
        out["latency_ms"] = args.latency_ms or 0.0
    return out


def _started_config(args: argparse.Namespace) -> RuntimeConfig | None:
    """The config the run in ``--out`` was started with, or None (no run there, or unreadable)."""
    meta = Path(args.out) / "meta.json" if args.out else None
    if meta is None or not meta.is_file():
        return None
    from edge.runtime.config import config_from_meta

    try:
        return config_from_meta(json.loads(meta.read_text()))
    except (OSError, ValueError, KeyError, TypeError):  # ConfigError is a ValueError
        return None


def _simulated_run(out: str) -> bool:
    """Whether ``out`` holds a run of simulated episodes (resume_state refuses the others by name)."""
    from edge.runtime.session import is_simulated_run

    try:
        return is_simulated_run(json.loads((Path(out) / "meta.json").read_text()))
    except (OSError, ValueError):
        return False


def _config_source(args: argparse.Namespace) -> str:
    return " / ".join(x for x in (f"--config {args.config}" if args.config else "", "--set" if args.set else "") if x)


def _check_config_keeps_flags(args: argparse.Namespace, flags: RuntimeConfig, cfg: RuntimeConfig) -> None:
    """--config / --set are applied on top of the flags; refuse where they undo the policy or task a
    flag asked for (a run of something else than was asked), and say which other flags they override.
    (Selecting the planner by a setting is refused before, in :func:`run`.)"""
    import sys

    from edge.runtime.config import SHORTCUTS, flag_of, shortcut_path

    source = _config_source(args)
    before, after = flags.dotted(), cfg.dotted()
    overridden = []
    as_short = {"query_mode": "execution", "no_verify": "verify"}  # flags whose dest is not their short name
    for dest in sorted(getattr(args, "non_default", set()) & (set(SHORTCUTS) | set(as_short)) - {"policy", "task"}):
        path = shortcut_path(as_short.get(dest, dest), cfg.scheduler.kind)
        if path in before and before[path] != after.get(path):
            given = "--no-verify" if dest == "no_verify" else f"{flag_of(path)} {getattr(args, dest)}"
            overridden.append(f"{given} -> {path}={after.get(path)}")
    if overridden:
        print(f"note: {source} (applied on top of the flags) overrides {'; '.join(overridden)}", file=sys.stderr)
    given = getattr(args, "given", set())
    for flag, dest, path, before, after in (
            ("--policy", "policy", "policy.name", flags.policy.name, cfg.policy.name),
            ("--task", "task", "scene.task", flags.scene.task, cfg.scene.task)):
        if dest in given and after != before:  # only a flag given on the command line
            raise EdgeError(f"{flag} {args.asked[dest]}, but {source} sets {path}={after} (applied on top of the "
                            f"flags): drop one of them")


def run(args: argparse.Namespace) -> int:
    args.asked = {"policy": args.policy, "task": args.task}  # as given (resolving auto changes args.policy)
    if args.scheduler not in SCHEDULERS.names() and ":" not in args.scheduler:
        raise EdgeError(f"--scheduler {args.scheduler}: choose {', '.join(SCHEDULERS.names())} or give your own as "
                        "'pkg.module:factory'")
    if args.config and not Path(args.config).is_file():
        raise EdgeError(f"--config {args.config}: " + ("is a directory: give a YAML file in it" if Path(args.config).is_dir()
                                                       else "not found (a YAML file, e.g. configs/run/dvac.yaml)"))
    if args.arm == "bridge":
        return _run_on_arm(args)
    given = [flag for flag, v in (("--port", args.port), ("--camera", args.camera), ("--instruction", args.instruction),
                                  ("--duration", "duration" in getattr(args, "given", ())), ("--yes", args.yes)) if v]
    if given:
        one = len(given) == 1
        raise EdgeError(f"{' / '.join(given)} configure{'s' if one else ''} a real arm; add --arm bridge or drop "
                        f"{'it' if one else 'them'} (the simulated arm runs --episodes episodes)")
    if args.episodes is None:  # not given: 3, or as many as the resumed run was started with
        was = _started_config(args) if args.resume else None
        args.episodes = was.run.episodes if was is not None else 3
    planner = args.policy == "comet"
    custom = ":" in args.policy or planner
    if not custom and args.policy not in ("auto", "vla", "expert"):
        raise EdgeError(f"--policy {args.policy}: choose auto, vla, expert, comet or 'pkg.module:factory'")
    given = _planner_flags(args)
    if given and not planner:
        one = len(given) == 1
        raise EdgeError(f"{' / '.join(given)} configure{'s' if one else ''} --policy comet; add --policy comet or "
                        f"drop {'it' if one else 'them'}")
    _check_plan_values(args)
    if args.n_blocks != 2 and args.task != "stack":
        raise EdgeError(f"--n-blocks {args.n_blocks}: sets the stack task's cubes; --task {args.task} has its own "
                        "objects; drop --n-blocks")
    _check_eqrl_flags(args)
    if planner:
        _check_planner_scheduler(args)
        _check_planner_vla_flags(args)
    if not planner and (args.config or args.set):  # before the VLA's checks, which would name its task
        from edge.runtime.config import load_runtime_config

        if load_runtime_config(None, args.config, args.set).policy.name == "comet":
            raise EdgeError(f"policy.name=comet from {_config_source(args)}: select the world-model planner with "
                            "--policy comet (it sets the planner's loop and schedule); its own settings "
                            "(policy.comet.*) can come from the YAML or --set")
    # a resumed planner run keeps the defaults it was started with (None: not resumed, or unreadable:
    # resume_state names what it cannot read)
    started = _started_config(args) if args.resume else None
    if started is not None and started.policy.name == "comet" and not planner:  # before a VLA is loaded
        raise EdgeError(f"--resume: {args.out} is a world-model planner run (--policy comet --task "
                        f"{started.scene.task}); resume it with `edge run --policy comet --task {started.scene.task} "
                        f"--out {args.out} --resume`, with the --config / --set it was started with")
    was_expert = started is not None and started.policy.name == "expert"
    if started is not None and _simulated_run(args.out) and (
            (was_expert and args.policy not in ("expert", "auto")) or (not was_expert and args.policy == "expert")):
        was = "an expert run (--policy expert)" if was_expert else f"a --policy {started.policy.name} run"
        raise EdgeError(f"--resume: {args.out} is {was}; resume it with the --policy it was started with "
                        f"(this command asks for --policy {args.policy}), or choose another --out")
    started = started if planner else None
    query_mode = args.query_mode or "async"
    if planner and args.query_mode is None:  # comet: async (lookahead) where it can run, else sync
        inline = args.inference == "inline" or (args.inference == "auto" and args.clock == "virtual")
        query_mode = "async" if inline and args.seam != "weighted" else "sync"
        if started is not None:  # as the run was started
            query_mode = started.loop.execution
    inference = args.inference
    if planner and inference == "auto":  # comet on the real clock, sync: the search in a worker process
        if started is not None:  # as the run was started (auto: a thread, before this default)
            inference = started.worker.mode
        elif args.clock == "real" and query_mode == "sync":
            inference = "process"
    deadline_ms = args.plan_deadline_ms if args.plan_deadline_ms is not None else (
        PLANNER_DEADLINE_MS if planner else 0.0)
    if args.plan_deadline_ms is None and started is not None:  # as the run was started
        deadline_ms = started.policy.comet.plan_deadline_ms
    plan_threads = started.policy.comet.plan_threads if started is not None else 1  # as the run was started
    workspace_mask = args.plan_workspace_mask != "off"
    if args.plan_workspace_mask is None and started is not None:  # runs recorded before the mask: off
        workspace_mask = started.policy.comet.workspace_mask
    if planner:
        _check_planner_task(args)
    if planner and args.latency in ("device", "per_step"):
        raise EdgeError(f"--latency {args.latency}: charges the VLA network's modelled time, not the planner's; "
                        "--policy comet takes --latency measured (the default) or constant")
    ckpt = str(args.checkpoint or DEFAULT_CHECKPOINT) if custom else _checkpoint(args)
    expert = args.policy == "expert"  # given, or the fallback without a checkpoint
    # the expert charges no latency by default, so a bare --latency-ms is its constant latency
    latency_kind = "constant" if expert and "latency" not in getattr(args, "given", set()) else args.latency
    if args.latency_ms is not None and latency_kind != "constant":
        raise EdgeError(f"--latency-ms {args.latency_ms:g} is the charge of --latency constant, but "
                        f"--latency is {args.latency!r}; add --latency constant (or drop --latency-ms)")
    from edge.runtime.config import RuntimeConfig, load_runtime_config
    from edge.runtime.session import run_session
    from edge.telemetry import format_summary

    if not custom and not expert:
        _check_vla_args(args, ckpt)
    # comet: sync executes each decision's one move; async (lookahead) executes [the queued move, the
    # new move, the new move] and queries every tick
    lookahead = planner and query_mode == "async"
    settings = {"num_steps": 1 if planner else args.num_steps,
                "execute": (3 if lookahead else 1) if planner else args.execute,
                **({"scheduler.fixed.next_query_in_steps": 1} if lookahead else {}),
                "execution": query_mode, "inference": inference, "latency": args.latency,
                "latency_ms": args.latency_ms or 0.0,
                # the VLA's image size is its checkpoint's (checked above); others' is their spec's
                "image_size": (getattr(args, "image_size", None) or 0) if custom else 0}
    if expert:
        settings.update(_expert_settings(args))
    from edge.config import ConfigError
    from edge.runtime.config import flag_of

    try:
        cfg = RuntimeConfig.of(policy="vla" if not custom and not expert else args.policy, task=args.task,
                               sim=args.sim, distribution=args.distribution, n_blocks=args.n_blocks,
                               checkpoint=ckpt, backend=args.backend, scheduler=args.scheduler,
                               adapter=args.adapter, verify=not args.no_verify,
                               seam=args.seam, world_model=args.world_model, plan_simulations=args.plan_simulations,
                               plan_deadline_ms=deadline_ms, plan_threads=plan_threads,
                               plan_backend=args.plan_backend or "onnxruntime",
                               plan_workspace_mask=workspace_mask,
                               rtc_soft_steps=args.rtc_soft_steps, noise_temperature=args.noise_temperature,
                               clock=args.clock, device=args.device,
                               episodes=args.episodes, seed=args.seed, **settings)
    except ConfigError as err:  # a flag's value out of range: name the flag as given
        import re

        m = re.match(r"([a-z_.]+)=", str(err))
        flag = flag_of(m[1]) if m else ""
        if flag.startswith("--") and not flag.startswith("--set"):
            raise EdgeError(f"{flag}: {err}") from None
        raise
    if args.config or args.set:
        flags = cfg
        cfg = load_runtime_config(cfg, args.config, args.set)
        args.config_layers = (flags, load_runtime_config(flags, args.config) if args.config else flags)
        _check_config_keeps_flags(args, flags, cfg)
    _check_settings_apply(args, cfg, planner)
    _check_adapter_is_read(args, cfg)
    run_dir = RunDir(args)
    try:
        res = run_session(cfg, run_dir.path, resume=args.resume, progress=not args.no_progress)
    except BaseException:
        run_dir.discard_if_empty()
        raise
    print()
    print(format_summary(res.summary))
    print(f"\nrun directory: {run_dir.path} (meta.json, ticks.jsonl, queries.jsonl, episodes.jsonl, "
          "events.jsonl, summary.json, summary.txt, episode0.gif)")
    print(f"report (timelines, video, html): edge report {run_dir.path}")
    return 0


def _planner_flags(args: argparse.Namespace) -> list[str]:
    """The world-model planner's flags given on the command line."""
    return [flag for flag, v in (("--world-model", args.world_model), ("--plan-simulations", args.plan_simulations),
                                 ("--plan-backend", args.plan_backend),
                                 ("--plan-workspace-mask", args.plan_workspace_mask),
                                 ("--plan-deadline-ms", args.plan_deadline_ms is not None)) if v]


def _check_eqrl_flags(args: argparse.Namespace) -> None:
    """--scheduler eqrl's adapter decides K and C per query: a fixed one given would be ignored."""
    if args.scheduler == "eqrl":
        for key, flag in (("num_steps", "--num-steps"), ("execute", "--execute")):
            if key in getattr(args, "given", set()):
                raise EdgeError(f"{flag} {getattr(args, key)}: --scheduler eqrl's adapter chooses K and C per query "
                                f"(its range is the adapter's); drop {flag}")


def _check_adapter_is_read(args: argparse.Namespace, cfg: RuntimeConfig) -> None:
    """An adapter given to a run whose scheduler would not read it."""
    eqrl = cfg.scheduler.eqrl
    if (eqrl.adapter or eqrl.noise_adapter) and cfg.scheduler.kind != "eqrl" and ":" not in cfg.scheduler.kind:
        given = (f"--adapter {args.adapter}" if args.adapter else
                 f"scheduler.eqrl.{'adapter' if eqrl.adapter else 'noise_adapter'}="
                 f"{eqrl.adapter or eqrl.noise_adapter} (from {_config_source(args)})")
        raise EdgeError(f"{given} configures --scheduler eqrl (this run's scheduler: {cfg.scheduler.kind}), "
                        "which would not read it; add --scheduler eqrl or drop the adapter")


def _check_settings_apply(args: argparse.Namespace, cfg: RuntimeConfig, planner: bool) -> None:
    """Refuse a setting the run would ignore, or one that would make its episodes depend on thread timing
    (on the final settings: flags, then --config / --set)."""
    from edge.runtime.config import flag_of

    def named(path: str, value: Any) -> str:
        flag = flag_of(path)
        return f"{flag} {value}" if not flag.startswith("--set") else f"{path}={value}"

    if cfg.clock.device != "orin-nano" and cfg.clock.latency != "device":
        raise EdgeError(f"{named('clock.device', cfg.clock.device)}: the target whose time --latency device charges; "
                        f"this run's latency is {cfg.clock.latency}; add --latency device (or drop it)")
    _check_settings_are_read(args, cfg, named)
    if (not planner and not args.resume and cfg.worker.mode == "thread" and cfg.clock.kind == "virtual"
            and cfg.loop.execution == "async"):  # (the planner names its own reason; a resumed run stays as it ran)
        raise EdgeError(f"{named('worker.mode', 'thread')}: on the virtual clock an async query's chunk would land "
                        "when the thread finishes in wall time, so the same seed would give other episodes; use "
                        "--inference inline (the virtual clock's default), --query-mode sync, or --clock real")


def _check_settings_are_read(args: argparse.Namespace, cfg: RuntimeConfig, named: Callable[[str, Any], str]) -> None:
    """Refuse a setting asked for by a flag or ``--set`` that nothing in this run reads
    (:func:`edge.runtime.config.unread_settings`); one that comes from the ``--config`` file only
    gets a note (a file sets many things, not all of which apply to every run). A resumed run is
    checked only for what differs from how it was started (an earlier version may have run settings
    refused now)."""
    import sys

    from edge.runtime.config import noise_drawn_by, unread_settings

    flags, from_file = getattr(args, "config_layers", (cfg, cfg))
    f, ff, after = flags.dotted(), from_file.dotted(), cfg.dotted()
    policy, kind = cfg.policy.name, cfg.scheduler.kind
    if policy in ("expert", "comet") and kind != "fixed":  # whatever set it: the policy's own schedule
        source = ("--set" if after["scheduler.kind"] != ff["scheduler.kind"] else f"--config {args.config}"
                  if after["scheduler.kind"] != f["scheduler.kind"] else "--scheduler")
        raise EdgeError(f"scheduler.kind={kind} (from {source}): --policy {policy} decides on its own fixed schedule "
                        "(one decision per query, its own K and C); drop it")
    noise_given = "noise_temperature" in getattr(args, "given", ())
    if noise_given and not args.resume and (kind == "eqrl" or policy in ("expert", "comet")):
        # (unread_settings sees values, not flags: the flag at its default value is refused here)
        raise EdgeError(f"--noise-temperature {float(args.noise_temperature)}: scales the VLA's initial noise; "
                        f"{noise_drawn_by(kind, policy)}; drop it")
    base = None
    if args.resume:  # settings as the run was started are not asked again (an earlier version ran them)
        base = _started_config(args)
        if base is None:
            return  # (resume_state names what it cannot read)
    for path, why, fix in unread_settings(cfg, base=base):
        value = after[path]
        if args.config and ff[path] != f[path] and after[path] == ff[path]:  # the file set it, --set did not change it
            print(f"note: {path}={value} (from --config {args.config}) is not read by this run: {why}",
                  file=sys.stderr)
            continue
        if after[path] != f[path]:  # --set
            fix_set = fix
            for drop in ("drop it", "drop --seam", "drop --no-verify"):
                fix_set = fix_set.replace(drop, "drop that --set")
            raise EdgeError(f"{path}={value} (from --set): {why}; {fix_set}")
        raise EdgeError(f"{'--no-verify' if path == 'policy.verify' else named(path, value)}: {why}; {fix}")


#: edge run flags that set up the simulated episodes (flag, args attribute, its default)
_SIM_ONLY = (("--episodes", "episodes", None), ("--sim", "sim", "mujoco"), ("--n-blocks", "n_blocks", 2),
             ("--distribution", "distribution", "train"), ("--resume", "resume", False),
             ("--latency", "latency", "measured"), ("--latency-ms", "latency_ms", None),
             ("--device", "device", "orin-nano"))


#: the scene / run / clock settings edge run --arm bridge reads (the rest set up the simulated episodes)
ARM_READS = ("scene.robot", "scene.task", "run.seed", "clock.kind")


def _parse_cameras(specs: list[str]) -> dict[str, str]:
    cams: dict[str, str] = {}
    for text in specs:
        name, sep, source = (x.strip() for x in text.partition("="))
        if not sep or not name or not source:
            raise EdgeError(f"--camera {text!r}: give NAME=SOURCE, e.g. --camera front=/dev/video0")
        if name in cams:
            raise EdgeError(f"--camera {text!r}: camera {name!r} is given twice; give each camera once")
        cams[name] = source
    return cams


def _confirm_on_terminal(what: str) -> bool:
    import sys

    if not sys.stdin.isatty():
        raise EdgeError("--arm bridge moves a real arm: confirm on a terminal, or pass --yes to arm without asking")
    try:  # what was typed while the policy loaded is not an answer to this question
        import termios

        termios.tcflush(sys.stdin, termios.TCIFLUSH)
    except Exception:  # noqa: BLE001 - no termios, or not a real terminal (termios.error): nothing to flush
        pass
    print(f"{what}\ntype 'yes' to arm it (Ctrl-C stops it under control): ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() == "yes"


def _check_plan_values(args: argparse.Namespace) -> None:
    """The planner flags' ranges (--plan-simulations, --plan-deadline-ms)."""
    if not 0 <= args.plan_simulations <= 1000:  # the planner's own range (world_models.planner.PlannerConfig)
        raise EdgeError(f"--plan-simulations {args.plan_simulations}: must be in 1..1000 (or 0 = the model's own)")
    if args.plan_deadline_ms is not None and not (math.isfinite(args.plan_deadline_ms)
                                                  and 0 <= args.plan_deadline_ms <= 60000):
        raise EdgeError(f"--plan-deadline-ms {args.plan_deadline_ms:g}: must be in 0..60000 ms (0 = no deadline)")


def _check_planner_task(args: argparse.Namespace) -> None:
    if args.task not in ("push", "reach"):
        raise EdgeError(f"--task {args.task}: --policy comet plans the object tasks; run it with --task push or reach")


def _check_planner_scheduler(args: argparse.Namespace) -> None:
    if args.scheduler != "fixed":
        raise EdgeError(f"--scheduler {args.scheduler}: --policy comet decides every move itself, on its own fixed "
                        "schedule (one decision per query); drop --scheduler")


def _check_planner_on_arm(args: argparse.Namespace) -> None:
    """``--policy comet`` on --arm bridge: an object task, one move per decision (sync), a fixed schedule."""
    _check_planner_task(args)
    _check_plan_values(args)
    _check_planner_scheduler(args)
    if args.query_mode == "async":
        raise EdgeError("--query-mode async: --policy comet searches from after the move queued for the frame's "
                        "tick, which needs the frame before that tick's command (inline inference, which a real arm "
                        "cannot wait for); on --arm bridge it decides in sync: drop --query-mode")
    _check_planner_vla_flags(args)


def _check_planner_vla_flags(args: argparse.Namespace) -> None:
    """--num-steps / --execute configure the VLA's denoising steps and chunk: --policy comet has neither
    (one move per decision; its moves per query follow --query-mode), so a value given would be ignored;
    nor does it load the VLA's --checkpoint (its model is --world-model). (The VLA's backend, noise and
    seam settings are checked on the final settings: :func:`_check_settings_are_read`.)"""
    if args.checkpoint is not None and not getattr(args, "resume", False):  # (a resumed run runs as it was started)
        raise EdgeError(f"--checkpoint {args.checkpoint}: the VLA's checkpoint; --policy comet plans with a world model: "
                        "give it with --world-model DIR (or drop --checkpoint)")
    given = getattr(args, "given", set())
    for key, flag in (("num_steps", "--num-steps"), ("execute", "--execute")):
        if key in given:
            raise EdgeError(f"{flag} {getattr(args, key)}: --policy comet makes one move per decision (its search "
                            f"has no denoising steps or chunk); drop {flag}")


def _run_on_arm(args: argparse.Namespace) -> int:
    """``edge run --arm bridge``: the policy on a firmware-bridge arm (:func:`edge.runtime.arm.deploy`)."""
    import sys

    for flag, dest, default in _SIM_ONLY:
        if getattr(args, dest) != default:
            raise EdgeError(f"{flag}: is for the simulated arm's episodes; --arm bridge drives the arm on --port "
                            f"for --duration seconds; drop {flag}")
    if hasattr(args, "image_size"):
        raise EdgeError(f"--image-size {args.image_size}: the policy's camera images have its checkpoint's size "
                        "(the cameras' frames are resized to it); drop --image-size")
    if args.clock == "virtual" and "clock" in getattr(args, "given", ()):
        raise EdgeError("--clock virtual: a real arm moves on the wall clock; drop --clock")
    planner = args.policy == "comet"
    planner_flags = _planner_flags(args)
    if planner_flags and not planner:
        raise EdgeError(f"{' / '.join(planner_flags)}: configure{'s' if len(planner_flags) == 1 else ''} the world-model "
                        "planner; add --policy comet or drop "
                        f"{'it' if len(planner_flags) == 1 else 'them'}")
    _check_eqrl_flags(args)
    if args.policy == "expert":
        raise EdgeError("--policy expert: reads the simulator's state; on --arm bridge run the VLA (--policy vla, "
                        "the default), the world-model planner (--policy comet) or your own 'pkg.module:factory'")
    if planner:
        _check_planner_on_arm(args)
    if args.inference == "inline":
        raise EdgeError("--inference inline: the policy would run on the loop's thread and the arm wait for every "
                        "query (the MCU watchdog stops it); use --inference thread (the default) or process")
    if not args.port:
        raise EdgeError("--arm bridge: give the MCU's serial port with --port (e.g. /dev/ttyACM0, a pty from "
                        "`python -m firmware_bridge.emulator --pty`, or a pyserial URL)")
    if planner and args.instruction:
        raise EdgeError(f"--instruction {args.instruction!r}: --policy comet reads no language (its model plans the "
                        f"task it was trained on, --task {args.task}); drop --instruction")
    if not args.instruction.strip() and not planner:
        raise EdgeError("--arm bridge: give the task in words with --instruction TEXT, as the policy was trained "
                        "on them (e.g. 'stack the red block on the blue block')")
    if not (math.isfinite(args.duration) and 0 < args.duration <= MAX_ARM_DURATION_S):
        raise EdgeError(f"--duration {args.duration:g}: must be in (0, {MAX_ARM_DURATION_S:g}] seconds")
    cameras = _parse_cameras(args.camera)
    if not args.yes and not sys.stdin.isatty():  # before anything is loaded or opened
        raise EdgeError("--arm bridge moves a real arm: confirm on a terminal, or pass --yes to arm without asking")
    custom = ":" in args.policy
    if args.policy == "auto":
        args.policy = "vla"
    if args.policy not in ("vla", "comet") and not custom:
        raise EdgeError(f"--policy {args.policy}: choose vla, comet or 'pkg.module:factory' on --arm bridge")
    ckpt = str(args.checkpoint or DEFAULT_CHECKPOINT)
    if not custom and not planner:
        if not Path(ckpt).exists():
            raise EdgeError(f"--checkpoint {ckpt}: checkpoint not found; train one with `edge train vla`")
        _check_vla_args(args, ckpt)
    from edge.config import ConfigError
    from edge.runtime.arm import ArmRun, deploy
    from edge.runtime.config import RuntimeConfig, load_runtime_config
    from edge.telemetry import format_summary

    # the planner as on the simulated arm's real clock: sync (one move per decision), its search in a
    # worker process by default, its deadline; the VLA: async, inference in a thread by default
    plan = {"world_model": args.world_model, "plan_simulations": args.plan_simulations,
            "plan_deadline_ms": PLANNER_DEADLINE_MS if args.plan_deadline_ms is None else args.plan_deadline_ms,
            "plan_backend": args.plan_backend or "onnxruntime",
            "plan_workspace_mask": args.plan_workspace_mask != "off"} if planner else {}
    inference = args.inference if args.inference != "auto" else "process" if planner else "thread"
    try:
        cfg = RuntimeConfig.of(policy=args.policy, task=args.task, checkpoint=ckpt, backend=args.backend,
                               scheduler=args.scheduler, adapter=args.adapter, verify=not args.no_verify,
                               seam=args.seam, rtc_soft_steps=args.rtc_soft_steps,
                               noise_temperature=args.noise_temperature, clock="real", inference=inference,
                               execution="sync" if planner else args.query_mode or "async",
                               num_steps=1 if planner else args.num_steps, execute=1 if planner else args.execute,
                               episodes=1, seed=args.seed, **plan)
    except ConfigError as err:
        raise EdgeError(str(err)) from None
    if args.config or args.set:
        flags = cfg
        cfg = load_runtime_config(cfg, args.config, args.set)
        args.config_layers = (flags, load_runtime_config(flags, args.config) if args.config else flags)
        _check_config_keeps_flags(args, flags, cfg)
        if cfg.policy.name != flags.policy.name:
            raise EdgeError(f"policy.name={cfg.policy.name} from {_config_source(args)}: choose the policy with "
                            "--policy (vla, comet or 'pkg.module:factory' on --arm bridge)")
        if cfg.clock.kind != "real" or cfg.worker.mode == "inline":
            raise EdgeError(f"{_config_source(args)}: a real arm runs on the real clock with inference in a thread "
                            "or process (clock.kind=real, worker.mode thread / process)")
        before, after, default = flags.dotted(), cfg.dotted(), RuntimeConfig().dotted()
        for key in sorted(after):  # what only the simulated arm's episodes read (a default value is no request)
            if (key.startswith(("scene.", "run.", "clock.", *(() if planner else ("policy.comet.",))))
                    and key not in ARM_READS
                    and before.get(key) != after[key] and default.get(key) != after[key]):
                raise EdgeError(f"{key}={after[key]} (from {_config_source(args)}): is for the simulated arm's "
                                "episodes; --arm bridge does not read it: drop it")
        sched = cfg.scheduler
        if planner and (cfg.loop.execution != "sync" or sched.kind != "fixed" or sched.fixed.execute != 1
                        or sched.fixed.num_steps != 1):
            what = (f"loop.execution={cfg.loop.execution}" if cfg.loop.execution != "sync" else
                    f"scheduler.kind={sched.kind}" if sched.kind != "fixed" else
                    f"scheduler.fixed.execute={sched.fixed.execute}" if sched.fixed.execute != 1 else
                    f"scheduler.fixed.num_steps={sched.fixed.num_steps}")
            raise EdgeError(f"{what} (from {_config_source(args)}): --policy comet on --arm bridge decides in sync, "
                            "one move per decision on the fixed schedule (loop.execution=sync, scheduler.kind=fixed, "
                            "execute and num_steps 1); drop it")
    _check_settings_apply(args, cfg, planner)
    _check_adapter_is_read(args, cfg)
    run_dir = RunDir(args)
    try:
        res, summary = deploy(cfg, ArmRun(port=args.port, cameras=cameras, duration_s=args.duration,
                                          instruction=args.instruction.strip()),
                              run_dir.path, confirm=None if args.yes else _confirm_on_terminal,
                              progress=not args.no_progress)
    except BaseException:
        run_dir.discard_if_empty()
        raise
    print()
    print(format_summary(summary))
    print(f"run directory: {run_dir.path} (meta.json, ticks.jsonl, queries.jsonl, events.jsonl, commands.jsonl, "
          "summary.json, arm_result.json)")
    if res["interrupted"]:
        print("interrupted: the arm was e-stopped while it was being armed (the MCU stays latched until the "
              "next activation)" if res.get("phase") else "interrupted: the arm stopped under control and was disarmed",
              file=sys.stderr)
        return 130
    if res.get("phase") == "connect":  # the MCU refused to arm: nothing moved
        print(f"error: the arm was not armed: {res['error']} (events.jsonl has the refusal)", file=sys.stderr)
        return 1
    if res["error_type"] or (res.get("stop") or "").startswith(("fault", "estop")):
        why = res["error"] if res["error_type"] else res["stop"]
        print(f"error: the arm was stopped: {why} (events.jsonl has the stop)", file=sys.stderr)
        return 1
    print(f"the arm ran {args.duration:g} s and was disarmed")
    return 0
