import pytest
import serial

from firmware_bridge.virtual_link import VirtualClock, virtual_serial_pair


def test_tickers_fire_in_time_order_and_only_when_time_advances():
    clock = VirtualClock()
    seen = []
    clock.add_ticker(0.003, lambda t: seen.append(("a", round(t, 6))))
    clock.add_ticker(0.002, lambda t: seen.append(("b", round(t, 6))), first_s=0.001)
    assert seen == []
    clock.sleep_until(0.006)
    assert seen == [
        ("a", 0.0),
        ("b", 0.001),
        ("a", 0.003),
        ("b", 0.003),
        ("b", 0.005),
        ("a", 0.006),
    ]
    assert clock.now() == 0.006
    clock.sleep_until(0.001)  # never backwards
    assert clock.now() == 0.006
    with pytest.raises(ValueError):
        clock.add_ticker(0.0, lambda t: None)


def test_blocking_read_waits_on_the_virtual_clock_and_returns_early():
    clock = VirtualClock()
    a, b = virtual_serial_pair(clock, timeout=0.010)
    clock.add_ticker(0.001, lambda t: b.write(b"x") if abs(t - 0.004) < 1e-9 else None)
    assert a.read(1) == b"x"
    assert clock.now() == pytest.approx(0.004)
    assert a.read(1) == b""  # nothing more: the full timeout passes
    assert clock.now() == pytest.approx(0.014)


def test_closed_peer_looks_like_an_unplugged_device():
    clock = VirtualClock()
    a, b = virtual_serial_pair(clock)
    b.close()
    with pytest.raises(serial.SerialException):
        a.read(1)
    with pytest.raises(serial.SerialException):
        b.write(b"x")
