"""Shared fixtures for the firmware_bridge tests: a virtual-time rig (emulated MCU, optional fault
proxy) and a host client on it. Everything here runs in virtual time unless a test says otherwise.
Helpers are handed out as fixtures (``rig_factory``, ``commander``) so no test imports conftest.
"""

from __future__ import annotations

import pytest

from firmware_bridge.client import ClientConfig, FirmwareClient
from firmware_bridge.emulator import McuConfig
from firmware_bridge.fault_proxy import FaultSchedule
from firmware_bridge.rig import VirtualRig
from firmware_bridge.virtual_link import VirtualClock


def make_rig(
    schedule: FaultSchedule | None = None, **mcu_overrides: object
) -> tuple[VirtualClock, VirtualRig, FirmwareClient]:
    """A VirtualRig (2-joint MCU unless overridden) and a client that has done the handshake."""
    clock = VirtualClock()
    config = McuConfig(**{"n_joints": 2, "seed": 7, **mcu_overrides})  # type: ignore[arg-type]
    rig = VirtualRig(clock, config, schedule=schedule)
    client = FirmwareClient(rig.host_port, ClientConfig(), clock=clock, seed=3)
    client.handshake()
    return clock, rig, client


def run_commands(
    clock: VirtualClock,
    client: FirmwareClient,
    q_rad: list[float],
    duration_s: float,
    period_s: float = 0.01,
) -> list[int]:
    """Send the same target every ``period_s`` for ``duration_s`` (virtual), polling in between."""
    seqs = []
    end = clock.now() + duration_s
    while clock.now() < end - 1e-9:
        seqs.append(client.send_command(q_rad))
        next_t = clock.now() + period_s
        while clock.now() < next_t - 1e-9:
            client.poll(next_t - clock.now())
    return seqs


@pytest.fixture
def rig_factory():
    return make_rig


@pytest.fixture
def commander():
    return run_commands
