"""``edge profile``: arms (scheduler x backend) on the same seeds -> success, compute, latency and
projected on-device cost, every number recomputable from the run records.

An *arm* is a scheduler spec and a backend. Specs: ``fixed:KxC`` (``fixed`` = 10x8), ``dvac`` /
``dvac:K``, ``eqrl`` / ``eqrl:DIR`` (an adapter checkpoint), ``comet`` / ``comet:N`` (the world-model
planner with N simulations on the push or reach task, one move per decision, sync; ``comet-ahead[:N]``: async,
a decision every tick searched from after the queued move; either with ``+mask`` (the workspace
mask) and ``@MS`` (a decision's deadline); its backend is the search's, torch or onnxruntime; its
device cost is projected from its world model's counted work:
:mod:`edge.profiler.planner_cost`). Each arm runs its episodes through
:func:`edge.runtime.session.run_session` on the virtual clock, seeds ``seed .. seed+N-1`` for every
arm (paired), into its own run directory; or existing run directories are re-read (``--runs``).

Per arm, from ticks / queries / episodes only (:func:`edge.profiler.episodes.arm_stats`): success with a 95 % Wilson
interval, NFE per executed action and its ratio to the reference arm, queries per episode, K / C
counts, host compute per executed action (mean = ratio of sums; p50 / p99 over the queries whose
chunk executed at least one action), safety interventions, overruns, starved ticks, and against the
reference on the shared seeds the exact McNemar test (:func:`edge.stats.paired`) and the paired
difference in success with its 95 % bootstrap interval (:func:`edge.profiler.episodes.bootstrap_difference`).
Then the projected ms and mJ per executed action on each target device (:mod:`edge.profiler.device_model`,
from the arm's query / NFE / episode counts) and the host breakdown encoder / denoising steps /
scene locator / scheduler + other (part medians timed on this host, :mod:`edge.profiler.calibrate`;
the remainder of the measured compute is the scheduler's and the Python around it). A planner arm is
projected from its world model's counted work and its decisions' counts
(:mod:`edge.profiler.planner_cost`): encoder passes, search passes, first frames, and the search
tree's bookkeeping as timed on this host (:mod:`world_models.device_cost`), which is not projected.

Writes ``summary.json`` (everything, including per-episode outcomes), ``report.md``,
``report.html`` (self-contained) and the PNGs into the output directory.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.errors import EdgeError
from edge.profiler.episodes import arm_stats, compare
from edge.telemetry import RunData, read_run

REPO = Path(__file__).resolve().parents[2]
DEFAULT_GRID = REPO / "benchmarks" / "results" / "vla_grid.json"


@dataclass(frozen=True)
class Arm:
    label: str  # the scheduler spec as given, e.g. "fixed:10x8"
    backend: str
    session: dict[str, Any] = field(default_factory=dict)  # RuntimeConfig settings by short name

    @property
    def name(self) -> str:
        return f"{self.label} / {self.backend}"

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.label}__{self.backend}")


def parse_scheduler(spec: str) -> dict[str, Any]:
    """A scheduler spec -> RuntimeConfig settings by short name (scheduler, num_steps, execute, adapter)."""
    full = spec.strip()
    kind, _, arg = full.partition(":")
    deadline = None
    planner_kind = kind.partition("@")[0] in ("comet", "comet-ahead", "comet+mask", "comet-ahead+mask")
    if planner_kind and "@" in full:  # comet arms: @MS, a decision's wall-clock limit
        head, _, deadline = full.rpartition("@")
        kind, _, arg = head.partition(":")
    if kind == "fixed":
        if not arg:
            return {"scheduler": "fixed", "num_steps": 10, "execute": 8}
        m = re.fullmatch(r"(\d+)[xX](\d+)", arg)
        if not m:
            raise EdgeError(f"scheduler {spec!r}: write fixed:KxC, e.g. fixed:10x8 (K steps, C actions)")
        return {"scheduler": "fixed", "num_steps": int(m[1]), "execute": int(m[2])}
    if kind == "dvac":
        if arg and not arg.isdigit():
            raise EdgeError(f"scheduler {spec!r}: write dvac or dvac:K (steps per query)")
        return {"scheduler": "dvac", "num_steps": int(arg or 3)}
    if kind == "eqrl":
        return {"scheduler": "eqrl", "adapter": arg}
    kind, mask = (kind[: -len("+mask")], True) if kind in ("comet+mask", "comet-ahead+mask") else (kind, False)
    if kind in ("comet", "comet-ahead"):  # the world-model planner: sync, or async with lookahead
        extra = {"plan_workspace_mask": mask}  # +mask: root moves the workspace box would cut are not searched
        if arg and not arg.isdigit():
            raise EdgeError(f"scheduler {spec!r}: write {kind} or {kind}:N (tree-search simulations per decision)")
        if deadline is not None:
            try:
                ms = float(deadline)
            except ValueError:
                ms = float("nan")
            if not (math.isfinite(ms) and 0 < ms <= 60000):
                raise EdgeError(f"scheduler {full!r}: write {kind}:N@MS or {kind}@MS with MS a decision's deadline "
                                "in ms, in (0, 60000], e.g. comet-ahead:32@40")
            extra["plan_deadline_ms"] = ms
        if int(arg or 0) > 1000:  # the planner's own range (world_models.planner.PlannerConfig)
            raise EdgeError(f"scheduler {spec!r}: at most 1000 simulations per decision ({kind}:N, N in 0..1000; "
                            "0 = the model's own)")
        if kind == "comet":  # one move per decision, executed before the next query
            return {"policy": "comet", "scheduler": "fixed", "num_steps": 1, "execute": 1, "execution": "sync",
                    "plan_simulations": int(arg or 0), **extra}
        # a query every tick, searching from after the queued move: [queued move, new move, new move]
        return {"policy": "comet", "scheduler": "fixed", "num_steps": 1, "execute": 3, "execution": "async",
                "scheduler.fixed.next_query_in_steps": 1, "plan_simulations": int(arg or 0), **extra}
    raise EdgeError(f"unknown scheduler spec {spec!r}: use fixed:KxC, dvac[:K], eqrl[:ADAPTER_DIR], comet[:N] "
                    "or comet-ahead[:N] (either with +mask: comet+mask[:N], the workspace mask; and @MS: a "
                    "decision's deadline, comet-ahead:32@40)")


def make_arm(spec: str, backend: str) -> Arm:
    """An arm from a scheduler spec, labelled canonically (``fixed`` -> ``fixed:10x8``, ``dvac`` ->
    ``dvac:3``) so that re-read run directories (``--runs``) get the same label. For ``comet[:N]``
    the backend is the planner's (``plan_backend``: torch or onnxruntime)."""
    overrides = parse_scheduler(spec)
    if overrides.get("policy") == "comet":
        if backend not in ("torch", "onnxruntime"):
            raise EdgeError(f"--backends {backend!r}: a comet arm's search runs on torch or onnxruntime; drop "
                            f"{backend} from --backends, or profile the comet arms in a separate edge profile and "
                            "combine the run directories with --runs")
        overrides["plan_backend"] = backend
    else:
        from edge.backends import BACKENDS

        if backend not in BACKENDS and ":" not in backend:
            raise EdgeError(f"--backends {backend!r}: not a backend; use {', '.join(BACKENDS)} or your own "
                            "'pkg.module:factory' (comma-separated for several)")
    return Arm(arm_of_session(overrides).label, backend, overrides)


def arm_of_session(session: dict[str, Any]) -> Arm:
    """The arm a run directory's ``meta.json`` session describes (for ``--runs``). A world-model
    planner's run (``--policy comet``) is ``comet[:SIMULATIONS]`` on its search's backend
    (``plan_backend``; torch for runs made before it was recorded); another non-VLA policy is
    labelled by its name."""
    policy = str(session.get("policy", "vla"))
    if policy == "comet":
        sims = session.get("plan_simulations") or 0
        name = ("comet-ahead" if session.get("execution") == "async" else "comet") + (
            "+mask" if session.get("plan_workspace_mask") else "")
        deadline = session.get("plan_deadline_ms") or 0
        label = (f"{name}:{sims}" if sims else name) + (f"@{_ms_text(deadline)}" if deadline else "")
        return Arm(label, str(session.get("plan_backend") or "torch"))
    if policy not in ("vla", "auto"):
        return Arm(policy, str(session.get("backend", "?")))
    sched = session.get("scheduler", "fixed")
    if sched == "fixed":
        label = f"fixed:{session.get('num_steps')}x{session.get('execute')}"
    elif sched == "dvac":
        label = f"dvac:{session.get('num_steps')}"
    elif sched == "eqrl":
        label = "eqrl" + (f":{session['adapter']}" if session.get("adapter") else "")
    else:
        label = str(sched)
    return Arm(label, str(session.get("backend", "?")))


def host_breakdown(stats: dict[str, Any], parts_ms: dict[str, float] | None) -> dict[str, Any] | None:
    """Measured compute per executed action split by the host's part medians; the rest is the
    scheduler and the Python around the calls."""
    ex = stats["executed_actions"]
    if not parts_ms or not ex:
        return None
    enc = stats["queries"] * parts_ms["encoder"] / ex
    steps = stats["nfe_total"] * parts_ms["step"] / ex
    loc = stats["episodes_with_queries"] * parts_ms.get("locator", 0.0) / ex
    total = stats["compute_ms_per_action_mean"]
    return {"encoder_ms": enc, "steps_ms": steps, "locator_ms": loc, "other_ms": max(0.0, total - enc - steps - loc),
            "total_ms": total}


def project(stats: dict[str, Any], profile: Any, devices: Sequence[str]) -> dict[str, Any]:
    from edge.profiler.device_model import get_device, project_run

    return {d: project_run(profile, get_device(d), stats["queries"], stats["nfe_total"],
                           stats["episodes_with_queries"], stats["executed_actions"]) for d in devices}


# ------------------------------------------------------------------------------------ running
@dataclass(frozen=True)
class ProfileConfig:
    task: str = "stack"
    sim: str = "mujoco"
    checkpoint: str = ""  # '' = the shipped stack checkpoint
    episodes: int = 5
    seed: int = 100000
    execution: str = "sync"  # as the K x C grid and the EQRL evaluation: comparable with both
    latency: str = "constant"
    latency_ms: float = 0.0
    latency_device: str = "orin-nano"  # latency="device": charge the projected time on this device
    noise_temperature: float = 0.5
    seam: str = "replace"
    max_steps: int = 0
    video_episodes: int = 0
    verify: bool = True
    world_model: str = ""  # comet arms: the world-model checkpoint ('' = the shipped model for the task)


def latency_text(cfg: dict) -> str:
    """How a profile charged inference latency on the virtual clock, in words (the report's header)."""
    kind, ms = cfg.get("latency"), cfg.get("latency_ms")
    if kind == "constant":
        return f"latency constant {ms} ms" + (" (none charged)" if not ms else "")
    if kind == "measured":
        return "latency measured (each query's own compute time charged)"
    return f"latency {kind}"


def session_config(pc: ProfileConfig, arm: Arm, seed: int, episodes: int) -> Any:
    from edge.runtime.config import DEFAULT_CHECKPOINT, RuntimeConfig

    settings = dict(task=pc.task, sim=pc.sim, checkpoint=pc.checkpoint or str(DEFAULT_CHECKPOINT),
                    verify=pc.verify, backend=arm.backend, seam=pc.seam, execution=pc.execution,
                    latency=pc.latency, latency_ms=pc.latency_ms, device=pc.latency_device,
                    episodes=episodes, seed=seed, max_steps=pc.max_steps, record_ticks=True,
                    video_episodes=pc.video_episodes, noise_temperature=pc.noise_temperature,
                    **({"world_model": pc.world_model} if arm.session.get("policy") == "comet" else {}))
    return RuntimeConfig.of(**{**settings, **arm.session})  # an arm's own settings win (comet: its execution)


def _run_job(job: dict[str, Any]) -> str:
    """One arm's episodes into one run directory (top level: picklable for worker processes)."""
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    from edge.runtime.session import run_session

    arm = Arm(job["label"], job["backend"], job["session"])
    cfg_ = session_config(ProfileConfig(**job["profile"]), arm, job["seed"], job["episodes"])
    run_session(cfg_, job["run_dir"], progress=job.get("progress", False))
    return job["run_dir"]


def _check_chunk_lengths(pc: ProfileConfig, arms: Sequence[Arm]) -> None:
    """A fixed arm's C must fit the VLA's chunk (the run would refuse it after the earlier arms ran)."""
    fixed = [a for a in arms if a.session.get("policy", "vla") == "vla" and a.session.get("scheduler") == "fixed"]
    if not fixed:
        return
    from edge.runtime.session import DEFAULT_CHECKPOINT, checkpoint_spec

    try:
        horizon = int(checkpoint_spec(pc.checkpoint or DEFAULT_CHECKPOINT).chunk_len)
    except Exception:  # noqa: BLE001 - an unreadable checkpoint is reported by the run itself
        return
    for a in fixed:
        if int(a.session.get("execute", 0)) > horizon:
            raise EdgeError(f"--schedulers {a.label}: C={a.session['execute']} > the VLA's chunk of {horizon} "
                            f"actions; choose C in 1..{horizon}")


def run_arms(pc: ProfileConfig, arms: Sequence[Arm], runs_dir: Path, workers: int = 1,
             shard_episodes: int = 0, progress: bool = True) -> dict[str, list[Path]]:
    """Run every arm (seeds pc.seed ..), ``shard_episodes`` per run directory (0 = one per arm),
    on ``workers`` processes. Returns arm name -> its run directories."""
    shard = shard_episodes or pc.episodes
    _check_chunk_lengths(pc, arms)  # before any arm runs
    jobs = []
    for arm in arms:
        for s0 in range(pc.seed, pc.seed + pc.episodes, shard):
            n = min(shard, pc.seed + pc.episodes - s0)
            d = runs_dir / (arm.slug if shard >= pc.episodes else f"{arm.slug}__s{s0}")
            if d.exists() and any(d.iterdir()):
                raise EdgeError(f"run directory {d} already holds files: choose another --out / --runs-dir, "
                                "or re-read it with --runs")
            jobs.append({"label": arm.label, "backend": arm.backend, "session": arm.session, "seed": s0,
                         "episodes": n, "run_dir": str(d), "profile": dataclasses.asdict(pc),
                         "progress": progress and workers == 1, "arm": arm.name})
    out: dict[str, list[Path]] = {a.name: [] for a in arms}
    if workers <= 1:
        for j in jobs:
            out[j["arm"]].append(Path(_run_job(j)))
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        for j, d in zip(jobs, ex.map(_run_job, jobs)):
            out[j["arm"]].append(Path(d))
    return out


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories among ``paths`` (a run directory, or a directory of run directories)."""
    found = []
    for p in map(Path, paths):
        if (p / "meta.json").is_file():
            found.append(p)
        elif p.is_dir():
            subs = sorted(q for q in p.iterdir() if (q / "meta.json").is_file())
            if not subs:
                raise EdgeError(f"--runs {p}: neither a run directory (meta.json) nor a folder of them")
            found += subs
        elif p.exists():
            raise EdgeError(f"--runs {p}: a file; give a run directory (meta.json) or a folder of them")
        else:
            raise EdgeError(f"--runs {p}: not found")
    return found


#: session keys that may differ between the runs pooled into one arm (how many, which seeds, what is
#: recorded and where things ran, and where the model's file lay: the model is compared by its hash);
#: any other difference is another arm
POOLABLE_KEYS = ("episodes", "seed", "video_episodes", "record_ticks", "inference_cpus", "loop_cpus", "verify",
                 "checkpoint", "world_model", "plan_threads")  # (plan_threads: the profiler runs one thread)


def _pool_view(meta: dict[str, Any]) -> dict[str, Any]:
    """The settings that make a run's arm what it is: the session with the defaults of settings added
    since it ran (as a resume reads it), without :data:`POOLABLE_KEYS`, with the model's sha256."""
    from edge.runtime.config import config_from_meta

    try:
        session = config_from_meta(meta).short()
    except (ValueError, KeyError, TypeError):  # ConfigError is a ValueError
        session = dict(meta.get("session") or {})
    view = {k: v for k, v in session.items() if k not in POOLABLE_KEYS}
    if view.get("policy") != "comet":  # the planner's settings matter only to planner runs (as on resume)
        view = {k: v for k, v in view.items() if not k.startswith("plan_")}
    if view.get("scheduler") != "eqrl" and ":" not in str(view.get("scheduler")):  # an adapter's only where read
        view = {k: v for k, v in view.items() if not k.startswith("adapter")}
    sha = (meta.get("policy") or {}).get("model_sha256")
    if sha:
        view["model_sha256"] = sha
    return view


def group_runs(dirs: Sequence[Path]) -> tuple[list[Arm], dict[str, list[RunData]]]:
    """The run directories grouped into arms (:func:`arm_of_session`); EdgeError where two runs of one
    arm differ in a setting (other than :data:`POOLABLE_KEYS`) or share an episode seed (an arm's
    episodes are paired with the reference's by seed, each seed once)."""
    arms: dict[str, Arm] = {}
    grouped: dict[str, list[RunData]] = {}
    first: dict[str, tuple[Path, dict]] = {}
    seeds: dict[str, dict[Any, Path]] = {}
    for d in dirs:
        run = read_run(d)
        session = run.meta.get("session")
        if not session:
            raise EdgeError(f"{d}/meta.json has no 'session': not written by edge run / edge profile")
        arm = arm_of_session(session)
        view = _pool_view(run.meta)
        d0, v0 = first.setdefault(arm.name, (d, view))
        for key in sorted(set(v0) & set(view)):  # a key one run did not record is not known to differ
            if v0[key] != view[key]:
                raise EdgeError(f"--runs: {d0} and {d} would pool into arm {arm.name} but differ in {key} "
                                f"({v0[key]!r} vs {view[key]!r}); profile them in separate reports")
        seen = seeds.setdefault(arm.name, {})
        for e in run.episodes:
            seed = e.get("seed")
            if seed is not None and seed in seen:
                raise EdgeError(f"--runs: arm {arm.name} has episode seed {seed} in both {seen[seed]} and {d}; an "
                                "arm's episodes are paired by seed, each seed once: leave one of them out")
            seen[seed] = d
        arms.setdefault(arm.name, arm)
        grouped.setdefault(arm.name, []).append(run)
    return list(arms.values()), grouped


# ------------------------------------------------------------------------------------ the profile
def summarize_profile(arms: Sequence[Arm], grouped: dict[str, list[RunData]], devices: Sequence[str],
                      reference: str | None = None, profile: Any = None,
                      host_parts_ms: dict[str, dict[str, float]] | None = None,
                      costed: set[str] | None = None) -> dict[str, Any]:
    """summary.json's content: per arm :func:`arm_stats` + comparison + projections + breakdown
    (the last two only for the arms named in ``costed``; default: every arm)."""
    if not arms:
        raise EdgeError("nothing to profile: no arms")
    ref_name = reference_name(arms, reference)
    stats = {a.name: arm_stats(grouped[a.name]) for a in arms}
    rows = []
    for a in arms:
        s = stats[a.name]
        row = {"label": a.label, "backend": a.backend, "name": a.name,
               "runs": [str(r.run_dir) for r in grouped[a.name]], **s, **compare(s, stats[ref_name])}
        costed_arm = costed is None or a.name in costed
        row["projected"] = project(s, profile, devices) if profile is not None and costed_arm else {}
        row["host_breakdown"] = host_breakdown(s, (host_parts_ms or {}).get(a.backend)) if costed_arm else None
        rows.append(row)
    return {"reference": ref_name, "devices": list(devices), "arms": rows}


def reference_name(arms: Sequence[Arm], reference: str | None) -> str:
    if reference is None:
        return arms[0].name
    for a in arms:
        if reference in (a.name, a.label):
            return a.name
    raise EdgeError(f"--reference {reference!r} is none of the arms: {', '.join(a.name for a in arms)}")


def is_vla_run(run: RunData) -> bool:
    """Whether the run's policy is the VLA (its work is counted from its checkpoint)."""
    return str(run.meta.get("session", {}).get("policy", "vla")) in ("vla", "auto")


def is_planner_run(run: RunData) -> bool:
    """Whether the run's policy is the world-model planner (counted from its world model)."""
    return str(run.meta.get("session", {}).get("policy", "vla")) == "comet"


def cost_profile_of(runs: Sequence[RunData], verify: bool = True) -> tuple[Any, str | None]:
    """The VLA checkpoint's counted work (one checkpoint per profile), or (None, why not): pass the
    VLA arms' runs (the world-model planner's are counted by :func:`planner_costs`)."""
    if not runs:
        return None, "no VLA arm or world-model planner arm (the device model counts those policies' work)"
    others = sorted({str(r.meta.get("session", {}).get("policy", "vla")) for r in runs if not is_vla_run(r)})
    if others:
        return None, f"runs of policy {', '.join(others)}: not the VLA's"
    ckpts = {r.meta.get("session", {}).get("checkpoint") for r in runs}
    if len(ckpts) != 1:
        return None, f"runs use several checkpoints ({sorted(map(str, ckpts))}): no single cost profile"
    ckpt = ckpts.pop()
    if not ckpt or not (Path(ckpt).is_file() or (Path(ckpt) / "model.pt").is_file()):
        return None, f"checkpoint {ckpt} has no model.pt to count (an ONNX export, or not on this machine)"
    from edge.profiler.flops import count_checkpoint

    return count_checkpoint(str(ckpt), verify=verify), None


def _ms_text(ms: float) -> str:
    """A deadline as written in an arm's label: exact (40.0 -> "40", 0.001 -> "0.001", 40.00001 stays)."""
    text = repr(float(ms))
    return text[:-2] if text.endswith(".0") else text


def planner_world_model(run: RunData) -> str:
    """The world-model checkpoint a planner run (``--policy comet``) used: its session's
    ``world_model``, or the task's shipped model when that was left empty."""
    session = run.meta.get("session", {})
    wm = str(session.get("world_model") or "")
    if wm:
        return wm
    from world_models.policy import SHIPPED_BY_TASK

    task = str(session.get("task"))
    if task not in SHIPPED_BY_TASK:
        raise EdgeError(f"{run.run_dir}: a planner run on task {task!r} names no world model")
    return str(SHIPPED_BY_TASK[task])


def planner_counts(runs: Sequence[RunData]) -> dict[str, Any]:
    """A planner arm's decisions, searches started after a queued move, simulations per decision
    (one budget per arm), the simulations run (fewer than decisions x budget where a deadline cut
    searches short: the episodes' ``planner_simulations``; older records: decisions x budget) and
    the model passes these make (a root pass per decision, one per simulation run, one per search
    from after a queued move); raises
    EdgeError, saying why, where the records cannot give them (several or unrecorded budgets;
    episodes recorded before the planner counted its decisions)."""
    sims = {int((r.meta.get("policy") or {}).get("simulations") or 0) for r in runs}
    if len(sims) != 1 or 0 in sims:
        raise EdgeError(f"its runs record several (or no) simulation budgets {sorted(sims)}")
    n = sims.pop()
    episodes = [e for r in runs for e in r.episodes]
    if any("planner_decisions" not in e or "planner_ahead" not in e for e in episodes):
        raise EdgeError("its episodes were recorded before the planner counted its decisions and searches from "
                        "after a queued move (planner_decisions / planner_ahead)")
    decisions = sum(int(e["planner_decisions"]) for e in episodes)
    ahead = sum(int(e["planner_ahead"]) for e in episodes)
    if all("planner_simulations" in e for e in episodes):
        run = sum(int(e["planner_simulations"]) for e in episodes)
    elif any((r.meta.get("policy") or {}).get("deadline_ms") for r in runs):
        raise EdgeError("its episodes ran under a deadline but do not record the simulations run (planner_simulations)")
    else:  # recorded before the count existed: every search ran its budget
        run = decisions * n
    cut = sum(int(e.get("planner_cut") or 0) for e in episodes)
    return {"simulations": n, "decisions": decisions, "ahead": ahead, "simulations_run": run, "cut": cut,
            "passes": decisions + run + ahead}


def planner_costs(arms: Sequence[Arm], grouped: dict[str, list[RunData]], planner_arms: set[str],
                  verify: bool = True, calibrate: bool = True) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per planner arm: its world model's counted work (:func:`world_models.device_cost.count_world_model`),
    its counts (:func:`planner_counts`) and, with ``calibrate``, the decision's parts timed on this
    host at the arm's budget and mode (:func:`_time_planner`): encoder, search pass and the tree's
    bookkeeping per simulation. An arm whose records or model do not allow it gets a note saying
    why instead (its runs' model must be the one on this machine: the sha256 recorded in the runs
    against the checkpoint's manifest). Returns (arm name -> that, notes)."""
    from world_models.device_cost import count_world_model
    from world_models.policy import load_world_model

    out: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    counted: dict[str, Any] = {}
    shas: dict[str, str | None] = {}  # world model -> its manifest's model sha256
    timed: dict[tuple[str, str, int, bool], dict[str, float]] = {}
    for a in arms:
        if a.name not in planner_arms:
            continue
        runs = grouped[a.name]
        try:
            models = {planner_world_model(r) for r in runs}
            if len(models) != 1:
                raise EdgeError(f"its runs use several world models {sorted(models)}")
            wm = models.pop()
            if not (Path(wm) / "model.pt").is_file():
                raise EdgeError(f"its world model {wm} is not on this machine")
            recorded = {(r.meta.get("policy") or {}).get("model_sha256") for r in runs}
            if wm not in shas:
                shas[wm] = (load_world_model(wm, verify=verify)[2].get("files") or {}).get("model.pt")
            here = shas[wm]
            if recorded != {here}:
                raise EdgeError(f"its runs recorded model sha256 {sorted(map(str, recorded))}, but {wm} is {here}")
            counts = planner_counts(runs)
            if wm not in counted:
                counted[wm] = count_world_model(wm, verify=verify)
            lookahead = all(bool((r.meta.get("policy") or {}).get("lookahead")) for r in runs)
            key = (wm, a.backend, counts["simulations"], lookahead)
            if calibrate and key not in timed:
                timed[key] = _time_planner(wm, a.backend, counts["simulations"], lookahead, verify)
        except (EdgeError, OSError) as e:
            notes.append(f"No device projection for {a.name}: {e}.")
            continue
        out[a.name] = {"world_model": wm, "profile": counted[wm], **counts, "lookahead": lookahead,
                       "host_parts_ms": timed.get(key)}
    return out, notes


def _time_planner(world_model: str, backend: str, simulations: int, lookahead: bool, verify: bool = True
                  ) -> dict[str, float]:
    """Medians of a decision's parts on this host (one thread), in the arm's mode (``lookahead``:
    searched from after the previous move), on 2 episodes x 10 frames of a uniform-random policy in
    the model's object task (seed 0)."""
    import numpy as np

    from world_models.device_cost import measure_decisions
    from world_models.policy import load_world_model
    from world_models.slot_pretrain import random_episodes

    cfg, _, _ = load_world_model(world_model, verify=verify)
    frames, _ = random_episodes(2, 10, 0, task=cfg.env.task, image_size=cfg.env.image_size)
    m = measure_decisions(world_model, frames, simulations, backend=backend, threads=1, lookahead=lookahead,
                          verify=verify)
    return {"encoder": float(np.median(m["encoder_ms"])), "pass": float(np.median(m["pass_ms"])),
            "tree_per_simulation": float(np.median(m["tree_ms"])) / simulations,
            "decision": float(np.median(m["decision_ms"]))}


def planner_projection(stats: dict[str, Any], pc: dict[str, Any], devices: Sequence[str]) -> dict[str, Any]:
    """A planner arm's projected cost per device (tree bookkeeping: this host's, when timed)."""
    from edge.profiler.device_model import get_device
    from edge.profiler.planner_cost import project_planner_run

    host = pc.get("host_parts_ms") or {}
    tree_s = 1e-3 * host.get("tree_per_simulation", 0.0) * pc["simulations_run"]
    return {d: project_planner_run(pc["profile"], get_device(d), pc["decisions"], pc["passes"],
                                   stats["episodes_with_queries"], stats["executed_actions"], tree_s) for d in devices}


def planner_host_breakdown(stats: dict[str, Any], pc: dict[str, Any]) -> dict[str, Any] | None:
    """A planner arm's measured compute per executed action split by its parts' host medians:
    encoder, search passes, tree; the rest is the loop's Python around the decision."""
    ex, host = stats["executed_actions"], pc.get("host_parts_ms")
    if not ex or not host:
        return None
    enc = pc["decisions"] * host["encoder"] / ex
    steps = pc["passes"] * host["pass"] / ex
    tree = pc["simulations_run"] * host["tree_per_simulation"] / ex
    total = stats["compute_ms_per_action_mean"]
    return {"encoder_ms": enc, "steps_ms": steps, "locator_ms": 0.0, "tree_ms": tree,
            "other_ms": max(0.0, total - enc - steps - tree), "total_ms": total}


def write_profile(out: Path, summary: dict[str, Any], grid: dict[str, Any] | None = None) -> dict[str, Any]:
    """summary.json, the PNGs, report.md and report.html into ``out``."""
    from edge.profiler import plots
    from edge.profiler.document import Document

    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    arms = summary["arms"]
    devices = summary["devices"]
    plot_arms = [{**a, "label": a["name"], "K_values": _expand(a["K_counts"]), "C_values": _expand(a["C_counts"])}
                 for a in arms]
    pngs = {
        "success_vs_nfe": plots.success_vs_nfe(plot_arms, grid, out / "success_vs_nfe.png"),
        "kc_hist": plots.kc_histograms(plot_arms, out / "kc_hist.png"),
    }
    compute_series = {}
    for a in arms:
        xs = []
        for d in a["runs"]:
            xs += [1e3 * q.compute_s for q in read_run(d).finished_only().query_records()]  # as the arm's table
        compute_series[a["name"]] = xs
    pngs["latency_by_backend"] = plots.latency_by_backend(compute_series, out / "latency_by_backend.png")
    rows = []
    for a in arms:
        hb = a.get("host_breakdown")
        if hb:
            rows.append({"label": f"{a['name']} · host (measured)", **hb})
        for d in devices:
            p = a["projected"].get(d)
            if p:
                rows.append({"label": f"{a['name']} · {d}", "encoder_ms": p["encoder_ms_per_action"],
                             "steps_ms": p["steps_ms_per_action"], "locator_ms": p["locator_ms_per_action"],
                             "tree_ms": p.get("tree_ms_per_action")})
    if rows:
        pngs["cost_breakdown"] = plots.cost_breakdown(rows, out / "cost_breakdown.png")
    if devices and any(a["projected"] for a in arms):  # the arms with a projection (VLA and planner arms)
        pngs["device_projection"] = plots.device_projection([a for a in plot_arms if a["projected"]], devices,
                                                            out / "device_projection.png")

    doc = Document(summary.get("title", "Inference profile"))
    cfg = summary.get("config", {})
    seed_sets = {tuple(sorted((e["seed"] for e in a["per_episode"]), key=lambda x: (x is None, x))) for a in arms}
    episodes_text = (f"{cfg.get('episodes')} episode{'' if cfg.get('episodes') == 1 else 's'} per arm from seed "
                     f"{cfg.get('seed')} (the same seeds for every arm)" if len(seed_sets) <= 1 else
                     "episodes per arm: " + ", ".join(f"{a['name']} {a['episodes']}" for a in arms) +
                     " (the arms' seeds differ: each arm is paired with the reference on the seeds both ran)")
    doc.p(f"Reference arm: `{summary['reference']}`. Task {cfg.get('task')} / {cfg.get('sim')}, "
          f"{episodes_text}, execution {cfg.get('execution')}, {latency_text(cfg)}, noise temperature "
          f"{cfg.get('noise_temperature')}. "
          "Every number is recomputed from the run records (summary.json has them all). Compute per "
          "action: host wall time of encode + scheduler + K steps per executed action (p50 / p99 over "
          "queries whose chunk executed an action). Overruns are not measured on a virtual clock (-). "
          "Worker start: seconds each start of the arm's runs took to get its inference worker ready "
          "(median, range).")
    doc.h("Arms")
    doc.table(["arm", "success", "95 % CI", "NFE/action", "rel. NFE", "queries/ep", "compute ms/action p50",
               "p99", "mean", "interventions", "overruns", "starved", "worker start s", "arm − ref [95 % CI]",
               "McNemar p", "only ref / only arm"],
              [[a["name"], f"{a['successes']}/{a['episodes']}", f"{a['ci95'][0]:.2f}-{a['ci95'][1]:.2f}",
                a["nfe_per_action"], a["relative_nfe_per_action"], a["queries_per_episode"],
                a["compute_ms_per_action_p50"], a["compute_ms_per_action_p99"], a["compute_ms_per_action_mean"],
                a["interventions_total"], a["overruns"], a["starved_ticks"], _start_text(a.get("worker_start_s")),
                difference_text(a["paired_vs_reference"]),
                a["paired_vs_reference"]["mcnemar_p"],
                f"{a['paired_vs_reference']['only_a']} / {a['paired_vs_reference']['only_b']}"] for a in arms])
    doc.img(pngs["success_vs_nfe"], "success with 95 % Wilson intervals against NFE per executed action"
            + ("; grey: the fixed K x C grid of the shipped model (Pareto context)" if grid else ""))
    if devices and any(a["projected"] for a in arms):
        doc.h("Projected on-device cost per executed action")
        doc.table(["arm"] + [f"{d} ms" for d in devices] + [f"{d} mJ" for d in devices],
                  [[a["name"]] + [a["projected"][d]["ms_per_action"] for d in devices]
                   + [a["projected"][d]["mj_per_action"] for d in devices] for a in arms if a["projected"]])
        doc.img(pngs["device_projection"], "projected inference time and energy per executed action (log scale)")
    planners = summary.get("planner_cost") or {}
    if devices and planners:
        doc.h("Planner decisions on the devices")
        doc.table(["arm", "simulations", "run / decision", "decisions cut", "passes / decision",
                   "host decision p50 ms (timed, full budget)", "host tree ms / simulation"]
                  + [f"{d} ms / decision" for d in devices],
                  [[name, p["simulations"], round(p["simulations_run"] / p["decisions"], 2) if p["decisions"] else None,
                    p.get("cut"), round(p["passes"] / p["decisions"], 2) if p["decisions"] else None,
                    (p.get("host_parts_ms") or {}).get("decision"), (p.get("host_parts_ms") or {}).get("tree_per_simulation")]
                   + [p["ms_per_decision"].get(d) for d in devices] for name, p in planners.items()])
        periods = sorted({p["period_ms"] for p in planners.values() if p.get("period_ms")})
        timed = any(p.get("host_parts_ms") for p in planners.values())
        doc.p("Projected time per decision: the frame's encoder pass and the search's model passes on the device, "
              "the first frames' extra encoder work spread over the decisions, and "
              + ("the search tree's bookkeeping as timed on this host (one thread; the host columns: 2 x 10 frames "
                 "of a uniform-random policy, at the arm's budget and mode)" if timed else
                 "no search-tree bookkeeping (not timed: --no-calibrate)")
              + (f"; control period {', '.join(f'{x:g}' for x in periods)} ms." if periods else ".")
              + (" An arm with a deadline (@MS) is projected with the simulations it ran here: on another "
                 "computer the deadline would cut its searches differently." if any(p.get("cut") for p in
                                                                                 planners.values()) else ""))
        for wm, prof in {p["world_model"]: p["cost_profile"] for p in planners.values()}.items():
            doc.p(f"Counted network work of `{wm}`, batch 1 ({prof.get('parameters')} parameters with its encoder): "
                  f"encoder pass {prof['encoder']['flops'] / 1e6:.1f} MFLOP, {prof['encoder']['kernels']} kernels; "
                  f"search pass {prof['step']['flops'] / 1e6:.1f} MFLOP, {prof['step']['kernels']} kernels"
                  + (f"; first frame extra {prof['locator']['flops'] / 1e6:.1f} MFLOP" if prof.get("locator") else "")
                  + ".")
    if "cost_breakdown" in pngs:
        doc.h("Cost breakdown")
        doc.img(pngs["cost_breakdown"], "host: measured compute split by the part medians timed on this "
                                        "host (the remainder is the scheduler and the Python around it); "
                                        "devices: projected (no scheduler term; a planner's search tree as "
                                        "timed on this host)")
    doc.h("K and C")
    doc.img(pngs["kc_hist"], "planned K and C per query")
    doc.h("Latency per backend")
    doc.img(pngs["latency_by_backend"], "host compute per query (encode + scheduler + K steps), by arm and backend")
    dev_rows = summary.get("device_table")
    if dev_rows:
        doc.h("Devices")
        doc.table(["device", "fp16 TFLOPS", "fp32 TFLOPS", "GB/s", "W", "launch µs", "efficiency", "encoder ms",
                   "step ms", "query K=10 ms"],
                  [[d["name"], d["fp16_tflops"], d["fp32_tflops"], d["bandwidth_gb_s"], d["power_w"],
                    d["launch_overhead_us"], d["efficiency"], d.get("encoder_ms"), d.get("step_ms"),
                    d.get("query_K10_ms")] for d in dev_rows])
        for d in dev_rows:
            doc.p(f"`{d['name']}` ({d['title']}): {d['source']}. Assumed: {d['assumptions']}.")
    prof = summary.get("cost_profile")
    if prof:
        doc.p(f"Counted network work, batch 1 ({prof.get('parameters')} parameters): encoder "
              f"{prof['encoder']['flops'] / 1e6:.1f} MFLOP, {prof['encoder']['kernels']} kernels; denoising "
              f"step {prof['step']['flops'] / 1e6:.1f} MFLOP, {prof['step']['kernels']} kernels"
              + (f"; scene locator {prof['locator']['flops'] / 1e6:.1f} MFLOP once per episode"
                 if prof.get("locator") else "") + ".")
    for note in summary.get("notes", []):
        doc.p(note)
    md, html_path = doc.write(out)
    return {"summary": out / "summary.json", "md": md, "html": html_path, "pngs": pngs}


def _start_text(starts: list[float] | None) -> str:
    """The worker's start-up: the one start's seconds, or the median and range of several, or "-"."""
    if not starts:
        return "-"
    if len(starts) == 1:
        return f"{starts[0]:.3g}"
    from edge.stats import percentiles

    (mid,) = percentiles(starts, (50.0,))
    return f"{mid:.3g} ({min(starts):.3g}–{max(starts):.3g}, {len(starts)} starts)"


def difference_text(p: dict[str, Any]) -> str:
    """"+0.020 [-0.013, +0.053]" (the arm's success minus the reference's, paired), or "-"."""
    d, ci = p.get("arm_minus_reference"), p.get("arm_minus_reference_ci95")
    return "-" if d is None or ci is None else f"{d:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _expand(counts: dict[str, int]) -> list[int]:
    return [int(k) for k, v in counts.items() for _ in range(v)]


def load_grid(path: str | Path | None) -> dict[str, Any] | None:
    p = Path(path) if path else DEFAULT_GRID
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def profile(pc: ProfileConfig, arms: Sequence[Arm] | None, out: Path, devices: Sequence[str],
            runs: Sequence[str | Path] = (), runs_dir: Path | None = None, workers: int = 1,
            reference: str | None = None, calibrate: bool = True, grid: str | Path | None = None,
            shard_episodes: int = 0, progress: bool = True, command: str = "") -> dict[str, Any]:
    """Run (or re-read) the arms and write the profile into ``out``. Returns write_profile's paths."""
    from edge.profiler.device_model import device_table, get_device
    from edge.telemetry import machine_info

    for d in devices:
        get_device(d)  # a clear error before anything runs
    t0 = time.perf_counter()
    if runs:
        arms_found, grouped = group_runs(find_runs(runs))
        if arms:  # keep the requested order / subset
            names = [a.name for a in arms]
            missing = [n for n in names if n not in grouped]
            if missing:
                raise EdgeError(f"--runs: no run directory for {missing}; found {sorted(grouped)}")
            arms_found = [a for a in arms_found if a.name in names]
            arms_found.sort(key=lambda a: names.index(a.name))
        arms = arms_found
    else:
        if not arms:
            raise EdgeError("nothing to run: give --schedulers/--backends or --runs")
        dirs = run_arms(pc, arms, runs_dir or out / "runs", workers, shard_episodes, progress)
        grouped = {name: [read_run(d) for d in ds] for name, ds in dirs.items()}
    all_runs = [r for rs in grouped.values() for r in rs]
    vla_arms = {a.name for a in arms if all(is_vla_run(r) for r in grouped[a.name])}
    planner_arms = {a.name for a in arms if all(is_planner_run(r) for r in grouped[a.name])}
    cost, why = cost_profile_of([r for n in vla_arms for r in grouped[n]], verify=pc.verify)
    pcosts, notes = planner_costs(arms, grouped, planner_arms, verify=pc.verify, calibrate=calibrate)
    if cost is None and vla_arms:
        notes.insert(0, f"No device projection for the VLA arms: {why}.")
    elif not vla_arms and not planner_arms:
        notes.insert(0, f"No device projection: {why}.")
    costed_names = (vla_arms if cost is not None else set()) | set(pcosts)
    uncosted = [a.name for a in arms if a.name not in costed_names]
    if costed_names and uncosted:
        notes.append(f"No device projection or host breakdown for {', '.join(uncosted)}.")
    if planner_arms:
        notes.append("For world-model planner arms (comet) NFE counts decisions, one per query, not the "
                     "search's model passes (one per simulation run, + 1 per decision, + 1 when searched from "
                     "after a queued move).")
    if pcosts:
        notes.append("Planner arms' projections: per decision the frame's encoder pass and the search's model "
                     "passes (a root pass, one per simulation run, one more per search from after a queued move: "
                     "the episodes' planner_decisions / planner_simulations / planner_ahead), per episode the first "
                     "frame's extra encoder work, and "
                     + ("the search tree's bookkeeping as timed on this host at the arm's budget and mode, on 2 x 10 "
                        "frames of a uniform-random policy (not projected: it runs on the robot computer's CPU; a "
                        "slower core adds to it; not in the energy)." if calibrate else
                        "not the search tree's bookkeeping (--no-calibrate: not timed)."))
    host_parts: dict[str, dict[str, float]] = {}
    ckpt = cost.source if cost is not None else None  # the VLA arms' checkpoint (not a planner run's default)
    if calibrate and cost is not None:
        from edge.profiler.calibrate import measure_parts

        for backend in sorted({a.backend for a in arms if a.name in vla_arms}):
            m = measure_parts(ckpt, backend=backend, reps=20, ks=(), verify=pc.verify)
            host_parts[backend] = {k: 1e3 * v["p50_s"] for k, v in m.items()
                                   if isinstance(v, dict) and "p50_s" in v}
    summary = summarize_profile(arms, grouped, devices if cost is not None or pcosts else (), reference, cost,
                                host_parts, vla_arms if cost is not None else set())
    planner_summary = {}
    for row in summary["arms"]:
        pc_ = pcosts.get(row["name"])
        if pc_ is None:
            continue
        row["projected"] = planner_projection(row, pc_, devices)
        row["host_breakdown"] = planner_host_breakdown(row, pc_)
        period_s = grouped[row["name"]][0].meta.get("period_s")
        planner_summary[row["name"]] = {
            **{k: v for k, v in pc_.items() if k != "profile"}, "cost_profile": pc_["profile"].to_json(),
            "period_ms": None if period_s is None else 1e3 * float(period_s),
            "ms_per_decision": {d: row["projected"][d]["ms_per_decision"] for d in devices}}
    session = dict(all_runs[0].meta.get("session", {}))
    modes = {name: {r.meta.get("session", {}).get("execution") for r in runs} for name, runs in grouped.items()}
    if len(set().union(*modes.values())) > 1:  # e.g. sync and async planner arms side by side
        session["execution"] = "per arm: " + ", ".join(f"{name} {'/'.join(sorted(map(str, m)))}"
                                                       for name, m in modes.items())
    summary.update({
        "title": f"Inference profile: {', '.join(a.name for a in arms)}",
        "command": command, "machine": machine_info(),
        "config": {k: session.get(k) for k in ("task", "sim", "checkpoint", "seam", "execution", "latency",
                                               "latency_ms", "noise_temperature", "max_steps")}
                  | {"episodes": max(a["episodes"] for a in summary["arms"]),
                     "seed": min((e["seed"] for a in summary["arms"] for e in a["per_episode"]
                                  if e["seed"] is not None), default=None)},
        "cost_profile": None if cost is None else cost.to_json(),
        "device_table": [] if cost is None else [r for r in device_table(cost) if r["name"] in devices],
        "host_parts_ms": host_parts, "planner_cost": planner_summary,
        "grid": str(grid or DEFAULT_GRID) if load_grid(grid) else None,
        "notes": notes + [
            "Device projections: published peak / bandwidth / power with assumed efficiency and "
            "per-kernel launch overhead (x86-cpu fitted on the host recorded in "
            "benchmarks/results/device_calibration.json); energy = rated module power x projected "
            "time, an upper bound where the work is launch-bound (a GPU waiting on launches draws "
            "less than its rating). Nothing was run on those devices."],
        "wall_s": round(time.perf_counter() - t0, 1),
    })
    grid_data = load_grid(grid)
    if grid_data is not None and grid_data.get("task", pc.task) != session.get("task"):
        grid_data = None  # the K x C grid of another task is no context for these arms
        summary["grid"] = None
    return write_profile(out, summary, grid_data)
