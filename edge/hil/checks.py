"""The checks a HIL scenario is judged by, on its recorded trace (verdict and report: ``_hil_report``).

Every scenario is held to the same invariants (checked on the MCU-side applied-command log, i.e.
on what reached the actuators, and on the host's run record):

* ``commands_intact``  every applied command is bit-identical to one the host driver wrote (no
  corrupted command was ever executed), with zero velocity feed-forward;
* ``seq_monotonic``    applied sequence numbers strictly increase within a session (no duplicate,
  no stale/reordered command executed);
* ``within_limits``    every applied target is finite and inside the joint limits (and every target
  the driver wrote is inside the limits minus its margin);
* ``command_age``      no command older than its validity (host send -> MCU apply) was executed;
* ``watchdog_timing``  every MCU watchdog stop began within W + 2 firmware ticks of the last command;
* ``expectation``      stop / no stop / refusal as the scenario states, the safe state reached
  within ``stop_bound_s`` (+ the rig's scheduling margin) of the fault, and never before the fault;
* ``no_auto_resume``   after a stop the MCU is never re-armed, no command is applied, and the policy
  never acts again, except after an explicit operator release;
* ``holds_still``      once stopped (plus 0.6 s to decelerate) the arm is still and does not drift;
* ``telemetry``        the host's run record is complete: contiguous ticks (gaps = recorded
  overruns) up to the fault/end, the fault logged as an event, every written command logged;
* ``mcu_final``        the MCU's mode at the end, where the scenario names one;

plus the scenario's own ``checks``. Times: ``time.monotonic`` seconds, shared by host and bench.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MODE = {0: "DISARMED", 1: "ARMED", 2: "STOPPING", 3: "FAULT", 4: "ESTOP"}
HOST_SAFE_EVENTS = ("driver_fault", "driver_estop", "loop_error", "estop", "fault")
WATCHDOG_BIT = 1 << 1


class Ctx:
    """Everything a check looks at."""

    def __init__(self, sc: Any, rig: Any, host: dict[str, Any], trace: dict[str, Any], out_dir: Path) -> None:
        from edge.robot_spec import load_robot_spec
        from edge.telemetry import read_jsonl, read_run

        self.sc, self.rig, self.host, self.trace = sc, rig, host, trace
        self.robot = load_robot_spec(getattr(rig, "robot", "panda"), [f"action_layout={sc.layout}"])
        self.T = self.robot.period_s
        hdir = out_dir / "host"
        self.run = read_run(hdir) if (hdir / "meta.json").is_file() else None
        self.ticks = self.run.ticks if self.run else []
        self.events = self.run.events if self.run else []
        self.queries = self.run.queries if self.run else []
        self.commands = read_jsonl(hdir / "commands.jsonl")
        self.t0 = host.get("t0")
        self.release_t = host.get("release_t")
        if sc.host_signal:
            self.t_fault = host.get("signal_t")
        elif sc.estop_at_s >= 0:
            self.t_fault = host.get("estop_t")
        else:
            self.t_fault = None if self.t0 is None else self.t0 + sc.fault_at_s
        self.t_motion_end = host.get("t_motion_end") or host.get("exit_t")
        self.modes = trace["modes"]
        self.applied = trace["applied"]
        self.samples = trace["samples"]
        self.safety = host.get("safety_counts") or {}
        self.link = trace["counters"]["link"]
        self.host_safe_t, self.host_safe_what = self._host_safe()
        self.mcu_safe_t, self.mcu_safe_what = self._mcu_safe()

    def _host_safe(self) -> tuple[float | None, str]:
        cands = [(e["t"], _event_what(e)) for e in self.events if e.get("kind") in HOST_SAFE_EVENTS]
        for t in self.ticks:
            if t.get("mode") != "running":
                cands.append((t["t_s"], f"safety {t['mode']}"))
                break
        if self.sc.safe_on_hold and self.t_fault is not None:
            for t in self.ticks:
                kinds = {k for k, _ in (t.get("interventions") or [])}
                if t["t_s"] >= self.t_fault and t.get("kind") == "hold" and "wait_first_plan" not in kinds:
                    cands.append((t["t_s"], "safety hold"))
                    break
        return min(cands) if cands else (None, "")

    def _mcu_safe(self) -> tuple[float | None, str]:
        if self.t0 is None:
            return None, ""
        end = math.inf if self.sc.host == "subprocess" else (self.t_motion_end or math.inf)
        for t, mode, flags, text in self.modes:
            if self.t0 < t < end and (mode in (2, 3, 4) or text.startswith("boot")):
                return t, f"MCU {MODE[mode]} ({text})"
        return None, ""

    def first_safe(self) -> tuple[float | None, str]:
        by = self.sc.stop_by
        cands = []
        if by in ("host", "any") and self.host_safe_t is not None:
            cands.append((self.host_safe_t, self.host_safe_what))
        if by in ("mcu", "any") and self.mcu_safe_t is not None:
            cands.append((self.mcu_safe_t, self.mcu_safe_what))
        return min(cands) if cands else (None, "")

    def any_safe_t(self) -> float | None:
        ts = [t for t in (self.host_safe_t, self.mcu_safe_t) if t is not None]
        return min(ts) if ts else None


def _event_what(e: dict[str, Any]) -> str:
    if e.get("kind") == "driver_fault":
        return f"driver {e.get('fault')}"
    if e.get("kind") == "loop_error":
        return f"loop stopped on {str(e.get('detail', '')).split(':')[0]}"
    return f"{e.get('kind')}: {str(e.get('detail', ''))[:60]}"


Result = tuple[bool, str]


# ----------------------------------------------------------------------------- invariants
def commands_intact(c: Ctx) -> Result:
    sent = {r["seq"]: r["q"] for r in c.commands}
    last_logged = max(sent) if sent else -1
    bad = unknown = 0
    for _t, _sess, seq, _ht, _dl, _mt, q, qd, _tw in c.applied:
        if seq not in sent:
            # A SIGKILL can land between the port write and the log line: only the very last one.
            if not (c.sc.host_signal == "SIGKILL" and seq > last_logged):
                unknown += 1
        elif list(q) != sent[seq] or any(v != 0.0 for v in qd):
            bad += 1
    return bad == 0 and unknown == 0, f"{len(c.applied)} applied, {bad} corrupted, {unknown} unknown"


def seq_monotonic(c: Ctx) -> Result:
    bad = 0
    prev: dict[int, int] = {}
    for _t, sess, seq, *_ in c.applied:
        if sess in prev and not 1 <= (seq - prev[sess]) % 65536 < 32768:
            bad += 1
        prev[sess] = seq
    return bad == 0, f"{bad} duplicate/stale commands applied"


def within_limits(c: Ctx) -> Result:
    lo = np.append(c.robot.q_min_rad, 0.0)
    hi = np.append(c.robot.q_max_rad, 0.08)
    bad = sum(1 for a in c.applied if not (np.all(np.isfinite(a[6])) and np.all(lo <= a[6]) and np.all(np.array(a[6]) <= hi)))
    margin = 0.01 - 1e-6
    sent_bad = sum(1 for r in c.commands if not np.all(np.isfinite(r["q"]))
                   or np.any(np.array(r["q"][:7]) < lo[:7] + margin) or np.any(np.array(r["q"][:7]) > hi[:7] - margin))
    return bad == 0 and sent_bad == 0, f"{bad} applied / {sent_bad} written outside limits"


def command_age(c: Ctx) -> Result:
    ages = [((round(a[8] * 1e6) - a[3]) % (1 << 32)) / 1e6 for a in c.applied]
    worst = max(ages, default=0.0)
    limit = c.rig.command_valid_for_s + 0.005
    return worst <= limit, f"max command age {worst * 1000:.1f} ms (validity {c.rig.command_valid_for_s * 1000:.0f} ms)"


def watchdog_timing(c: Ctx) -> Result:
    W = c.rig.watchdog_ms / 1000.0
    worst = None
    for t, _m, _f, text in c.modes:
        if text == "watchdog expired":
            before = [a[0] for a in c.applied if a[0] <= t]
            arm = max((m[0] for m in c.modes if m[3] == "armed" and m[0] <= t), default=None)
            ref = max(before + ([arm] if arm is not None else []), default=None)
            if ref is not None:
                worst = max(worst or 0.0, t - ref)
    if worst is None:
        return True, "no watchdog stop"
    return worst <= W + 2 * c.rig.mcu_tick_s + 1e-3, f"watchdog stop {worst * 1000:.1f} ms after the last command (W {W * 1000:.0f} ms)"


def expectation(c: Ctx) -> Result:
    sc, host = c.sc, c.host
    if sc.expect == "refused":
        ok = host.get("phase") == "connect" and host.get("error") is not None
        return ok, "connect refused" if ok else "connect was not refused"
    if c.t0 is None:
        return False, f"host never started: {host.get('error')}"
    early = c.any_safe_t()
    if early is not None and c.t_fault is not None and early < c.t_fault - 1e-3:
        return False, f"stopped {c.t_fault - early:.3f} s BEFORE the fault"
    t_safe, what = c.first_safe()
    bound = sc.stop_bound_s + c.rig.margin_s
    if sc.expect == "none":
        anything = c.any_safe_t()
        err = host.get("error")
        ok = anything is None and err is None
        return ok, "ran to the end, no stop" if ok else f"unexpected stop: {c.host_safe_what or c.mcu_safe_what or err}"
    if sc.expect == "tolerate":
        return True, "no stop" if c.any_safe_t() is None else f"stopped: {c.host_safe_what or c.mcu_safe_what}"
    if t_safe is None:
        return False, f"no safe state reached (stop_by {sc.stop_by})"
    tts = t_safe - c.t_fault
    return tts <= bound, f"{what} after {tts * 1000:.0f} ms (bound {sc.stop_bound_s * 1000:.0f} + {c.rig.margin_s * 1000:.0f} ms)"


def no_auto_resume(c: Ctx) -> Result:
    t_stop = c.any_safe_t()
    if t_stop is None:
        return True, "no stop"
    rel = c.release_t if c.release_t is not None else math.inf
    rearm = [m[0] for m in c.modes if m[3] == "armed" and t_stop < m[0] < rel]
    mcu_stop = c.mcu_safe_t if c.mcu_safe_t is not None else math.inf
    next_arm = min([m[0] for m in c.modes if m[3] == "armed" and m[0] > mcu_stop], default=math.inf)
    applied_after = [a for a in c.applied if mcu_stop < a[0] < next_arm]
    host_t = c.host_safe_t if c.host_safe_t is not None else math.inf
    acts = [t for t in c.ticks if host_t < t["t_s"] < rel and t.get("kind") == "act"]
    activations = [e for e in c.events if e.get("kind") == "driver_activated" and host_t < e["t"] < rel]
    ok = not (rearm or applied_after or acts or activations)
    return ok, (f"re-armed {len(rearm)}x, {len(applied_after)} commands applied after the MCU stop, "
                f"{len(acts)} policy actions after the host stop, {len(activations)} re-activations")


def holds_still(c: Ctx) -> Result:
    t_stop = c.any_safe_t()
    if t_stop is None:
        return True, "no stop"
    end = c.release_t if c.release_t is not None else math.inf
    win = [s for s in c.samples if t_stop + 0.6 <= s[0] < end]
    if len(win) < 10:
        return True, "too little trace after the stop to judge"
    q = np.array([s[3][:7] for s in win])
    qd = np.array([s[4][:7] for s in win])
    drift, speed = float(np.abs(q - q[0]).max()), float(np.abs(qd).max())
    peak = max((float(np.max(np.abs(s[4][:7]))) for s in c.samples if s[0] >= t_stop), default=0.0)
    vmax = float(np.max(c.robot.qd_max_rad_s))
    ok = drift <= 0.02 and speed <= 0.05 and peak <= 1.1 * vmax
    return ok, f"after stop: drift {drift:.4f} rad, speed {speed:.3f} rad/s, peak {peak:.2f} rad/s"


def telemetry(c: Ctx) -> Result:
    if c.sc.expect == "refused":
        ok = any(e.get("kind") == "connect_failed" for e in c.events)
        return ok, "connect failure logged" if ok else "connect failure NOT logged"
    problems = []
    if not any(e.get("kind") == "start" for e in c.events):
        problems.append("no start event")
    ticks = c.ticks
    if not ticks:
        return False, "no ticks recorded"
    gaps = sum(1 for a, b in itertools.pairwise(ticks)
               if b["slot"] != a["slot"] + 1 + (a.get("overrun_ticks") or 0))
    if gaps:
        problems.append(f"{gaps} unexplained tick gaps")
    # The tick that detects a fault raises before it is recorded: ticks must reach the detection.
    ends = [t for t in (c.host_safe_t, c.host.get("signal_t"), c.t_motion_end) if t is not None]
    end = min(ends) if ends else None
    if end is not None and ticks[-1]["t_s"] < end - 2 * c.T - c.rig.margin_s:
        problems.append(f"ticks stop {end - ticks[-1]['t_s']:.3f} s before the end/fault")
    if c.host.get("error") and not c.sc.host_signal and not any(
            e.get("kind") in ("loop_error", "driver_fault") for e in c.events):
        problems.append("host error not logged as an event")
    sent = (c.host.get("driver_counts") or {}).get("commands_sent")
    if sent is not None and sent != len(c.commands):
        problems.append(f"{sent} commands sent but {len(c.commands)} logged")
    if not c.samples or (c.t_motion_end and c.samples[-1][0] < c.t_motion_end):
        problems.append("bench trace does not cover the run")
    return not problems, "; ".join(problems) or f"{len(ticks)} ticks, {len(c.events)} events, {len(c.commands)} commands"


def mcu_final(c: Ctx) -> Result:
    want = c.sc.mcu_final
    mode = c.modes[-1][1] if c.modes else None
    flags = c.modes[-1][2] if c.modes else 0
    name = MODE.get(mode, "?")
    if not want:
        return True, f"MCU ends {name}"
    ok = {"disarmed": mode == 0, "fault": mode == 3, "estop": mode == 4, "armed": mode == 1,
          "not_armed": mode != 1}[want]
    return ok, f"MCU ends {name} (faults 0x{flags:X}), expected {want}"


INVARIANTS: dict[str, Callable[[Ctx], Result]] = {
    "commands_intact": commands_intact, "seq_monotonic": seq_monotonic, "within_limits": within_limits,
    "command_age": command_age, "watchdog_timing": watchdog_timing, "expectation": expectation,
    "no_auto_resume": no_auto_resume, "holds_still": holds_still, "telemetry": telemetry, "mcu_final": mcu_final,
}


# ----------------------------------------------------------------------------- scenario checks
def _counter(name: str, field: str) -> Callable[[Ctx], Result]:
    def check(c: Ctx) -> Result:
        n = sum(c.link.get(f, 0) for f in field.split("+"))
        return n > 0, f"MCU {field.replace('_', ' ')} = {n}"

    check.__name__ = name
    return check


def _host_fault(kind: str) -> Callable[[Ctx], Result]:
    def check(c: Ctx) -> Result:
        faults = [e.get("fault") for e in c.events if e.get("kind") == "driver_fault"]
        return kind in faults, f"driver faults: {faults or 'none'}"

    return check


def mcu_watchdog(c: Ctx) -> Result:
    hits = [m for m in c.modes if m[3] == "watchdog expired"]
    return bool(hits), f"MCU watchdog stops: {len(hits)}"


def session_change(c: Ctx) -> Result:
    boots = [m for m in c.modes if m[3].startswith("boot") and c.t0 is not None and m[0] > c.t0]
    if not boots:
        return False, "MCU did not reboot"
    t_boot = boots[0][0]
    new_session = {a[1] for a in c.applied if a[0] > t_boot}
    rearmed = [m for m in c.modes if m[3] == "armed" and m[0] > t_boot]
    host_ok = "mcu_reboot" in [e.get("fault") for e in c.events if e.get("kind") == "driver_fault"]
    ok = host_ok and not new_session and not rearmed
    return ok, (f"host saw the reboot: {host_ok}; commands applied in the new session: {len(new_session)}; "
                f"re-armed: {len(rearmed)}")


def graceful_stop(c: Ctx) -> Result:
    t_sig = c.host.get("signal_t") or math.inf
    disarm = any(m[3] == "disarm -> stopping" and m[0] > t_sig for m in c.modes)
    wd = any(m[3] == "watchdog expired" for m in c.modes)
    rc = c.host.get("returncode")
    sig = c.sc.host_signal or "the signal"
    return disarm and not wd and rc == 130, f"DISARM after {sig}: {disarm}, watchdog: {wd}, exit code {rc}"


def safety_invalid(c: Ctx) -> Result:
    inv, stop = c.safety.get("invalid_action", 0), c.safety.get("protective_stop", 0)
    return inv > 0 and stop > 0, f"invalid actions rejected {inv}, protective stops {stop}"


def no_nan_sent(c: Ctx) -> Result:
    nan = sum(1 for r in c.commands if not np.all(np.isfinite(r["q"])))
    nacks = c.trace["nacks"].get("NOT_FINITE", 0)
    return nan == 0 and nacks == 0, f"non-finite commands written {nan}, MCU NOT_FINITE NACKs {nacks}"


def joint_limit_clamped(c: Ctx) -> Result:
    n = c.safety.get("joint_limit", 0)
    hi = np.array(c.robot.q_max_rad)
    over = max((float(np.max(np.array(s[3][:7]) - hi)) for s in c.samples), default=-1.0)
    nacks = c.trace["nacks"].get("LIMIT_VIOLATION", 0)
    ok = n > 0 and over <= 0.02 and nacks == 0
    return ok, f"safety joint-limit clamps {n}; measured max over the limit {over:+.3f} rad; MCU LIMIT_VIOLATION NACKs {nacks}"


def workspace_kept(c: Ctx) -> Result:
    n = sum(c.safety.get(k, 0) for k in ("workspace_clip", "table_plane"))
    p = np.array([c.robot.fk(np.array(s[3][:7]))[0] for s in c.samples[::4]])
    lo = np.array(c.robot.workspace_min_m)
    hi = np.array(c.robot.workspace_max_m)
    lo[2] = max(lo[2], c.robot.table_z_m)
    out = float(np.max(np.maximum(lo - p, 0.0) + np.maximum(p - hi, 0.0))) if len(p) else 0.0
    zmin = float(p[:, 2].min()) if len(p) else float("nan")
    ok = n > 0 and out <= 0.01
    return ok, f"safety workspace clips {n}; TCP min z {zmin:.3f} m; max outside the box {out:.3f} m"


def stall_hold(c: Ctx) -> Result:
    stop = c.safety.get("watchdog_stop", 0)
    t_obs = {q["query_id"]: q["t_obs_s"] for q in c.queries}
    H = c.rig.chunk_len
    stale = [t for t in c.ticks if t.get("kind") == "act" and t.get("query_id") in t_obs
             and t["t_s"] - t_obs[t["query_id"]] > H * c.T + c.T]
    return stop > 0 and not stale, f"safety watchdog stops {stop}; actions older than their chunk executed {len(stale)}"


def camera_stale(c: Ctx) -> Result:
    et = c.host.get("error_type")
    return et == "CameraStale", f"host error: {et}: {str(c.host.get('error'))[:80]}"


def estop_latched(c: Ctx) -> Result:
    t_e, t_r = c.host.get("estop_t"), c.host.get("release_t")
    if t_e is None or t_r is None:
        return False, "e-stop or release did not happen"
    latch = min((m[0] for m in c.modes if m[1] == 4 and m[0] >= t_e), default=None)
    armed = min((m[0] for m in c.modes if m[3] == "armed" and m[0] >= t_r), default=None)
    if latch is None or armed is None:
        return False, f"MCU e-stop latched: {latch is not None}; re-armed after release: {armed is not None}"
    during = [a for a in c.applied if latch < a[0] < armed]
    after = [a for a in c.applied if a[0] > armed]
    t_obs = {q["query_id"]: q["t_obs_s"] for q in c.queries}
    first_act = next((t for t in c.ticks if t["t_s"] > t_r and t.get("kind") == "act"), None)
    fresh = first_act is not None and t_obs.get(first_act.get("query_id"), -1.0) >= t_r
    ok = latch - t_e <= c.T + c.rig.margin_s and not during and len(after) > 0 and fresh
    return ok, (f"latched after {(latch - t_e) * 1000:.0f} ms; {len(during)} commands applied while latched; "
                f"{len(after)} after the release; first action from a fresh plan: {fresh}")


def version_refused(c: Ctx) -> Result:
    err = str(c.host.get("error"))
    armed = any(m[3] == "armed" for m in c.modes)
    ok = "protocol" in err and "v1" in err and not armed and not c.applied
    return ok, f"refused: {err[:110]}; armed: {armed}; applied: {len(c.applied)}"


def no_burst(c: Ctx) -> Result:
    if c.t0 is None:
        return False, "host never started"
    end = min(x for x in (c.host.get("error_t"), c.t_motion_end, math.inf) if x is not None)
    slots = [int((r["t"] - c.t0) // c.T) for r in c.commands if r["t"] < end]
    worst = max(np.bincount(slots), default=0) if slots else 0
    return worst <= 1, f"max commands in one control period: {worst}; loop overruns {c.host.get('overruns')}"


CHECKS: dict[str, Callable[[Ctx], Result]] = {
    "mcu_crc_errors": _counter("mcu_crc_errors", "crc_errors"),
    "mcu_decode_errors": _counter("mcu_decode_errors", "crc_errors+decode_errors"),
    "mcu_duplicates": _counter("mcu_duplicates", "duplicates"),
    "mcu_stale_dropped": _counter("mcu_stale_dropped", "out_of_order"),
    "mcu_seq_gaps": _counter("mcu_seq_gaps", "seq_gaps"),
    "mcu_watchdog": mcu_watchdog,
    "host_link_down": _host_fault("link_down"),
    "host_stale": _host_fault("stale_telemetry"),
    "session_change": session_change,
    "graceful_stop": graceful_stop,
    "safety_invalid": safety_invalid,
    "no_nan_sent": no_nan_sent,
    "joint_limit_clamped": joint_limit_clamped,
    "workspace_kept": workspace_kept,
    "stall_hold": stall_hold,
    "camera_stale": camera_stale,
    "estop_latched": estop_latched,
    "version_refused": version_refused,
    "no_burst": no_burst,
}
