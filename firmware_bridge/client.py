"""Host-side client for an MCU motor controller speaking the edge wire protocol over serial.

Works with anything pyserial opens (``/dev/ttyACM0``, a pty path, ``loop://``, ``socket://``)
and with ``VirtualSerial``. Single-threaded: the owner calls ``poll`` regularly (the control loop
does it once per tick). The client never arms by itself and never re-arms after an MCU reboot:
a session change makes every command raise ``SessionChanged`` until ``handshake`` and ``arm``.
"""

from __future__ import annotations

import random
import select
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

import serial

from firmware_bridge.errors import (
    BridgeError,
    CommandRejected,
    HandshakeError,
    LinkDown,
    LinkTimeout,
    NotReady,
    SessionChanged,
)
from firmware_bridge.frame_codec import (
    FrameError,
    FrameErrorCode,
    StreamDecoder,
    encode_frame,
)
from firmware_bridge.link_stats import LinkStats, SeqTracker, SeqVerdict
from firmware_bridge.messages import (
    Ack,
    Arm,
    Capabilities,
    ClearFault,
    Disarm,
    Error,
    Estop,
    Frame,
    Heartbeat,
    Hello,
    JointCommand,
    LimitsConfig,
    Message,
    Nack,
    State,
)
from firmware_bridge.transport import Clock, MonotonicClock

__all__ = [
    "BridgeError",
    "ClientConfig",
    "CommandRejected",
    "FirmwareClient",
    "HandshakeError",
    "LinkDown",
    "LinkTimeout",
    "NotReady",
    "SessionChanged",
]
from firmware_bridge.wire_constants import (
    PROTOCOL_VERSION,
    ErrorCode,
    Flag,
    Mode,
    MsgType,
)


# Most bytes one poll() drains beyond its first read (bounds the time a flood can hold the caller).
POLL_DRAIN_MAX_BYTES = 256 * 1024


@dataclass
class ClientConfig:
    baud: int = 1_000_000  # ignored by ptys and USB CDC-ACM, used by real UARTs
    read_timeout_s: float = 0.001  # longest single blocking read on ports without an fd
    request_timeout_s: float = 0.1  # per try, for HELLO/ARM/CLEAR_FAULT/LIMITS/DISARM
    request_retries: int = 3
    command_valid_for_s: float = 0.02  # default deadline of a joint command (MCU clock)
    heartbeat_period_s: float = 0.05
    estop_repeat_s: float = 0.01  # e-stop is re-sent this often until acknowledged
    supported_versions: tuple[int, ...] = (PROTOCOL_VERSION,)
    rtt_window: int = 4096  # RTT samples kept for percentiles
    max_pending: int = 256  # unanswered commands/heartbeats remembered for RTT

    def __post_init__(self) -> None:
        for name in (
            "read_timeout_s",
            "request_timeout_s",
            "command_valid_for_s",
            "heartbeat_period_s",
            "estop_repeat_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"ClientConfig.{name} must be > 0, got {getattr(self, name)}"
                )
        if self.request_retries < 1 or self.max_pending < 1 or self.rtt_window < 1:
            raise ValueError(
                "ClientConfig: request_retries, max_pending, rtt_window must be >= 1"
            )
        if not self.supported_versions:
            raise ValueError("ClientConfig.supported_versions must not be empty")


class FirmwareClient:
    """Talk to one MCU over ``port`` (an open pyserial-like object)."""

    def __init__(
        self,
        port: serial.SerialBase,
        config: ClientConfig | None = None,
        clock: Clock | None = None,
        seed: int | None = None,
    ) -> None:
        self.port = port
        self.config = config or ClientConfig()
        self.clock = clock or MonotonicClock()
        self.port.timeout = self.config.read_timeout_s
        self._fd = _fileno(port)
        self.stats = LinkStats(rtt_window=self.config.rtt_window)
        self._decoder = StreamDecoder(frozenset(self.config.supported_versions))
        self._rng = random.Random(seed)
        self._tx_seq = self._rng.randrange(1 << 16)
        self._mcu_seq = SeqTracker()
        self.capabilities: Capabilities | None = None
        self.session_id: int | None = None  # session fixed by the last handshake
        self._peer_session: int | None = None  # session of the newest MCU frame seen
        # Sessions left behind: late frames from them are dropped.
        self._old_sessions: set[int] = set()
        self.session_changed = False
        self.latest_state: State | None = None
        self.latest_state_rx_s = float("-inf")
        self.last_error: Error | None = None
        self._mcu_clock: tuple[int, float] | None = None  # (mcu t_us, host rx time)
        self._pending_cmd: OrderedDict[int, float] = OrderedDict()
        self._pending_hb: OrderedDict[int, float] = OrderedDict()
        self._last_hb_s = float("-inf")
        self._version_seen: int | None = None

    @classmethod
    def open(
        cls, url: str, config: ClientConfig | None = None, clock: Clock | None = None
    ) -> FirmwareClient:
        """Open a device path or pyserial URL (``loop://``, ``socket://host:port``, ...)."""
        cfg = config or ClientConfig()
        # exclusive: no second process may open the device and interleave frames.
        kwargs = {} if "://" in url else {"exclusive": True}
        port = serial.serial_for_url(
            url, baudrate=cfg.baud, timeout=cfg.read_timeout_s, **kwargs
        )
        return cls(port, cfg, clock)

    def close(self) -> None:
        self.port.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sending
    def _write(
        self, message: Message, flags: int = 0, session_id: int | None = None
    ) -> int:
        seq = self._tx_seq
        self._tx_seq = (seq + 1) & 0xFFFF
        session = self.session_id if session_id is None else session_id
        t_us = int(self.clock.now() * 1e6) & 0xFFFFFFFF
        wire = encode_frame(
            message, seq=seq, session_id=session or 0, t_us=t_us, flags=flags
        )
        try:
            self.port.write(wire)
        except (serial.SerialException, OSError) as exc:
            raise LinkDown(f"write failed: {exc}") from exc
        self.stats.frames_tx += 1
        self.stats.bytes_tx += len(wire)
        return seq

    def _require_ready(self) -> None:
        if self.session_changed:
            raise SessionChanged(
                f"MCU session changed 0x{self.session_id or 0:04X} -> "
                f"0x{self._peer_session or 0:04X} (reboot); handshake and arm again"
            )
        if self.session_id is None or self.capabilities is None:
            raise NotReady("no handshake yet; call handshake()")

    def mcu_time_estimate_us(self) -> int:
        """The MCU clock now, as far as the host can tell (lags by the one-way latency)."""
        if self._mcu_clock is None:
            raise NotReady("no frame from the MCU yet")
        t_us, rx_s = self._mcu_clock
        return int(t_us + (self.clock.now() - rx_s) * 1e6) & 0xFFFFFFFF

    def send_command(
        self,
        q_rad: Sequence[float],
        qd_rad_s: Sequence[float] | None = None,
        valid_for_s: float | None = None,
    ) -> int:
        """Send joint targets ``q_rad (n,)`` and feed-forward ``qd_rad_s (n,)``; returns the seq.

        Fire-and-forget: the MCU answers with STATE (``last_cmd_seq``) or NACK, seen by ``poll``.
        """
        self._require_ready()
        assert self.capabilities is not None
        n = self.capabilities.n_joints
        qd = tuple(qd_rad_s) if qd_rad_s is not None else (0.0,) * n
        if len(q_rad) != n or len(qd) != n:
            raise ValueError(
                f"expected {n} joints, got q_rad={len(q_rad)}, qd_rad_s={len(qd)}"
            )
        valid_s = (
            self.config.command_valid_for_s if valid_for_s is None else valid_for_s
        )
        deadline_us = (self.mcu_time_estimate_us() + int(valid_s * 1e6)) & 0xFFFFFFFF
        seq = self._write(JointCommand(deadline_us, tuple(q_rad), qd))
        _remember(self._pending_cmd, seq, self.clock.now(), self.config.max_pending)
        return seq

    def send_heartbeat(self) -> int:
        self._require_ready()
        seq = self._write(Heartbeat())
        self._last_hb_s = self.clock.now()
        _remember(self._pending_hb, seq, self._last_hb_s, self.config.max_pending)
        return seq

    def maybe_send_heartbeat(self) -> bool:
        """Send a heartbeat if ``heartbeat_period_s`` has passed since the last one."""
        if self.clock.now() - self._last_hb_s < self.config.heartbeat_period_s:
            return False
        self.send_heartbeat()
        return True

    # ------------------------------------------------------------------ receiving
    def poll(self, timeout_s: float = 0.0) -> list[Frame]:
        """Read and decode what has arrived; wait up to ``timeout_s`` for at least one frame."""
        deadline = self.clock.now() + timeout_s
        frames: list[Frame] = []
        while True:
            try:
                data = self._read(deadline - self.clock.now())
                # Drain everything already buffered, not one OS read's worth: a pty or USB buffer
                # holds ~4 KiB, so one read per control tick (20 Hz) would drain ~80 KB/s, less
                # than a 1 Mbaud link delivers, and a garbage burst would leave STATE frames
                # queued behind it until the telemetry went stale (seen in the HIL campaign).
                extra = data
                budget = POLL_DRAIN_MAX_BYTES
                while extra and budget > 0:
                    extra = self._read(0.0)
                    data += extra
                    budget -= len(extra)
            except (serial.SerialException, OSError) as exc:
                raise LinkDown(f"read failed: {exc}") from exc
            if data:
                frames += self._ingest(data)
            if frames or self.clock.now() >= deadline:
                return frames

    def _read(self, wait_s: float) -> bytes:
        n = self.port.in_waiting
        if n or wait_s <= 0:
            return self.port.read(n) if n else b""
        if self._fd is not None:
            # Real fd: sleep in select() for exactly the time left, not a whole port timeout.
            ready, _, _ = select.select([self._fd], [], [], wait_s)
            if not ready:
                return b""
            n = self.port.in_waiting
            # n == 0 while readable means hang-up; read(1) then raises SerialException.
            return self.port.read(n or 1)
        wait_s = min(wait_s, self.config.read_timeout_s)
        if self.port.timeout != wait_s:
            self.port.timeout = wait_s  # URL and virtual ports: no termios behind this
        data = self.port.read(1)
        n = self.port.in_waiting if data else 0
        return data + self.port.read(n) if n else data

    def _ingest(self, data: bytes) -> list[Frame]:
        now = self.clock.now()
        st = self.stats
        st.bytes_rx += len(data)
        accepted = []
        for item in self._decoder.feed(data):
            if isinstance(item, FrameError):
                if item.code is FrameErrorCode.CRC:
                    st.crc_errors += 1
                elif item.code is FrameErrorCode.VERSION:
                    st.version_errors += 1
                    self._version_seen = item.version
                else:
                    st.decode_errors += 1
                continue
            h = item.header
            if not h.flags & Flag.FROM_MCU:
                st.wrong_direction += 1
                continue
            if h.session_id != self._peer_session:
                if self._peer_session is not None and not self._is_new_session(
                    h.session_id
                ):
                    st.out_of_order += 1  # a late frame from a session we already left
                    continue
                self._on_new_session(h.session_id)
            verdict, missed = self._mcu_seq.check(h.seq)
            if verdict is SeqVerdict.DUPLICATE:
                st.duplicates += 1
                continue
            if verdict is SeqVerdict.STALE:
                st.out_of_order += 1
                continue
            st.seq_gaps += missed
            st.frames_rx += 1
            self._mcu_clock = (h.t_us, now)
            self._on_message(item, now)
            accepted.append(item)
        return accepted

    def _is_new_session(self, session_id: int) -> bool:
        return session_id not in self._old_sessions

    def _on_new_session(self, session_id: int) -> None:
        if self._peer_session is not None:
            self._old_sessions.add(self._peer_session)
        self._peer_session = session_id
        self._mcu_seq.reset()
        if self.session_id is not None and session_id != self.session_id:
            self.stats.session_changes += 1
            self.session_changed = True
            self._pending_cmd.clear()
            self._pending_hb.clear()

    def _on_message(self, frame: Frame, now: float) -> None:
        msg = frame.message
        if isinstance(msg, State):
            self.latest_state = msg
            self.latest_state_rx_s = now
            sent = _pop_through(self._pending_cmd, msg.last_cmd_seq)
            if sent is not None:
                self.stats.add_rtt(now - sent)
        elif isinstance(msg, Heartbeat):
            sent = _pop_through(self._pending_hb, msg.echo_seq)
            if sent is not None:
                self.stats.add_rtt(now - sent)
        elif isinstance(msg, Nack):
            self.stats.nacks += 1
        elif isinstance(msg, Error):
            self.last_error = msg

    def state_age_s(self) -> float:
        """Seconds since the last STATE arrived (inf if none): the host telemetry-age check."""
        return self.clock.now() - self.latest_state_rx_s

    @property
    def mode(self) -> Mode | None:
        return self.latest_state.mode if self.latest_state is not None else None

    # ------------------------------------------------------------------ requests
    def handshake(self) -> Capabilities:
        """HELLO -> CAPABILITIES. Raises ``HandshakeError`` on version mismatch."""
        cfg = self.config
        nonce = self._rng.getrandbits(32)
        hello = Hello(min(cfg.supported_versions), max(cfg.supported_versions), nonce)
        self._version_seen = None
        try:
            # A lone delimiter ends whatever half frame a previous host left in the MCU's buffer.
            self.port.write(b"\x00")
        except (serial.SerialException, OSError) as exc:
            raise LinkDown(f"write failed: {exc}") from exc
        for _ in range(cfg.request_retries):
            seq = self._write(hello, session_id=0)
            deadline = self.clock.now() + cfg.request_timeout_s
            while self.clock.now() < deadline:
                for f in self.poll(deadline - self.clock.now()):
                    m = f.message
                    if isinstance(m, Capabilities) and m.nonce == nonce:
                        return self._accept_capabilities(f.header.session_id, m)
                    offered = f"v{hello.proto_min}..v{hello.proto_max}"
                    if isinstance(m, Nack) and (m.nacked_type, m.nacked_seq) == (
                        MsgType.HELLO,
                        seq,
                    ):
                        reason = m.error_code.name
                        raise HandshakeError(f"MCU refused HELLO {offered}: {reason}")
                    if (
                        isinstance(m, Error)
                        and m.error_code is ErrorCode.VERSION_UNSUPPORTED
                    ):
                        mcu_v = m.detail
                        raise HandshakeError(
                            f"MCU speaks v{mcu_v}; host offers {offered}"
                        )
                if self._version_seen is not None:
                    raise HandshakeError(
                        f"MCU frames carry protocol version {self._version_seen}; "
                        f"host supports {cfg.supported_versions}"
                    )
        raise LinkTimeout(
            f"no CAPABILITIES after {cfg.request_retries} HELLOs"
        )

    def _accept_capabilities(self, session_id: int, caps: Capabilities) -> Capabilities:
        if caps.proto_version not in self.config.supported_versions:
            raise HandshakeError(f"MCU chose version {caps.proto_version}, not offered")
        self.capabilities = caps
        self.session_id = session_id
        self.session_changed = False
        return caps

    def _request(self, message: Message) -> None:
        self._require_ready()
        cfg = self.config
        mtype = message.MSG_TYPE
        for _ in range(cfg.request_retries):
            seq = self._write(message, flags=Flag.ACK_REQUEST)
            deadline = self.clock.now() + cfg.request_timeout_s
            while self.clock.now() < deadline:
                for f in self.poll(deadline - self.clock.now()):
                    m = f.message
                    key = (mtype, seq)
                    if isinstance(m, Ack) and (m.acked_type, m.acked_seq) == key:
                        return
                    if isinstance(m, Nack) and (m.nacked_type, m.nacked_seq) == key:
                        raise CommandRejected(mtype, m.error_code)
                self._require_ready()
        raise LinkTimeout(f"no ACK for {mtype.name} after {cfg.request_retries} tries")

    def arm(self) -> None:
        """DISARMED -> ARMED. The MCU resets its setpoint to the measured position."""
        self._request(Arm())

    def disarm(self) -> None:
        self._request(Disarm())

    def clear_faults(self, fault_mask: int = 0xFFFFFFFF) -> None:
        """Clear latched faults (including ESTOP if in the mask); does not arm."""
        self._request(ClearFault(fault_mask))

    def configure_limits(self, limits: LimitsConfig) -> None:
        self._request(limits)

    def estop(self, reason: int = 0, timeout_s: float = 0.1) -> bool:
        """Send ESTOP repeatedly until acknowledged or ``timeout_s``; True if acknowledged.

        Works without a handshake. False means: assume the MCU did not hear it (its watchdog
        still stops the arm within W; the hardware e-stop is independent of this link).
        """
        sent: set[int] = set()
        deadline = self.clock.now() + timeout_s
        while self.clock.now() < deadline:
            sent.add(self._write(Estop(reason)))
            repeat_at = min(deadline, self.clock.now() + self.config.estop_repeat_s)
            while self.clock.now() < repeat_at:
                for f in self.poll(repeat_at - self.clock.now()):
                    m = f.message
                    if (
                        isinstance(m, Ack)
                        and m.acked_type == MsgType.ESTOP
                        and m.acked_seq in sent
                    ):
                        return True
        return False


def _fileno(port: object) -> int | None:
    """The OS file descriptor behind ``port`` if select() can wait on it, else None."""
    try:
        fd = port.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def _remember(pending: OrderedDict[int, float], seq: int, t_s: float, cap: int) -> None:
    pending[seq] = t_s
    while len(pending) > cap:
        pending.popitem(last=False)


def _pop_through(pending: OrderedDict[int, float], seq: int) -> float | None:
    """Pop entries up to and including ``seq``; return its send time, or None if unknown."""
    if seq not in pending:
        return None
    while pending:
        key, t_s = pending.popitem(last=False)
        if key == seq:
            return t_s
    return None
