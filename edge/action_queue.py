"""Time-indexed action buffer between the inference worker and the control loop: the queue-side half
of real-time chunking (RTC); the sampler-side half is :mod:`edge.query`.

Time is discretised into *slots*: slot ``n`` is the control tick whose deadline is
``t0_s + n * period_s``. A chunk observed at ``t_start_s`` puts action ``i`` into slot
``slot_of(t_start_s) + i``; only its first ``execute`` actions are executable, the rest (the tail) is
kept for blending and guidance but never executed.

``merge(chunk, now_slot)`` (called when a chunk arrives at tick ``now_slot``):

* latency compensation: actions for slots before ``now_slot`` already passed while the model was
  computing; they are dropped and counted (``dropped_late``). With compensation off (synchronous
  execution) the chunk is re-stamped to start at ``now_slot`` instead.
* seam with what is left of the previous chunk, by ``QueueConfig.seam``:
  ``replace`` — the new chunk supersedes the old one;
  ``weighted`` — on the overlap of both executable windows, ``(1 - w) * old + w * new``;
  ``rtc`` — slots before ``frozen_until_slot`` (the actions that were going to run while this
  query computed) keep the old actions; the rest come from the new chunk, which the sampler was
  guided toward the old one (:func:`edge.query.guided_sample`).

``pop(now_slot)`` returns the action for this tick or None when the queue is dry (counted as
starvation). Entries for past slots are purged, never replayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edge.config import cfg, check_fields
from edge.contracts import ActionChunk

SEAMS = ("replace", "weighted", "rtc")


@dataclass
class QueueConfig:
    """How chunks are aligned to time and stitched together."""

    seam: str = cfg("rtc", "seam strategy between consecutive chunks", choices=SEAMS)
    blend_new: float = cfg(0.5, "weighted: weight of the new chunk on the overlap", range=(0.0, 1.0))
    latency_compensation: bool = cfg(True, "drop actions whose time passed during inference")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class QueuedAction:
    action: np.ndarray  # (Da,)
    slot: int
    query_id: int
    t_obs_s: float  # observation time of the query that produced it


@dataclass(frozen=True)
class MergeReport:
    query_id: int
    start_slot: int  # slot of action 0
    now_slot: int
    dropped_late: int  # executable actions dropped because their time had passed
    overlap: int  # slots where old and new executable actions met
    frozen_kept: int  # rtc: old actions kept in the frozen region
    executable: int  # executable actions in the queue after the merge
    expired: bool  # every executable action of the chunk had already passed


class ActionQueue:
    """Slot-indexed buffer. Not thread-safe: only the control loop thread touches it."""

    def __init__(self, config: QueueConfig, action_dim: int, period_s: float, t0_s: float) -> None:
        self.config = config
        self.action_dim = action_dim
        self.period_s = period_s
        self.t0_s = t0_s
        self.starved_ticks = 0
        self.dropped_late = 0
        self.skipped = 0  # executable actions whose slot passed without being popped (overruns)
        self.served = 0
        self.clear()

    def slot_of(self, t_s: float) -> int:
        """Slot whose period contains ``t_s`` (the loop reads state just after each deadline)."""
        return math.floor((t_s - self.t0_s) / self.period_s + 1e-6)

    def clear(self) -> None:
        """Drop everything (reset, e-stop): nothing planned before this call will run."""
        self._base = 0  # slot of self._a[0]
        self._last_popped: tuple[int, np.ndarray] | None = None
        self._a = np.zeros((0, self.action_dim), dtype=np.float32)
        # executable slots are [_base, _exec_end): every seam keeps them one run from the front
        self._exec_end = 0
        # which query each queued slot came from, as runs: (end slot, exclusive; query id; t_obs_s)
        self._runs: list[tuple[int, int, float]] = []

    # ------------------------------------------------------------------ reads
    def depth(self, now_slot: int) -> int:
        """Executable actions at or after ``now_slot``."""
        return max(0, self._exec_end - max(now_slot, self._base))

    def prefix(self, from_slot: int, n: int) -> np.ndarray:
        """Queued actions (executable or tail) for slots ``from_slot ..`` contiguous, at most ``n``:
        (m, Da). Used as the RTC guidance target for a query observed at ``from_slot``."""
        k = from_slot - self._base
        if k == -1 and self._last_popped is not None and self._last_popped[0] == from_slot:
            # the slot's own action was already popped this tick (a query made after the command
            # went out): it is part of what the new chunk must agree with
            return np.concatenate([self._last_popped[1][None], self._a[: n - 1]])
        if k < 0 or k >= len(self._a):
            return np.zeros((0, self.action_dim), dtype=np.float32)
        return self._a[k : k + n].copy()

    def executable(self, from_slot: int) -> np.ndarray:
        """The executable actions for slots ``from_slot ..`` (m, Da), the one already popped at
        ``from_slot`` included (a query made after the tick's command went out); the tail that never
        runs is not."""
        popped = self._last_popped is not None and self._last_popped[0] == from_slot
        return self.prefix(from_slot, self.depth(from_slot) + int(popped))

    # ------------------------------------------------------------------ writes
    def merge(self, chunk: ActionChunk, now_slot: int, frozen_until_slot: int | None = None) -> MergeReport:
        """Merge ``chunk`` at tick ``now_slot``, which is never before the last popped slot (the loop
        merges for the tick it is at or about to run): the executable actions then stay one run."""
        if abs(chunk.period_s - self.period_s) > 1e-9:
            raise ValueError(f"chunk period {chunk.period_s} s != loop period {self.period_s} s")
        new = np.asarray(chunk.actions, dtype=np.float32)
        H = new.shape[0]
        if new.ndim != 2 or new.shape[1] != self.action_dim:
            raise ValueError(f"chunk actions have shape {new.shape}, expected (H, {self.action_dim})")
        start = self.slot_of(chunk.t_start_s) if self.config.latency_compensation else now_slot
        C = int(min(max(chunk.execute, 0), H))
        first = max(0, now_slot - start)  # index of the first action still in the future
        dropped = min(first, C)
        self.dropped_late += dropped
        report = {
            "query_id": chunk.query_id,
            "start_slot": start,
            "now_slot": now_slot,
            "dropped_late": dropped,
        }
        if first >= C:
            return MergeReport(
                **report, overlap=0, frozen_kept=0, executable=self.depth(now_slot), expired=True
            )

        self._purge(now_slot)  # old entries now start at now_slot (or at the next slot, once popped)
        # a handful of slice operations whatever the chunk length: this runs on the tick that
        # receives a chunk, often with a cold cache (per-slot mask arithmetic cost ~150 us at H=400)
        n_new = H - first
        a = new[first:].copy()
        new_end = now_slot + C - first  # the new chunk's executable slots: [now_slot, new_end)
        old, old_base = self._a, self._base
        off = old_base - now_slot  # 0, or 1 when this slot's action was already popped
        # the old executable slots inside the new chunk's window: [old_base, old_end)
        old_end = min(self._exec_end, old_base + max(0, min(len(old), n_new - off)))
        overlap = max(0, min(old_end, new_end) - old_base)
        frozen_kept, exec_end, runs = 0, new_end, []
        if self.config.seam == "weighted" and overlap:
            w = self.config.blend_new
            a[off : off + overlap] = (1.0 - w) * old[:overlap] + w * a[off : off + overlap]
        elif self.config.seam == "rtc" and frozen_until_slot is not None:
            frozen_kept = max(0, min(old_end, frozen_until_slot) - old_base)
            if frozen_kept:
                if old_base > new_end:  # only if now_slot is before the last pop: never leave a gap
                    raise RuntimeError(f"rtc merge: old actions start at slot {old_base}, after the new "
                                       f"chunk's executable end {new_end}")
                end = old_base + frozen_kept
                a[off : off + frozen_kept] = old[:frozen_kept]
                exec_end = max(new_end, end)
                if off:
                    runs.append((old_base, chunk.query_id, chunk.t_start_s))
                for run_end, qid, tobs in self._runs:
                    runs.append((min(run_end, end), qid, tobs))
                    if run_end >= end:
                        break
        runs.append((now_slot + n_new, chunk.query_id, chunk.t_start_s))
        self._base, self._a, self._exec_end, self._runs = now_slot, a, exec_end, runs
        return MergeReport(
            **report, overlap=overlap, frozen_kept=frozen_kept, executable=exec_end - now_slot, expired=False
        )

    def pop(self, now_slot: int) -> QueuedAction | None:
        """The action for ``now_slot`` or None (dry: counted in ``starved_ticks``)."""
        self._purge(now_slot)
        if self._base == now_slot and self._exec_end > now_slot:
            _, qid, tobs = self._runs[0]
            qa = QueuedAction(self._a[0].copy(), now_slot, qid, tobs)
            self._last_popped = (now_slot, qa.action)
            self._drop_front(1)
            self.served += 1
            return qa
        self.starved_ticks += 1
        return None

    def _purge(self, now_slot: int) -> None:
        k = now_slot - self._base
        if k > 0:
            self.skipped += max(0, min(self._exec_end, now_slot) - self._base)
            self._drop_front(k)

    def _drop_front(self, k: int) -> None:
        self._a = self._a[k:]
        self._base += k
        self._exec_end = max(self._exec_end, self._base)
        runs = self._runs
        while runs and runs[0][0] <= self._base:
            runs.pop(0)
