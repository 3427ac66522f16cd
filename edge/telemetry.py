"""Run records: everything the loop and the worker did, written as it happens, and read back later.

A run directory holds::

    meta.json        what ran (command, config, robot, policy, machine), written at start
    ticks.jsonl      one line per control tick: t, slot, lateness, overhead, state, raw/safe/sent
                     action, decision, safety interventions, queue depth, starvation
    queries.jsonl    one line per inference query: observation/submit/ready/merge times, latency,
                     compute time, K, C, NFE, scheduler signals, backend, seam merge report
    events.jsonl     faults, e-stops, resets, episode boundaries, errors
    episodes.jsonl   one line per finished episode (loop statistics + whatever the caller adds,
                     e.g. success)
    summary.json     aggregate statistics (see :func:`summarize`)
    summary.txt      the same as a human-readable table

Every ``.jsonl`` file is line-buffered: each record reaches the operating system when it is
written, so a run killed with SIGKILL loses at most the record being written (well under the
one-second budget); Ctrl-C and exceptions additionally flush and write the summary. The reader
tolerates a truncated last line. ``summarize`` recomputes the summary from the raw lines, so a killed
run can be summarised afterwards with ``summarize(read_run(path))``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import platform
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge.errors import EdgeError

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


def machine_info() -> dict[str, Any]:
    """Platform facts and the result-relevant package versions, stored with every run and benchmark."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or None,
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
        _write_json_atomic(self.run_dir / "meta.json", {"machine": machine_info(), **(meta or {})})
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
    """Re-read a run directory (complete, interrupted or killed)."""
    d = Path(run_dir)
    if not (d / "meta.json").is_file():
        raise FileNotFoundError(f"{d} is not a run directory (no meta.json)")
    data = RunData(d, json.loads((d / "meta.json").read_text()))
    for name in STREAMS:
        setattr(data, name, read_jsonl(d / f"{name}.jsonl"))
    if (d / "summary.json").is_file():
        data.summary = json.loads((d / "summary.json").read_text())
    return data


def _pct(xs: list[float] | np.ndarray, q: float) -> float | None:
    a = np.asarray([x for x in xs if x is not None], dtype=float)
    return float(np.percentile(a, q)) if a.size else None


def summarize(run: RunData) -> dict[str, Any]:
    """Aggregate statistics from the raw records (times in seconds unless the key says ms)."""
    ticks, queries = run.ticks, run.queries
    period = run.meta.get("period_s") or next(
        (e.get("period_s") for e in run.events if e.get("kind") == "start"), None
    )
    late = [t.get("late") for t in ticks]
    ovh = [t.get("ovh") for t in ticks]
    jitter = []
    for a, b in itertools.pairwise(ticks):
        if period and b.get("n") == a.get("n", -2) + 1 and b.get("ep") == a.get("ep"):
            jitter.append(abs((b["t"] - a["t"]) - period))
    interventions: Counter[str] = Counter()
    for t in ticks:
        for kind, _ in t.get("iv") or ():
            interventions[kind] += 1
    executed = sum(1 for t in ticks if t.get("kind") == "act")
    nfe = sum(q.get("nfe") or 0 for q in queries)

    def ms(x: float | None) -> float | None:
        return None if x is None else 1000.0 * x

    return {
        "ticks": len(ticks),
        "episodes": len(run.episodes),
        "period_s": period,
        "overruns": int(sum(t.get("ovr") or 0 for t in ticks)),
        "lateness_p50_ms": ms(_pct(late, 50)),
        "lateness_p99_ms": ms(_pct(late, 99)),
        "jitter_p99_ms": ms(_pct(jitter, 99)),
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
        "interventions": dict(sorted(interventions.items())),
        "interventions_total": int(sum(v for k, v in interventions.items() if k != "wait_first_plan")),
        "faults": [e for e in run.events if e.get("kind") in ("fault", "estop", "loop_error")],
        "successes": sum(1 for e in run.episodes if e.get("success")),
    }


def format_summary(summary: dict[str, Any]) -> str:
    """A two-column table of the scalar entries, then interventions by kind."""
    rows = []
    for k, v in summary.items():
        if isinstance(v, (dict, list)):
            continue
        rows.append((k, "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))))
    w = max((len(k) for k, _ in rows), default=10)
    lines = [f"{k:<{w}}  {v}" for k, v in rows]
    ivs = summary.get("interventions") or {}
    if ivs:
        lines.append("")
        lines.append("safety interventions")
        lines.extend(f"  {k:<{w - 2}}  {v}" for k, v in ivs.items())
    for f in summary.get("faults") or ():
        lines.append(f"fault: {f.get('kind')} at t={f.get('t')}: {f.get('detail', '')}")
    return "\n".join(lines) + "\n"


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> None:
    d = Path(run_dir)
    _write_json_atomic(d / "summary.json", summary)
    tmp = d / "summary.txt.tmp"
    tmp.write_text(format_summary(summary), encoding="utf-8")
    os.replace(tmp, d / "summary.txt")


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=_plain), encoding="utf-8")
    os.replace(tmp, path)
