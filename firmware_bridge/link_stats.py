"""Sequence-number bookkeeping and link counters, shared by the host client and the emulator."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

SEQ_MOD = 1 << 16
SEQ_HALF = SEQ_MOD // 2


class SeqVerdict(enum.Enum):
    NEW = "new"  # newer than the last accepted frame (possibly after a gap)
    DUPLICATE = "duplicate"  # same seq as the last accepted frame
    STALE = "stale"  # older than the last accepted frame (reordered or replayed)


def seq_distance(seq: int, last: int) -> int:
    """Forward distance from ``last`` to ``seq`` modulo 2**16, in [0, 65535]."""
    return (seq - last) % SEQ_MOD


class SeqTracker:
    """Accept only frames newer than the last accepted one, with u16 wrap-around.

    A frame is NEW if it is 1..32767 ahead of the last accepted seq (the gap minus one is the
    number of frames lost in between), DUPLICATE if equal, STALE otherwise.
    """

    def __init__(self) -> None:
        self.last: int | None = None

    def reset(self, seq: int | None = None) -> None:
        self.last = seq

    def check(self, seq: int) -> tuple[SeqVerdict, int]:
        """Classify ``seq`` and, if NEW, accept it. Returns (verdict, frames missed before it)."""
        if self.last is None:
            self.last = seq
            return SeqVerdict.NEW, 0
        d = seq_distance(seq, self.last)
        if d == 0:
            return SeqVerdict.DUPLICATE, 0
        if d >= SEQ_HALF:
            return SeqVerdict.STALE, 0
        self.last = seq
        return SeqVerdict.NEW, d - 1


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (q in [0, 100]); NaN if empty."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100.0 * (len(sorted_values) - 1))))
    return sorted_values[k]


@dataclass
class LinkStats:
    """Counters for one end of the link. Mutated by its owner only (single thread)."""

    frames_tx: int = 0
    frames_rx: int = 0
    bytes_tx: int = 0
    bytes_rx: int = 0
    crc_errors: int = 0
    # Every other FrameError (COBS, length, type, payload, oversize, ...)
    decode_errors: int = 0
    version_errors: int = 0
    # Frames with the wrong FROM_MCU flag (echo, crossed wires)
    wrong_direction: int = 0
    session_mismatch: int = 0
    seq_gaps: int = 0  # frames inferred lost from gaps in the peer's seq
    duplicates: int = 0
    out_of_order: int = 0  # stale seq: reordered or replayed
    nacks: int = 0
    session_changes: int = 0
    rtt_window: int = 4096
    rtt_s: deque[float] = field(default_factory=deque, repr=False)

    def add_rtt(self, rtt_s: float) -> None:
        self.rtt_s.append(rtt_s)
        while len(self.rtt_s) > self.rtt_window:
            self.rtt_s.popleft()

    def rtt_percentiles_s(self) -> dict[str, float]:
        values = sorted(self.rtt_s)
        return {
            "p50": percentile(values, 50),
            "p99": percentile(values, 99),
            "max": values[-1] if values else float("nan"),
        }

    def as_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            k: v
            for k, v in vars(self).items()
            if isinstance(v, int) and k != "rtt_window"
        }
        rtt = self.rtt_percentiles_s()
        out.update(
            {
                "rtt_p50_s": rtt["p50"],
                "rtt_p99_s": rtt["p99"],
                "rtt_samples": len(self.rtt_s),
            }
        )
        return out
