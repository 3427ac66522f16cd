"""Fault-injection proxy between host and MCU: drop, duplicate, reorder, delay/jitter, bit flips,
truncation, garbage bursts, one-way loss, link cut, hang-up and MCU reboot.

The proxy splits each direction's byte stream at 0x00 delimiters (it never decodes frames, so it
works on any payload) and applies the ``FaultRule``s of a seeded ``FaultSchedule``. Rules are
active in a time window (seconds since the proxy started) and/or a frame-index window (per
direction), with a probability. ``FaultProxyCore`` is sans-I/O; ``FaultProxy`` moves bytes
between two ``ByteLink``s. Run ``python -m firmware_bridge.fault_proxy --upstream PORT`` to put it
in front of a real board or an emulator pty.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from firmware_bridge.transport import ByteLink


class Direction(enum.Enum):
    H2M = "host_to_mcu"
    M2H = "mcu_to_host"


class FaultKind(enum.Enum):
    DROP = "drop"  # lose the frame (one-way loss: direction + probability 1)
    CUT = "cut"  # lose everything, both ways unless a direction is given (link cut)
    DUPLICATE = "duplicate"
    REORDER = "reorder"  # hold the frame back behind the next ``reorder_depth`` frames
    # Fixed ``delay_s`` + uniform jitter in [0, ``jitter_s``]; order kept
    DELAY = "delay"
    # Flip ``n_bits`` random bits (may create or destroy a delimiter)
    BITFLIP = "bitflip"
    TRUNCATE = "truncate"  # keep a random prefix; ``keep_delimiter`` False merges with the next
    GARBAGE = "garbage"  # insert ``garbage_bytes`` random bytes before the frame
    REBOOT = "reboot"  # one-shot: call the MCU-reboot hook when the window opens
    # One-shot: call the hang-up hook (close the host's port: USB unplug)
    HANGUP = "hangup"


ONE_SHOT = frozenset({FaultKind.REBOOT, FaultKind.HANGUP})


@dataclass(frozen=True)
class FaultRule:
    """One scripted fault. Windows are half-open: ``[start, end)``; ``None`` means unbounded."""

    kind: FaultKind
    direction: Direction | None = None  # None: both directions
    start_s: float | None = None
    end_s: float | None = None
    start_frame: int | None = None
    end_frame: int | None = None
    probability: float = 1.0
    delay_s: float = 0.0
    jitter_s: float = 0.0
    n_bits: int = 1
    keep_delimiter: bool = True
    garbage_bytes: int = 64
    reorder_depth: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"FaultRule.probability={self.probability} outside [0, 1]")
        if self.delay_s < 0 or self.jitter_s < 0:
            raise ValueError("FaultRule.delay_s and jitter_s must be >= 0")
        if self.n_bits < 1 or self.garbage_bytes < 1 or self.reorder_depth < 1:
            raise ValueError(
                "FaultRule.n_bits, garbage_bytes and reorder_depth must be >= 1"
            )
        if self.kind in ONE_SHOT and self.start_s is None and self.start_frame is None:
            raise ValueError(
                f"FaultRule {self.kind.value}: one-shot faults need start_s or start_frame"
            )

    def in_window(self, t_s: float, frame_index: int | None) -> bool:
        if self.start_s is not None and t_s < self.start_s:
            return False
        if self.end_s is not None and t_s >= self.end_s:
            return False
        if frame_index is None:
            return self.start_frame is None and self.end_frame is None
        if self.start_frame is not None and frame_index < self.start_frame:
            return False
        return self.end_frame is None or frame_index < self.end_frame

    @classmethod
    def from_dict(cls, d: dict) -> FaultRule:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(
                f"FaultRule: unknown keys {sorted(unknown)}; known: {sorted(known)}"
            )
        kw = dict(d)
        kw["kind"] = FaultKind(kw["kind"])
        if kw.get("direction") is not None:
            kw["direction"] = Direction(kw["direction"])
        return cls(**kw)


@dataclass(frozen=True)
class FaultSchedule:
    """A seeded list of rules; the same seed and traffic give the same faults."""

    rules: tuple[FaultRule, ...] = ()
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict) -> FaultSchedule:
        return cls(
            tuple(FaultRule.from_dict(r) for r in d.get("rules", ())),
            int(d.get("seed", 0)),
        )

    @classmethod
    def from_json(cls, path: str | Path) -> FaultSchedule:
        return cls.from_dict(json.loads(Path(path).read_text()))


@dataclass
class _Lane:
    """Per-direction state: partial frame, frame counter, release queue, held-back frames."""

    partial: bytearray = field(default_factory=bytearray)
    frame_index: int = 0
    last_release_s: float = 0.0
    queue: list[tuple[float, int, bytes]] = field(default_factory=list)
    # Held-back frames: [bytes, frames_to_wait, release_by_s].
    held: list[list] = field(default_factory=list)


class FaultProxyCore:
    """Apply a ``FaultSchedule`` to both directions of a byte stream. Sans-I/O."""

    # A run without delimiter longer than this is passed through unchanged
    MAX_PARTIAL = 4096
    # A held-back frame is released after this even without more traffic
    REORDER_HOLD_S = 0.05

    def __init__(
        self,
        schedule: FaultSchedule,
        start_s: float,
        on_reboot: Callable[[float], None] | None = None,
        on_hangup: Callable[[float], None] | None = None,
    ) -> None:
        self.schedule = schedule
        self.start_s = start_s
        self.on_reboot = on_reboot
        self.on_hangup = on_hangup
        self.rng = random.Random(schedule.seed)
        self.lanes = {d: _Lane() for d in Direction}
        self.applied: Counter[tuple[str, str]] = Counter()  # (direction, kind) -> count
        self._fired: set[int] = set()
        self._order = itertools.count()

    def poll_events(self, now_s: float) -> None:
        """Fire time-triggered one-shot faults (reboot, hang-up) that are due."""
        t = now_s - self.start_s
        for i, rule in enumerate(self.schedule.rules):
            due = (
                rule.kind in ONE_SHOT
                and i not in self._fired
                and rule.start_frame is None
            )
            if due and rule.in_window(t, None):
                self._fire(i, rule, now_s)

    def _fire(self, i: int, rule: FaultRule, now_s: float) -> None:
        self._fired.add(i)
        self.applied[("-", rule.kind.value)] += 1
        hook = self.on_reboot if rule.kind is FaultKind.REBOOT else self.on_hangup
        if hook is not None:
            hook(now_s)

    def push(self, direction: Direction, data: bytes, now_s: float) -> None:
        lane = self.lanes[direction]
        parts = data.split(b"\x00")
        for k, part in enumerate(parts):
            lane.partial += part
            if k == len(parts) - 1:
                if len(lane.partial) > self.MAX_PARTIAL:
                    self._enqueue(direction, bytes(lane.partial), now_s, 0.0)
                    lane.partial.clear()
                break
            frame = bytes(lane.partial) + b"\x00"
            lane.partial.clear()
            if len(frame) == 1:
                # Idle fill passes untouched.
                self._enqueue(direction, frame, now_s, 0.0)
            else:
                self._on_frame(direction, frame, now_s)

    def _active(
        self, direction: Direction, now_s: float, index: int
    ) -> list[FaultRule]:
        t = now_s - self.start_s
        active = []
        for i, rule in enumerate(self.schedule.rules):
            if rule.direction not in (None, direction) or not rule.in_window(t, index):
                continue
            if rule.kind in ONE_SHOT:
                if rule.start_frame is not None and i not in self._fired:
                    self._fire(i, rule, now_s)
                continue
            if self.rng.random() < rule.probability:
                active.append(rule)
        return active

    def _on_frame(self, direction: Direction, frame: bytes, now_s: float) -> None:
        lane = self.lanes[direction]
        index = lane.frame_index
        lane.frame_index += 1
        rules = self._active(direction, now_s, index)
        kinds = {r.kind for r in rules}
        count = self.applied
        if kinds & {FaultKind.DROP, FaultKind.CUT}:
            count[(direction.value, "drop")] += 1
            return
        delay_s = 0.0
        copies = 1
        reorder = None
        for rule in rules:
            k = rule.kind
            count[(direction.value, k.value)] += 1
            if k is FaultKind.BITFLIP:
                frame = self._flip(frame, rule.n_bits)
            elif k is FaultKind.TRUNCATE:
                keep = self.rng.randrange(0, len(frame) - 1)
                frame = frame[:keep] + (b"\x00" if rule.keep_delimiter else b"")
            elif k is FaultKind.GARBAGE:
                frame = self.rng.randbytes(rule.garbage_bytes) + frame
            elif k is FaultKind.DELAY:
                delay_s += rule.delay_s + self.rng.uniform(0.0, rule.jitter_s)
            elif k is FaultKind.DUPLICATE:
                copies += 1
            elif k is FaultKind.REORDER:
                reorder = rule
        if reorder is not None:
            lane.held.append(
                [frame, reorder.reorder_depth, now_s + self.REORDER_HOLD_S]
            )
            return
        for _ in range(copies):
            self._enqueue(direction, frame, now_s, delay_s)

    def _flip(self, frame: bytes, n_bits: int) -> bytes:
        buf = bytearray(frame)
        for _ in range(n_bits):
            pos = self.rng.randrange(len(buf) * 8)
            buf[pos // 8] ^= 1 << (pos % 8)
        return bytes(buf)

    def _enqueue(
        self, direction: Direction, data: bytes, now_s: float, delay_s: float
    ) -> None:
        lane = self.lanes[direction]
        # A serial line keeps order: jitter stretches gaps, it never lets a frame overtake.
        release_s = max(now_s + delay_s, lane.last_release_s)
        lane.last_release_s = release_s
        heapq.heappush(lane.queue, (release_s, next(self._order), data))
        still_held = []
        for item in lane.held:
            item[1] -= 1
            if item[1] <= 0:
                lane.last_release_s = max(lane.last_release_s, release_s)
                heapq.heappush(
                    lane.queue, (lane.last_release_s, next(self._order), item[0])
                )
            else:
                still_held.append(item)
        lane.held = still_held

    def pop_ready(self, direction: Direction, now_s: float) -> bytes:
        """Bytes due for delivery in ``direction`` at ``now_s``."""
        lane = self.lanes[direction]
        for item in [h for h in lane.held if h[2] <= now_s]:
            lane.held.remove(item)
            heapq.heappush(lane.queue, (now_s, next(self._order), item[0]))
        out = bytearray()
        while lane.queue and lane.queue[0][0] <= now_s:
            out += heapq.heappop(lane.queue)[2]
        return bytes(out)


class FaultProxy:
    """Move bytes host_link <-> mcu_link through a ``FaultProxyCore`` each ``service`` call."""

    def __init__(
        self, core: FaultProxyCore, host_link: ByteLink, mcu_link: ByteLink
    ) -> None:
        self.core = core
        self.host_link: ByteLink | None = host_link
        self.mcu_link = mcu_link

    def hang_up(self) -> None:
        """Close the host side for good, as when a USB cable is pulled."""
        if self.host_link is not None:
            self.host_link.close()
            self.host_link = None

    def service(self, now_s: float) -> None:
        core = self.core
        core.poll_events(now_s)
        up = self.host_link.read_available() if self.host_link is not None else b""
        if up:
            core.push(Direction.H2M, up, now_s)
        down = self.mcu_link.read_available()
        if down:
            core.push(Direction.M2H, down, now_s)
        out_up = core.pop_ready(Direction.H2M, now_s)
        if out_up:
            self.mcu_link.write(out_up)
        out_down = core.pop_ready(Direction.M2H, now_s)
        if out_down and self.host_link is not None:
            self.host_link.write(out_down)


def main(argv: list[str] | None = None) -> int:
    """CLI: put the proxy in front of a real board or emulator; the host opens the printed pty."""
    import argparse
    import time

    import serial

    from firmware_bridge.transport import PtyEndpoint, SerialLink, ServiceThread

    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.fault_proxy")
    parser.add_argument(
        "--upstream", required=True, help="MCU side: device path or pyserial URL"
    )
    parser.add_argument("--baud", type=int, default=1_000_000)
    parser.add_argument(
        "--schedule", help="JSON file: {seed, rules: [FaultRule fields...]}"
    )
    parser.add_argument(
        "--period-ms", type=float, default=1.0, help="proxy service period"
    )
    args = parser.parse_args(argv)
    try:
        schedule = (
            FaultSchedule.from_json(args.schedule) if args.schedule else FaultSchedule()
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        parser.exit(2, f"error: --schedule {args.schedule}: {err} (want a JSON object: seed, rules)\n")
    if not args.period_ms > 0:
        parser.exit(2, f"error: --period-ms {args.period_ms:g}: must be > 0\n")
    try:
        # exclusive, as the client opens it: no second process interleaves frames on the device
        kwargs = {} if "://" in args.upstream else {"exclusive": True}
        upstream = serial.serial_for_url(args.upstream, baudrate=args.baud, timeout=0, **kwargs)
    except (serial.SerialException, ValueError) as err:
        parser.exit(2, f"error: --upstream {args.upstream}: cannot open it ({err})\n")
    endpoint = PtyEndpoint()
    core = FaultProxyCore(schedule, time.monotonic())
    proxy = FaultProxy(core, endpoint.link, SerialLink(upstream))
    core.on_hangup = lambda _now: proxy.hang_up()
    core.on_reboot = lambda _now: print(
        "reboot fault: no reboot hook for an external MCU", flush=True
    )
    print(endpoint.path, flush=True)
    thread = ServiceThread(
        proxy.service, args.period_ms / 1000.0, "fault-proxy"
    ).start()
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # as Ctrl-C: stop and print the counts
    try:
        while thread.error is None and not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        thread.stop()
        print(
            json.dumps({f"{d}:{k}": n for (d, k), n in sorted(core.applied.items())}),
            flush=True,
        )
    if thread.error is not None:
        raise thread.error
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
