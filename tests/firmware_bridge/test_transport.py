import os
import threading
import time

import pytest

from firmware_bridge.transport import (
    FdLink,
    LinkClosed,
    MonotonicClock,
    PtyEndpoint,
    ServiceThread,
    memory_link_pair,
)


def test_pty_endpoint_moves_raw_bytes_both_ways():
    ep = PtyEndpoint()
    try:
        fd = os.open(ep.path, os.O_RDWR | os.O_NOCTTY)
        # Every byte value, and no line discipline in the way.
        payload = bytes(range(256)) * 4
        os.write(fd, payload)
        got = b""
        deadline = time.monotonic() + 2.0
        while len(got) < len(payload) and time.monotonic() < deadline:
            got += ep.link.read_available()
        assert got == payload
        ep.link.write(b"\x00\x0a\x0d\x03")
        time.sleep(0.01)
        assert os.read(fd, 16) == b"\x00\x0a\x0d\x03"
        os.close(fd)
    finally:
        ep.close()
    with pytest.raises(LinkClosed):
        ep.link.read_available()
    ep.close()  # idempotent


def test_fd_link_on_closed_pipe_raises_link_closed():
    r, w = os.pipe()
    link = FdLink(w)
    os.close(r)
    with pytest.raises(LinkClosed):
        link.write(b"x")
    link.close()


def test_memory_link_pair():
    a, b = memory_link_pair()
    a.write(b"abc")
    assert b.read_available() == b"abc" and b.read_available() == b""
    b.close()
    a.write(b"lost")  # to a closed peer: dropped like on a cut line
    with pytest.raises(LinkClosed):
        b.read_available()


def test_service_thread_surfaces_errors_and_stops():
    calls = []
    done = threading.Event()

    def service(now_s):
        calls.append(now_s)
        if len(calls) == 3:
            done.set()
            raise RuntimeError("boom")

    t = ServiceThread(service, 0.001, "t").start()
    assert done.wait(2.0)
    t.stop()
    assert isinstance(t.error, RuntimeError) and len(calls) == 3
    with pytest.raises(ValueError):
        ServiceThread(service, 0.0, "bad")


def test_monotonic_clock_sleep_until():
    c = MonotonicClock()
    t0 = c.now()
    c.sleep_until(t0 + 0.002)
    assert c.now() >= t0 + 0.002
    c.sleep_until(t0)  # in the past: returns at once
