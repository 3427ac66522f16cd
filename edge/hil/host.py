"""The host side of a HIL run: the on-robot runtime (control loop, safety supervisor, inference
worker, telemetry) driving the firmware-bridge arm over a serial port. Exactly what would run on the
robot computer, pointed at the emulator's pty instead of ``/dev/ttyACM0``.

Used in-process by ``edge hil`` (with a camera on the simulator) and as a separate process
(``python -m edge.hil.host SPEC.json``) for the scenarios that kill or interrupt the host;
that process prints ``T0 <monotonic seconds>`` once the loop has started.

Run directory (``HostSpec.out_dir``): the runtime's run record (meta, ticks, queries, events with the
driver's lifecycle/clamp/fault events, summary), ``commands.jsonl`` (every joint command exactly as
written to the wire: seq, host time, f32 targets) and ``host_result.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class HostSpec:
    """Everything a host run needs (JSON-serialisable, so a subprocess can receive it)."""

    port: str
    out_dir: str
    layout: str = "ee_delta"
    robot: str = "panda"  # configs/robots/<name>.yaml
    duration_s: float = 3.0
    policy: str = "replay"  # "replay" | "vla"
    checkpoint: str = ""
    num_steps: int = 1
    chunk_len: int = 16
    execute: int = 8
    seam: str = "replace"
    policy_fault: dict[str, Any] = field(default_factory=dict)  # PolicyFault fields, t_s relative to t0
    estop_at_s: float = -1.0
    release_at_s: float = -1.0
    driver: dict[str, Any] = field(default_factory=dict)  # BridgeArmConfig overrides
    actions_file: str = ""  # replay actions (.npy) for a subprocess host
    instruction: str = ""
    runtime: list[str] = field(default_factory=list)  # RuntimeConfig key=value settings (worker/queue/safety)


def host_config(spec: HostSpec) -> Any:
    """The host's :class:`edge.runtime.config.RuntimeConfig`: the runtime's defaults with the HIL
    host's own (fixed K/C and seam from the spec, real clock, inference in a thread), then
    ``spec.runtime``'s settings."""
    from edge.runtime.config import RuntimeConfig, load_runtime_config

    base = RuntimeConfig.of(scheduler="fixed", num_steps=spec.num_steps, execute=spec.execute, seam=spec.seam,
                            clock="real", inference="thread")
    return load_runtime_config(base, None, spec.runtime)


def run_host(
    spec: HostSpec,
    policy: Any,
    observer: Any = None,
    on_start: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Start the loop (connect + activate), run ``duration_s``, stop and close
    (:func:`edge.runtime.arm.drive_arm`, as ``edge run --arm bridge``). Returns a result dict (also
    written to ``host_result.json``). Never raises for a fault the stack handled: the fault is the
    result. KeyboardInterrupt is handled like a fault (controlled stop, then exit). A latched safety
    stop keeps ticking (braking to a hold, ignoring the policy): the scenario judges the hold, and an
    operator's release at ``release_at_s`` re-arms."""
    from drivers.bridge_arm import BridgeArmConfig, BridgeArmDriver
    from drivers.sim_camera import ProprioObserver
    from edge.clock import RealClock
    from edge.config import from_dict, to_dict
    from edge.robot_spec import load_robot_spec
    from edge.runtime.arm import Jsonl, drive_arm, write_result
    from edge.runtime.wiring import wire_loop
    from edge.safety import SafetyMode
    from edge.schedulers import make_scheduler
    from edge.telemetry import RunRecorder

    cfg = host_config(spec)
    out = Path(spec.out_dir)
    robot = load_robot_spec(spec.robot, [f"action_layout={spec.layout}"])
    used = ("scheduler", "worker", "queue", "loop", "clock", "safety")  # the sections the host reads
    recorder = RunRecorder(out, meta={"hil_host": asdict(spec), "period_s": robot.period_s,
                                      "config": {k: v for k, v in to_dict(cfg).items() if k in used}})
    commands = Jsonl(out / "commands.jsonl")
    clock = RealClock()
    dcfg = from_dict(BridgeArmConfig, {**spec.driver, "port": spec.port})
    driver = BridgeArmDriver(dcfg, robot, clock=clock, event_sink=recorder.event,
                             command_sink=lambda seq, t, q: commands.write({"seq": seq, "t": t, "q": q}))
    observer = observer or ProprioObserver(spec.instruction)
    loop = wire_loop(robot, clock, driver, observer, policy, make_scheduler(cfg.scheduler.fixed), recorder, cfg)
    times: dict[str, float | None] = {"estop": None, "release": None}

    def started(t0: float) -> None:
        if hasattr(policy, "fault"):
            policy.fault.t_s = t0 + policy.fault.t_s
        times["estop"] = t0 + spec.estop_at_s if spec.estop_at_s >= 0 else None
        times["release"] = t0 + spec.release_at_s if spec.release_at_s >= 0 else None
        if on_start is not None:
            on_start(t0)

    def operator(now: float, res: dict[str, Any]) -> bool:
        """Operator e-stop / release at their times."""
        if times["estop"] is not None and now >= times["estop"] and res["estop_t"] is None:
            res["estop_t"] = now
            loop.request_estop("operator e-stop (HIL scenario)")
        if (times["release"] is not None and now >= times["release"] and res["release_t"] is None
                and loop.safety.mode is SafetyMode.ESTOP):
            res["release_t"] = clock.now()
            loop.reset()  # explicit operator release: clear + re-arm, fresh plan only
        return False

    res: dict[str, Any] = {"error": "the host run did not finish", "error_type": "HostAborted"}
    try:
        res = drive_arm(loop, driver, clock, spec.duration_s, on_start=started, on_tick=operator,
                        before_close=getattr(policy, "release", None))
    finally:
        recorder.close()
        commands.close()
        write_result(out / "host_result.json", res)  # even when the run itself raised
    return res


def _restore_sigint() -> None:
    """Make SIGINT mean Ctrl-C (KeyboardInterrupt -> controlled stop), even if it arrived ignored.

    A process started from a non-interactive shell's background job (``edge hil ... &``, CI, a
    nohup'd service) inherits SIGINT = SIG_IGN, and Python then installs no KeyboardInterrupt
    handler: the robot process would silently ignore an operator's or supervisor's interrupt
    and run on to the end of its motion (seen in the HIL campaign: DISARM 2 s late, exit 0)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    """Subprocess entry: ``python -m edge.hil.host SPEC.json``."""
    from drivers.sim_camera import ProprioObserver
    from edge.hil.policy import FaultyPolicy, PolicyFault, ReplayPolicy
    from edge.robot_spec import load_robot_spec

    argv = sys.argv[1:] if argv is None else argv
    _restore_sigint()
    spec = HostSpec(**json.loads(Path(argv[0]).read_text()))
    robot = load_robot_spec(spec.robot, [f"action_layout={spec.layout}"])
    policy: Any = ReplayPolicy(np.load(spec.actions_file), robot.control_rate_hz, spec.layout, spec.chunk_len)
    if spec.policy_fault:
        policy = FaultyPolicy(policy, PolicyFault(**spec.policy_fault), np.array(robot.q_max_rad))

    def announce(t0: float) -> None:
        print(f"T0 {t0:.6f}", flush=True)

    from edge.runtime.arm import operator_signals

    try:
        with operator_signals():  # SIGTERM (a supervisor's stop) as Ctrl-C: a controlled stop, then DISARM
            res = run_host(spec, policy, ProprioObserver(spec.instruction), on_start=announce)
    except KeyboardInterrupt:  # before the arm was started (run_host's setup): nothing moved
        return 130
    print(f"RESULT {json.dumps({'error_type': res['error_type'], 'interrupted': res['interrupted']})}", flush=True)
    return 130 if res["interrupted"] else 1 if res["error_type"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
