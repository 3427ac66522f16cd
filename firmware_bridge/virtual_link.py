"""Virtual time and an in-memory serial pair, for deterministic HIL runs faster than real time.

``VirtualClock`` advances only when someone sleeps on it, running registered tickers (emulator,
fault proxy, a simulator step) at their periods on the way. ``VirtualSerial`` has the pyserial
surface the host client uses (``read``/``write``/``in_waiting``/``timeout``/``close``); a read that
would block sleeps on the virtual clock instead, so the client code is the same as on a real port.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

import serial


class VirtualClock:
    """Discrete-event clock. ``now()`` in seconds; tickers fire at ``start + k * period_s``."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s
        self._events: list[tuple[float, int, float, Callable[[float], None]]] = []
        self._ids = itertools.count()

    def now(self) -> float:
        return self._now_s

    def add_ticker(
        self, period_s: float, fn: Callable[[float], None], first_s: float | None = None
    ) -> None:
        """Call ``fn(now_s)`` every ``period_s`` from ``first_s`` (default: now)."""
        if period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        t0 = self._now_s if first_s is None else first_s
        heapq.heappush(self._events, (t0, next(self._ids), period_s, fn))

    def sleep_until(
        self, t_s: float, stop_when: Callable[[], bool] | None = None
    ) -> None:
        """Advance to ``t_s``, firing due tickers in time order; return early if ``stop_when()``."""
        while self._events and self._events[0][0] <= t_s:
            t_event, ident, period_s, fn = heapq.heappop(self._events)
            self._now_s = max(self._now_s, t_event)
            heapq.heappush(self._events, (t_event + period_s, ident, period_s, fn))
            fn(self._now_s)
            if stop_when is not None and stop_when():
                return
        self._now_s = max(self._now_s, t_s)

    def advance(self, dt_s: float) -> None:
        self.sleep_until(self._now_s + dt_s)


class VirtualSerial:
    """One end of an in-memory serial pair (see ``virtual_serial_pair``)."""

    def __init__(
        self, clock: VirtualClock, timeout: float | None = 0.001, name: str = "virtual"
    ) -> None:
        self.clock = clock
        self.timeout = timeout
        self.name = name
        self.peer: VirtualSerial | None = None
        self._rx = bytearray()
        self.is_open = True
        self.peer_closed = False

    @property
    def in_waiting(self) -> int:
        self._check_open()
        return len(self._rx)

    def read(self, size: int = 1) -> bytes:
        self._check_open()
        if not self._rx and self.timeout:
            deadline = self.clock.now() + self.timeout
            self.clock.sleep_until(
                deadline, stop_when=lambda: bool(self._rx) or not self.is_open
            )
            self._check_open()
        data = bytes(self._rx[:size])
        del self._rx[:size]
        return data

    def read_available(self) -> bytes:
        self._check_open()
        data = bytes(self._rx)
        self._rx.clear()
        return data

    def write(self, data: bytes) -> int:
        self._check_open()
        if self.peer is not None and self.peer.is_open:
            self.peer._rx += data
        return len(data)

    def reset_input_buffer(self) -> None:
        self._rx.clear()

    def flush(self) -> None:
        """Nothing is buffered on the way out."""

    def close(self) -> None:
        self.is_open = False
        if self.peer is not None:
            self.peer.peer_closed = True

    def _check_open(self) -> None:
        if not self.is_open:
            raise serial.PortNotOpenError()
        if self.peer_closed:
            # What pyserial reports when a USB CDC device disappears under a read.
            raise serial.SerialException("device disconnected (peer closed)")


def virtual_serial_pair(
    clock: VirtualClock, timeout: float | None = 0.001
) -> tuple[VirtualSerial, VirtualSerial]:
    """Two connected ends: bytes written to one are readable from the other."""
    a = VirtualSerial(clock, timeout, "virtual-a")
    b = VirtualSerial(clock, timeout, "virtual-b")
    a.peer, b.peer = b, a
    return a, b
