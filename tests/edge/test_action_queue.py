import math

import numpy as np
import pytest

from edge.action_queue import ActionQueue, QueueConfig
from edge.config import ConfigError
from edge.contracts import ActionChunk
from edge.query import guided_sample, rtc_weights

DT = 0.05


def chunk(t_start, values, execute=None, qid=1):
    a = np.asarray(values, np.float32).reshape(-1, 1)
    return ActionChunk(a, DT, t_start, len(a) if execute is None else execute, qid)


def q(seam="replace", **kw):
    return ActionQueue(QueueConfig(seam=seam, **kw), action_dim=1, period_s=DT, t0_s=0.0)


def drain(queue, start, n):
    out = []
    for s in range(start, start + n):
        a = queue.pop(s)
        out.append(None if a is None else float(a.action[0]))
    return out


def test_slots_and_latency_compensation():
    queue = q()
    assert queue.slot_of(0.0) == 0 and queue.slot_of(3 * DT) == 3 and queue.slot_of(3 * DT + 0.049) == 3
    rep = queue.merge(chunk(0.0, range(10), execute=6), now_slot=2)  # arrived 2 ticks late
    assert rep.dropped_late == 2 and rep.executable == 4 and not rep.expired
    assert queue.depth(2) == 4
    assert drain(queue, 2, 6) == [2, 3, 4, 5, None, None]  # tail (6..9) never executes
    assert queue.starved_ticks == 2 and queue.dropped_late == 2 and queue.served == 4


def test_expired_chunk_does_not_touch_the_queue():
    queue = q()
    queue.merge(chunk(0.0, [1, 1, 1, 1]), now_slot=0)
    rep = queue.merge(chunk(0.0, [9, 9], qid=2), now_slot=3)
    assert rep.expired and rep.dropped_late == 2
    assert drain(queue, 3, 2) == [1, None]


def test_never_replays_past_actions():
    queue = q()
    queue.merge(chunk(0.0, range(8)), now_slot=0)
    assert drain(queue, 0, 2) == [0, 1]
    assert queue.pop(5).action[0] == 5  # slots 2..4 skipped (overrun): purged, not replayed
    assert queue.skipped == 3
    assert drain(queue, 6, 3) == [6, 7, None]


def test_sync_restamps_the_chunk():
    queue = q(latency_compensation=False)
    rep = queue.merge(chunk(0.0, range(4)), now_slot=3)
    assert rep.dropped_late == 0 and rep.start_slot == 3
    assert drain(queue, 3, 5) == [0, 1, 2, 3, None]


def test_replace_and_weighted_seams():
    for seam, expect in (("replace", [10, 10, 10]), ("weighted", [5.5, 5.5, 10])):
        queue = q(seam, blend_new=0.5)
        queue.merge(chunk(0.0, [1] * 6, execute=5), now_slot=0)
        drain(queue, 0, 3)
        queue.merge(chunk(3 * DT, [10] * 6, qid=2), now_slot=3)  # overlap: slots 3, 4
        assert drain(queue, 3, 3) == expect, seam


def test_rtc_freezes_the_actions_that_run_during_inference():
    queue = q("rtc")
    queue.merge(chunk(0.0, [1, 2, 3, 4, 5, 6, 7, 8], execute=8), now_slot=0)
    drain(queue, 0, 2)
    # a query observed at slot 2 expected 2 ticks of latency -> frozen until slot 4; it arrived early
    rep = queue.merge(chunk(2 * DT, [30, 40, 50, 60, 70, 80], qid=2), now_slot=3, frozen_until_slot=4)
    assert rep.frozen_kept == 1 and rep.dropped_late == 1
    out = [queue.pop(s) for s in range(3, 7)]
    assert [float(a.action[0]) for a in out] == [4, 50, 60, 70]
    assert [a.query_id for a in out] == [1, 2, 2, 2]


def test_prefix_and_clear():
    queue = q()
    queue.merge(chunk(0.0, range(6), execute=3), now_slot=0)
    np.testing.assert_array_equal(queue.prefix(1, 10)[:, 0], [1, 2, 3, 4, 5])  # tail included
    assert len(queue.prefix(9, 3)) == 0
    # a query made after this tick's pop still sees the slot's own (already popped) action first
    assert float(queue.pop(0).action[0]) == 0.0
    np.testing.assert_array_equal(queue.prefix(0, 3)[:, 0], [0, 1, 2])
    assert len(queue.prefix(-1, 3)) == 0
    queue.clear()
    assert queue.depth(0) == 0 and queue.pop(0) is None


def test_merge_checks_period_and_shape():
    queue = q()
    with pytest.raises(ValueError, match="period"):
        queue.merge(ActionChunk(np.zeros((3, 1), np.float32), 0.1, 0.0, 3), 0)
    with pytest.raises(ValueError, match="shape"):
        queue.merge(ActionChunk(np.zeros((3, 2), np.float32), DT, 0.0, 3), 0)
    with pytest.raises(ConfigError, match="seam"):
        QueueConfig(seam="splice")


def test_rtc_weights():
    w = rtc_weights(10, frozen=2, overlap=6)
    assert w.shape == (10,)
    np.testing.assert_array_equal(w[:2], 1.0)
    assert np.all(np.diff(w[2:6]) < 0) and np.all(w[2:6] > 0) and np.all(w[2:6] < 1)
    np.testing.assert_array_equal(w[6:], 0.0)
    assert rtc_weights(4, frozen=9, overlap=9).tolist() == [1, 1, 1, 1]


def _toward(target):
    def step(features, x, tau, dtau):
        return x + dtau * (target - x) / (1.0 - tau)

    return step


def test_guided_sample_pins_the_frozen_prefix():
    rng = np.random.default_rng(0)
    H, Da = 8, 3
    policy_target = np.ones((H, Da), np.float32)
    prev = np.zeros((5, Da), np.float32)
    noise = rng.standard_normal((H, Da)).astype(np.float32)
    free = guided_sample(_toward(policy_target), None, noise, 5)
    np.testing.assert_allclose(free, policy_target, atol=1e-5)
    trace = []
    out = guided_sample(
        _toward(policy_target), None, noise, 5, target=prev, weights=rtc_weights(H, 2, 5), trace=trace
    )
    np.testing.assert_allclose(out[:2], 0.0, atol=1e-5)  # frozen = previous chunk exactly
    assert np.all(out[2:5, 0] > 0) and np.all(out[2:5, 0] < 1)  # ramp between the chunks
    assert np.all(np.diff(out[:5, 0]) >= -1e-6)
    np.testing.assert_allclose(out[5:], 1.0, atol=1e-5)  # beyond the overlap: the policy's own
    assert len(trace) == 5 and trace[0].shape == (H, Da)
    with pytest.raises(ValueError, match="weights"):
        guided_sample(_toward(policy_target), None, noise, 2, target=prev)


class SlotModel:
    """Reference: the queue as one dict entry per slot (action, executable, query id, t_obs), the
    definition the run-based ActionQueue must match operation for operation."""

    def __init__(self, config, period_s):
        self.config, self.period_s = config, period_s
        self.slots, self.popped = {}, None
        self.starved = self.dropped_late = self.skipped = self.served = 0

    def purge(self, now):
        for s in [s for s in self.slots if s < now]:
            self.skipped += int(self.slots.pop(s)[1])

    def merge(self, ch, now, frozen_until):
        H = len(ch.actions)
        start = math.floor(ch.t_start_s / self.period_s + 1e-6) if self.config.latency_compensation else now
        C = min(max(ch.execute, 0), H)
        first = max(0, now - start)
        self.dropped_late += min(first, C)
        if first >= C:
            return (min(first, C), 0, 0, None, True)
        self.purge(now)
        new, overlap, kept = {}, 0, 0
        for i in range(first, H):
            slot, ex = now + i - first, i < C
            entry = [ch.actions[i].copy(), ex, ch.query_id, ch.t_start_s]
            old = self.slots.get(slot)
            if old is not None and old[1] and ex:
                overlap += 1
                if self.config.seam == "weighted":
                    w = self.config.blend_new
                    entry[0] = (1.0 - w) * old[0] + w * entry[0]
            if (self.config.seam == "rtc" and frozen_until is not None and old is not None and old[1]
                    and slot < frozen_until):
                entry, kept = list(old), kept + 1
            new[slot] = entry
        self.slots = new
        return (min(first, C), overlap, kept, sum(e[1] for e in new.values()), False)

    def pop(self, now):
        self.purge(now)
        e = self.slots.get(now)
        if e is None or not e[1]:
            self.starved += 1
            return None
        del self.slots[now]
        self.served += 1
        return e

    def depth(self, now):
        return sum(1 for s, e in self.slots.items() if s >= now and e[1])


@pytest.mark.parametrize("seam", ["replace", "weighted", "rtc"])
@pytest.mark.parametrize("compensate", [True, False])
def test_queue_matches_the_per_slot_model(seam, compensate):
    """Random merges (late, early, short, long, with and without a frozen region, also after the
    slot's own pop), pops, skipped slots and clears: every report, action, count and depth agrees."""
    rng = np.random.default_rng([("replace", "weighted", "rtc").index(seam), int(compensate)])
    config = QueueConfig(seam=seam, latency_compensation=compensate, blend_new=0.3)
    for _ in range(150):
        queue, model = ActionQueue(config, 2, DT, 0.0), SlotModel(config, DT)
        slot, qid = 0, 0
        for _ in range(40):
            r = rng.random()
            if r < 0.3:
                H, qid = int(rng.integers(1, 12)), qid + 1
                at = slot - 1 if slot and rng.random() < 0.3 else slot  # after this slot's pop
                ch = ActionChunk(rng.standard_normal((H, 2)).astype(np.float32), DT,
                                 (at - int(rng.integers(0, 6))) * DT + 1e-4, int(rng.integers(0, H + 2)), qid)
                frozen = None if rng.random() < 0.3 else at + int(rng.integers(0, 6))
                rep = queue.merge(ch, at, frozen)
                want = model.merge(ch, at, frozen)
                got = (rep.dropped_late, rep.overlap, rep.frozen_kept, rep.executable, rep.expired)
                if rep.expired:
                    assert want[4] and rep.dropped_late == want[0] and rep.executable == model.depth(at)
                else:
                    assert got == want
            elif r < 0.85:
                a, e = queue.pop(slot), model.pop(slot)
                assert (a is None) == (e is None)
                if a is not None:
                    assert np.array_equal(a.action, e[0]) and (a.query_id, a.t_obs_s) == (e[2], e[3])
                slot += 1
            elif r < 0.95:
                slot += int(rng.integers(1, 4))  # overrun: slots pass unpopped
            else:
                queue.clear()
                model.slots = {}
            assert queue.depth(slot) == model.depth(slot) and queue.depth(slot + 2) == model.depth(slot + 2)
            assert (queue.starved_ticks, queue.dropped_late, queue.skipped, queue.served) == (
                model.starved, model.dropped_late, model.skipped, model.served)


def test_executable_from_a_slot_counts_the_popped_action_and_not_the_tail():
    queue = q()
    queue.merge(chunk(0.0, range(10), execute=4), now_slot=0)
    assert queue.executable(0)[:, 0].tolist() == [0, 1, 2, 3]  # not the tail 4..9
    queue.pop(0)
    assert queue.executable(0)[:, 0].tolist() == [0, 1, 2, 3]  # slot 0's action, already popped
    assert queue.executable(1)[:, 0].tolist() == [1, 2, 3]
    drain(queue, 1, 3)
    assert queue.executable(4).shape == (0, 1)
