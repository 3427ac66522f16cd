"""Typed run records: one tick, one query, one episode — written by the loop, read back here.

Each record is a frozen dataclass whose field names are the JSON keys of its line in the run
directory (``ticks.jsonl``, ``queries.jsonl``, ``episodes.jsonl``; see :mod:`edge.telemetry`).
:meth:`to_json` gives the dict the recorder writes, :meth:`from_json` reads a line back (also a
line of an older schema, through :func:`upgrade`).

Schema versions (``meta.json`` ``schema_version``):

* 1 — no ``schema_version`` key: the short keys (``n``, ``t``, ``late``, ``ovh``, ``ovr``, ``q``,
  ``g``, ``ee``, ``raw``, ``qid``, ``cmd``, ``iv``, ``depth``; queries ``qid``, ``t_obs``, ...).
* 2 — the names below, units in the names (``t_s``, ``tick_overhead_s``, ``q_rad``).

Episode records keep their version-1 keys (``ep``, ``executed``, ``nfe``, ... are read by every
campaign); the caller's outcome fields (``success``, ``seed``, ...) sit beside the loop's counts.

Vectors (joint angles, actions) are whatever the writer passed (numpy arrays from the loop); read
back from JSON they are tuples of floats, so records read from disk compare and hash.

The 1 kHz budget: building a record is a tuple of attribute stores (slots, no validation); the
JSON encoding dominates the per-tick telemetry cost either way (measured in the README).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, ClassVar

SCHEMA_VERSION = 2

Vector = Sequence[float]  # (n,) numpy array when written by the loop, tuple when read from JSON

#: version-1 key -> current key, per stream
LEGACY_KEYS: dict[str, dict[str, str]] = {
    "ticks": {"n": "slot", "t": "t_s", "late": "lateness_s", "ovh": "tick_overhead_s",
              "cmd_s": "command_s", "ovr": "overrun_ticks", "q": "q_rad", "g": "gripper",
              "ee": "ee_pos_m", "raw": "raw_action", "qid": "query_id", "cmd": "command",
              "iv": "interventions", "depth": "queue_depth"},
    "queries": {"qid": "query_id", "t_obs": "t_obs_s", "t_submit": "t_submit_s", "t_ready": "t_ready_s",
                "t_merged": "t_merged_s", "next": "next_query_in_steps"},
    "episodes": {},
}


def upgrade(stream: str, record: dict[str, Any], version: int) -> dict[str, Any]:
    """A record of ``stream`` written with schema ``version`` -> the same record in the current keys."""
    if version >= SCHEMA_VERSION:
        return record
    table = LEGACY_KEYS.get(stream, {})
    return {table.get(k, k): v for k, v in record.items()}


def _vector(v: Any) -> tuple[float, ...] | None:
    return None if v is None else tuple(float(x) for x in v)


class _Record:
    """to_json / from_json shared by the record types (field order = JSON key order)."""

    __slots__ = ()
    _names: ClassVar[tuple[str, ...]]
    _get: ClassVar[Any]
    _vectors: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _bind(cls) -> None:
        cls._names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        cls._get = attrgetter(*cls._names)

    def to_json(self) -> dict[str, Any]:
        """The line the recorder writes (numpy values are converted by the recorder's encoder)."""
        return dict(zip(self._names, self._get(self)))

    @classmethod
    def from_json(cls, record: Mapping[str, Any], version: int = SCHEMA_VERSION) -> Any:
        """A line read back (``version`` of the schema it was written with). Unknown keys are
        ignored, missing ones take the field's default (None)."""
        d = upgrade(cls._stream, dict(record), version)  # type: ignore[attr-defined]
        kw = {k: d[k] for k in cls._names if k in d}
        for k in cls._vectors:
            if kw.get(k) is not None:
                kw[k] = _vector(kw[k])
        return cls(**kw)


@dataclass(frozen=True, slots=True)
class TickRecord(_Record):
    """One control tick (a line of ``ticks.jsonl``). Times on the loop's clock, seconds."""

    _stream: ClassVar[str] = "ticks"
    _vectors: ClassVar[tuple[str, ...]] = ("q_rad", "ee_pos_m", "raw_action", "command", "sent")

    ep: int = 0  # episode index (0 = the first episode of the run)
    slot: int = 0  # tick slot n: deadline t0 + n * period
    t_s: float = 0.0  # clock time the tick woke
    lateness_s: float = 0.0  # wake time - deadline
    tick_overhead_s: float = 0.0  # wall time of the tick's own work (state, pop, safety, send, query start)
    command_s: float = 0.0  # tick start -> command handed to the driver
    slack_s: float = 0.0  # time spent merging a chunk before this tick, in its slack
    overrun_ticks: int = 0  # deadlines missed after this tick (skipped, not caught up)
    q_rad: Vector | None = None  # (n_joints,) measured joint angles
    gripper: float | None = None  # measured gripper, 0 = open .. 1 = closed
    ee_pos_m: Vector | None = None  # (3,) measured TCP position, base frame (None: driver has none)
    raw_action: Vector | None = None  # (Da,) action taken from the queue, before safety
    query_id: int | None = None  # query whose chunk the action came from
    command: Vector | None = None  # (Da,) what safety let through
    sent: Vector | None = None  # what the driver reports it sent (after its own clamps)
    kind: str = "hold"  # act | hold | stop (safety decision)
    mode: str = "running"  # safety mode after the tick
    interventions: Sequence[Sequence[str]] | None = None  # [(kind, detail), ...] by the safety layer
    queue_depth: int = 0  # executable actions queued after this tick
    starved: bool = False  # running, but the queue had nothing for this slot


@dataclass(frozen=True, slots=True)
class QueryRecord(_Record):
    """One merged inference query (a line of ``queries.jsonl``). K and C are the documented symbols
    (denoising steps, executed actions)."""

    _stream: ClassVar[str] = "queries"

    ep: int = 0
    query_id: int = 0
    epoch: int = 0  # worker epoch (bumped by every reset / e-stop / new episode)
    t_obs_s: float = 0.0  # observation time (= the tick that started the query)
    t_submit_s: float = 0.0
    t_ready_s: float = 0.0  # when the chunk became available (charged on a virtual clock)
    t_merged_s: float = 0.0  # when the loop merged it into the queue
    # when the loop thread received the answer (process worker: off its pipe; otherwise t_ready_s)
    t_received_s: float | None = None  # None in runs written before it was recorded
    merged_in_slack: bool = False  # merged before the tick of merge_slot, while the loop waited
    latency_s: float = 0.0  # t_ready_s - t_obs_s
    compute_s: float = 0.0  # wall time of encode + scheduler + K steps on the host
    K: int = 0  # denoising steps
    C: int = 0  # actions to execute
    next_query_in_steps: int = 0
    nfe: int = 0  # denoiser evaluations
    signals: Mapping[str, Any] = field(default_factory=dict)  # scheduler signals (uncertainty, ...)
    backend: str = ""
    scheduler: str = ""
    guided: bool = False  # RTC guidance applied
    delay_steps_est: int = 0  # the loop's latency estimate at submit, in ticks
    depth_at_query: int | None = None  # executable actions queued when the query started
    start_slot: int = 0  # slot of the chunk's first action
    merge_slot: int = 0
    dropped_late: int = 0  # actions overtaken by latency
    overlap: int = 0  # actions that met the previous chunk at the seam
    frozen_kept: int = 0
    expired: bool = False  # every executable action had expired on arrival
    seam: str = ""

    @classmethod
    def from_result(cls, res: Any, rep: Any, *, ep: int, t_merged_s: float, in_slack: bool, seam: str,
                    scheduler: str, depth_at_query: int | None) -> QueryRecord:
        """The record of a merged query: ``res`` an ``edge.query.QueryResult``, ``rep`` the
        queue's ``MergeReport``; ``in_slack``: merged before the tick of ``merge_slot``, while the
        loop waited for it."""
        req, plan = res.request, res.plan
        return cls(ep=ep, query_id=req.query_id, epoch=req.epoch, t_obs_s=req.obs.t_s, t_submit_s=req.t_submit_s,
                   t_ready_s=res.t_ready_s, t_merged_s=t_merged_s, merged_in_slack=in_slack,
                   t_received_s=res.t_ready_s if res.t_received_s is None else res.t_received_s,
                   latency_s=res.latency_s, compute_s=res.compute_s, K=plan.num_steps, C=plan.execute,
                   next_query_in_steps=plan.next_query_in_steps, nfe=res.nfe, signals=dict(plan.signals),
                   backend=res.backend, scheduler=scheduler, guided=res.guided,
                   delay_steps_est=req.context.delay_steps, depth_at_query=depth_at_query,
                   start_slot=rep.start_slot, merge_slot=rep.now_slot, dropped_late=rep.dropped_late,
                   overlap=rep.overlap, frozen_kept=rep.frozen_kept, expired=rep.expired, seam=seam)


@dataclass(frozen=True, slots=True)
class EpisodeRecord(_Record):
    """One finished episode (a line of ``episodes.jsonl``): the loop's counts and the caller's
    outcome; fields the caller added that are not listed here are kept in ``extra``."""

    _stream: ClassVar[str] = "episodes"

    ep: int = 0
    ticks: int = 0
    overruns: int = 0  # missed deadlines
    starved: int = 0  # ticks with nothing to execute while running
    executed: int = 0  # actions executed
    queries: int = 0
    nfe: int = 0
    safety_mode: str = "running"  # at the episode's end
    success: bool | None = None
    seed: int | None = None
    steps: int | None = None
    instruction: str | None = None
    stop_reason: str | None = None
    sim_diverged: bool | None = None
    max_stage: int | None = None
    wall_s: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = dict(zip(self._names, self._get(self)))
        extra = d.pop("extra")
        for k in ("success", "seed", "steps", "instruction", "stop_reason", "sim_diverged", "max_stage",
                  "wall_s"):
            if d[k] is None:
                del d[k]
        return {**d, **extra}

    @classmethod
    def from_json(cls, record: Mapping[str, Any], version: int = SCHEMA_VERSION) -> EpisodeRecord:
        d = upgrade("episodes", dict(record), version)
        names = set(cls._names) - {"extra"}
        return cls(**{k: v for k, v in d.items() if k in names},
                   extra={k: v for k, v in d.items() if k not in names})

    @classmethod
    def from_loop(cls, counts: Mapping[str, Any], **outcome: Any) -> EpisodeRecord:
        """The loop's per-episode counts + the caller's outcome (``success=...``, ``seed=...``)."""
        return cls.from_json({**counts, **outcome})


for _cls in (TickRecord, QueryRecord, EpisodeRecord):
    _cls._bind()

STREAM_TYPES = {"ticks": TickRecord, "queries": QueryRecord, "episodes": EpisodeRecord}
