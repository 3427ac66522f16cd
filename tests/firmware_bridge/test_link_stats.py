import pytest

from firmware_bridge.link_stats import LinkStats, SeqTracker, SeqVerdict, percentile


def test_first_frame_is_new_then_gaps_duplicates_stale():
    t = SeqTracker()
    assert t.check(10) == (SeqVerdict.NEW, 0)
    assert t.check(11) == (SeqVerdict.NEW, 0)
    assert t.check(11) == (SeqVerdict.DUPLICATE, 0)
    assert t.check(15) == (SeqVerdict.NEW, 3)
    assert t.check(12) == (SeqVerdict.STALE, 0)
    assert t.last == 15


def test_wraps_around_u16():
    t = SeqTracker()
    t.reset(0xFFFE)
    assert t.check(0xFFFF)[0] is SeqVerdict.NEW
    assert t.check(0x0000)[0] is SeqVerdict.NEW
    assert t.check(0xFFFF)[0] is SeqVerdict.STALE
    assert t.check(0x7FFF) == (SeqVerdict.NEW, 0x7FFE)
    # Exactly half-way counts as stale.
    assert t.check(0x7FFF + 0x8000)[0] is SeqVerdict.STALE


def test_percentiles_and_window():
    s = LinkStats(rtt_window=100)
    for i in range(200):
        s.add_rtt(float(i))
    assert len(s.rtt_s) == 100
    p = s.rtt_percentiles_s()
    assert p["p50"] == pytest.approx(150, abs=1) and p["max"] == 199
    assert percentile([], 50) != percentile([], 50)  # NaN when empty
    d = s.as_dict()
    assert d["rtt_samples"] == 100 and "rtt_window" not in d
