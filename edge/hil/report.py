"""The verdict of a HIL scenario (all checks of ``_hil_checks`` on its trace) and the report table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from edge.hil.checks import CHECKS, INVARIANTS, MODE, Ctx, Result


def judge(sc: Any, rig: Any, host: dict[str, Any], trace: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Run every invariant and the scenario's checks; return the report row."""
    unknown = [k for k in sc.checks if k not in CHECKS]
    if unknown:
        raise KeyError(f"scenario {sc.name}: unknown checks {unknown}; known: {sorted(CHECKS)}")
    c = Ctx(sc, rig, host, trace, out_dir)
    results = {}
    for name, fn in [*INVARIANTS.items(), *((k, CHECKS[k]) for k in sc.checks)]:
        try:
            ok, detail = fn(c)
            results[name] = (bool(ok), str(detail))
        except Exception as err:  # noqa: BLE001 - a crashing check is a failed check, reported
            results[name] = (False, f"check crashed: {type(err).__name__}: {err}")
    t_safe, what = c.first_safe()
    tts = None if t_safe is None or c.t_fault is None or sc.expect == "none" else t_safe - c.t_fault
    failed = {k: v[1] for k, v in results.items() if not v[0]}
    return {
        "scenario": sc.name,
        "fault": sc.fault,
        "expected": sc.expected,
        "observed": _observed(c, results),
        "time_to_safe_s": None if tts is None else round(tts, 4),
        "safe_state": what or None,
        "bound_s": sc.stop_bound_s if sc.expect in ("stop",) else None,
        "pass": not failed,
        "failed": failed,
        "checks": {k: {"ok": v[0], "detail": v[1]} for k, v in results.items()},
        "mcu_counters": {k: c.link.get(k) for k in ("crc_errors", "decode_errors", "duplicates", "out_of_order",
                                                    "seq_gaps", "session_mismatch")},
        "mcu_nacks": trace["nacks"],
        "applied_commands": len(c.applied),
        "rig_overruns": trace["rig_overruns"],
        "loop_overruns": host.get("overruns"),
        "host_error": host.get("error_type"),
    }


def _observed(c: Ctx, results: dict[str, Result]) -> str:
    parts = [results["expectation"][1]]
    mode = MODE.get(c.modes[-1][1], "?") if c.modes else "?"
    parts.append(f"MCU ends {mode}")
    parts.append(f"{len(c.applied)} cmds applied, 0 bad" if results["commands_intact"][0]
                 and results["within_limits"][0] and results["seq_monotonic"][0] and results["command_age"][0]
                 else f"{len(c.applied)} cmds applied, BAD ones present")
    for k in c.sc.checks:
        parts.append(results[k][1])
    return "; ".join(parts)


def write_report(rows: list[dict[str, Any]], out_dir: Path, meta: dict[str, Any]) -> tuple[Path, Path]:
    """``hil_report.json`` (rows + meta) and ``hil_report.md`` (the table) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    passed = sum(r["pass"] for r in rows)
    doc = {"meta": meta, "passed": passed, "total": len(rows), "rows": rows}
    jpath = out_dir / "hil_report.json"
    jpath.write_text(json.dumps(doc, indent=2))
    lines = [
        "# HIL fault-injection report",
        "",
        f"{passed}/{len(rows)} scenarios pass. Rig: {meta.get('rig_summary', '')}",
        "",
        "| scenario | fault | expected | observed | time-to-safe | bound | pass |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        tts = "-" if r["time_to_safe_s"] is None else f"{r['time_to_safe_s'] * 1000:.0f} ms"
        bound = "-" if r["bound_s"] is None else f"{r['bound_s'] * 1000:.0f} ms"
        obs = r["observed"] + ("" if r["pass"] else " — FAILED: " + "; ".join(f"{k}: {v}" for k, v in r["failed"].items()))
        lines.append(f"| {r['scenario']} | {_md(r['fault'])} | {_md(r['expected'])} | {_md(obs)} | {tts} | {bound} | "
                     f"{'pass' if r['pass'] else 'FAIL'} |")
    invariants = ", ".join(INVARIANTS)
    lines += ["", f"Every row also passed the common invariants unless it says FAILED: {invariants}.",
              ("Times are from the fault to the first safe state (host: driver fault / loop error / safety stop "
               "or hold; MCU: STOPPING/FAULT/ESTOP), measured on the shared monotonic clock."), ""]
    if meta.get("notes"):
        lines += [f"- {n}" for n in meta["notes"]] + [""]
    mpath = out_dir / "hil_report.md"
    mpath.write_text("\n".join(lines))
    return mpath, jpath


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def harness_failure(sc: Any, err: BaseException) -> dict[str, Any]:
    """The row of a scenario whose harness crashed (counted as a failure, with the reason)."""
    detail = f"harness error: {type(err).__name__}: {err}"
    return {"scenario": sc.name, "fault": sc.fault, "expected": sc.expected, "observed": detail,
            "time_to_safe_s": None, "safe_state": None, "bound_s": None, "pass": False,
            "failed": {"harness": detail}, "checks": {}}
