"""Fault proxy: each fault on its own (sans-I/O core), then the link-fault catalogue end to end in
virtual time (host client -> proxy -> emulated MCU)."""

from __future__ import annotations

import pytest

from firmware_bridge.client import LinkDown, SessionChanged
from firmware_bridge.fault_proxy import (
    Direction,
    FaultKind,
    FaultProxyCore,
    FaultRule,
    FaultSchedule,
)
from firmware_bridge.wire_constants import FaultFlag, Mode

H2M, M2H = Direction.H2M, Direction.M2H
FRAMES = [bytes([0x02, i + 1, 0x00]) for i in range(10)]  # ten distinct tiny "frames"


def _run(rules, frames=FRAMES, seed=0, direction=H2M, t_step=0.001):
    core = FaultProxyCore(FaultSchedule(tuple(rules), seed), start_s=0.0)
    out = b""
    t = 0.0
    for f in frames:
        core.push(direction, f, t)
        out += core.pop_ready(direction, t)
        t += t_step
    out += core.pop_ready(direction, t + 1.0)
    return core, out


def _split(out: bytes) -> list[bytes]:
    return [p + b"\x00" for p in out.split(b"\x00")[:-1]]


def test_no_rules_is_transparent_even_across_chunk_boundaries():
    core = FaultProxyCore(FaultSchedule(), 0.0)
    stream = b"".join(FRAMES)
    for i in range(len(stream)):
        core.push(H2M, stream[i : i + 1], 0.0)
    assert core.pop_ready(H2M, 0.0) == stream


def test_drop_and_one_way_loss():
    _, out = _run([FaultRule(FaultKind.DROP, direction=H2M)])
    assert out == b""
    # The other direction is untouched.
    _, out = _run([FaultRule(FaultKind.DROP, direction=M2H)])
    assert out == b"".join(FRAMES)


def test_frame_index_window_and_probability():
    _, out = _run([FaultRule(FaultKind.DROP, start_frame=2, end_frame=5)])
    assert _split(out) == FRAMES[:2] + FRAMES[5:]
    core, out = _run(
        [FaultRule(FaultKind.DROP, probability=0.5)], frames=FRAMES * 20, seed=1
    )
    dropped = core.applied[("host_to_mcu", "drop")]
    assert 60 < dropped < 140 and len(_split(out)) == 200 - dropped


def test_time_window():
    _, out = _run([FaultRule(FaultKind.CUT, start_s=0.003, end_s=0.006)])
    assert _split(out) == FRAMES[:3] + FRAMES[6:]


def test_duplicate_and_reorder():
    _, out = _run([FaultRule(FaultKind.DUPLICATE, start_frame=1, end_frame=2)])
    assert _split(out) == [FRAMES[0], FRAMES[1], FRAMES[1], *FRAMES[2:]]
    _, out = _run(
        [FaultRule(FaultKind.REORDER, start_frame=1, end_frame=2, reorder_depth=2)]
    )
    assert _split(out) == [FRAMES[0], FRAMES[2], FRAMES[3], FRAMES[1], *FRAMES[4:]]


def test_delay_with_jitter_keeps_order():
    core = FaultProxyCore(
        FaultSchedule((FaultRule(FaultKind.DELAY, delay_s=0.01, jitter_s=0.02),), 5),
        0.0,
    )
    for i, f in enumerate(FRAMES):
        core.push(H2M, f, i * 0.001)
    assert core.pop_ready(H2M, 0.0099) == b""
    assert _split(core.pop_ready(H2M, 1.0)) == FRAMES  # stretched, never overtaken


def test_bitflip_truncate_garbage():
    frame = bytes(range(1, 40)) + b"\x00"
    _, out = _run([FaultRule(FaultKind.BITFLIP, n_bits=1)], frames=[frame])
    assert sum((a ^ b).bit_count() for a, b in zip(out, frame)) == 1
    _, out = _run([FaultRule(FaultKind.TRUNCATE)], frames=[frame])
    assert (
        len(out) < len(frame) and out.endswith(b"\x00") and frame.startswith(out[:-1])
    )
    _, out = _run([FaultRule(FaultKind.TRUNCATE, keep_delimiter=False)], frames=[frame])
    assert b"\x00" not in out
    _, out = _run([FaultRule(FaultKind.GARBAGE, garbage_bytes=32)], frames=[frame])
    assert len(out) == len(frame) + 32 and out.endswith(frame)


def test_seeded_runs_are_reproducible():
    rules = [
        FaultRule(FaultKind.BITFLIP, probability=0.3),
        FaultRule(FaultKind.DROP, probability=0.2),
    ]
    assert _run(rules, seed=9)[1] == _run(rules, seed=9)[1]
    assert _run(rules, seed=9)[1] != _run(rules, seed=10)[1]


def test_one_shot_hooks_fire_once():
    fired = []
    sched = FaultSchedule(
        (
            FaultRule(FaultKind.REBOOT, start_s=0.002),
            FaultRule(FaultKind.HANGUP, start_frame=3),
        )
    )
    core = FaultProxyCore(
        sched,
        0.0,
        on_reboot=lambda t: fired.append(("reboot", t)),
        on_hangup=lambda t: fired.append(("hangup", t)),
    )
    for i in range(6):
        core.poll_events(i * 0.001)
        core.push(H2M, FRAMES[i], i * 0.001)
    assert fired == [("reboot", 0.002), ("hangup", 0.003)]


def test_schedule_from_dict_and_validation():
    s = FaultSchedule.from_dict(
        {
            "seed": 4,
            "rules": [
                {"kind": "delay", "direction": "mcu_to_host", "delay_s": 0.01},
                {"kind": "reboot", "start_s": 1.0},
            ],
        }
    )
    assert (
        s.seed == 4
        and s.rules[0].direction is M2H
        and s.rules[1].kind is FaultKind.REBOOT
    )
    with pytest.raises(ValueError, match="unknown keys"):
        FaultSchedule.from_dict({"rules": [{"kind": "drop", "prob": 0.5}]})
    with pytest.raises(ValueError):
        FaultRule(FaultKind.DROP, probability=1.5)
    with pytest.raises(ValueError):
        FaultRule(FaultKind.REBOOT)  # a one-shot needs a trigger


# ----------------------------------------------------------------------------- end to end (L-series)


def _armed(rig_factory, rules, seed=1, **mcu):
    clock, rig, client = rig_factory(FaultSchedule(tuple(rules), seed), **mcu)
    client.arm()
    return clock, rig, client


def test_L1_bitflips_never_execute_a_corrupted_command(rig_factory, commander):
    rules = [FaultRule(FaultKind.BITFLIP, direction=H2M, probability=0.3, start_s=0.0)]
    clock, rig, client = _armed(rig_factory, [])
    rig.proxy.core.schedule = FaultSchedule(tuple(rules), 2)  # faults only after arming
    targets = set()
    for k in range(100):
        q = [0.001 * k, -0.001 * k]
        targets.add(tuple(q))
        commander(clock, client, q, 0.005, period_s=0.005)
        got = tuple(round(x, 6) for x in rig.mcu.q_cmd_rad)
        # Only values we sent, never a corrupted one.
        assert any(got == tuple(round(x, 6) for x in t) for t in targets)
    link = rig.mcu.counters.link
    assert link.crc_errors + link.decode_errors > 10
    assert rig.mcu.counters.commands_applied > 50 and rig.mcu.mode is Mode.ARMED


def test_L5_L6_duplicates_and_reordering_are_dropped(rig_factory, commander):
    rules = [
        FaultRule(FaultKind.DUPLICATE, direction=H2M, probability=0.3),
        FaultRule(FaultKind.REORDER, direction=H2M, probability=0.1),
    ]
    clock, rig, client = _armed(rig_factory, [])
    rig.proxy.core.schedule = FaultSchedule(tuple(rules), 3)
    seqs = commander(clock, client, [0.2, 0.2], 0.6, period_s=0.005)
    link = rig.mcu.counters.link
    assert link.duplicates > 10 and link.out_of_order > 0
    assert rig.mcu.counters.commands_applied <= len(seqs)
    assert rig.mcu.mode is Mode.ARMED


def test_L7_L8_short_gaps_do_not_stop_but_L9_silence_does(rig_factory, commander):
    clock, rig, client = _armed(
        rig_factory, [FaultRule(FaultKind.DROP, direction=H2M, start_s=0.1, end_s=0.14)]
    )
    commander(clock, client, [0.1, 0.1], 0.3, period_s=0.01)  # 40 ms gap < W = 50 ms
    assert rig.mcu.mode is Mode.ARMED and rig.mcu.counters.link.seq_gaps >= 3
    rig.proxy.core.schedule = FaultSchedule((FaultRule(FaultKind.CUT, start_s=0.0),))
    commander(clock, client, [0.1, 0.1], 0.1, period_s=0.01)  # link cut both ways
    assert rig.mcu.mode is Mode.FAULT and rig.mcu.fault_flags & FaultFlag.WATCHDOG


def test_L11_delay_beyond_validity_is_rejected_not_executed_late(
    rig_factory, commander
):
    clock, rig, client = _armed(rig_factory, [])
    rig.proxy.core.schedule = FaultSchedule(
        (FaultRule(FaultKind.DELAY, direction=H2M, delay_s=0.03),)
    )
    # Command validity 20 ms < 30 ms delay.
    commander(clock, client, [0.3, 0.3], 0.2, period_s=0.01)
    assert rig.mcu.counters.commands_applied == 0
    assert rig.mcu.counters.commands_rejected > 5
    assert rig.mcu.mode is Mode.FAULT  # nothing valid arrived: the watchdog stopped it


def test_L13_reboot_from_schedule_forces_rearm(rig_factory, commander):
    clock, rig, client = _armed(rig_factory, [FaultRule(FaultKind.REBOOT, start_s=0.1)])
    with pytest.raises(SessionChanged):
        commander(clock, client, [0.1, 0.1], 0.3, period_s=0.01)
    assert rig.mcu.counters.reboots == 1 and rig.mcu.mode is Mode.DISARMED


def test_L17_one_way_loss_trips_host_telemetry_age(rig_factory, commander):
    clock, rig, client = _armed(
        rig_factory, [FaultRule(FaultKind.DROP, direction=M2H, start_s=0.1)]
    )
    commander(clock, client, [0.1, 0.1], 0.2, period_s=0.01)
    # The host sees stale telemetry: its SAFE_STOP trigger.
    assert client.state_age_s() > 0.05
    assert rig.mcu.mode is Mode.ARMED  # while the MCU keeps obeying good commands


def test_garbage_bursts_are_survived(rig_factory, commander):
    clock, rig, client = _armed(rig_factory, [])
    rig.proxy.core.schedule = FaultSchedule(
        (FaultRule(FaultKind.GARBAGE, probability=0.2, garbage_bytes=600),), seed=4
    )
    commander(clock, client, [0.2, 0.2], 0.4, period_s=0.005)
    assert rig.mcu.counters.link.decode_errors + rig.mcu.counters.link.crc_errors > 0
    assert client.stats.decode_errors + client.stats.crc_errors > 0
    assert rig.mcu.counters.commands_applied > 40 and rig.mcu.mode is Mode.ARMED


def test_L18_lost_estop_is_repeated_until_acked(rig_factory):
    _clock, rig, client = _armed(rig_factory, [])
    rig.proxy.core.schedule = FaultSchedule(
        (FaultRule(FaultKind.DROP, direction=H2M, start_frame=0, end_frame=3),)
    )
    rig.proxy.core.lanes[H2M].frame_index = 0
    assert client.estop(timeout_s=0.2) is True
    assert rig.proxy.core.applied[("host_to_mcu", "drop")] == 3
    assert rig.mcu.mode is Mode.ESTOP


def test_L10_hangup_raises_link_down(rig_factory, commander):
    clock, rig, client = _armed(
        rig_factory, [FaultRule(FaultKind.HANGUP, start_s=0.05)]
    )
    with pytest.raises(LinkDown):
        commander(clock, client, [0.1, 0.1], 0.2, period_s=0.01)
    clock.advance(0.2)
    assert rig.mcu.mode is Mode.FAULT  # the MCU stops on its own watchdog
