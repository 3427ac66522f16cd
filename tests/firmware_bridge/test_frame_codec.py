import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge import cobs
from firmware_bridge.frame_codec import (
    Deframer,
    FrameError,
    FrameErrorCode,
    StreamDecoder,
    decode_frame,
    encode_frame,
    encode_raw,
)
from firmware_bridge.messages import (
    Ack,
    Arm,
    Capabilities,
    ClearFault,
    Disarm,
    Error,
    Estop,
    Heartbeat,
    Hello,
    JointCommand,
    LimitsConfig,
    Nack,
    State,
)
from firmware_bridge.wire_constants import (
    MAX_ENCODED_FRAME,
    MAX_JOINTS,
    ErrorCode,
    Mode,
    MsgType,
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
f32 = st.floats(width=32, allow_nan=False)
modes = st.sampled_from(Mode)
codes = st.sampled_from(ErrorCode)


@st.composite
def arrays(draw, k: int):
    n = draw(st.integers(1, MAX_JOINTS))
    return [tuple(draw(st.lists(f32, min_size=n, max_size=n))) for _ in range(k)]


messages = st.one_of(
    st.builds(Hello, u8, u8, u32),
    st.builds(
        Capabilities,
        u8,
        st.integers(1, MAX_JOINTS),
        st.tuples(u8, u8, u8),
        u32,
        u16,
        u16,
        u16,
        u32,
    ),
    st.builds(lambda d, a: JointCommand(d, *a), u32, arrays(2)),
    st.builds(lambda m, f, s, a: State(m, f, s, *a), modes, u32, u16, arrays(4)),
    st.builds(Heartbeat, u16, u32, modes),
    st.builds(Estop, u8),
    st.builds(ClearFault, u32),
    st.just(Arm()),
    st.just(Disarm()),
    st.builds(lambda a: LimitsConfig(*a), arrays(4)),
    st.builds(Ack, u8, u16),
    st.builds(Nack, u8, u16, codes),
    st.builds(Error, codes, u32, u32),
)


@settings(deadline=None)
@given(messages, u16, u16, u32, st.sampled_from([0, 1, 2, 3]))
def test_round_trip_every_message(msg, seq, session, t_us, flags):
    wire = encode_frame(msg, seq=seq, session_id=session, t_us=t_us, flags=flags)
    assert wire.endswith(b"\x00") and 0 not in wire[:-1]
    assert len(wire) - 1 <= MAX_ENCODED_FRAME
    frame = decode_frame(wire[:-1])
    assert frame.message == msg
    h = frame.header
    assert (h.msg_type, h.seq, h.session_id, h.t_us, h.flags) == (
        msg.MSG_TYPE,
        seq,
        session,
        t_us,
        flags,
    )


def test_nan_survives_the_wire():
    msg = JointCommand(1, (math.nan, math.inf), (-math.inf, 0.0))
    out = decode_frame(encode_frame(msg, seq=1, session_id=1, t_us=1)[:-1]).message
    assert (
        math.isnan(out.q_rad[0])
        and out.q_rad[1] == math.inf
        and out.qd_rad_s[0] == -math.inf
    )


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400))
def test_decoder_raises_only_frame_error_on_arbitrary_bytes(data):
    try:
        decode_frame(data)
    except FrameError as exc:
        assert isinstance(exc.code, FrameErrorCode)


@settings(deadline=None)
@given(messages, st.data())
def test_mutated_frames_never_escape(msg, data):
    raw = bytearray(cobs.decode(encode_frame(msg, seq=1, session_id=2, t_us=3)[:-1]))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(u8)
    for candidate in (bytes(raw), cobs.encode(bytes(raw))):
        try:
            decode_frame(candidate)
        except FrameError:
            pass


@settings(deadline=None)
@given(st.lists(st.binary(max_size=600), max_size=8))
def test_stream_decoder_never_raises_and_stays_bounded(chunks):
    sd = StreamDecoder()
    for chunk in chunks:
        for item in sd.feed(chunk):
            assert isinstance(item, (FrameError,)) or item.header is not None
        assert sd.deframer.pending <= MAX_ENCODED_FRAME


@settings(deadline=None)
@given(st.binary(max_size=1000), messages, st.integers(1, 64))
def test_resynchronises_after_garbage_at_any_chunking(garbage, msg, chunk):
    wire = encode_frame(msg, seq=9, session_id=9, t_us=9)
    stream = garbage + b"\x00" + wire
    sd = StreamDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out += sd.feed(stream[i : i + chunk])
    frames = [x for x in out if not isinstance(x, FrameError)]
    assert frames and frames[-1].message == msg


def test_deframer_drops_oversize_and_recovers():
    d = Deframer()
    good = encode_frame(Arm(), seq=1, session_id=1, t_us=1)
    out = d.feed(b"\x01" * 300) + d.feed(b"\x01" * 300 + b"\x00" + good)
    assert [type(x) for x in out] == [FrameError, bytes]
    assert out[0].code is FrameErrorCode.TOO_LONG
    assert d.oversize == 1 and d.pending == 0


def test_frame_of_exactly_max_size_is_accepted_by_deframer():
    d = Deframer()
    assert d.feed(b"\x01" * MAX_ENCODED_FRAME + b"\x00") == [
        b"\x01" * MAX_ENCODED_FRAME
    ]


@pytest.mark.parametrize(
    "kw, code",
    [
        ({"version": 9}, FrameErrorCode.VERSION),
        ({"flags": 0x04}, FrameErrorCode.FLAGS),
    ],
)
def test_header_checks(kw, code):
    raw = encode_raw(int(MsgType.ARM), b"", seq=1, session_id=1, t_us=0, **kw)
    with pytest.raises(FrameError) as info:
        decode_frame(cobs.encode(raw))
    assert info.value.code is code
    if code is FrameErrorCode.VERSION:
        assert info.value.version == 9


def test_other_versions_can_be_enabled():
    raw = encode_raw(int(MsgType.ARM), b"", seq=1, session_id=1, t_us=0, version=2)
    assert decode_frame(cobs.encode(raw), frozenset({1, 2})).header.version == 2


def test_encode_raw_refuses_oversize_payload():
    with pytest.raises(ValueError):
        encode_raw(int(MsgType.STATE), bytes(241), seq=0, session_id=0, t_us=0)
