"""Fuzz the frame decoder: random and mutated frames, zero escaped exceptions, bounded memory.

Each iteration draws one input from a mix of generators and passes it to ``decode_frame``; the
same inputs are also streamed in random chunks through ``StreamDecoder`` (deframer + decoder):

* ``random``      random bytes, 0..320 B (mostly COBS/TOO_SHORT/CRC rejects);
* ``mutated``     a valid frame with 1-4 bytes replaced, bits flipped, truncated or extended;
* ``recrc``       a valid raw frame with header/payload bytes mutated and the CRC recomputed, so
                  the checks behind the CRC (version, flags, type, length, payload) are exercised;
* ``valid``       an untouched valid frame (must decode).

Any exception other than ``FrameError`` counts as escaped (the target is zero). Two passes:
the timed pass (``--frames``, default 1,000,000) runs without tracing; the memory pass
(``--trace-frames``, default 100,000, other seed) runs under tracemalloc, whose peak and
checkpoints every 10 % show whether memory grows. tracemalloc slows this allocation-heavy loop
about 4x, which is why it does not cover the timed pass; there, ``sys.getallocatedblocks()`` and
ru_maxrss are sampled at the same checkpoints. Expect a small rise that levels off: CPython keeps
up to 2000 freed tuples per length 1..20 on free lists (at most ~5 MB), and the decoder creates
float tuples of many lengths. The decoder itself holds nothing between calls (no reference cycles,
no caches that grow with input).

    python benchmarks/codec_fuzz.py                      # ~2 min on a 2-core CPU
    python benchmarks/codec_fuzz.py --frames 20000 --trace-frames 5000 --out /tmp/fuzz.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import struct
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import whole, writable_path
from firmware_bridge import cobs
from firmware_bridge.crc import crc16_ccitt_false
from firmware_bridge.frame_codec import (
    FrameError,
    StreamDecoder,
    decode_frame,
    encode_frame,
)
from firmware_bridge.messages import (
    Ack,
    Arm,
    ClearFault,
    Estop,
    Heartbeat,
    Hello,
    JointCommand,
    LimitsConfig,
    Nack,
    State,
)
from firmware_bridge.wire_constants import MAX_ENCODED_FRAME, ErrorCode, Mode

RESULTS = Path(__file__).resolve().parent / "results" / "codec_fuzz.json"


def machine_info() -> dict[str, object]:
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                check=False,
                capture_output=True,
                text=True,
                cwd=Path(__file__).parent,
                timeout=5,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "git_commit": commit,
    }


def _valid_pool(rng: random.Random, size: int) -> list[bytes]:
    pool = []
    for i in range(size):
        n = rng.randrange(1, 13)
        v = tuple(rng.uniform(-4, 4) for _ in range(n))
        msg = rng.choice(
            [
                JointCommand(rng.getrandbits(32), v, v),
                State(
                    rng.choice(list(Mode)),
                    rng.getrandbits(32),
                    rng.getrandbits(16),
                    v,
                    v,
                    v,
                    v,
                ),
                LimitsConfig(v, v, v, v),
                Heartbeat(rng.getrandbits(16), rng.getrandbits(32), Mode.ARMED),
                Hello(1, 1, rng.getrandbits(32)),
                Estop(rng.getrandbits(8)),
                ClearFault(rng.getrandbits(32)),
                Arm(),
                Ack(0x10, rng.getrandbits(16)),
                Nack(0x10, rng.getrandbits(16), ErrorCode.NOT_ARMED),
            ]
        )
        pool.append(
            encode_frame(
                msg,
                seq=i & 0xFFFF,
                session_id=rng.getrandbits(16),
                t_us=rng.getrandbits(32),
                flags=rng.randrange(4),
            )[:-1]
        )
    return pool


def _mutate(rng: random.Random, enc: bytes) -> bytes:
    buf = bytearray(enc)
    op = rng.randrange(4)
    if op == 0:
        for _ in range(rng.randrange(1, 5)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    elif op == 1:
        for _ in range(rng.randrange(1, 5)):
            bit = rng.randrange(len(buf) * 8)
            buf[bit // 8] ^= 1 << (bit % 8)
    elif op == 2:
        del buf[rng.randrange(len(buf)) :]
    else:
        pos = rng.randrange(len(buf) + 1)
        buf[pos:pos] = rng.randbytes(rng.randrange(1, 40))
    return bytes(buf)


def _recrc(rng: random.Random, enc: bytes) -> bytes:
    raw = bytearray(cobs.decode(enc))
    body = raw[:-2]
    for _ in range(rng.randrange(1, 3)):
        pos = (
            rng.randrange(min(len(body), 16))
            if rng.random() < 0.6
            else rng.randrange(len(body))
        )
        body[pos] = rng.randrange(256)
    if rng.random() < 0.2:
        body = body[: rng.randrange(13, len(body) + 1)]
    return cobs.encode(bytes(body) + struct.pack("<H", crc16_ccitt_false(body)))


def run(frames: int, seed: int, trace: bool) -> dict[str, object]:
    rng = random.Random(seed)
    pool = _valid_pool(rng, 2000)
    kinds = ("random", "mutated", "recrc", "valid")
    weights = (0.35, 0.35, 0.25, 0.05)
    outcome: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    escaped: list[str] = []
    stream = StreamDecoder()
    stream_items = 0
    pending_max = 0
    if trace:
        tracemalloc.start()
    base_current = tracemalloc.get_traced_memory()[0]
    checkpoints = []
    t0 = time.perf_counter()
    for i in range(frames):
        kind = rng.choices(kinds, weights)[0]
        by_kind[kind] += 1
        if kind == "random":
            data = rng.randbytes(rng.randrange(0, 321))
        elif kind == "mutated":
            data = _mutate(rng, rng.choice(pool))
        elif kind == "recrc":
            data = _recrc(rng, rng.choice(pool))
        else:
            data = rng.choice(pool)
        try:
            decode_frame(data)
            outcome["OK"] += 1
        except FrameError as exc:
            outcome[exc.code.value] += 1
        except Exception as exc:  # noqa: BLE001 - counting escapes is the point of this script
            if len(escaped) < 20:
                escaped.append(f"{type(exc).__name__}: {exc} input={data.hex()}")
            outcome["ESCAPED"] += 1
        # Same bytes as a stream, delimited most of the time and cut at random points.
        try:
            tail = b"\x00" if rng.random() < 0.9 else b""
            stream_items += len(stream.feed(data + tail))
            pending_max = max(pending_max, stream.deframer.pending)
        except Exception as exc:  # noqa: BLE001
            if len(escaped) < 20:
                escaped.append(f"stream {type(exc).__name__}: {exc}")
            outcome["ESCAPED_STREAM"] += 1
        if (i + 1) % max(1, frames // 10) == 0:
            point = {
                "frames": i + 1,
                "allocated_blocks": sys.getallocatedblocks(),
                "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
            if trace:
                cur, peak = tracemalloc.get_traced_memory()
                point |= {
                    "current_bytes": cur - base_current,
                    "peak_bytes": peak - base_current,
                }
            checkpoints.append(point)
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base_current if trace else None
    tracemalloc.stop()
    return {
        "frames": frames,
        "seed": seed,
        "elapsed_s": round(elapsed, 3),
        "frames_per_s": round(frames / elapsed, 1),
        "escaped_exceptions": outcome["ESCAPED"] + outcome["ESCAPED_STREAM"],
        "escaped_examples": escaped,
        "outcomes": dict(sorted(outcome.items())),
        "inputs_by_kind": dict(by_kind),
        "stream_items": stream_items,
        "stream_oversize_runs": stream.deframer.oversize,
        "stream_pending_max_bytes": pending_max,
        "stream_pending_cap_bytes": MAX_ENCODED_FRAME,
        "tracemalloc_peak_bytes": peak,
        "checkpoints": checkpoints,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=whole(1), default=1_000_000)
    parser.add_argument("--trace-frames", type=whole(1), default=100_000)
    parser.add_argument("--seed", type=whole(0), default=0)
    parser.add_argument("--out", type=writable_path, default=str(RESULTS))
    args = parser.parse_args(argv)
    result = {
        "benchmark": "codec_fuzz",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "loadavg_before": os.getloadavg(),
        "timed_pass": run(args.frames, args.seed, trace=False),
        "memory_pass": run(args.trace_frames, args.seed + 1, trace=True),
        "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "loadavg_after": os.getloadavg(),
    }
    result["frames_total"] = args.frames + args.trace_frames
    result["escaped_exceptions"] = (
        result["timed_pass"]["escaped_exceptions"]
        + result["memory_pass"]["escaped_exceptions"]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    t, m = result["timed_pass"], result["memory_pass"]
    print(
        json.dumps(
            {
                "frames": t["frames"],
                "elapsed_s": t["elapsed_s"],
                "frames_per_s": t["frames_per_s"],
                "escaped_exceptions": result["escaped_exceptions"],
                "tracemalloc_peak_bytes": m["tracemalloc_peak_bytes"],
                "ru_maxrss_kib": result["ru_maxrss_kib"],
            }
        )
    )
    return 1 if result["escaped_exceptions"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
