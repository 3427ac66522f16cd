"""MCU rules (PROTOCOL.md section 5), in virtual time through the real client and byte path."""

from __future__ import annotations

import math

import pytest

from firmware_bridge.client import (
    ClientConfig,
    CommandRejected,
    FirmwareClient,
    HandshakeError,
    SessionChanged,
)
from firmware_bridge.emulator import JointSample, McuConfig, McuEmulator
from firmware_bridge.frame_codec import StreamDecoder, encode_frame
from firmware_bridge.messages import Error, Hello, JointCommand, LimitsConfig, Nack
from firmware_bridge.rig import VirtualRig
from firmware_bridge.virtual_link import VirtualClock
from firmware_bridge.wire_constants import ErrorCode, FaultFlag, Flag, Mode


def test_watchdog_stops_within_bound(rig_factory, commander):
    clock, rig, client = rig_factory(watchdog_ms=50, stop_decel_rad_s2=20.0)
    client.arm()
    commander(clock, client, [1.0, -1.0], 0.5)  # moving at qd_max = 1 rad/s by now
    t_last = rig.mcu.last_cmd_rx_s
    speeds = []
    while clock.now() < t_last + 0.3:
        clock.advance(0.001)
        speeds.append(max(abs(v) for v in rig.mcu.v_ref_rad_s))
    assert rig.mcu.mode is Mode.FAULT and rig.mcu.fault_flags & FaultFlag.WATCHDOG
    (trip_t,) = [t for t, what in rig.mcu.events if what == "watchdog expired"]
    # W + one firmware tick.
    assert trip_t - t_last <= 0.050 + rig.mcu.config.tick_s + 1e-9
    # Controlled stop: from 1 rad/s at 20 rad/s^2 takes 50 ms; never faster than the limit.
    assert max(speeds) <= 1.0 + 1e-9
    assert speeds[-1] == 0.0
    client.poll(0.01)
    assert (
        isinstance(client.last_error, Error)
        and client.last_error.error_code is ErrorCode.WATCHDOG_EXPIRED
    )


def test_no_resume_without_clear_and_rearm(rig_factory, commander):
    clock, rig, client = rig_factory()
    client.arm()
    commander(clock, client, [0.2, 0.2], 0.1)
    clock.advance(0.3)  # silence -> watchdog
    with pytest.raises(CommandRejected) as info:
        commander(clock, client, [0.2, 0.2], 0.02)
        client.poll(0.01)
        client.arm()
    assert info.value.code is ErrorCode.FAULT_LATCHED
    client.clear_faults()
    assert rig.mcu.mode is Mode.DISARMED
    applied = rig.mcu.counters.commands_applied
    commander(clock, client, [0.3, 0.3], 0.05)  # cleared is not armed
    assert rig.mcu.counters.commands_applied == applied
    assert client.stats.nacks > 0
    q_now = list(rig.mcu.sample.q_rad)
    client.arm()
    assert rig.mcu.q_cmd_rad == q_now  # re-arm holds where the joints are: no jump


def test_estop_latches_until_cleared_at_standstill(rig_factory, commander):
    clock, rig, client = rig_factory()
    client.arm()
    commander(clock, client, [1.0, 1.0], 0.3)
    assert client.estop(reason=1) is True
    assert rig.mcu.mode is Mode.ESTOP
    with pytest.raises(CommandRejected) as info:
        client.clear_faults()  # still decelerating
    assert info.value.code is ErrorCode.NOT_STANDSTILL
    applied = rig.mcu.counters.commands_applied
    for _ in range(5):
        client.send_command([1.0, 1.0])
        client.poll(0.005)
    assert rig.mcu.counters.commands_applied == applied
    clock.advance(0.5)
    with pytest.raises(CommandRejected) as info:
        client.arm()
    assert info.value.code is ErrorCode.ESTOP_LATCHED
    client.clear_faults(int(FaultFlag.WATCHDOG))  # not the e-stop bit: stays latched
    assert rig.mcu.mode is Mode.ESTOP
    client.clear_faults(int(FaultFlag.ESTOP))
    assert rig.mcu.mode is Mode.DISARMED
    client.arm()
    assert rig.mcu.mode is Mode.ARMED


def test_estop_is_obeyed_from_any_session_without_handshake():
    clock = VirtualClock()
    rig = VirtualRig(clock, McuConfig(n_joints=1))
    client = FirmwareClient(rig.host_port, clock=clock)
    assert client.estop() is True
    assert rig.mcu.mode is Mode.ESTOP


def test_limits_are_enforced_and_configurable(rig_factory):
    _clock, rig, client = rig_factory(hard_q_min_rad=-2.0, hard_q_max_rad=2.0)
    client.configure_limits(
        LimitsConfig((-1.0, -1.0), (1.0, 1.0), (0.5, 0.5), (4.0, 4.0))
    )
    with pytest.raises(CommandRejected) as info:
        client.configure_limits(
            LimitsConfig((-3.0, -1.0), (1.0, 1.0), (0.5, 0.5), (4.0, 4.0))
        )
    assert info.value.code is ErrorCode.LIMITS_OUT_OF_RANGE
    with pytest.raises(CommandRejected):
        client.configure_limits(
            LimitsConfig((1.0, -1.0), (-1.0, 1.0), (0.5, 0.5), (4.0, 4.0))
        )
    client.arm()
    with pytest.raises(CommandRejected) as info:
        client.configure_limits(
            LimitsConfig((-1.0, -1.0), (1.0, 1.0), (0.5, 0.5), (4.0, 4.0))
        )
    assert info.value.code is ErrorCode.INVALID_STATE
    cases = [
        ([1.5, 0.0], [0.0, 0.0], ErrorCode.LIMIT_VIOLATION),
        ([0.5, 0.0], [0.9, 0.0], ErrorCode.LIMIT_VIOLATION),
        ([math.nan, 0.0], [0.0, 0.0], ErrorCode.NOT_FINITE),
    ]
    for q, qd, code in cases:
        seq = client.send_command(q, qd)
        nack = _await_nack(client, seq)
        assert nack.error_code is code
    assert rig.mcu.counters.commands_applied == 0
    assert rig.mcu.q_cmd_rad == list(rig.mcu.sample.q_rad)  # previous setpoint kept


def test_deadlines(rig_factory):
    _clock, rig, client = rig_factory(max_deadline_ms=200)
    client.arm()
    assert (
        _await_nack(
            client, client.send_command([0.1, 0.1], valid_for_s=-0.001)
        ).error_code
        is ErrorCode.DEADLINE_EXPIRED
    )
    assert (
        _await_nack(client, client.send_command([0.1, 0.1], valid_for_s=1.0)).error_code
        is ErrorCode.DEADLINE_TOO_FAR
    )
    client.send_command([0.1, 0.1], valid_for_s=0.05)
    client.poll(0.005)
    assert rig.mcu.counters.commands_applied == 1


def test_duplicate_and_stale_frames_are_not_executed(rig_factory):
    clock, rig, client = rig_factory()
    client.arm()
    mcu = rig.mcu
    sid = client.session_id
    deadline = (mcu.mcu_time_us(clock.now()) + 100_000) & 0xFFFFFFFF
    base = client._tx_seq  # the next seq the client would use

    def cmd(seq, q):
        return encode_frame(
            JointCommand(deadline, (q, q), (0.0, 0.0)), seq=seq, session_id=sid, t_us=0
        )

    mcu.receive(cmd(base + 5, 0.3), clock.now())
    assert mcu.counters.commands_applied == 1 and mcu.q_cmd_rad == pytest.approx(
        [0.3, 0.3]
    )
    mcu.receive(cmd(base + 5, 0.3), clock.now())  # duplicate
    mcu.receive(cmd(base + 4, -0.3), clock.now())  # older: reordered or replayed
    assert mcu.counters.commands_applied == 1 and mcu.q_cmd_rad == pytest.approx(
        [0.3, 0.3]
    )
    assert mcu.counters.link.duplicates == 1 and mcu.counters.link.out_of_order == 1
    assert mcu.counters.link.seq_gaps == 5  # base..base+4 never arrived
    mcu.receive(cmd(base + 6, 0.4), clock.now())
    assert mcu.counters.commands_applied == 2


def test_wrong_session_and_wrong_direction(rig_factory):
    clock, rig, _client = rig_factory()
    mcu = rig.mcu
    frame = encode_frame(Hello(), seq=1, session_id=0, t_us=0, flags=Flag.FROM_MCU)
    mcu.receive(frame, clock.now())
    assert mcu.counters.link.wrong_direction == 1
    mcu.drain_output()
    mcu.receive(
        encode_frame(
            LimitsConfig((0.0,), (1.0,), (1.0,), (1.0,)),
            seq=1,
            session_id=mcu.session_id ^ 1,
            t_us=0,
        ),
        clock.now(),
    )
    (reply,) = StreamDecoder().feed(mcu.drain_output())
    assert (
        isinstance(reply.message, Nack)
        and reply.message.error_code is ErrorCode.SESSION_MISMATCH
    )


def test_reboot_gives_new_session_and_forces_rearm(rig_factory, commander):
    clock, rig, client = rig_factory()
    client.arm()
    commander(clock, client, [0.5, 0.5], 0.1)
    old = client.session_id
    rig.reboot(clock.now())
    assert rig.mcu.session_id != old and rig.mcu.mode is Mode.DISARMED
    client.poll(0.02)
    assert client.session_changed and client.stats.session_changes == 1
    with pytest.raises(SessionChanged):
        client.send_command([0.5, 0.5])
    with pytest.raises(SessionChanged):
        client.arm()
    client.handshake()
    assert client.session_id == rig.mcu.session_id != old
    assert rig.mcu.mode is Mode.DISARMED  # handshake alone never arms
    clock.advance(0.3)  # the joints coast to standstill after the reset
    client.arm()
    commander(clock, client, [0.5, 0.5], 0.05)
    assert rig.mcu.counters.commands_applied > 0


def test_boot_delay_makes_the_mcu_deaf(rig_factory):
    clock, rig, client = rig_factory()
    rig.reboot(clock.now(), boot_delay_s=0.05)
    client.poll(0.03)
    assert client.stats.frames_rx > 0 and not client.session_changed  # nothing new yet
    clock.advance(0.05)
    client.poll(0.02)
    assert client.session_changed


def test_version_mismatch_at_handshake():
    clock = VirtualClock()
    rig = VirtualRig(clock, McuConfig(n_joints=1))
    from firmware_bridge.client import ClientConfig

    v2_host = FirmwareClient(
        rig.host_port, ClientConfig(supported_versions=(2, 3)), clock=clock
    )
    with pytest.raises(HandshakeError):
        v2_host.handshake()
    assert rig.mcu.mode is Mode.DISARMED
    # A host that offers a range including 1 gets version 1.
    rig.mcu.receive(
        encode_frame(Hello(1, 5, 42), seq=0, session_id=0, t_us=0), clock.now()
    )
    (reply,) = [
        f
        for f in StreamDecoder().feed(rig.mcu.drain_output())
        if f.header.msg_type == 0x02
    ]
    assert reply.message.proto_version == 1


def test_hello_while_armed_stops(rig_factory, commander):
    clock, rig, client = rig_factory()
    client.arm()
    commander(clock, client, [0.5, 0.5], 0.2)
    client.handshake()
    assert rig.mcu.mode in (Mode.STOPPING, Mode.DISARMED)
    clock.advance(0.3)
    assert rig.mcu.mode is Mode.DISARMED


def test_arm_needs_standstill_and_disarm_is_a_controlled_stop(rig_factory, commander):
    clock, rig, client = rig_factory()
    client.arm()
    commander(clock, client, [1.0, 1.0], 0.3)
    client.disarm()
    assert rig.mcu.mode is Mode.STOPPING
    with pytest.raises(CommandRejected) as info:
        client.arm()
    assert info.value.code is ErrorCode.NOT_STANDSTILL
    clock.advance(0.3)
    assert rig.mcu.mode is Mode.DISARMED
    client.arm()
    client.arm()  # a retried ARM is harmless
    assert rig.mcu.mode is Mode.ARMED


class _HotPlant:
    """A JointPlant from 'a simulator': records the reference it is given, reports 90 C."""

    def __init__(self) -> None:
        self.refs: list[tuple[float, ...]] = []

    def measure(self) -> JointSample:
        return JointSample((0.0,), (0.0,), (0.5,), (90.0,))

    def step(self, q_ref_rad, qd_ref_rad_s, dt_s):
        self.refs.append(tuple(q_ref_rad))
        return self.measure()


def test_plant_hook_drives_state_and_faults():
    plant = _HotPlant()
    mcu = McuEmulator(McuConfig(n_joints=1), plant=plant)
    mcu.tick(0.01)
    assert len(plant.refs) == 10  # 10 firmware ticks of 1 ms
    assert mcu.mode is Mode.FAULT and mcu.fault_flags & FaultFlag.OVER_TEMP
    with pytest.raises(ValueError):
        McuEmulator(McuConfig(n_joints=2), plant=plant)


def test_servo_tracks_within_velocity_limit(rig_factory, commander):
    clock, _rig, client = rig_factory(default_qd_max_rad_s=0.5)
    client.arm()
    commander(clock, client, [0.4, -0.4], 1.5)
    q = client.latest_state.q_rad
    assert q[0] == pytest.approx(0.4, abs=0.01) and q[1] == pytest.approx(
        -0.4, abs=0.01
    )
    assert (
        client.latest_state.mode is Mode.ARMED and client.latest_state.fault_flags == 0
    )


@pytest.mark.parametrize("q_ref, q_meas, qd_meas, q_cmd, reset", [
    (0.000, 0.043, 0.0, 0.080, True),    # fingers closed on a 4.3 cm object, reference wound to 0; open
    (0.000, 0.043, 0.0, 0.000, False),   # ... still closing: keep squeezing
    (0.000, 0.043, 0.0, 0.020, False),   # ... a lighter squeeze: the command lies inside the wound-up travel
    (0.000, 0.043, -0.5, 0.080, False),  # fingers still closing (moving): a lag, not a wind-up
    (0.000, 0.005, 0.0, 0.080, False),   # a gap under the threshold: ordinary tracking
    (0.000, 0.010, 0.0, 0.080, False),   # exactly the threshold: not past it
    (0.500, 0.300, 0.0, 0.000, True),    # the other direction (a joint held back from moving up)
    (0.500, 0.300, 0.0, 0.400, False),
    (0.500, 0.300, 0.8, 0.000, False),   # a joint moving fast behind its reference turns back: untouched
])
def test_windup_reset_only_for_a_still_joint_whose_command_lies_beyond_it(q_ref, q_meas, qd_meas, q_cmd, reset):
    from firmware_bridge.emulator.motion import windup_reset

    assert windup_reset(q_ref, q_meas, qd_meas, q_cmd, 0.01, 0.02) is reset
    assert windup_reset(q_ref, q_meas, qd_meas, q_cmd, 0.0, 0.02) is False  # 0: off


def test_reference_step_resets_a_wound_up_joint_only_while_tracking():
    from firmware_bridge.emulator.motion import JointLimits, reference_step

    c = McuConfig(n_joints=2, windup_reset_rad=0.01)
    lim = JointLimits.defaults(c)
    measured = ((0.043, 0.300), (0.0, 0.8))  # joint 0 still and wound up, joint 1 moving
    q_ref, v_ref = [0.0, 0.5], [0.0, 0.3]
    assert reference_step(q_ref, v_ref, ([0.08, 0.0], [0.0, 0.0]), lim, c, measured) == [0]
    assert q_ref[0] == pytest.approx(0.043 + c.track_accel_rad_s2 * c.tick_s ** 2, abs=1e-9)  # from rest
    assert q_ref[1] < 0.5 + 0.3 * c.tick_s and v_ref[1] > 0.0  # the moving joint decelerates within its bound
    q_ref, v_ref = [0.0, 0.5], [0.0, 0.3]
    assert reference_step(q_ref, v_ref, None, lim, c, measured) == []  # a controlled stop never resets


def test_reference_step_gives_step_channels_the_command_at_once_and_holds_it_on_a_stop():
    from firmware_bridge.emulator.motion import JointLimits, reference_step

    c = McuConfig(n_joints=2, step_channels=1, hard_q_min_rad=0.0, hard_q_max_rad=0.08)
    lim = JointLimits.defaults(c)
    q_ref, v_ref = [0.0, 0.0], [0.0, 0.0]
    reference_step(q_ref, v_ref, ([0.08, 0.08], [0.0, 0.0]), lim, c)
    assert q_ref[1] == 0.08 and v_ref[1] == 0.0  # the step channel: the command, not the speed limit's 1 mm
    assert q_ref[0] == pytest.approx(c.track_accel_rad_s2 * c.tick_s ** 2)  # the shaped one: from rest
    lim.q_max_rad[1] = 0.05
    reference_step(q_ref, v_ref, ([0.08, 0.08], [0.0, 0.0]), lim, c)
    assert q_ref[1] == 0.05  # never outside the limits in force
    q_ref[1] = 0.043
    reference_step(q_ref, v_ref, None, lim, c)
    assert q_ref[1] == 0.043 and v_ref[1] == 0.0  # a controlled stop holds it (a grasp keeps its squeeze)
    with pytest.raises(ValueError, match="step_channels"):
        McuConfig(n_joints=2, step_channels=3)


class _FingersOnObject:
    """One gripper channel (opening in m) following its reference first order (50 ms) but unable to
    close below a 4.3 cm object between the fingers (``object_m``; 0: nothing between them)."""

    def __init__(self, object_m: float = 0.043) -> None:
        self.q, self.qd, self.object_m = 0.08, 0.0, object_m

    def measure(self) -> JointSample:
        return JointSample((self.q,), (self.qd,), (0.1,), (30.0,))

    def step(self, q_ref_rad, qd_ref_rad_s, dt_s):
        q = max(self.object_m, self.q + (q_ref_rad[0] - self.q) * dt_s / 0.05)
        self.qd, self.q = (q - self.q) / dt_s, q
        return self.measure()


@pytest.mark.parametrize("windup, step", [(0.01, 0), (0.0, 0), (0.0, 1)])
def test_fingers_holding_an_object_open_without_unwinding_the_reference(windup, step, commander):
    """While fingers hold an object the reference runs on to the closed position; with the anti-windup
    an open command restarts it from the fingers' position, so they open at once (without it the
    reference first travels back 4.3 cm at the channel's speed limit). As a step channel the fingers
    get the open command as their reference at once: they open faster still, with no restart."""
    plant = _FingersOnObject()
    clock = VirtualClock()
    mcu_config = McuConfig(n_joints=1, seed=7, tick_s=0.002, hard_q_min_rad=0.0, hard_q_max_rad=0.08,
                           default_qd_max_rad_s=1.2, windup_reset_rad=windup, step_channels=step)
    rig = VirtualRig(clock, mcu_config, plant=plant)
    client = FirmwareClient(rig.host_port, ClientConfig(), clock=clock, seed=3)
    client.handshake()
    client.arm()
    commander(clock, client, [0.0], 0.3)  # close on the object
    assert plant.q == pytest.approx(0.043) and rig.mcu.q_ref_rad[0] < 0.001
    commander(clock, client, [0.08], 0.05)  # open for one 50 ms control period
    opened = plant.q - 0.043
    if step:
        assert opened > 0.02  # the plant's own first-order answer: 63 % of the 3.7 cm in its 50 ms
    elif windup:
        assert opened > 0.008  # about 1 cm in the first 50 ms
    else:
        assert opened < 0.002  # still unwinding
    commander(clock, client, [0.08], 0.3)
    assert plant.q > 0.075 and rig.mcu.mode is Mode.ARMED  # open either way, no fault
    assert rig.mcu.counters.windup_resets == [1 if windup else 0]


def test_a_step_channel_brakes_where_it_is_on_a_controlled_stop_and_keeps_a_squeeze(commander):
    """Disarmed mid-move, a step channel's servo stops where the fingers are (not at the last target);
    stopped while squeezing an object, the squeeze stays (its reference holds); both reach DISARMED."""
    for object_m in (0.0, 0.043):
        plant = _FingersOnObject(object_m)
        clock = VirtualClock()
        rig = VirtualRig(clock, McuConfig(n_joints=1, seed=7, tick_s=0.002, hard_q_min_rad=0.0, hard_q_max_rad=0.08,
                                          default_qd_max_rad_s=1.2, step_channels=1), plant=plant)
        client = FirmwareClient(rig.host_port, ClientConfig(), clock=clock, seed=3)
        client.handshake()
        client.arm()
        commander(clock, client, [0.0], 0.4)  # close (on the object, if any)
        if object_m:
            client.disarm()
            end = clock.now() + 0.2
            while clock.now() < end - 1e-9:
                client.poll(end - clock.now())
            assert rig.mcu.mode is Mode.DISARMED and rig.mcu.q_ref_rad[0] == 0.0  # still squeezing
            assert plant.q == pytest.approx(0.043)
            continue
        commander(clock, client, [0.08], 0.02)  # open, and stop 20 ms into the move
        mid = plant.q
        assert 0.01 < mid < 0.06
        client.disarm()
        end = clock.now() + 0.3
        while clock.now() < end - 1e-9:
            client.poll(end - clock.now())
        assert rig.mcu.mode is Mode.DISARMED
        assert plant.q < mid + 0.01  # braked where it was, not carried on to the 8 cm target


def test_config_validation():
    with pytest.raises(ValueError):
        McuConfig(n_joints=0)
    with pytest.raises(ValueError):
        McuConfig(default_qd_max_rad_s=9.0, hard_qd_max_rad_s=4.0)


def _await_nack(client: FirmwareClient, seq: int) -> Nack:
    for _ in range(50):
        for f in client.poll(0.002):
            if isinstance(f.message, Nack) and f.message.nacked_seq == seq:
                return f.message
    raise AssertionError(f"no NACK for seq {seq}")


@pytest.mark.parametrize("module, argv, said", [
    ("firmware_bridge.emulator", ["--pty", "--joints", "20"], "n_joints=20 outside 1..12"),
    ("firmware_bridge.emulator", ["--pty", "--state-hz", "0"], "--state-hz 0: must be > 0"),
    ("firmware_bridge.emulator", ["--pty", "--schedule", "/nonexistent.json"], "--schedule /nonexistent.json"),
    ("firmware_bridge.emulator", ["--pty", "--joints", "8", "--q0", "1,2"], "--q0 1,2: give 8 finite numbers"),
    ("firmware_bridge.emulator", ["--pty", "--joints", "2", "--q0", "1,x"], "--q0 1,x: give 2 numbers"),
    ("firmware_bridge.emulator", ["--pty", "--joints", "2", "--q0", "1,3.5"], "outside the hard joint limits [-3, 3]"),
    ("firmware_bridge.fault_proxy", ["--upstream", "loop://", "--period-ms", "0"], "--period-ms 0: must be > 0"),
    ("firmware_bridge.fault_proxy", ["--upstream", "/dev/no-such-port"], "--upstream /dev/no-such-port: cannot open"),
])
def test_the_command_lines_refuse_bad_values_in_one_line(module, argv, said):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=60)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], res.stderr


def test_the_emulator_takes_the_panda_with_wider_hard_limits(tmp_path):
    """The documented reference device for the Panda (drivers/README.md): 8 joints, a 200 ms watchdog, ±4 rad."""
    import subprocess
    import sys
    import time

    from drivers.bridge_arm import BridgeArmConfig, BridgeArmDriver
    from edge.robot_spec import load_robot_spec

    import numpy as np

    path = tmp_path / "pty"
    import re
    from pathlib import Path

    panda = load_robot_spec("panda")
    readme = (Path(__file__).resolve().parents[2] / "drivers" / "README.md").read_text()
    home = re.search(r"--q0 ([-0-9.,]+)", readme)[1]  # the documented --q0: the Panda's home, gripper open
    assert np.allclose([float(x) for x in home.split(",")], (*panda.q_home_rad, 0.08), atol=1e-3)
    proc = subprocess.Popen([sys.executable, "-m", "firmware_bridge.emulator", "--pty", "--joints", "8",
                             "--watchdog-ms", "200", "--hard-q-limit", "4", "--q0", home, "--path-file", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not path.is_file() and time.monotonic() - t0 < 30:
            if proc.poll() is not None:
                pytest.fail(f"the emulator exited ({proc.returncode}) before writing --path-file: {proc.stderr.read()}")
            time.sleep(0.05)
        arm = BridgeArmDriver(BridgeArmConfig(port=path.read_text().strip()), panda)
        arm.connect()
        arm.activate()
        state = arm.read_state()
        assert np.allclose(state.q_rad, panda.q_home_rad, atol=1e-3) and state.gripper < 1e-6  # home, open
        arm.send_command(np.zeros(5, np.float32))
        assert arm.counts.get("joint_limit", 0) == 0  # at home nothing needs clamping
        arm.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()


def test_the_path_file_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    """A reader polling for --path-file must never see it empty (a CI run read '' between create and write)."""
    import os

    from firmware_bridge.emulator.__main__ import write_path_file

    target = tmp_path / "pty"
    seen = []
    real_replace = os.replace

    def watching_replace(src, dst):
        seen.append((target.exists(), open(src).read()))  # at the rename: target absent, temp already whole
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    write_path_file(str(target), "/dev/pts/7")
    assert seen == [(False, "/dev/pts/7\n")]
    assert target.read_text() == "/dev/pts/7\n" and [p.name for p in tmp_path.iterdir()] == ["pty"]

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_path_file(str(tmp_path / "other"), "/dev/pts/8")
    assert [p.name for p in tmp_path.iterdir()] == ["pty"]  # no temporary file left behind
