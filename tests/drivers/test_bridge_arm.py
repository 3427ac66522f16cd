"""BridgeArmDriver against the emulated MCU: over an in-process virtual serial pair in virtual time
(deterministic, fast) and once over a real pty in real time."""

import time

import numpy as np
import pytest

from drivers.bridge_arm import (
    BridgeArmConfig,
    BridgeArmDriver,
    BridgeDriverError,
    BridgeFault,
)
from drivers.joint_targets import TcpTarget, clamp_to_limits, ee_delta_to_joints
from edge.contracts import DriverState, RobotDriver
from edge.robot_spec import load_robot_spec
from firmware_bridge.emulator import McuConfig, ServoPlant, ServoPlantConfig
from firmware_bridge.fault_proxy import FaultRule, FaultSchedule
from firmware_bridge.rig import PtyRig, VirtualRig
from firmware_bridge.virtual_link import VirtualClock
from firmware_bridge.wire_constants import Mode

T = 0.05  # control period of the panda spec (20 Hz)


def make(layout="ee_delta", schedule=None, **mcu):
    spec = load_robot_spec("panda", [f"action_layout={layout}"])
    clock = VirtualClock()
    cfg = McuConfig(**{"n_joints": 8, "watchdog_ms": 200, "hard_q_min_rad": -4.0, "hard_q_max_rad": 4.0,
                       "tick_s": 0.002, "state_period_s": 0.01, "seed": 1, **mcu})
    plant = ServoPlant(ServoPlantConfig(n_joints=cfg.n_joints),
                       q0_rad=(tuple(spec.q_home_rad) + (0.08,))[: cfg.n_joints])
    rig = VirtualRig(clock, cfg, plant=plant, schedule=schedule)
    events = []
    drv = BridgeArmDriver(BridgeArmConfig(), spec, port_obj=rig.host_port, clock=clock,
                          event_sink=lambda kind, t, **f: events.append((kind, t, f)), client_seed=3)
    return spec, clock, rig, drv, events


def tick(clock, drv, command):
    clock.sleep_until(clock.now() + T)
    drv.read_state()
    return drv.send_command(np.asarray(command, np.float32))


def test_lifecycle_commands_only_when_active():
    _, clock, rig, drv, events = make()
    assert isinstance(drv, RobotDriver)
    with pytest.raises(BridgeDriverError, match="disconnected"):
        drv.read_state()
    drv.connect()
    assert drv.state is DriverState.PASSIVE and rig.mcu.mode is Mode.DISARMED
    with pytest.raises(BridgeDriverError, match="not active"):
        drv.send_command(np.zeros(5, np.float32))
    drv.activate()
    assert drv.state is DriverState.ACTIVE and rig.mcu.mode is Mode.ARMED
    s0 = drv.read_state()
    for _ in range(20):
        sent = tick(clock, drv, [0.01, 0, 0, 0, 0.0])
    np.testing.assert_allclose(sent[:3], [0.01, 0, 0], atol=1e-6)
    assert 0.05 < drv.read_state().ee_pos_m[0] - s0.ee_pos_m[0] < 0.25  # the MCU's servo follows
    assert rig.mcu.counters.commands_applied >= 19
    drv.estop()
    assert drv.state is DriverState.ESTOPPED and rig.mcu.mode is Mode.ESTOP
    with pytest.raises(BridgeDriverError, match="not active"):
        drv.send_command(np.zeros(5, np.float32))
    drv.activate()  # explicit: clears the latch at standstill, re-arms from the measured position
    assert drv.state is DriverState.ACTIVE and rig.mcu.mode is Mode.ARMED
    tick(clock, drv, np.zeros(5))
    drv.close()  # DISARM was acknowledged before the port closed
    assert drv.state is DriverState.DISCONNECTED and rig.mcu.mode in (Mode.STOPPING, Mode.DISARMED)
    kinds = [k for k, _, _ in events]
    assert kinds[:2] == ["driver_connected", "driver_activated"] and "driver_disarmed" in kinds


def test_version_mismatch_is_refused_and_nothing_armed():
    _, _, rig, drv, events = make(supported_versions=(2,))
    with pytest.raises(BridgeDriverError, match=r"protocol handshake failed.*v1.*Nothing was armed"):
        drv.connect()
    assert drv.state is DriverState.DISCONNECTED
    assert rig.mcu.mode is Mode.DISARMED and rig.mcu.counters.commands_applied == 0
    assert events[0][0] == "driver_connect_refused"


def test_wrong_joint_count_is_refused():
    _, _, _, drv, _ = make(n_joints=6)
    with pytest.raises(BridgeDriverError, match="drives 6 joints.*needs 8"):
        drv.connect()


def test_clamp_is_pure_and_reports_changed_joints():
    q, mask = clamp_to_limits(np.array([-5.0, 0.0, 5.0]), np.array([-1.0, -1, -1]), np.array([1.0, 1, 1]))
    np.testing.assert_array_equal(q, [-1, 0, 1])
    np.testing.assert_array_equal(mask, [True, False, True])


def test_joint_targets_are_clamped_before_sending():
    spec, clock, rig, drv, events = make("joint_pos")
    drv.connect()
    drv.activate()
    home = np.array(spec.q_home_rad)
    cmd = np.append(home, 0.0)
    cmd[6] = spec.q_max_rad[6] + 0.5  # beyond the limit
    sent = tick(clock, drv, cmd)
    assert sent[6] == pytest.approx(spec.q_max_rad[6] - drv.config.joint_margin_rad, abs=1e-6)
    assert drv.counts["joint_limit"] == 1
    assert drv.last_joint_command[6] <= spec.q_max_rad[6]
    clock.advance(0.01)
    assert rig.mcu.counters.commands_applied == 1 and rig.mcu.counters.commands_rejected == 0
    assert any(k == "driver_clamp" and f["clamp"] == "joint_limit" for k, _, f in events)


def test_nan_is_never_sent():
    _, clock, _, drv, _ = make()
    drv.connect()
    drv.activate()
    with pytest.raises(BridgeDriverError, match="finite"):
        tick(clock, drv, [np.nan, 0, 0, 0, 0])
    assert drv.counts["commands_sent"] == 0


def test_ee_delta_conversion_keeps_workspace_and_lead():
    spec = load_robot_spec("panda")
    q = np.array(spec.q_home_rad)
    target = TcpTarget.at(q)
    step = ee_delta_to_joints(target, np.array([0.0, 0.0, -1.0, 0.0]), q, np.array([0.25, -0.4, 0.005]),
                              np.array([0.8, 0.4, 0.65]), 0.06, (-1.8, 1.8))
    assert step.workspace_clipped and step.lead_limited
    assert step.target.pos_m[2] == pytest.approx(target.pos_m[2] - 0.06, abs=1e-9)
    np.testing.assert_allclose(step.sent[:3], step.target.pos_m - target.pos_m)


def test_stale_telemetry_stops_and_stays_stopped():
    rule = FaultRule.from_dict({"kind": "drop", "direction": "mcu_to_host", "start_s": 0.5})
    _, clock, rig, drv, events = make(schedule=FaultSchedule((rule,)))
    drv.connect()
    drv.activate()
    with pytest.raises(BridgeFault, match="stale_telemetry"):
        for _ in range(40):
            tick(clock, drv, np.zeros(5))
    t_fault = next(t for k, t, _ in events if k == "driver_fault")
    assert 0.5 + drv.config.state_timeout_s <= t_fault <= 0.5 + drv.config.state_timeout_s + 2 * T
    assert drv.state is DriverState.ESTOPPED
    clock.advance(0.01)
    assert rig.mcu.mode is Mode.ESTOP  # host->MCU still works: the ESTOP got through
    with pytest.raises(BridgeDriverError, match="not active"):  # no automatic re-activation
        drv.send_command(np.zeros(5, np.float32))


def test_link_down_surfaces_and_mcu_watchdog_stops():
    _, clock, rig, drv, _ = make()
    drv.connect()
    drv.activate()
    tick(clock, drv, np.zeros(5))
    rig.hang_up()
    with pytest.raises(BridgeFault, match="link_down"):
        tick(clock, drv, np.zeros(5))
    assert drv.state is DriverState.DISCONNECTED
    clock.advance(0.25)
    assert rig.mcu.mode is Mode.FAULT and rig.mcu.counters.watchdog_trips == 1


def test_mcu_reboot_needs_explicit_reactivation():
    _, clock, rig, drv, _ = make()
    drv.connect()
    drv.activate()
    tick(clock, drv, np.zeros(5))
    old = rig.mcu.session_id
    rig.reboot(clock.now())
    with pytest.raises(BridgeFault, match="mcu_reboot"):
        tick(clock, drv, np.zeros(5))
    clock.advance(0.3)
    assert rig.mcu.mode is not Mode.ARMED  # nothing re-armed it
    drv.activate()  # the operator re-arms: new handshake, clear, limits, arm
    assert rig.mcu.session_id != old and rig.mcu.mode is Mode.ARMED
    tick(clock, drv, np.zeros(5))


def test_commands_the_mcu_stops_applying_stop_the_driver():
    _, clock, _, drv, _ = make()
    drv.connect()
    drv.activate()
    tick(clock, drv, np.zeros(5))
    clock.advance(0.3)  # the host loop stalled: the MCU watchdog tripped meanwhile
    with pytest.raises(BridgeFault, match="mcu_fault|mcu_not_armed"):
        drv.read_state()


def test_over_a_real_pty():
    spec = load_robot_spec("panda")
    cfg = McuConfig(n_joints=8, watchdog_ms=200, hard_q_min_rad=-4.0, hard_q_max_rad=4.0, tick_s=0.002)
    plant = ServoPlant(ServoPlantConfig(n_joints=8), q0_rad=tuple(spec.q_home_rad) + (0.08,))
    with PtyRig(cfg, plant=plant) as rig:
        drv = BridgeArmDriver(BridgeArmConfig(port=rig.path), spec)
        drv.connect()
        drv.activate()
        for _ in range(5):  # the command first: the watchdog (200 ms) counts from ARM
            drv.read_state()
            drv.send_command(np.zeros(5, np.float32))
            time.sleep(T)
        drv.close()
        with rig.lock:
            assert rig.mcu.counters.commands_applied >= 4
