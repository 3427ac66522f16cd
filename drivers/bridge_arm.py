"""The firmware-bridge arm: a :class:`edge.contracts.RobotDriver` over MCU motor controllers that speak
the ``firmware_bridge`` wire protocol (a real board on ``/dev/ttyACM*``, the emulator on a pty, a
pyserial URL, or an in-process ``VirtualSerial`` in tests).

Joint layout on the MCU: ``n_arm`` revolute joints in rad (the robot spec's joints, in order), then
one gripper channel whose "position" is the finger opening in metres (0 = closed ..
``gripper_width_max_m``). The MCU must report ``n_arm + 1`` joints at the handshake.

Lifecycle (ros2_control-shaped, DESIGN.md): ``disconnected -connect()-> passive -activate()-> active``.

* ``connect``: open the port, handshake (protocol version check: a mismatch refuses with a message
  naming both versions and nothing is ever armed), wait for the first STATE.
* ``activate`` is the explicit operator (re-)arm and the only way to ``active``: a new handshake if
  the MCU rebooted, CLEAR_FAULT once at standstill, LIMITS_CONFIG from the robot spec, ARM. The MCU
  then resets its setpoint to the measured position, and so does the driver (no jump on re-arm).
* Any link or MCU error while active (port failure, MCU fault/watchdog, session change = MCU reboot,
  stale telemetry, commands the MCU stops confirming, repeated NACKs) is handled the same way:
  a safe stop first (ESTOP repeated until acknowledged, bounded in time; if the link is dead the
  MCU's own watchdog stops the arm), the driver drops to ``estopped`` (or ``disconnected`` if the
  port is gone), then :class:`BridgeFault` is raised. Nothing re-activates by itself.

Commands: ``ee_delta`` actions are integrated into a TCP target (kept inside the workspace box and
within ``max_tcp_lead_m`` of the measured TCP, as the simulator does) and turned into joint targets by
one damped-least-squares step (:meth:`edge.kinematics.SerialChain.ik_step`, the robot spec's
chain ``robot.kinematics``; no simulator code) from the *measured* joints;
``joint_pos`` actions are joint targets. Every target is then clamped to the joint limits minus
``joint_margin_rad`` (each clamp is counted and the first of each kind is logged) and the whole
vector is checked finite before anything is written. ``send_command`` returns what was sent, in the
action layout.

Timing (defaults for a 20 Hz loop; see ``BridgeArmConfig``): host telemetry-age limit 0.1 s, commands
valid for 0.1 s on the MCU clock, commands unconfirmed by STATE for 0.2 s -> stop.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from drivers.joint_targets import TcpTarget, clamp_to_limits, ee_delta_to_joints
from edge.config import cfg, check_fields
from edge.contracts import DriverState, RobotState
from edge.errors import EdgeError
from edge.kinematics import tcp_yaw
from edge.robot_spec import RobotSpec
from firmware_bridge.client import ClientConfig, FirmwareClient
from firmware_bridge.errors import (
    BridgeError,
    CommandRejected,
    HandshakeError,
    LinkDown,
    LinkTimeout,
    SessionChanged,
)
from firmware_bridge.messages import Error, LimitsConfig, Nack, State
from firmware_bridge.transport import MonotonicClock
from firmware_bridge.wire_constants import (
    PROTOCOL_VERSION,
    ErrorCode,
    FaultFlag,
    Mode,
    MsgType,
)

log = logging.getLogger("drivers.bridge_arm")

# NACK codes meaning "the MCU is not following commands any more": stop at once.
_FATAL_NACKS = frozenset({ErrorCode.NOT_ARMED, ErrorCode.ESTOP_LATCHED, ErrorCode.FAULT_LATCHED,
                          ErrorCode.SESSION_MISMATCH, ErrorCode.NO_HANDSHAKE})


class BridgeDriverError(EdgeError):
    """Refused operation (wrong lifecycle state, bad command, failed connect/activate)."""


class BridgeFault(BridgeDriverError):
    """A link or MCU fault while active. The driver already stopped the arm when this is raised."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"firmware-bridge arm stopped ({kind}): {detail}")
        self.kind = kind


@dataclass
class BridgeArmConfig:
    """Firmware-bridge arm settings (values for a 20 Hz loop; scale the times with the period)."""

    port: str = cfg("", "device path (/dev/ttyACM0, /dev/serial/by-id/...), pty path or pyserial URL")
    baud: int = cfg(1_000_000, "UART baud rate (ignored by USB CDC-ACM and ptys)", range=(1200, 20_000_000))
    state_timeout_s: float = cfg(0.1, "host telemetry-age limit: newest STATE older -> stop", range=(0.001, 10.0))
    command_valid_for_s: float = cfg(
        0.1, "command deadline on the MCU clock; older commands are refused by the MCU", range=(0.001, 10.0)
    )
    confirm_timeout_s: float = cfg(
        0.2, "no STATE confirming a newer command for this long while active -> stop", range=(0.001, 10.0)
    )
    max_rejects_in_row: int = cfg(3, "consecutive NACKed commands (deadline/limits) -> stop", range=(1, 1000))
    estop_timeout_s: float = cfg(0.05, "how long a safe stop repeats ESTOP waiting for the ACK", range=(0.001, 5.0))
    connect_timeout_s: float = cfg(1.0, "connect: wait this long for the first STATE", range=(0.01, 60.0))
    activate_timeout_s: float = cfg(3.0, "activate: wait this long for standstill/clear/arm", range=(0.01, 60.0))
    joint_margin_rad: float = cfg(0.01, "clamp joint targets to the limits minus this", range=(0.0, 0.5))
    gripper_width_max_m: float = cfg(0.08, "finger opening at gripper command 0 (open)", range=(0.001, 0.5))
    gripper_speed_m_s: float = cfg(
        1.2, "gripper channel speed limit sent in LIMITS_CONFIG: the fingers' own top speed (the simulated Panda "
        "hand's, 1.2 m/s, which the shipped VLA learned with); a lower limit slows the fingers and, on firmware "
        "without the anti-windup of PROTOCOL.md 5.4, delays each release further (the MCU's reference runs on to "
        "the closed position while the fingers hold an object and must come back first)",
        range=(0.001, 4.0))
    current_max_a: float = cfg(10.0, "per-joint current limit sent in LIMITS_CONFIG", range=(0.01, 1000.0))
    max_tcp_lead_m: float = cfg(0.06, "ee_delta: keep the TCP target this close to the measured TCP",
                                range=(0.001, 1.0))
    table_clearance_m: float = cfg(0.005, "ee_delta: TCP target stays this far above the table", range=(0.0, 0.5))
    yaw_range_rad: tuple[float, float] = cfg((-1.87, 1.87), "ee_delta: allowed TCP target yaw")
    read_timeout_s: float = cfg(0.001, "client: longest blocking read on fd-less ports", range=(1e-5, 1.0))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.yaw_range_rad[0] >= self.yaw_range_rad[1]:
            raise BridgeDriverError(f"yaw_range_rad={self.yaw_range_rad} is empty")


EventSink = Callable[..., None]  # (kind, t_s, **fields), e.g. RunRecorder.event
CommandSink = Callable[[int, float, list[float]], None]  # (seq, t_s, q_cmd as sent (f32 values))


class BridgeArmDriver:
    """RobotDriver over one MCU. Single-threaded: the control loop calls every method.

    ``port_obj``: an already open pyserial-like port (tests: ``VirtualSerial``); otherwise
    ``config.port`` is opened on ``connect``. ``clock``: anything with ``now()``/``sleep_until``
    (the loop's clock; the virtual-time rig's clock in tests). ``event_sink(kind, t_s, **fields)``
    receives every lifecycle change, clamp and fault; ``command_sink(seq, t_s, q)`` every joint
    command as written to the wire.
    """

    def __init__(
        self,
        config: BridgeArmConfig,
        robot: RobotSpec,
        port_obj: Any = None,
        clock: Any = None,
        event_sink: EventSink | None = None,
        command_sink: CommandSink | None = None,
        client_seed: int | None = None,
    ) -> None:
        if not config.port and port_obj is None:
            raise BridgeDriverError("BridgeArmConfig.port is empty; pass --port /dev/ttyACM0 (or a pty path / URL)")
        self.config, self.robot = config, robot
        self.action_layout = robot.action_layout
        self.state = DriverState.DISCONNECTED
        self.clock = clock or MonotonicClock()
        self._port_obj = port_obj
        self._event_sink, self._command_sink = event_sink, command_sink
        self._client_seed = client_seed
        self.client: FirmwareClient | None = None
        self.n_arm = robot.n_joints
        self.kin = robot.kinematics  # FK for read_state, FK/IK for ee_delta commands
        lo, hi = robot.limits()
        m = config.joint_margin_rad
        self._q_lo, self._q_hi = lo + m, hi - m
        self._box_lo = np.array(robot.workspace_min_m, float)
        self._box_lo[2] = max(self._box_lo[2], robot.table_z_m + config.table_clearance_m)
        self._box_hi = np.array(robot.workspace_max_m, float)
        self.counts: Counter[str] = Counter()  # clamps, nacks, faults, commands
        self.events: deque[tuple[float, str, str]] = deque(maxlen=1000)
        self.last_joint_command: np.ndarray | None = None  # (n_arm + 1,) as sent
        self._reset_motion_state()

    # ------------------------------------------------------------------ lifecycle
    def connect(self) -> None:
        """disconnected -> passive: open, handshake with a version check, first STATE."""
        if self.state is not DriverState.DISCONNECTED:
            raise BridgeDriverError(f"connect() from {self.state.value}; close() first")
        c = self.config
        ccfg = ClientConfig(baud=c.baud, read_timeout_s=c.read_timeout_s, command_valid_for_s=c.command_valid_for_s)
        where = c.port or getattr(self._port_obj, "name", "port")
        try:
            if self._port_obj is not None:
                self.client = FirmwareClient(self._port_obj, ccfg, clock=self.clock, seed=self._client_seed)
            else:
                self.client = FirmwareClient.open(c.port, ccfg, clock=self.clock)
        except (OSError, BridgeError, ValueError) as err:  # serial.SerialException is an OSError
            raise BridgeDriverError(
                f"cannot open {where}: {err}; check the path and permissions (dialout group)") from err
        try:
            caps = self.client.handshake()
            self._check_capabilities(caps, where)
            self._wait_first_state()
        except HandshakeError as err:
            self._close_port()
            self._event("connect_refused", detail=str(err))
            raise BridgeDriverError(
                f"refusing to use {where}: protocol handshake failed: {err}. This host speaks protocol "
                f"v{PROTOCOL_VERSION}; flash matching MCU firmware or upgrade the host. Nothing was armed."
            ) from err
        except (LinkTimeout, LinkDown) as err:
            self._close_port()
            raise BridgeDriverError(
                f"no answer from {where}: {err}. Wrong port, wrong baud, or the MCU is not running."
            ) from err
        except BridgeDriverError:
            self._close_port()
            raise
        self.state = DriverState.PASSIVE
        self._event("connected", detail=f"{where}: fw {caps.fw_version} n_joints={caps.n_joints} "
                    f"watchdog={caps.watchdog_ms} ms session=0x{self.client.session_id:04X}")

    def _check_capabilities(self, caps: Any, where: str) -> None:
        want = self.n_arm + 1
        if caps.n_joints != want:
            raise BridgeDriverError(
                f"refusing to use {where}: the MCU drives {caps.n_joints} joints, robot "
                f"{self.robot.name!r} needs {want} ({self.n_arm} arm joints + gripper)"
            )
        period_ms = 1000.0 * self.robot.period_s
        if caps.watchdog_ms <= period_ms:
            raise BridgeDriverError(
                f"refusing to use {where}: MCU watchdog {caps.watchdog_ms} ms is not longer than the control "
                f"period {period_ms:.0f} ms; every gap between commands would trip it"
            )

    def _wait_first_state(self) -> None:
        assert self.client is not None
        deadline = self.clock.now() + self.config.connect_timeout_s
        while self.client.latest_state is None:
            if self.clock.now() >= deadline:
                raise LinkTimeout(f"no STATE within {self.config.connect_timeout_s} s of the handshake")
            self.client.poll(0.01)

    def activate(self) -> None:
        """passive/estopped -> active. The explicit operator re-arm; never called by the driver."""
        if self.state is DriverState.ACTIVE:
            return
        if self.state is DriverState.DISCONNECTED or self.client is None:
            raise BridgeDriverError("activate() while disconnected; connect() first")
        client = self.client
        deadline = self.clock.now() + self.config.activate_timeout_s
        try:
            if client.session_changed:
                self._event("rehandshake", detail="MCU rebooted since the last activation")
                client.handshake()
                self._wait_first_state()
            self._retry(client.clear_faults, {ErrorCode.NOT_STANDSTILL}, deadline)
            self._retry(lambda: client.configure_limits(self._limits()), {ErrorCode.INVALID_STATE}, deadline)
            self._retry(client.arm, {ErrorCode.NOT_STANDSTILL}, deadline)
            self._wait_armed_state(deadline)
        except (BridgeError, BridgeDriverError) as err:
            self._event("activate_failed", detail=str(err))
            hint = ""
            if "LIMITS_OUT_OF_RANGE" in str(err):  # the robot spec asks for more than the firmware's hard limits
                lim = self._limits()
                hint = (f" (the limits sent from the robot spec: q {min(lim.q_min_rad):.4g}..{max(lim.q_max_rad):.4g} "
                        f"rad, qd up to {max(lim.qd_max_rad_s):.4g} rad/s; the firmware's hard limits are narrower: "
                        "widen them there or narrow configs/robots/<robot>.yaml)")
            raise BridgeDriverError(f"activate() failed: {err}{hint}") from err
        self._reset_motion_state()
        st = client.latest_state
        if st is not None:
            self._set_hold_from(st)
        self._last_confirm_s = self.clock.now()
        self.state = DriverState.ACTIVE
        self._event("activated", detail=f"session=0x{client.session_id:04X}")

    def _wait_armed_state(self, deadline: float) -> None:
        """Wait for a STATE that reports ARMED, so later mode checks never see the pre-ARM state."""
        assert self.client is not None
        while True:
            self.client.poll(0.005)
            st = self.client.latest_state
            if st is not None and st.mode is Mode.ARMED:
                return
            if self.clock.now() >= deadline:
                mode = st.mode.name if st is not None else "no STATE"
                raise BridgeDriverError(f"MCU acknowledged ARM but reports {mode}")

    def _retry(self, fn: Callable[[], None], retry_codes: set[ErrorCode], deadline: float) -> None:
        """Call ``fn`` until accepted; NACKs with ``retry_codes`` (e.g. not at standstill yet) retry."""
        assert self.client is not None
        while True:
            try:
                fn()
                return
            except CommandRejected as err:
                if err.code not in retry_codes or self.clock.now() >= deadline:
                    raise
                self.client.poll(0.02)

    def _limits(self) -> LimitsConfig:
        r, c = self.robot, self.config
        return LimitsConfig(
            tuple(r.q_min_rad) + (0.0,),
            tuple(r.q_max_rad) + (c.gripper_width_max_m,),
            tuple(r.qd_max_rad_s) + (c.gripper_speed_m_s,),
            (c.current_max_a,) * (self.n_arm + 1),
        )

    def close(self) -> None:
        """Normal stop (DISARM: decelerate, hold under power) if active, then release the port."""
        if self.state is DriverState.DISCONNECTED:
            return
        if self.state is DriverState.ACTIVE and self.client is not None:
            try:
                self.client.disarm()
                self._event("disarmed")
            except BridgeError as err:  # the MCU watchdog stops the arm when commands cease
                self._event("disarm_failed", detail=str(err))
        self._close_port()
        self.state = DriverState.DISCONNECTED
        self._event("closed")

    def _close_port(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except (OSError, BridgeError) as err:
                log.debug("closing the port: %s", err)
            self.client = None

    # ------------------------------------------------------------------ state
    def read_state(self) -> RobotState:
        """Newest measured state; runs the link checks (may stop the arm and raise BridgeFault)."""
        if self.state is DriverState.DISCONNECTED or self.client is None:
            raise BridgeDriverError("read_state() while disconnected; connect() first")
        self._service()
        st = self.client.latest_state
        age = self.client.state_age_s()
        if st is None or age > self.config.state_timeout_s:
            raise BridgeDriverError(f"no fresh STATE (age {age:.3f} s); the arm is not active")
        q = np.asarray(st.q_rad[: self.n_arm], float)
        qd = np.asarray(st.qd_rad_s[: self.n_arm], float)
        width = float(st.q_rad[self.n_arm])
        p, R = self.kin.fk_pose(q)
        grip = float(np.clip(1.0 - width / self.config.gripper_width_max_m, 0.0, 1.0))
        return RobotState(self.client.latest_state_rx_s, q, qd, grip, p, tcp_yaw(R))

    def _service(self) -> None:
        """Drain the link and run every host-side check; a failure while active stops and raises."""
        client = self.client
        assert client is not None
        now = self.clock.now()
        try:
            frames = client.poll(0.0)
            if self.state is not DriverState.ACTIVE:
                return
            if client.session_changed:
                raise SessionChanged(f"MCU session 0x{client.session_id or 0:04X} ended (reboot)")
            client.maybe_send_heartbeat()
        except LinkDown as err:
            self._fail("link_down", str(err), link_alive=False)
        except SessionChanged as err:
            self._fail("mcu_reboot", str(err))
        for f in frames:
            self._on_frame(f.message, now)
        st = client.latest_state
        age = client.state_age_s()
        if age > self.config.state_timeout_s:
            self._fail("stale_telemetry", f"newest STATE is {age * 1000:.0f} ms old "
                       f"(limit {self.config.state_timeout_s * 1000:.0f} ms)")
        if st is not None and st.mode is not Mode.ARMED:
            self._fail("mcu_not_armed", f"MCU mode {st.mode.name}, faults {_flags(st.fault_flags)}")
        unconfirmed = now - self._last_confirm_s
        if self._awaiting_confirm and unconfirmed > self.config.confirm_timeout_s:
            self._fail("commands_unconfirmed", f"no command confirmed by the MCU for {unconfirmed * 1000:.0f} ms")

    def _on_frame(self, msg: Any, now: float) -> None:
        if isinstance(msg, State):
            if self._last_sent_seq is not None and msg.last_cmd_seq in self._unconfirmed:
                # Everything sent up to this seq is settled (applied or lost): drop it.
                while self._unconfirmed and self._unconfirmed[0] != msg.last_cmd_seq:
                    self._unconfirmed.popleft()
                self._unconfirmed.popleft()
                self._last_confirm_s = now
                self._rejects_in_row = 0
                self._awaiting_confirm = bool(self._unconfirmed)
        elif isinstance(msg, Nack) and msg.nacked_type == MsgType.JOINT_COMMAND:
            self.counts[f"nack_{msg.error_code.name.lower()}"] += 1
            if msg.error_code in _FATAL_NACKS:
                self._fail("mcu_refuses_commands", f"NACK {msg.error_code.name}")
            self._rejects_in_row += 1
            if self._rejects_in_row >= self.config.max_rejects_in_row:
                self._fail("commands_rejected", f"{self._rejects_in_row} commands in a row NACKed "
                           f"(last: {msg.error_code.name})")
        elif isinstance(msg, Error):
            self._fail("mcu_fault", f"MCU ERROR {msg.error_code.name}, faults {_flags(msg.fault_flags)}")

    # ------------------------------------------------------------------ commands
    def send_command(self, command: np.ndarray) -> np.ndarray:
        """Convert, clamp and send one command (``action_layout``); returns what was sent (Da,)."""
        if self.state is not DriverState.ACTIVE:
            raise BridgeDriverError(f"command refused: driver is {self.state.value}, not active")
        cmd = np.asarray(command, dtype=np.float64)
        dim = self.robot.action_dim
        if cmd.shape != (dim,) or not np.all(np.isfinite(cmd)):
            raise BridgeDriverError(f"command {cmd!r} must be finite with shape ({dim},); nothing was sent")
        self._service()
        st = self.client.latest_state  # type: ignore[union-attr]
        q_meas = np.asarray(st.q_rad[: self.n_arm], float)
        sent_body = None
        if self.action_layout == "ee_delta":
            c = self.config
            step = ee_delta_to_joints(self._target, cmd[:4], q_meas, self._box_lo, self._box_hi,
                                      c.max_tcp_lead_m, c.yaw_range_rad, self.kin)
            if step.workspace_clipped:
                self._note_clamp("workspace_clip", f"TCP target clipped into the workspace at "
                                 f"{np.round(step.target.pos_m, 3).tolist()}")
            self.counts["tcp_lead_limit"] += int(step.lead_limited)
            self._target, q_t, sent_body = step.target, step.q_rad, step.sent
        else:
            q_t = cmd[: self.n_arm].copy()
        g = float(cmd[-1])
        if not 0.0 <= g <= 1.0:
            self._note_clamp("gripper_range", f"gripper {g:.3f} outside [0, 1]")
            g = min(max(g, 0.0), 1.0)
        q_c, changed = clamp_to_limits(q_t, self._q_lo, self._q_hi)
        if changed.any():
            joints = [self.robot.joint_names[i] for i in np.flatnonzero(changed)]
            self._note_clamp("joint_limit", f"targets clamped to limits -{self.config.joint_margin_rad} rad: "
                             f"{', '.join(joints)}")
        q_cmd = np.append(q_c, (1.0 - g) * self.config.gripper_width_max_m).astype(np.float32)
        if not np.all(np.isfinite(q_cmd)):  # IK cannot produce NaN from finite input, but never send one
            raise BridgeDriverError(f"joint targets {q_cmd} not finite; nothing was sent")
        self._write(q_cmd)
        self._gripper_cmd, self._q_hold = g, q_c
        if self.action_layout == "ee_delta":
            return np.append(sent_body, g).astype(np.float32)
        return np.append(q_c, g).astype(np.float32)

    def _write(self, q_cmd: np.ndarray) -> None:
        client = self.client
        assert client is not None
        values = [float(x) for x in q_cmd]
        try:
            seq = client.send_command(values, valid_for_s=self.config.command_valid_for_s)
        except LinkDown as err:
            self._fail("link_down", str(err), link_alive=False)
        except SessionChanged as err:
            self._fail("mcu_reboot", str(err))
        now = self.clock.now()
        self.counts["commands_sent"] += 1
        self._last_sent_seq = seq
        if not self._awaiting_confirm:
            self._last_confirm_s = max(self._last_confirm_s, now)
        self._unconfirmed.append(seq)
        self._awaiting_confirm = True
        self.last_joint_command = q_cmd
        if self._command_sink is not None:
            self._command_sink(seq, now, values)

    def hold_command(self) -> np.ndarray:
        """The command that keeps the current target: zero TCP delta, or the last joint targets."""
        if self.action_layout == "ee_delta":
            return np.array([0.0, 0.0, 0.0, 0.0, self._gripper_cmd], np.float32)
        return np.append(self._q_hold, self._gripper_cmd).astype(np.float32)

    def hold(self) -> np.ndarray:
        """Active: send the hold command. Otherwise nothing is sent (the MCU holds on its own)."""
        if self.state is not DriverState.ACTIVE:
            return self.hold_command()
        return self.send_command(self.hold_command())

    def estop(self) -> None:
        """ESTOP repeated until acknowledged (bounded), latch ``estopped``. Never raises on a dead link:
        the MCU watchdog stops the arm once commands cease."""
        if self.state is DriverState.DISCONNECTED or self.client is None:
            return
        acked = self._send_estop(reason=0)
        if self.state is not DriverState.DISCONNECTED:
            self.state = DriverState.ESTOPPED
        self._event("estop", detail="acknowledged" if acked else "NOT acknowledged (MCU watchdog will stop the arm)")

    def _send_estop(self, reason: int) -> bool:
        assert self.client is not None
        try:
            return self.client.estop(reason, timeout_s=self.config.estop_timeout_s)
        except LinkDown as err:
            self._event("estop_link_down", detail=str(err))
            self._close_port()
            self.state = DriverState.DISCONNECTED
            return False

    # ------------------------------------------------------------------ faults
    def _fail(self, kind: str, detail: str, link_alive: bool = True) -> None:
        """Safe stop, then raise. Called only while active."""
        self.counts[f"fault_{kind}"] += 1
        self._event("driver_fault", fault=kind, detail=detail)  # detection time = the decision to stop
        log.error("bridge arm fault %s: %s", kind, detail)
        acked = False
        if link_alive and self.client is not None:
            acked = self._send_estop(reason=1)
        else:
            self._close_port()
        self.state = DriverState.ESTOPPED if self.client is not None else DriverState.DISCONNECTED
        self._event("safe_stop", estop_acked=acked, state=self.state.value,
                    detail="ESTOP acknowledged" if acked else "ESTOP not acknowledged: the MCU watchdog stops the arm")
        raise BridgeFault(kind, detail)

    # ------------------------------------------------------------------ helpers
    def _reset_motion_state(self) -> None:
        self._target = TcpTarget(np.zeros(3), 0.0)
        self._gripper_cmd = 0.0
        self._q_hold = np.zeros(self.n_arm)
        self._unconfirmed: deque[int] = deque(maxlen=4096)
        self._awaiting_confirm = False
        self._last_sent_seq: int | None = None
        self._last_confirm_s = -math.inf
        self._rejects_in_row = 0

    def _set_hold_from(self, st: State) -> None:
        """Targets := measured (after ARM the MCU did the same): no jump toward an old plan."""
        q = np.asarray(st.q_rad[: self.n_arm], float)
        self._target = TcpTarget.at(q, self.kin)
        self._q_hold = np.clip(q, self._q_lo, self._q_hi)
        width = float(st.q_rad[self.n_arm])
        self._gripper_cmd = float(np.clip(1.0 - width / self.config.gripper_width_max_m, 0.0, 1.0))

    def _note_clamp(self, kind: str, detail: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] == 1 or self.counts[kind] % 100 == 0:
            self._event("clamp", clamp=kind, count=self.counts[kind], detail=detail)

    def _event(self, kind: str, **fields: Any) -> None:
        now = self.clock.now()
        self.events.append((now, kind, str(fields.get("detail", ""))))
        log.info("bridge arm %s %s", kind, fields)
        if self._event_sink is not None:
            self._event_sink(f"driver_{kind}" if not kind.startswith("driver_") else kind, now, **fields)

    def link_stats(self) -> dict[str, Any]:
        """Host-side link counters (frames, CRC/decode errors, gaps, NACKs, RTT percentiles)."""
        return self.client.stats.as_dict() if self.client is not None else {}


def _flags(bits: int) -> str:
    names = [f.name for f in FaultFlag if bits & f]
    return "|".join(names) if names else "none"
