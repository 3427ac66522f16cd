"""Byte links and clocks at the I/O boundary: pty pairs, raw fds, pyserial ports, monotonic time.

The emulator and the fault proxy move bytes through the small ``ByteLink`` protocol
(``read_available`` / ``write``); the host client talks to a pyserial ``Serial`` (or anything with
the same ``read``/``write``/``in_waiting``/``timeout`` surface, e.g. ``VirtualSerial``).
"""

from __future__ import annotations

import errno
import os
import threading
import time
import tty
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """Seconds on a monotonic time base; same shape as edge's Clock so either can be injected."""

    def now(self) -> float: ...

    def sleep_until(self, t_s: float) -> None: ...


class MonotonicClock:
    """The real clock: ``time.monotonic``."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t_s: float) -> None:
        dt_s = t_s - time.monotonic()
        if dt_s > 0:
            time.sleep(dt_s)


class LinkClosed(ConnectionError):
    """The other end of a byte link went away (pty closed, USB unplugged)."""


class ByteLink(Protocol):
    def read_available(self) -> bytes:
        """Return whatever bytes are ready now (possibly empty); never block."""
        ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class FdLink:
    """Non-blocking ``ByteLink`` over a file descriptor (typically a pty master)."""

    def __init__(self, fd: int, read_chunk: int = 4096) -> None:
        self.fd = fd
        self.read_chunk = read_chunk
        os.set_blocking(fd, False)
        self.closed = False

    def read_available(self) -> bytes:
        if self.closed:
            raise LinkClosed("fd link closed")
        chunks = []
        while True:
            try:
                data = os.read(self.fd, self.read_chunk)
            except BlockingIOError:
                break
            except OSError as exc:
                # A pty master reads EIO once every slave fd is closed: the peer hung up.
                if exc.errno == errno.EIO:
                    break
                raise LinkClosed(str(exc)) from exc
            if not data:
                break
            chunks.append(data)
            if len(data) < self.read_chunk:
                break
        return b"".join(chunks)

    def write(self, data: bytes) -> None:
        if self.closed:
            raise LinkClosed("fd link closed")
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                # Peer is not reading and the pty buffer is full; a UART would drop bytes too.
                return
            except OSError as exc:
                raise LinkClosed(str(exc)) from exc
            view = view[n:]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


class SerialLink:
    """``ByteLink`` over an open pyserial port (real device, pty slave or URL)."""

    def __init__(self, port: object) -> None:
        self.port = port

    def read_available(self) -> bytes:
        n = self.port.in_waiting  # type: ignore[attr-defined]
        return self.port.read(n) if n else b""  # type: ignore[attr-defined]

    def write(self, data: bytes) -> None:
        self.port.write(data)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.port.close()  # type: ignore[attr-defined]


class PtyEndpoint:
    """One pty pair: the owner keeps the master (``link``); a client opens ``path`` (the slave).

    The slave fd is kept open here in raw mode so the master does not see EIO between client
    reconnects, and so no line discipline (echo, CR/LF mapping) touches the binary stream.
    """

    def __init__(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)
        tty.setraw(master)
        self._slave_fd = slave
        self.path = os.ttyname(slave)
        self.link = FdLink(master)

    def close(self) -> None:
        self.link.close()
        if self._slave_fd >= 0:
            os.close(self._slave_fd)
            self._slave_fd = -1


class ServiceThread:
    """Call ``service(now_s)`` every ``period_s`` on a daemon thread until ``stop()``.

    Overruns are skipped, not caught up (absolute deadlines on the monotonic clock); an exception
    in ``service`` stops the thread and is kept in ``error`` so the owner can surface it.
    """

    def __init__(
        self, service: Callable[[float], None], period_s: float, name: str
    ) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self._service = service
        self.period_s = period_s
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.overruns = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> ServiceThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                self._service(now)
                next_t += self.period_s
                now = time.monotonic()
                if now > next_t:
                    skipped = int((now - next_t) / self.period_s) + 1
                    self.overruns += skipped
                    next_t += skipped * self.period_s
                self._stop.wait(max(0.0, next_t - now))
        except Exception as exc:  # noqa: BLE001 - stored and re-raised by the owner via error
            self.error = exc

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)


class MemoryLink:
    """One end of an in-process ``ByteLink`` pair (see ``memory_link_pair``)."""

    def __init__(self) -> None:
        self.peer: MemoryLink | None = None
        self._rx = bytearray()
        self.closed = False

    def read_available(self) -> bytes:
        if self.closed:
            raise LinkClosed("memory link closed")
        data = bytes(self._rx)
        self._rx.clear()
        return data

    def write(self, data: bytes) -> None:
        if self.closed:
            raise LinkClosed("memory link closed")
        if self.peer is not None and not self.peer.closed:
            self.peer._rx += data

    def close(self) -> None:
        self.closed = True


def memory_link_pair() -> tuple[MemoryLink, MemoryLink]:
    a, b = MemoryLink(), MemoryLink()
    a.peer, b.peer = b, a
    return a, b
