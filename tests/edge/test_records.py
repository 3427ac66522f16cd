"""Typed run records: JSON round trip, the schema version, and old (unversioned) run directories."""

import json

import numpy as np
import pytest

from edge.errors import EdgeError
from edge.records import SCHEMA_VERSION, EpisodeRecord, QueryRecord, TickRecord, upgrade
from edge.telemetry import RunRecorder, _plain, read_run, summarize


def _roundtrip(rec):
    return json.loads(json.dumps(rec.to_json(), default=_plain))


def test_tick_record_round_trips_through_json():
    rec = TickRecord(ep=1, slot=7, t_s=0.35, tick_overhead_s=1e-4, overrun_ticks=2, q_rad=np.arange(7.0),
                     gripper=0.5, ee_pos_m=np.array([0.4, 0.0, 0.3]), interventions=[("step_cap", "x")],
                     kind="act", queue_depth=3)
    back = TickRecord.from_json(_roundtrip(rec))
    assert back.slot == 7 and back.overrun_ticks == 2 and back.q_rad == tuple(range(7))
    assert back.ee_pos_m == (0.4, 0.0, 0.3) and back.interventions == [["step_cap", "x"]]
    assert TickRecord.from_json(_roundtrip(back)) == back
    with pytest.raises(AttributeError):
        back.slot = 3  # frozen


def test_query_and_episode_records_round_trip():
    q = QueryRecord(ep=0, query_id=4, t_obs_s=1.0, K=10, C=8, nfe=10, signals={"u": 0.1})
    assert QueryRecord.from_json(_roundtrip(q)) == q
    e = EpisodeRecord.from_loop({"ep": 2, "ticks": 9, "executed": 8, "nfe": 3}, success=True, seed=5, note="x")
    d = e.to_json()
    assert d["success"] is True and d["note"] == "x" and "wall_s" not in d  # absent outcome: no key
    assert EpisodeRecord.from_json(d) == e and e.extra == {"note": "x"}


def test_legacy_keys_are_mapped():
    old = {"n": 3, "t": 0.15, "late": 0.0, "ovh": 2e-4, "ovr": 1, "g": 1.0, "iv": [["accel_cap", ""]],
           "qid": 2, "depth": 4, "raw": [0.1], "kind": "act"}
    new = upgrade("ticks", old, 1)
    assert new["tick_overhead_s"] == 2e-4 and new["overrun_ticks"] == 1 and new["gripper"] == 1.0
    assert new["interventions"] == [["accel_cap", ""]] and new["slot"] == 3 and new["queue_depth"] == 4
    assert upgrade("queries", {"qid": 2, "t_obs": 1.0, "next": 8}, 1) == {
        "query_id": 2, "t_obs_s": 1.0, "next_query_in_steps": 8}
    assert upgrade("ticks", new, SCHEMA_VERSION) is new


def test_meta_has_the_schema_version_and_old_run_dirs_stay_readable(tmp_path):
    rec = RunRecorder(tmp_path / "new", meta={"period_s": 0.05})
    rec.close()
    assert json.loads((tmp_path / "new" / "meta.json").read_text())["schema_version"] == SCHEMA_VERSION
    old = tmp_path / "old"  # written before records were versioned: no schema_version, short keys
    old.mkdir()
    (old / "meta.json").write_text(json.dumps({"period_s": 0.05}))
    ticks = [{"ep": 0, "n": n, "t": 0.05 * n, "late": 0.0, "ovh": 1e-4, "ovr": 0, "g": 0.0, "kind": "act",
              "iv": [["step_cap", ""]] if n == 2 else None, "qid": 1, "depth": 3, "starved": False}
             for n in range(4)]
    (old / "ticks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in ticks))
    (old / "queries.jsonl").write_text(json.dumps({"ep": 0, "qid": 1, "t_obs": 0.0, "K": 2, "C": 4,
                                                   "nfe": 2, "latency_s": 0.0}) + "\n")
    run = read_run(old)
    assert run.schema_version == 1 and run.ticks[2]["interventions"] == [["step_cap", ""]]
    assert run.tick_records()[3].slot == 3 and run.query_records()[0].t_obs_s == 0.0
    s = summarize(run)
    assert s["tick_overhead_p50_ms"] == pytest.approx(0.1) and s["interventions"] == {"step_cap": 1}
    assert s["jitter_p99_ms"] == pytest.approx(0.0, abs=1e-9) and s["nfe_per_action"] == 0.5


def test_a_newer_schema_is_refused(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(EdgeError, match="newer"):
        read_run(tmp_path)


def test_the_loop_fills_every_field_in_order():
    """The loop builds TickRecord positionally (cheaper on the tick path): check the fields land."""
    from tests.fakes import build_loop

    loop, _driver, _policy, _clock = build_loop(latency_s=0.0, K=2, C=4)
    loop.start()
    recs = [loop.step() for _ in range(6)]
    r = recs[-1]
    assert [x.slot for x in recs] == list(range(6)) and r.t_s == pytest.approx(5 * loop.period_s)
    assert r.kind == "act" and r.mode == "running" and r.query_id is not None and r.starved is False
    assert len(r.q_rad) == 7 and 0.0 <= r.gripper <= 1.0 and len(r.raw_action) == 8
    assert r.queue_depth >= 0 and r.overrun_ticks == 0 and r.tick_overhead_s >= r.command_s >= 0.0
    assert r.lateness_s == 0.0 and r.slack_s == 0.0
