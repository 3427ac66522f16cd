"""The runtime on an arm behind the firmware bridge: ``edge run --arm bridge`` (a board on a serial
port, cameras through OpenCV) and the HIL host (:mod:`edge.hil.host`, the emulated MCU on a pty).

:func:`drive_arm` is the part both share: start the loop (connect + activate: the arm arms and holds
where it is), tick on the real clock for ``duration_s``, then stop and close (DISARM: controlled stop,
hold under power). A fault the stack handled — the driver's safe stop on a link or MCU problem, a
camera that went stale, the safety supervisor's latched stop — is the run's result, never an
exception; so is Ctrl-C (controlled stop first). :func:`deploy` composes the VLA (or a plug-in
policy), its scheduler, the cameras and the bridge driver around it for ``edge run --arm bridge``.

Run directory: the runtime's records (meta.json with ``arm``, ticks, queries, events with the driver's
lifecycle/clamp/fault events, summary), ``commands.jsonl`` (every joint command as written to the wire:
seq, host time, f32 targets) and ``arm_result.json`` (how the run ended).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge import atomic
from edge.errors import EdgeError

#: the longest ``edge run --arm bridge`` (s); a longer deployment is several runs
MAX_DURATION_S = 24 * 3600.0


@dataclass
class ArmRun:
    """What ``edge run --arm bridge`` needs beyond the runtime settings."""

    port: str  # serial device, pty or pyserial URL
    cameras: dict[str, str]  # camera name (as the policy's spec names it) -> OpenCV source
    duration_s: float = 30.0
    instruction: str = ""
    driver: dict[str, Any] = field(default_factory=dict)  # drivers.bridge_arm.BridgeArmConfig overrides


class Jsonl:
    """A line-buffered JSON-lines writer (survives SIGKILL up to the line being written)."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, rec: dict[str, Any]) -> None:
        self._f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def close(self) -> None:
        """Flush the lines to the disk (they are what an arm was sent: they must survive a power cut) and close."""
        try:
            self._f.flush()
            os.fsync(self._f.fileno())
        finally:
            self._f.close()


def drive_arm(loop: Any, driver: Any, clock: Any, duration_s: float, *,
              on_start: Callable[[float], None] | None = None,
              on_tick: Callable[[float, dict[str, Any]], bool] | None = None,
              before_close: Callable[[], None] | None = None,
              end_on_stop: bool = False) -> dict[str, Any]:
    """Start ``loop``, tick until ``duration_s`` after its start, close it; -> the result dict.

    ``on_tick(now, res)`` runs after every tick (True ends the run); ``end_on_stop``: a latched safety
    stop (fault or e-stop) ends the run, else it keeps ticking (braking to a hold, the policy ignored),
    as a HIL scenario that then judges the hold and an operator's release needs. A driver or loop
    error ends the run (the loop stopped the arm first); so does Ctrl-C, and one during the start
    (connect / activate) e-stops the arm, which may have been armed already. Never raises for what the
    stack handled; the arm is closed (DISARM where it is active) whatever happens."""
    from edge.safety import SafetyMode

    res: dict[str, Any] = {"t0": None, "error": None, "error_type": None, "error_t": None, "estop_t": None,
                           "release_t": None, "interrupted": False, "stop": None}

    def failed(err: BaseException, **extra: Any) -> None:
        res.update(error=str(err) or type(err).__name__, error_type=type(err).__name__, error_t=clock.now(), **extra)
        if isinstance(err, KeyboardInterrupt):
            res["interrupted"] = True

    try:
        try:
            loop.start()
        except KeyboardInterrupt as err:  # mid-activation the MCU may be armed already: stop it
            failed(err, phase=_start_phase(driver))
            _guarded(res, "estop_error", driver.estop)
            return res
        except Exception as err:  # noqa: BLE001 - a refused connect / activation is the result of the run
            failed(err, phase=_start_phase(driver))
            if loop.recorder is not None:
                loop.recorder.event("connect_failed", clock.now(), detail=str(err))
            return res
        t0 = res["t0"] = loop.t0_s
        try:
            if on_start is not None:
                on_start(t0)
            t_end = t0 + duration_s
            while clock.now() < t_end:
                loop.run(1)
                mode = loop.safety.mode
                if end_on_stop and mode in (SafetyMode.FAULT, SafetyMode.ESTOP):
                    res["stop"] = f"{mode.value}: {loop.safety.fault_reason}"
                    break
                if on_tick is not None and on_tick(clock.now(), res):
                    res["stop"] = "on_tick"
                    break
            else:
                res["stop"] = "duration"
        except (Exception, KeyboardInterrupt) as err:  # noqa: BLE001 - the loop already stopped the arm
            failed(err)
    finally:
        res["t_motion_end"] = clock.now()  # before the orderly close (DISARM) below
        if before_close is not None:
            _guarded(res, "before_close_error", before_close)
        link = _guarded(res, "link_error", driver.link_stats)
        res["link"] = link if isinstance(link, dict) else {}
        if _guarded(res, "close_error", lambda: loop.close(close_driver=True)) is _FAILED:
            # closing after a fault may fail on a dead link; never leave an active arm behind
            _guarded(res, "driver_close_error", driver.close)
        safety = loop.safety
        res.update(t_closed=clock.now(), driver_counts=dict(driver.counts), safety_counts=dict(safety.counts),
                   overruns=loop.overruns, safety_mode=safety.mode.value, safety_reason=safety.fault_reason,
                   driver_state=driver.state.value)
    return res


_FAILED = object()


def _start_phase(driver: Any) -> str:
    """Where a failed start ended: ``connect`` while the arm was never armed (a refused handshake or
    activation: nothing moved), ``start`` once it was (armed, then stopped)."""
    from edge.contracts import DriverState

    return "start" if driver.state in (DriverState.ACTIVE, DriverState.ESTOPPED) else "connect"


def _guarded(res: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or ``_FAILED`` with the error recorded as ``res[key]`` (a close step that fails must not
    keep the next one from running; a second Ctrl-C during the close is recorded, and the close goes on)."""
    try:
        return fn()
    except (Exception, KeyboardInterrupt) as err:  # noqa: BLE001 - recorded; the caller goes on closing
        res[key] = f"{type(err).__name__}: {err}"
        if isinstance(err, KeyboardInterrupt):
            res["interrupted"] = True
        return _FAILED


def write_result(path: Path, res: dict[str, Any]) -> None:
    """``res`` as strict JSON (NaN / inf statistics as null)."""
    atomic.write_text(path, json.dumps(_finite(res), indent=2, default=_plain))  # whole or not at all: a
    # supervisor (edge hil's harness) reads it once it exists, also after killing the host mid-run


def _finite(v: Any) -> Any:
    """``v`` with NaN / inf floats as None: strict JSON (a statistic of no samples is absent, not NaN)."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return None
    return v


def _plain(v: Any) -> Any:
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


# ---------------------------------------------------------------------------- edge run --arm bridge
def check_cameras(needed: tuple[str, ...], given: dict[str, str], policy_name: str) -> None:
    """The ``--camera NAME=SOURCE`` given must name exactly the cameras the policy sees."""
    missing = [n for n in needed if n not in given]
    extra = [n for n in given if n not in needed]
    if missing or extra:
        what = "; ".join(x for x in (
            f"missing {', '.join(missing)}" if missing else "",
            f"{', '.join(extra)} not seen by it" if extra else "") if x)
        raise EdgeError(f"--camera: --policy {policy_name} sees the cameras {', '.join(needed)} (its spec): {what}; "
                        f"give each once, e.g. " + " ".join(f"--camera {n}=/dev/video{i}" for i, n in enumerate(needed)))


def deploy(cfg: Any, arm: ArmRun, out_dir: str | Path, *, confirm: Callable[[str], bool] | None,
           observer: Any = None, policy: Any = None, policy_factory: Callable[[], Any] | None = None,
           stop_when: Callable[[float], bool] | None = None,
           progress: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``cfg``'s policy and scheduler on the bridge arm at ``arm.port`` for ``arm.duration_s``; ->
    (result, summary). Order: the policy is loaded and the cameras opened (``observer``: another
    ObservationSource, e.g. a simulator's cameras, instead), then the driver connects (handshake;
    nothing moves), one query warms the policy up, ``confirm(description)`` must say yes, and only
    then the arm is armed and the loop runs (``confirm=None``, given explicitly: arm without asking).
    SIGINT and SIGTERM stop it under control (:func:`operator_signals`).
    ``policy`` (with ``policy_factory`` to rebuild it in a worker process): an already built policy
    instead of ``cfg``'s. ``stop_when(now)``: True ends the run early. Raises EdgeError (nothing moved) when the port, a
    camera or the confirmation refuses."""
    with operator_signals():  # SIGINT / SIGTERM: a controlled stop from here on
        return _deploy(cfg, arm, out_dir, confirm=confirm, observer=observer, policy=policy,
                       policy_factory=policy_factory, stop_when=stop_when, progress=progress)


def _deploy(cfg: Any, arm: ArmRun, out_dir: str | Path, *, confirm: Callable[[str], bool] | None,
            observer: Any, policy: Any, policy_factory: Callable[[], Any] | None,
            stop_when: Callable[[float], bool] | None,
            progress: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    from tqdm import tqdm

    from drivers.bridge_arm import BridgeArmConfig, BridgeArmDriver
    from drivers.opencv_camera import CameraError, CameraSet, OpenCVCamera, OpenCVCameraConfig
    from drivers.sim_camera import proprio_from_state
    from edge.clock import RealClock
    from edge.config import ConfigError, from_dict, to_dict
    from edge.robot_spec import load_robot_spec
    from edge.runtime.session import (
        _policy_meta,
        _robot_meta,
        _scheduler_meta,
        built_policy,
        built_scheduler,
        check_execute_fits,
        check_policy_task,
        report_unread_options,
    )
    from edge.runtime.wiring import wire_loop
    from edge.telemetry import RunRecorder

    out = Path(out_dir)
    trackers: list = []  # a user's factories' options, to say at the end which they never read
    if policy is None:
        policy, robot, factory = built_policy(cfg, trackers)
    else:
        robot, factory = load_robot_spec(cfg.scene.robot), policy_factory
    check_policy_task(cfg, policy)
    check_execute_fits(cfg, policy)
    scheduler = built_scheduler(cfg, policy, trackers)
    try:
        dcfg = from_dict(BridgeArmConfig, {**arm.driver, "port": arm.port})
    except (ConfigError, ValueError) as err:
        raise EdgeError(f"--port {arm.port}: {err}") from None
    cams = tuple(getattr(policy.spec, "cameras", ("front",)))
    own_cameras = observer is None
    if own_cameras:
        check_cameras(cams, arm.cameras, cfg.policy.name)
        try:
            height, width = (int(x) for x in policy.spec.image_hw)  # (H, W)
            observer = CameraSet([OpenCVCamera(OpenCVCameraConfig(source=arm.cameras[n], name=n, width=width,
                                                                  height=height))
                                  for n in cams], proprio_from_state, arm.instruction)
            observer.start()
        except (CameraError, ConfigError, ValueError) as err:
            raise EdgeError(f"--camera: {err}") from None
    clock = RealClock()
    recorder = commands = None
    try:
        meta = {"session": cfg.short(), "config": to_dict(cfg), "period_s": 1.0 / robot.control_rate_hz,
                "robot": _robot_meta(robot), "policy": _policy_meta(policy, cfg),
                "scheduler": _scheduler_meta(scheduler, cfg),
                "arm": {"kind": "bridge", "port": arm.port, "cameras": dict(arm.cameras) if own_cameras else
                        {n: type(observer).__name__ for n in cams}, "duration_s": arm.duration_s,
                        "instruction": arm.instruction, "driver": asdict(dcfg)}}
        recorder = RunRecorder(out, meta=meta)
        commands = Jsonl(out / "commands.jsonl")
        cmds = commands
        driver = BridgeArmDriver(dcfg, robot, clock=clock, event_sink=recorder.event,
                                 command_sink=lambda seq, t, q: cmds.write({"seq": seq, "t": t, "q": q}))
        try:
            driver.connect()  # handshake and version check: nothing moves
        except Exception as err:  # noqa: BLE001 - the port's problem, named by its flag
            recorder.event("connect_failed", clock.now(), detail=str(err))
            raise EdgeError(f"--port {arm.port}: {err}") from None
        loop = None
        try:  # everything but arming, so that the operator's yes is the last step before ARM
            loop = wire_loop(robot, clock, driver, observer, policy, scheduler, recorder, cfg, seed=cfg.run.seed,
                             policy_factory=factory)
            recorder.event("worker_started", clock.now(), mode=loop.worker.mode,
                           start_s=round(loop.worker.start_s, 4), torch_threads=loop.worker.torch_threads)
            _warm_up(policy, observer, driver, arm.instruction)
            what = (f"the arm on {arm.port} ({len(driver.read_state().q_rad)} joints and a gripper) will move under "
                    f"--policy {cfg.policy.name} for {arm.duration_s:g} s: "
                    + (repr(arm.instruction) if arm.instruction else f"--task {cfg.scene.task}"))
            if confirm is not None and not confirm(what):
                raise EdgeError("not confirmed: the arm was not armed and nothing moved")
        except BaseException:
            try:
                if loop is not None:
                    loop.close(close_driver=True)  # the port, then the worker (nothing was armed)
            finally:
                driver.close()  # (a no-op once closed)
            raise
        bar = tqdm(total=round(arm.duration_s), desc=f"arm {arm.port}", unit="s", disable=not progress)
        shown = [0]

        def tick(now: float, res: dict[str, Any]) -> bool:
            done = min(int(now - res["t0"]), bar.total)
            if done > shown[0]:
                bar.update(done - shown[0])
                shown[0] = done
            return stop_when is not None and stop_when(now)

        try:
            res = drive_arm(loop, driver, clock, arm.duration_s, on_tick=tick, end_on_stop=True)
        finally:
            bar.close()
        res["ticks"] = loop.n
    except BaseException:
        if recorder is not None:  # nothing moved (or the run's records are flushed): close the files
            recorder.close()
        raise
    finally:
        if own_cameras:
            observer.close()
        if commands is not None:
            commands.close()
    report_unread_options(trackers, recorder, clock.now())
    summary = recorder.close(extra={"arm": "bridge", "stop": res.get("stop") or res.get("error_type")})
    write_result(out / "arm_result.json", res)
    return res, summary


@contextmanager
def operator_signals() -> Iterator[None]:
    """While a real arm may move: SIGINT (Ctrl-C) and SIGTERM (a supervisor's stop, systemd's) raise
    KeyboardInterrupt, so the arm stops under control and disarms instead of waiting for the MCU's watchdog
    — also when SIGINT arrived ignored (a process started as a background job inherits it so). Only in the
    main thread (elsewhere signals cannot be handled); the old handlers come back after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _warm_up(policy: Any, observer: Any, driver: Any, instruction: str) -> None:
    """One query before the arm is armed: the instruction's embedding (seconds, once, for a sentence the
    checkpoint has not cached) and the first inference's allocations (hundreds of ms) would otherwise
    land inside the first control ticks. Also the first check that the cameras deliver."""
    language = getattr(policy, "language", None)
    if callable(language) and instruction:
        language([instruction])
    obs = observer.observe(driver.read_state())
    encode, sample = getattr(policy, "encode", None), getattr(policy, "sample", None)
    if callable(encode) and callable(sample):
        noise = np.zeros((policy.chunk_len, policy.action_dim), np.float32)
        sample(encode(obs), noise, 1)
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset()
