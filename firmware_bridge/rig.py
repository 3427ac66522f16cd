"""Test rigs: an emulated MCU, optionally behind the fault proxy, reachable over a pty (real time)
or over a ``VirtualSerial`` (virtual time). HIL scenarios and driver tests build on these; a real
board replaces the rig by its device path.
"""

from __future__ import annotations

import threading
import time
from typing import Self

from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.mcu import McuEmulator
from firmware_bridge.emulator.plant import JointPlant
from firmware_bridge.fault_proxy import FaultProxy, FaultProxyCore, FaultSchedule
from firmware_bridge.transport import (
    ByteLink,
    PtyEndpoint,
    ServiceThread,
    memory_link_pair,
)
from firmware_bridge.virtual_link import (
    VirtualClock,
    VirtualSerial,
    virtual_serial_pair,
)


class _RigCore:
    """Emulator + optional proxy, serviced together once per firmware tick."""

    def __init__(
        self,
        host_side: ByteLink,
        mcu_config: McuConfig | None,
        plant: JointPlant | None,
        schedule: FaultSchedule | None,
        now_s: float,
    ) -> None:
        self.mcu = McuEmulator(mcu_config, plant, now_s)
        self.proxy: FaultProxy | None = None
        if schedule is None:
            self._mcu_link: ByteLink = host_side
            return
        proxy_side, self._mcu_link = memory_link_pair()
        core = FaultProxyCore(
            schedule, now_s, on_reboot=self.reboot, on_hangup=self._hang_up
        )
        self.proxy = FaultProxy(core, host_side, proxy_side)
        self._host_side = host_side

    def reboot(self, now_s: float, boot_delay_s: float = 0.0) -> None:
        self.mcu.reboot(now_s, boot_delay_s)

    def _hang_up(self, _now_s: float) -> None:
        if self.proxy is not None:
            self.proxy.hang_up()

    def service(self, now_s: float) -> None:
        if self.proxy is not None:
            self.proxy.service(now_s)
        self.mcu.service(self._mcu_link, now_s)
        if self.proxy is not None:
            self.proxy.service(now_s)


class VirtualRig(_RigCore):
    """Rig on a ``VirtualClock``; the host client opens ``host_port`` and everything runs in
    virtual time, deterministic for a given seed and schedule."""

    def __init__(
        self,
        clock: VirtualClock,
        mcu_config: McuConfig | None = None,
        plant: JointPlant | None = None,
        schedule: FaultSchedule | None = None,
    ) -> None:
        self.clock = clock
        self.host_port, rig_port = virtual_serial_pair(clock)
        self._rig_port: VirtualSerial = rig_port
        super().__init__(rig_port, mcu_config, plant, schedule, clock.now())
        clock.add_ticker(self.mcu.config.tick_s, self.service)

    def hang_up(self) -> None:
        """Unplug: the host's next read or write raises ``serial.SerialException``."""
        if self.proxy is not None:
            self.proxy.hang_up()
        else:
            self._rig_port.close()
            self._mcu_link = _Dead()


class _Dead:
    def read_available(self) -> bytes:
        return b""

    def write(self, data: bytes) -> None:
        """Bytes to an unplugged host are lost."""

    def close(self) -> None:
        """Already gone."""


class PtyRig(_RigCore):
    """Rig in real time on a service thread; the host opens ``path`` (a pty slave) with pyserial.

    Use as a context manager. Touch ``mcu`` only while holding ``lock``.
    """

    def __init__(
        self,
        mcu_config: McuConfig | None = None,
        plant: JointPlant | None = None,
        schedule: FaultSchedule | None = None,
    ) -> None:
        self.endpoint = PtyEndpoint()
        self.path = self.endpoint.path
        self.lock = threading.Lock()
        super().__init__(
            self.endpoint.link, mcu_config, plant, schedule, time.monotonic()
        )
        self._thread = ServiceThread(
            self._locked_service, self.mcu.config.tick_s, "firmware-rig"
        )

    def _locked_service(self, now_s: float) -> None:
        with self.lock:
            # Read the clock after taking the lock: a time read before waiting for it could stamp
            # a command earlier than it was sent.
            self.service(max(now_s, time.monotonic()))

    def start(self) -> PtyRig:
        self._thread.start()
        return self

    def reboot(self, now_s: float | None = None, boot_delay_s: float = 0.0) -> None:
        if (
            now_s is not None
        ):  # called from the proxy inside service(): lock already held
            super().reboot(now_s, boot_delay_s)
            return
        with self.lock:
            super().reboot(time.monotonic(), boot_delay_s)

    def hang_up(self) -> None:
        """Close the pty master: the host's next read raises ``serial.SerialException``."""
        with self.lock:
            if self.proxy is not None:
                self.proxy.hang_up()
            else:
                self.endpoint.link.close()
                self._mcu_link = _Dead()

    @property
    def error(self) -> BaseException | None:
        return self._thread.error

    @property
    def overruns(self) -> int:
        return self._thread.overruns

    def stop(self) -> None:
        self._thread.stop()
        if self._thread.error is not None:
            raise self._thread.error

    def close(self) -> None:
        self.stop()
        self.endpoint.close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
