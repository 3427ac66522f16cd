"""HIL harness: run one fault scenario through the full stack and judge it on the recorded trace.

Stack per scenario (composition, so this module may wire every package together)::

    ControlLoop + SafetySupervisor + InferenceWorker(policy)          host (in-process or a subprocess)
      -> BridgeArmDriver -> FirmwareClient -> pty  ==================  serial byte path
      -> FaultProxy -> emulated MCU (watchdog, limits, e-stop) -> SimJointPlant -> MuJoCo physics

Real time (see ``drivers/hil_rig.py``): the MCU and physics run on the bench's service thread on
the monotonic clock; the host runs its 20 Hz loop on a real clock. Faults come from three places:
the fault proxy (link), the bench (MCU reboot, via the proxy's one-shot rule), and the host side
(policy faults, frozen camera, operator e-stop, signals to a host subprocess, CPU hogs).

Scenario files: ``configs/hil/<name>.yaml`` (values only, :class:`HilScenario`); rig settings:
``configs/hil/rig.yaml`` (:class:`HilRigConfig`). Per scenario the run directory holds ``host/``
(the runtime's run record + ``commands.jsonl``), ``bench.json`` (MCU/physics trace) and ``result.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge.config import ConfigError, cfg, check_fields, load_config
from edge.resources import config_dir

CATALOGUE_DIR = config_dir("hil")
RIG_FILE = "rig.yaml"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class HilRigConfig:
    """The rig every scenario runs on (timing in seconds unless named otherwise)."""

    robot: str = cfg("panda", "robot spec (configs/robots/<name>.yaml): limits, rate, kinematics of host and MCU")
    task: str = cfg("stack", "scene", choices=("stack", "pick_place", "push"))
    sim: str = cfg("mujoco", "physics engine driving the MCU's joints", choices=("mujoco", "pybullet"))
    seed: int = cfg(7, "scene, expert, fault-proxy and MCU session-id seed", range=(0, None))
    mcu_tick_s: float = cfg(0.002, "firmware tick (also the bench service period)", range=(0.0005, 0.01))
    mcu_state_hz: float = cfg(100.0, "periodic STATE telemetry rate", range=(1.0, 2000.0))
    watchdog_ms: int = cfg(200, "MCU command watchdog W", range=(1, 60000))
    command_valid_for_s: float = cfg(0.1, "command deadline (max age on the MCU clock)", range=(0.001, 10.0))
    state_timeout_s: float = cfg(0.1, "host telemetry-age limit", range=(0.001, 10.0))
    confirm_timeout_s: float = cfg(0.2, "host: no command confirmed for this long -> stop", range=(0.001, 10.0))
    max_frozen_s: float = cfg(0.3, "camera: image unchanged this long -> CameraStale", range=(0.01, 60.0))
    image_size: int = cfg(96, "camera image size (px)", range=(16, 512))
    chunk_len: int = cfg(16, "replay policy chunk length H", range=(1, 256))
    execute: int = cfg(8, "actions executed per chunk C", range=(1, 256))
    settle_s: float = cfg(0.6, "bench keeps recording this long after the host stopped", range=(0.0, 10.0))
    margin_s: float = cfg(0.03, "scheduling slack added to every time bound (shared 2-core CPU)", range=(0.0, 1.0))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class HilScenario:
    """One fault scenario (``configs/hil/<name>.yaml``). Times are seconds after motion start."""

    name: str = cfg("", "scenario name (file stem)")
    fault: str = cfg("", "what is injected (report column)")
    expected: str = cfg("", "the expected safe behaviour (report column)")
    duration_s: float = cfg(3.0, "motion time of the host loop", range=(0.2, 60.0))
    fault_at_s: float = cfg(1.0, "when the fault begins; time-to-safe counts from here", range=(0.0, 60.0))
    link_faults: tuple[dict[str, Any], ...] = cfg((), "fault-proxy rules (FaultRule fields)")
    repeat: int = cfg(1, "replicate every time-windowed link rule this many times", range=(1, 100))
    repeat_every_s: float = cfg(0.3, "spacing of the replicated windows", range=(0.0, 60.0))
    delay_sweep_ms: tuple[float, ...] = cfg((), "latency sweep: one run per one-way delay", range=(0.0, 10000.0))
    sweep_stop_above_ms: float = cfg(1e9, "sweep runs above this delay must stop, the others must not")
    host: str = cfg("inline", "host in this process or in a subprocess", choices=("inline", "subprocess"))
    host_signal: str = cfg("", "signal sent to the host subprocess at fault_at_s", choices=("", "SIGINT", "SIGTERM", "SIGKILL"))
    policy_fault: str = cfg("", "policy-side fault", choices=("", "nan", "workspace", "joint_limit", "stall"))
    camera_fault: str = cfg("", "camera fault", choices=("", "freeze"))
    mcu_versions: tuple[int, ...] = cfg((1,), "protocol versions the MCU firmware speaks", range=(1, 255))
    estop_at_s: float = cfg(-1.0, "operator e-stop at this time (< 0: none)")
    release_at_s: float = cfg(-1.0, "explicit operator release (reset) at this time (< 0: none)")
    cpu_hog: int = cfg(0, "busy-loop processes started at fault_at_s", range=(0, 16))
    layout: str = cfg("ee_delta", "robot action layout", choices=("ee_delta", "joint_pos"))
    expect: str = cfg("none", "none | stop | refused | tolerate (stop allowed)",
                      choices=("none", "stop", "refused", "tolerate"))
    stop_by: str = cfg("any", "who must bring the arm to a safe state", choices=("host", "mcu", "any"))
    safe_on_hold: bool = cfg(False, "a safety hold (braking, policy ignored) counts as the safe state")
    stop_bound_s: float = cfg(0.0, "safe state within this long after the fault (+ rig margin)", range=(0.0, 60.0))
    mcu_final: str = cfg("", "MCU mode at the end of the trace",
                         choices=("", "disarmed", "fault", "estop", "not_armed", "armed"))
    checks: tuple[str, ...] = cfg((), "scenario-specific checks (edge/hil/checks.py)")

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.name:
            raise ConfigError("scenario needs a name")
        for rule in self.link_faults:
            if rule.get("start_s") is None and rule.get("start_frame") is None:
                raise ConfigError(f"scenario {self.name}: link fault {rule} needs start_s (s after motion start)")
        if self.host_signal and self.host != "subprocess":
            raise ConfigError(f"scenario {self.name}: host_signal needs host: subprocess")
        if self.duration_s <= self.fault_at_s and self.expect != "refused":
            raise ConfigError(f"scenario {self.name}: duration_s must exceed fault_at_s")


def load_rig(catalogue: Path = CATALOGUE_DIR) -> HilRigConfig:
    path = catalogue / RIG_FILE
    return load_config(HilRigConfig, path if path.is_file() else None)


def load_catalogue(catalogue: Path = CATALOGUE_DIR) -> list[HilScenario]:
    """Every scenario file (all ``*.yaml`` but ``rig.yaml``), sorted by name, sweeps expanded."""
    files = sorted(p for p in catalogue.glob("*.yaml") if p.name != RIG_FILE)
    if not files:
        raise ConfigError(f"no scenario files in {catalogue}")
    out = []
    for p in files:
        sc = load_config(HilScenario, p)
        if sc.name != p.stem:
            raise ConfigError(f"{p}: name {sc.name!r} must equal the file name {p.stem!r}")
        out += expand(sc)
    return out


def expand(sc: HilScenario) -> list[HilScenario]:
    """Replicate repeated link windows; turn a latency sweep into one scenario per delay."""
    rules = []
    for rule in sc.link_faults:
        for i in range(sc.repeat if rule.get("start_s") is not None and rule.get("kind") not in ("reboot", "hangup")
                       else 1):
            r = dict(rule)
            if i:
                r["start_s"] = rule["start_s"] + i * sc.repeat_every_s
                if rule.get("end_s") is not None:
                    r["end_s"] = rule["end_s"] + i * sc.repeat_every_s
            rules.append(r)
    sc = dataclasses.replace(sc, link_faults=tuple(rules), repeat=1)
    if not sc.delay_sweep_ms:
        return [sc]
    out = []
    for d in sc.delay_sweep_ms:
        delay = {"kind": "delay", "start_s": sc.fault_at_s, "delay_s": d / 1000.0}
        out.append(dataclasses.replace(
            sc, name=f"{sc.name}@{d:g}ms", delay_sweep_ms=(), link_faults=(*sc.link_faults, delay),
            fault=f"{sc.fault}: {d:g} ms each way",
            expect="stop" if d > sc.sweep_stop_above_ms else "none"))
    return out


class HilContext:
    """What scenarios share within one ``edge hil`` invocation: the sim env, expert actions, policy."""

    def __init__(self, rig: HilRigConfig, policy: str = "replay", checkpoint: str = "",
                 runtime: tuple[str, ...] = ()) -> None:
        """``runtime``: ``key=value`` settings of the host's :class:`edge.runtime.config.RuntimeConfig`
        (its worker, queue and safety sections; e.g. ``safety.stale_s=0.3``)."""
        os.environ.setdefault("MUJOCO_GL", "egl")
        import sim

        self.rig, self.policy_kind, self.checkpoint = rig, policy, checkpoint
        self.runtime = tuple(runtime)
        self.env = sim.make_env(rig.task, sim=rig.sim, render_images=False, image_size=rig.image_size)
        self._actions: dict[str, np.ndarray] | None = None
        self._vla = None
        self._warm = False

    def actions(self) -> dict[str, np.ndarray]:
        """The scripted expert on this scene, recorded once (``ee_delta`` and ``joint_pos``)."""
        from edge.hil.policy import expert_actions

        if self._actions is None:
            n = round(8.0 / self.env.control_dt_s) + self.rig.chunk_len  # longer than any scenario
            self._actions = expert_actions(self.env, self.rig.seed, n)
        return self._actions

    def make_policy(self, sc: HilScenario) -> Any:
        from edge.hil.policy import FaultyPolicy, PolicyFault, ReplayPolicy
        from edge.robot_spec import load_robot_spec

        robot = load_robot_spec(self.rig.robot, [f"action_layout={sc.layout}"])
        if self.policy_kind == "vla" and sc.layout == "ee_delta":
            policy = self._load_vla(robot)
        else:
            policy = ReplayPolicy(self.actions()[sc.layout], robot.control_rate_hz, sc.layout, self.rig.chunk_len)
        if sc.policy_fault:
            policy = FaultyPolicy(policy, PolicyFault(sc.policy_fault, t_s=sc.fault_at_s), np.array(robot.q_max_rad))
        return policy

    def _load_vla(self, robot: Any) -> Any:
        if self._vla is None:
            from edge.backends import BackendConfig
            from edge.vla_policy import load_policy

            # One intra-op thread, no spinning: the MCU emulator and the control loop share 2 cores.
            backend = BackendConfig(name="onnxruntime", threads=1, allow_spinning=False)
            self._vla = load_policy(self.checkpoint, backend, robot=robot)
        return self._vla

    def warm_up_policy(self, policy: Any, camera: Any) -> None:
        """One query outside the loop: the first inference allocates (hundreds of ms), which would
        otherwise land in the first control ticks."""
        if self._vla is None or self._warm:
            return
        from edge.contracts import RobotState

        q, qd = self.env.backend.arm_state()
        obs = camera.observe(RobotState(time.monotonic(), q, qd, 0.0))
        noise = np.zeros((self._vla.chunk_len, self._vla.action_dim), np.float32)
        self._vla.sample(self._vla.encode(obs), noise, 10)
        self._vla.reset()  # the warm-up frame is not the episode's scene
        self._warm = True

    def cameras(self, sc: HilScenario) -> tuple[tuple[str, ...], int]:
        """Camera names and image size the scenario's policy needs."""
        if self._vla is not None and self.policy_kind == "vla" and sc.layout == "ee_delta":
            return tuple(self._vla.spec.cameras), int(self._vla.spec.image_hw[0])
        return ("front",), self.rig.image_size

    def close(self) -> None:
        self.env.close()


def run_scenario(sc: HilScenario, ctx: HilContext, out_dir: Path) -> dict[str, Any]:
    """Run one scenario; returns its report row (also written to ``out_dir/result.json``)."""
    from drivers.hil_rig import HilBench
    from edge.hil.report import judge
    from firmware_bridge.emulator.config import McuConfig
    from firmware_bridge.fault_proxy import FaultRule, FaultSchedule

    rig = ctx.rig
    if out_dir.exists():
        shutil.rmtree(out_dir)  # this scenario's own artifacts from an earlier run into the same --out
    out_dir.mkdir(parents=True)
    ctx.actions()
    ctx.env.reset(seed=rig.seed)
    mcu = McuConfig(n_joints=8, tick_s=rig.mcu_tick_s, state_period_s=1.0 / rig.mcu_state_hz,
                    watchdog_ms=rig.watchdog_ms, hard_q_min_rad=-4.0, hard_q_max_rad=4.0,
                    supported_versions=tuple(sc.mcu_versions), seed=rig.seed)
    schedule = FaultSchedule(tuple(FaultRule.from_dict(r) for r in sc.link_faults), seed=rig.seed)
    bench = HilBench(ctx.env, mcu, schedule).start()
    hogs: list[subprocess.Popen] = []
    try:
        if sc.host == "subprocess":
            host = _run_subprocess_host(sc, ctx, bench, out_dir, hogs)
        else:
            host = _run_inline_host(sc, ctx, bench, out_dir, hogs)
        time.sleep(rig.settle_s)
    finally:
        for p in hogs:
            p.kill()
            p.wait()
        trace = bench.trace()
        bench.close()
        (out_dir / "bench.json").write_text(json.dumps(trace))  # an interrupted scenario keeps its MCU trace too
    row = judge(sc, rig, host, trace, out_dir)
    (out_dir / "result.json").write_text(json.dumps(row, indent=2))
    return row


def _host_spec(sc: HilScenario, rig: HilRigConfig, port: str, out_dir: Path, policy: str,
               runtime: tuple[str, ...] = ()) -> Any:
    from edge.hil.host import HostSpec

    vla = policy == "vla" and sc.layout == "ee_delta"
    return HostSpec(
        port=port, out_dir=str(out_dir / "host"), layout=sc.layout, duration_s=sc.duration_s, policy=policy,
        chunk_len=rig.chunk_len, execute=rig.execute, num_steps=10 if vla else 1, seam="rtc" if vla else "replace",
        estop_at_s=sc.estop_at_s, release_at_s=sc.release_at_s, robot=rig.robot,
        driver={"state_timeout_s": rig.state_timeout_s, "command_valid_for_s": rig.command_valid_for_s,
                "confirm_timeout_s": rig.confirm_timeout_s},
        policy_fault={"kind": sc.policy_fault, "t_s": sc.fault_at_s} if sc.policy_fault else {},
        runtime=list(runtime))


def _start_hogs(n: int, hogs: list[subprocess.Popen]) -> None:
    for _ in range(n):
        # their own session: a Ctrl-C at the terminal is the campaign's, not theirs (they are killed after)
        hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True))


def _run_inline_host(sc: HilScenario, ctx: HilContext, bench: Any, out_dir: Path,
                     hogs: list[subprocess.Popen]) -> dict[str, Any]:
    from drivers.sim_camera import SimCamera
    from edge.hil.host import run_host

    policy = ctx.make_policy(sc)
    cams, size = ctx.cameras(sc)
    cam = SimCamera(ctx.env, bench.lock, cameras=cams, image_size=size,
                    max_frozen_s=ctx.rig.max_frozen_s, seed=ctx.rig.seed)
    cam.warm_up()
    ctx.warm_up_policy(policy, cam)
    timers: list[threading.Timer] = []

    def on_start(t0: float) -> None:
        bench.set_fault_origin(t0)
        if sc.camera_fault == "freeze":
            cam.freeze_from(t0 + sc.fault_at_s)
        if sc.cpu_hog:
            delay = max(0.0, t0 + sc.fault_at_s - time.monotonic())
            timers.append(threading.Timer(delay, _start_hogs, (sc.cpu_hog, hogs)))
            timers[-1].start()

    spec = _host_spec(sc, ctx.rig, bench.path, out_dir, "vla" if ctx.policy_kind == "vla" else "replay",
                      ctx.runtime)
    spec.policy_fault = {}  # the in-process policy object carries its fault already
    try:
        res = run_host(spec, policy, cam, on_start=on_start)
    finally:
        for t in timers:
            t.cancel()
            t.join()
    res["host_mode"] = "inline"
    if res.get("interrupted"):  # Ctrl-C on this process: the arm stopped under control, now the campaign stops
        raise KeyboardInterrupt
    return res


def _run_subprocess_host(sc: HilScenario, ctx: HilContext, bench: Any, out_dir: Path,
                         hogs: list[subprocess.Popen]) -> dict[str, Any]:
    host_dir = out_dir / "host"
    host_dir.mkdir(parents=True, exist_ok=True)
    actions_file = out_dir / "actions.npy"
    np.save(actions_file, ctx.actions()[sc.layout])
    spec = _host_spec(sc, ctx.rig, bench.path, out_dir, "replay", ctx.runtime)
    spec.actions_file = str(actions_file)
    spec_file = out_dir / "host_spec.json"
    spec_file.write_text(json.dumps(dataclasses.asdict(spec), indent=2))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(out_dir / "host_stderr.txt", "w") as err_file:
        # its own session: a Ctrl-C at the terminal reaches the host once, forwarded below (a second SIGINT
        # would break into its controlled stop)
        proc = subprocess.Popen([sys.executable, "-m", "edge.hil.host", str(spec_file)],
                                stdout=subprocess.PIPE, stderr=err_file, text=True, env=env, cwd=REPO_ROOT,
                                start_new_session=True)
        res: dict[str, Any] = {"host_mode": "subprocess", "signal": sc.host_signal}
        try:
            t0 = _read_t0(proc, timeout_s=60.0)
            bench.set_fault_origin(t0)
            if sc.cpu_hog:
                _start_hogs(sc.cpu_hog, hogs)
            if sc.host_signal:
                time.sleep(max(0.0, t0 + sc.fault_at_s - time.monotonic()))
                res["signal_t"] = time.monotonic()
                proc.send_signal(getattr(signal, sc.host_signal))
            proc.wait(timeout=sc.duration_s + 30.0)
        except KeyboardInterrupt:  # Ctrl-C on the campaign: the host stops the arm under control, then exits
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=HOST_STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass  # killed below
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        res["exit_t"] = time.monotonic()
        res["returncode"] = proc.returncode
        res["stdout"] = proc.stdout.read() if proc.stdout else ""
    result_file = host_dir / "host_result.json"
    if result_file.is_file():
        res = {**json.loads(result_file.read_text()), **res}
    else:
        res.setdefault("t0", t0)
    return res


#: how long an interrupted campaign waits for a host subprocess's controlled stop before killing it
HOST_STOP_GRACE_S = 5.0


def _read_t0(proc: subprocess.Popen, timeout_s: float) -> float:
    """The host subprocess prints ``T0 <monotonic s>`` once its loop has started."""
    import select

    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("T0 "):
                return float(line.split()[1])
            if not line and proc.poll() is not None:
                break
    raise RuntimeError(f"HIL host subprocess did not start (exit code {proc.poll()}); see host_stderr.txt")
