"""Compile the C99 firmware codec with the host compiler and check it against the golden vectors
byte for byte (and against the Python decoder on random frames)."""

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from firmware_bridge import cobs
from firmware_bridge.crc import crc16_ccitt_false
from firmware_bridge.frame_codec import (
    FrameError,
    StreamDecoder,
    decode_frame,
    encode_frame,
)
from firmware_bridge.golden import GOLDEN_PATH
from firmware_bridge.messages import Heartbeat, JointCommand, State
from firmware_bridge.wire_constants import Mode, MsgType

C_DIR = Path(__file__).resolve().parents[2] / "firmware_bridge" / "c"
VECTORS = json.loads(GOLDEN_PATH.read_text())
STRICT = [
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Wconversion",
    "-Werror",
    "-O1",
]


def _compile(out_dir: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip(
            "no C compiler (cc/gcc/clang) on PATH; the C codec is checked where one exists"
        )
    exe = out_dir / "test_edge_frame"
    sources = [str(C_DIR / "edge_frame.c"), str(C_DIR / "test_edge_frame.c")]
    for extra in (["-fsanitize=address,undefined", "-fno-omit-frame-pointer"], []):
        proc = subprocess.run(
            [cc, *STRICT, *extra, f"-I{C_DIR}", *sources, "-o", str(exe)],
            check=False,
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return exe
        if not extra:
            pytest.fail(f"C codec does not compile cleanly:\n{proc.stderr}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def exe(tmp_path_factory) -> Path:
    return _compile(tmp_path_factory.mktemp("c_codec"))


def _run(exe: Path, lines: list[str]) -> list[str]:
    proc = subprocess.run(
        [str(exe)],
        input="\n".join(lines) + "\n",
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _f32_hex(values):
    import struct

    return [struct.pack("<f", v)[::-1].hex() for v in values]


def test_selftest(exe):
    proc = subprocess.run(
        [str(exe), "--selftest"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and "SELFTEST OK" in proc.stdout, (
        proc.stdout + proc.stderr
    )


def test_crc_and_cobs_match_python(exe):
    cases = [bytes.fromhex(c["raw_hex"]) for c in VECTORS["cobs"]]
    out = _run(exe, [f"C {c.hex()}" for c in cases] + [f"R {c.hex()}" for c in cases])
    for line, c in zip(out[: len(cases)], cases):
        assert line == f"C {cobs.encode(c).hex()}"
    for line, c in zip(out[len(cases) :], cases):
        assert line == f"R {crc16_ccitt_false(c):04x}"


def test_valid_golden_vectors_byte_for_byte(exe):
    vecs = VECTORS["valid"]
    out = _run(exe, [f"D {bytes.fromhex(v['wire_hex'])[:-1].hex()}" for v in vecs])
    for line, v in zip(out, vecs, strict=True):
        h = v["header"]
        fields = line.split(" ")
        assert fields[:8] == [
            "OK",
            "1",
            str(int(MsgType[h["msg_type"]])),
            str(h["flags"]),
            str(h["session_id"]),
            str(h["seq"]),
            str(h["t_us"]),
            v["payload_hex"],
        ], v["name"]
        assert fields[8:10] == ["ENC", v["wire_hex"]], v["name"]
        m = v["message"]
        if m["type"] == "JOINT_COMMAND":
            n = len(m["q_rad"])
            assert fields[10:13] == ["JC", str(n), str(m["deadline_us"])]
            assert fields[13 : 13 + 2 * n] == _f32_hex(m["q_rad"] + m["qd_rad_s"])
            assert fields[-2:] == ["REPACK", v["payload_hex"]]
        if m["type"] == "STATE":
            n = len(m["q_rad"])
            assert fields[10:15] == [
                "ST",
                str(n),
                str(
                    ["DISARMED", "ARMED", "STOPPING", "FAULT", "ESTOP"].index(m["mode"])
                ),
                str(m["fault_flags"]),
                str(m["last_cmd_seq"]),
            ]
            values = m["q_rad"] + m["qd_rad_s"] + m["current_a"] + m["temp_c"]
            assert fields[15 : 15 + 4 * n] == _f32_hex(values)
            assert fields[-2:] == ["REPACK", v["payload_hex"]]


def test_invalid_golden_vectors_same_error(exe):
    vecs = VECTORS["invalid"]
    out = _run(exe, [f"D {bytes.fromhex(v['wire_hex'])[:-1].hex()}" for v in vecs])
    assert [line.split(" ")[1] for line in out] == [v["error"] for v in vecs]


def test_stream_golden_vectors(exe):
    for vec in VECTORS["streams"]:
        (line,) = _run(exe, [f"S {vec['stream_hex']}"])
        expected = []
        for item in vec["frames"]:
            if item.startswith("OK:"):
                _, name, seq = item.split(":")
                item = f"OK:{int(MsgType[name])}:{seq}"
            expected.append(item)
        assert line.split(" ")[1:] == expected


def test_random_frames_agree_with_python(exe):
    rng = random.Random(1234)
    inputs = []
    for i in range(400):
        if i % 2:
            inputs.append(
                rng.randbytes(rng.randrange(0, 300)).replace(b"\x00", b"\x01")
            )
            continue
        wire = bytearray(
            encode_frame(
                _random_message(rng), seq=rng.randrange(65536), session_id=7, t_us=i
            )[:-1]
        )
        for _ in range(rng.randrange(0, 3)):
            pos = rng.randrange(len(wire))
            wire[pos] = rng.randrange(1, 256)
        inputs.append(bytes(wire))
    out = _run(exe, [f"D {x.hex()}" for x in inputs])
    for line, x in zip(out, inputs, strict=True):
        try:
            decode_frame(x)
            want = "OK"
        except FrameError as exc:
            want = exc.code.value
        assert line.split(" ")[0 if want == "OK" else 1] == want, x.hex()


def test_stream_of_random_chunks_agrees(exe):
    rng = random.Random(99)
    parts = []
    for i in range(60):
        parts.append(
            rng.randbytes(rng.randrange(0, 400))
            if i % 3 == 0
            else encode_frame(_random_message(rng), seq=i, session_id=1, t_us=i)
        )
    stream = b"".join(parts)
    (line,) = _run(exe, [f"S {stream.hex()}"])
    py = [
        x.code.value
        if isinstance(x, FrameError)
        else f"OK:{int(x.header.msg_type)}:{x.header.seq}"
        for x in StreamDecoder().feed(stream)
    ]
    assert line.split(" ")[1:] == py


def test_fuzz_under_sanitizers(exe):
    proc = subprocess.run(
        [str(exe), "--fuzz", "7", "50000"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("FUZZ 50000"), (
        proc.stdout + proc.stderr
    )


def _random_message(rng: random.Random):
    n = rng.randrange(1, 13)
    vals = tuple(rng.uniform(-3, 3) for _ in range(n))
    return rng.choice(
        [
            JointCommand(rng.randrange(1 << 32), vals, vals),
            State(
                Mode.ARMED,
                rng.randrange(64),
                rng.randrange(65536),
                vals,
                vals,
                vals,
                vals,
            ),
            Heartbeat(rng.randrange(65536), rng.randrange(1 << 32), Mode.FAULT),
        ]
    )
