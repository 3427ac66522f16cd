"""Run records: everything the loop and the worker did, written as it happens, and read back later.

A run directory holds::

    meta.json        what ran (command, config, robot, policy, machine) and the records'
                     schema_version, written at start
    ticks.jsonl      one line per control tick (:class:`edge.records.TickRecord`): time, slot,
                     lateness, overhead, state, raw/safe/sent action, decision, safety
                     interventions, queue depth, starvation
    queries.jsonl    one line per inference query (:class:`edge.records.QueryRecord`):
                     observation/submit/ready/merge times, latency, compute time, K, C, NFE,
                     scheduler signals, backend, seam merge report
    events.jsonl     faults, e-stops, resets, episode boundaries, errors
    episodes.jsonl   one line per finished episode (:class:`edge.records.EpisodeRecord`: loop
                     statistics + whatever the caller adds, e.g. success)
    summary.json     aggregate statistics (see :func:`summarize`)
    summary.txt      the same as a human-readable table

Every ``.jsonl`` file is line-buffered: each record reaches the operating system when it is
written, so a run killed with SIGKILL loses at most the record being written (well under the
one-second budget); Ctrl-C and exceptions additionally flush and write the summary. The reader
tolerates a truncated last line. ``summarize`` recomputes the summary from the raw lines, so a killed
run can be summarised afterwards with ``summarize(read_run(path))``. :func:`read_run` returns the
lines in the current schema (:mod:`edge.records`; a run written before ``schema_version`` existed
has its short keys mapped), as dicts, and typed through ``RunData.tick_records()`` etc.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import sys
from collections import Counter
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge import atomic
from edge.errors import EdgeError
from edge.records import SCHEMA_VERSION, STREAM_TYPES, upgrade

STREAMS = ("ticks", "queries", "events", "episodes")


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        return v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    raise TypeError(f"not JSON-serialisable: {type(v).__name__}")


#: distributions whose versions change what a run measures (physics, rendering, inference numerics)
RESULT_PACKAGES = ("mujoco", "pybullet", "onnxruntime", "onnx", "torch", "numpy")


def package_versions(names: tuple[str, ...] = RESULT_PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None when absent). A closed-loop success rate is
    only comparable between runs with the same physics and inference stack."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_model() -> str | None:
    """The CPU's model name (Linux: /proc/cpuinfo), None where it cannot be read: timings from
    different sessions are comparable only on the same CPU."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


def machine_info() -> dict[str, Any]:
    """Platform facts and the result-relevant package versions, stored with every run and benchmark."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or None,
        "cpu_model": cpu_model(),
        "command": " ".join(sys.argv),
        "packages": package_versions(),
    }


class RunRecorder:
    """Appends JSON lines to a run directory. Safe to use from one thread at a time."""

    def __init__(self, run_dir: str | Path, meta: dict[str, Any] | None = None) -> None:
        self.run_dir = Path(run_dir)
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise EdgeError(
                f"cannot create run directory {self.run_dir}: {err}; choose another --out"
            ) from err
        _write_json_atomic(self.run_dir / "meta.json",
                           {"schema_version": SCHEMA_VERSION, "machine": machine_info(), **(meta or {})})
        # long-lived, closed in close(); line-buffered so each record reaches the OS when written
        self._files = {
            name: open(self.run_dir / f"{name}.jsonl", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
            for name in STREAMS
        }
        self.closed = False

    def write(self, stream: str, record: dict[str, Any]) -> None:
        self._files[stream].write(json.dumps(record, default=_plain, separators=(",", ":")) + "\n")

    def tick(self, record: dict[str, Any]) -> None:
        self.write("ticks", record)

    def query(self, record: dict[str, Any]) -> None:
        self.write("queries", record)

    def event(self, kind: str, t_s: float, **fields: Any) -> None:
        self.write("events", {"kind": kind, "t": t_s, **fields})

    def end_episode(self, record: dict[str, Any]) -> None:
        self.write("episodes", record)
        self.flush()

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()
            os.fsync(f.fileno())

    def close(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Flush, close, and write summary.json / summary.txt; returns the summary."""
        if self.closed:
            return {}
        self.flush()
        for f in self._files.values():
            f.close()
        self.closed = True
        summary = summarize(read_run(self.run_dir))
        summary.update(extra or {})
        write_summary(self.run_dir, summary)
        return summary


@dataclass
class RunData:
    run_dir: Path
    meta: dict[str, Any]
    ticks: list[dict[str, Any]] = field(default_factory=list)
    queries: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION  # what the files were written with (lines are upgraded)

    def tick_records(self) -> list[Any]:
        """ticks as :class:`edge.records.TickRecord`."""
        return [STREAM_TYPES["ticks"].from_json(t) for t in self.ticks]

    def query_records(self) -> list[Any]:
        """queries as :class:`edge.records.QueryRecord`."""
        return [STREAM_TYPES["queries"].from_json(q) for q in self.queries]

    def episode_records(self) -> list[Any]:
        """episodes as :class:`edge.records.EpisodeRecord`."""
        return [STREAM_TYPES["episodes"].from_json(e) for e in self.episodes]

    def unfinished_ticks(self) -> int:
        """Tick lines of an episode without an episode record (a run stopped or killed inside it: a run killed
        in its first episode has all its ticks here); 0 for a real arm's run or an HIL host trace."""
        return len(self.ticks) - len(self.finished_only().ticks)

    def finished_only(self) -> RunData:
        """This run with the tick and query lines of episodes that have no episode record left out (what
        an interrupted or killed run's statistics count); runs without episodes are returned as they are."""
        if "arm" in self.meta or "hil_host" in self.meta or "session" not in self.meta:
            return self
        done = {e.get("ep") for e in self.episodes}

        def kept(line: dict[str, Any]) -> bool:
            return "ep" not in line or line["ep"] in done

        return dataclasses.replace(self, ticks=[t for t in self.ticks if kept(t)],
                                   queries=[q for q in self.queries if kept(q)])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a truncated *last* line (killed writer) is skipped."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            if i == len(lines) - 1:  # no newline after it: the writer was killed mid-line
                break
            raise ValueError(f"{path}:{i + 1}: corrupt record: {err}") from err
    return out


def read_run(run_dir: str | Path) -> RunData:
    """Re-read a run directory (complete, interrupted or killed), its lines in the current schema."""
    d = Path(run_dir)
    if not (d / "meta.json").is_file():
        raise FileNotFoundError(f"{d} is not a run directory (no meta.json)")
    meta = json.loads((d / "meta.json").read_text())
    version = int(meta.get("schema_version", 1))  # no key: written before records were versioned
    if version > SCHEMA_VERSION:
        raise EdgeError(f"{d}/meta.json: schema_version {version} is newer than this edge reads "
                        f"({SCHEMA_VERSION}); upgrade edge to read this run")
    data = RunData(d, meta, schema_version=version)
    for name in STREAMS:
        lines = read_jsonl(d / f"{name}.jsonl")
        setattr(data, name, lines if version == SCHEMA_VERSION else [upgrade(name, r, version) for r in lines])
    if (d / "summary.json").is_file():
        data.summary = json.loads((d / "summary.json").read_text())
    return data


def _pct(xs: list[float] | np.ndarray, q: float) -> float | None:
    a = np.asarray([x for x in xs if x is not None], dtype=float)
    return float(np.percentile(a, q)) if a.size else None


def _policy_brief(meta: dict[str, Any]) -> dict[str, Any] | None:
    """Which policy, backend and checkpoint ran (from meta.json's ``policy``), for the summary."""
    pol = meta.get("policy")
    if not isinstance(pol, dict):
        return None
    name = pol.get("name")
    if pol.get("kind") == "world_model":  # the planner: what searches, how much, under which deadline
        deadline = pol.get("deadline_ms")
        name = (f"{pol.get('model_kind')} over {pol.get('obs')}, {pol.get('simulations')} {pol.get('search')} "
                f"simulations per decision, deadline {f'{deadline:g} ms' if deadline else 'none'}"
                + (", workspace mask" if pol.get("workspace_mask") else ""))
    out = {"kind": pol.get("kind"), "name": name, "backend": pol.get("backend_name"),
           "checkpoint": pol.get("checkpoint"), "model_sha256": pol.get("model_sha256")}
    return {k: v for k, v in out.items() if v is not None}


def _scheduler_brief(meta: dict[str, Any]) -> str | None:
    """``fixed K=10 C=8, seam replace, noise T=0.5`` from meta.json's ``scheduler`` / ``session``."""
    sch = meta.get("scheduler") if isinstance(meta.get("scheduler"), dict) else {}
    ses = meta.get("session") if isinstance(meta.get("session"), dict) else {}
    name = sch.get("name") or ses.get("scheduler")
    if not name:
        return None
    k, c = sch.get("num_steps", ses.get("num_steps")), sch.get("execute", ses.get("execute"))
    seam, temp = sch.get("seam", ses.get("seam")), sch.get("noise_temperature", ses.get("noise_temperature"))
    planner = isinstance(meta.get("policy"), dict) and meta["policy"].get("kind") == "world_model"
    if planner:  # one search per query, no denoising steps or initial noise
        return f"{name}, one decision per query, {c} action{'s' if c != 1 else ''} per chunk" + (
            f", seam {seam}" if seam else "")
    parts = [str(name) + (f" K={k} C={c}" if name in ("fixed", "dvac") and k is not None else "")]
    if seam:
        parts.append(f"seam {seam}")
    if name == "eqrl":  # the adapter plans each query's noise itself
        noise = sch.get("adapter_noise", ses.get("adapter_noise"))
        parts.append("noise from the adapter" + (" (its mode)" if noise == "mean" else ""))
    elif temp is not None and (meta.get("policy") or {}).get("kind") != "expert":  # the expert draws no noise
        parts.append(f"noise T={temp:g}")
    return ", ".join(parts)


def summarize(run: RunData) -> dict[str, Any]:
    """Aggregate statistics from the raw records (times in seconds unless the key says ms).

    Timing on a virtual clock is not measured (the clock advances exactly one period per tick), so
    ``lateness_*``, ``jitter_*`` and ``overruns`` are None there. The first tick of every episode
    after the first wakes after the environment reset between episodes: its lateness and the
    deadlines it missed are the reset's, not the loop's, so they are left out of the lateness
    percentiles and ``overruns`` and counted apart (``reset_overruns``); a simulated arm still steps
    through those deadlines (``sim_elapsed_periods`` counts every skipped deadline it stepped, episode
    starts included)."""
    from edge.stats import wilson

    finished = run.finished_only()  # an interrupted episode's lines count toward no statistic
    unfinished, run = len(run.ticks) - len(finished.ticks), finished
    ticks, queries, episodes = run.ticks, run.queries, run.episodes
    session = run.meta.get("session") if isinstance(run.meta.get("session"), dict) else {}
    clock = session.get("clock")
    virtual = clock == "virtual"
    period = run.meta.get("period_s") or next(
        (e.get("period_s") for e in run.events if e.get("kind") == "start"), None
    )
    after_reset = [i > 0 and t.get("ep") != ticks[i - 1].get("ep") for i, t in enumerate(ticks)]
    late = [t.get("lateness_s") for t, r in zip(ticks, after_reset) if not r]
    ovh = [t.get("tick_overhead_s") for t in ticks]
    jitter = []
    for a, b in itertools.pairwise(ticks):
        if period and b.get("slot") == a.get("slot", -2) + 1 and b.get("ep") == a.get("ep"):
            jitter.append(abs((b["t_s"] - a["t_s"]) - period))
    interventions: Counter[str] = Counter()
    for t in ticks:
        for kind, _ in t.get("interventions") or ():
            interventions[kind] += 1
    executed = sum(1 for t in ticks if t.get("kind") == "act")
    nfe = sum(q.get("nfe") or 0 for q in queries)
    overruns = int(sum(t.get("overrun_ticks") or 0 for t, r in zip(ticks, after_reset) if not r))
    reset_overruns = int(sum(t.get("overrun_ticks") or 0 for t, r in zip(ticks, after_reset) if r))
    successes = sum(1 for e in episodes if e.get("success"))
    clipped_eps = [e for e in episodes if e.get("policy_outputs") is not None]
    sim_eps = [e for e in episodes if e.get("sim_workspace_clips") is not None]
    elapsed_eps = [e for e in episodes if e.get("sim_elapsed_periods") is not None]
    plan_eps = [e for e in episodes if e.get("planner_decisions") is not None]
    decisions = sum(int(e["planner_decisions"]) for e in plan_eps)

    def ms(x: float | None) -> float | None:
        return None if x is None else 1000.0 * x

    def timing(x: float | None) -> float | None:
        return None if virtual else x

    return {
        "episodes": len(episodes),
        "successes": successes,
        "success_rate": successes / len(episodes) if episodes else None,
        "success_ci95": list(wilson(successes, len(episodes))) if episodes else None,
        "policy": _policy_brief(run.meta),
        "scheduler": _scheduler_brief(run.meta),
        "clock": clock,
        "ticks": len(ticks),
        "period_s": period,
        "overruns": None if virtual else overruns,
        "reset_overruns": None if virtual else reset_overruns,
        "lateness_p50_ms": timing(ms(_pct(late, 50))),
        "lateness_p99_ms": timing(ms(_pct(late, 99))),
        "jitter_p99_ms": timing(ms(_pct(jitter, 99))),
        "tick_overhead_p50_ms": ms(_pct(ovh, 50)),
        "tick_overhead_p99_ms": ms(_pct(ovh, 99)),
        "queries": len(queries),
        "latency_p50_ms": ms(_pct([q.get("latency_s") for q in queries], 50)),
        "latency_p99_ms": ms(_pct([q.get("latency_s") for q in queries], 99)),
        "compute_p50_ms": ms(_pct([q.get("compute_s") for q in queries], 50)),
        "mean_K": float(np.mean([q["K"] for q in queries])) if queries else None,
        "mean_C": float(np.mean([q["C"] for q in queries])) if queries else None,
        "nfe_total": nfe,
        "executed_actions": executed,
        "nfe_per_action": nfe / executed if executed else None,
        "starved_ticks": sum(1 for t in ticks if t.get("starved")),
        "dropped_late": int(sum(q.get("dropped_late") or 0 for q in queries)),
        "expired_chunks": sum(1 for q in queries if q.get("expired")),
        "policy_outputs": sum(int(e["policy_outputs"]) for e in clipped_eps) if clipped_eps else None,
        "policy_clipped": sum(int(e.get("policy_clipped") or 0) for e in clipped_eps) if clipped_eps else None,
        "policy_clip_max": max(float(e.get("policy_clip_max") or 0.0) for e in clipped_eps) if clipped_eps else None,
        "sim_workspace_clips": sum(int(e["sim_workspace_clips"]) for e in sim_eps) if sim_eps else None,
        "sim_action_box_clips": sum(int(e.get("sim_action_box_clips") or 0) for e in sim_eps) if sim_eps else None,
        "sim_elapsed_periods": (sum(int(e["sim_elapsed_periods"]) for e in elapsed_eps)
                                if elapsed_eps and not virtual else None),
        # the world-model planner: how much its searches ran (a deadline may cut a decision's budget short)
        "planner": {"decisions": decisions,
                    # (records from before the count have none: not reported)
                    "simulations_per_decision": (sum(int(e["planner_simulations"]) for e in plan_eps) / decisions
                                                 if decisions and all(e.get("planner_simulations") is not None
                                                                      for e in plan_eps) else None),
                    "cut_by_deadline": sum(int(e.get("planner_cut") or 0) for e in plan_eps)} if plan_eps else None,
        "interventions": dict(sorted(interventions.items())),
        "interventions_total": int(sum(v for k, v in interventions.items() if k != "wait_first_plan")),
        "faults": [e for e in run.events if e.get("kind") in ("fault", "estop", "loop_error")],
        # seconds each start (and resume) took to get its inference worker ready; process mode spawns
        # a process and builds the policy there
        "worker_start_s": worker_starts(run),
        # ticks of an episode the run stopped inside (no episode record): left out of the statistics above
        **({"ticks_unfinished": unfinished} if unfinished else {}),
    }


def worker_starts(run: RunData) -> list[float]:
    """Seconds each start (and resume) of the run took to get its inference worker ready (its
    ``worker_started`` events)."""
    return [e["start_s"] for e in run.events if e.get("kind") == "worker_started"]


def _num(v: Any, unit: str = "", digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def _summary_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of :func:`format_summary`; keys it does not know are listed at the end."""
    na = "n/a (virtual clock)"
    virtual = s.get("clock") == "virtual"
    rows: list[tuple[str, str]] = []
    used = {"episodes", "successes", "success_rate", "success_ci95", "policy", "scheduler", "planner", "clock",
            "ticks", "period_s", "overruns", "reset_overruns", "lateness_p50_ms", "lateness_p99_ms",
            "jitter_p99_ms", "tick_overhead_p50_ms", "tick_overhead_p99_ms", "queries",
            "latency_p50_ms", "latency_p99_ms", "compute_p50_ms", "mean_K", "mean_C", "nfe_total",
            "executed_actions", "nfe_per_action", "starved_ticks", "dropped_late", "expired_chunks",
            "policy_outputs", "policy_clipped", "policy_clip_max", "interventions",
            "interventions_total", "faults", "sim_workspace_clips", "sim_action_box_clips", "sim_elapsed_periods",
            "arm", "stop"}
    n, k = s.get("episodes"), s.get("successes")
    if n:
        ci = s.get("success_ci95") or [None, None]
        ci_text = "" if ci[0] is None else f" (95 % Wilson CI {ci[0]:.1%} – {ci[1]:.1%})"
        rows.append(("success", f"{k}/{n} = {k / n:.1%}{ci_text}"))
    elif s.get("arm"):  # edge run --arm bridge: one run on a real arm, no episodes
        rows.append(("run", f"on the {s['arm']} arm, ended by {s.get('stop') or '?'}"))
    else:
        rows.append(("episodes", str(n or 0)))
    pol = s.get("policy")
    if isinstance(pol, dict) and pol:
        sha = pol.get("model_sha256")
        where = pol.get("checkpoint")
        text = ", ".join(str(x) for x in (pol.get("kind"), pol.get("name"), pol.get("backend")) if x)
        if where:
            text += f", {where}" + (f" (model.pt sha256 {sha[:12]})" if sha else "")
        rows.append(("policy", text))
    if s.get("scheduler"):
        rows.append(("scheduler", str(s["scheduler"])))
    plan = s.get("planner")
    if isinstance(plan, dict) and plan.get("decisions"):
        sims = plan["simulations_per_decision"]
        rows.append(("planner searches", ("simulations not recorded" if sims is None else
                                          f"{sims:.1f} simulations per decision")
                     + f"; {plan['cut_by_deadline']} of {plan['decisions']} decisions cut by a deadline"))
    if not s.get("ticks"):  # e.g. the scripted expert: no runtime loop ran
        extra = [(k2, v) for k2, v in s.items() if k2 not in used and not isinstance(v, (dict, list))]
        return rows + [(k2, _num(v)) for k2, v in extra]
    if s.get("clock"):
        rows.append(("clock", str(s["clock"])))
    period = s.get("period_s")
    rows.append(("ticks", f"{s['ticks']}" + (f" (period {1000 * period:.1f} ms)" if period else "")))
    if virtual:
        rows += [("overruns", na), ("lateness p50 / p99", na), ("jitter p99", na)]
    else:
        ovr = _num(s.get("overruns"))
        if s.get("reset_overruns"):
            ovr += f" (+{s['reset_overruns']} at episode starts, after the env reset: not counted)"
        if s.get("sim_elapsed_periods") is not None:
            total = (s.get("overruns") or 0) + (s.get("reset_overruns") or 0)
            ovr += (f"; the simulated arm stepped through {s['sim_elapsed_periods']} of the {total} skipped "
                    "deadlines, episode starts included (none after an episode's end), holding its target: "
                    "the world does not wait for a late tick")
        rows += [("overruns", ovr),
                 ("lateness p50 / p99", f"{_num(s.get('lateness_p50_ms'))} / {_num(s.get('lateness_p99_ms'))} ms"),
                 ("jitter p99", _num(s.get("jitter_p99_ms"), " ms"))]
    rows.append(("tick overhead p50 / p99",
                 f"{_num(s.get('tick_overhead_p50_ms'))} / {_num(s.get('tick_overhead_p99_ms'))} ms"))
    rows.append(("queries", str(s.get("queries"))))
    if s.get("queries"):
        rows += [("inference latency p50 / p99",
                  f"{_num(s.get('latency_p50_ms'), digits=1)} / {_num(s.get('latency_p99_ms'), digits=1)} ms"
                  + (" (charged, virtual clock)" if virtual else "")),
                 ("compute p50", _num(s.get("compute_p50_ms"), " ms", 1)),
                 ("mean K / C", f"{_num(s.get('mean_K'), digits=2)} / {_num(s.get('mean_C'), digits=2)}"),
                 ("NFE", f"{s.get('nfe_total')} total, {_num(s.get('nfe_per_action'), digits=3)} per "
                         f"executed action ({s.get('executed_actions')} executed)")]
    rows.append(("starved ticks", str(s.get("starved_ticks"))))
    rows.append(("stale actions dropped", f"{s.get('dropped_late')} (by design, latency compensation: "
                 "each chunk's actions for ticks that passed while its query ran, >= 1 per query)"))
    rows.append(("expired chunks", str(s.get("expired_chunks"))))
    moved, ticks = s.get("executed_actions"), s.get("ticks")
    if ticks and moved is not None and moved < 0.1 * ticks:  # the arm barely moved: say why it may be
        lat = s.get("latency_p50_ms")
        if s.get("faults"):  # stopped by the safety layer: the faults below say why
            why = "the safety layer stopped it (the faults below)"
        else:
            why = (f"its chunks came too late or not at all (starved {s.get('starved_ticks')}, expired "
                   f"{s.get('expired_chunks')}"
                   + (f"; inference p50 {_num(lat, digits=1)} ms against a {1e3 * period:.0f} ms period"
                      if lat is not None and period else "")
                   + "): a loaded machine, or a policy too slow for this rate")
        rows.append(("warning", f"the arm acted on {moved} of {ticks} ticks: {why}"))
    if s.get("policy_outputs") is not None:
        rows.append(("policy output clipped",
                     f"{s.get('policy_clipped')} of {s.get('policy_outputs')} gripper outputs to [0, 1], "
                     f"max {_num(s.get('policy_clip_max'), digits=4)} (the model's output contract; "
                     "post-processing, not a safety intervention)"))
    if s.get("sim_workspace_clips") is not None:
        rows.append(("sim controller clips", f"{s['sim_workspace_clips']} TCP targets into the sim's workspace box, "
                     f"{s.get('sim_action_box_clips')} commands into its action box (the simulated arm's own, "
                     "after the safety layer; the tick's `sent` is what it applied)"))
    rows.append(("safety interventions", f"{s.get('interventions_total')} (wait_first_plan not counted)"))
    rows += [(k2, _num(v)) for k2, v in s.items() if k2 not in used and not isinstance(v, (dict, list))]
    return rows


def format_summary(summary: dict[str, Any]) -> str:
    """A two-column table with labels (success with its 95 % Wilson interval, what ran, timing,
    queries), then safety interventions by kind and faults."""
    rows = _summary_rows(summary)
    w = max((len(k) for k, _ in rows), default=10)
    lines = [f"{k:<{w}}  {v}" for k, v in rows]
    ivs = summary.get("interventions") or {}
    if ivs:
        lines.extend(f"  {k:<{w - 2}}  {v}" for k, v in ivs.items())
    for f in summary.get("faults") or ():
        lines.append(f"fault: {f.get('kind')} at t={f.get('t')}: {f.get('detail', '')}"
                     + (" (an episode interrupted and rerun by a resume)" if f.get("interrupted") else ""))
    return "\n".join(lines) + "\n"


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> None:
    d = Path(run_dir)
    _write_json_atomic(d / "summary.json", summary)
    atomic.write_text(d / "summary.txt", format_summary(summary))


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``path`` whole or not at all, also across a power cut (fsynced before the rename)."""
    atomic.write_json(path, data, default=_plain)
