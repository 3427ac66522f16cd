"""Replay windows and n-step value targets."""

import numpy as np
import pytest

from world_models.replay import Episode, Replay, nstep_targets


def _ep(T, terminated, r=1.0):
    return Episode(states=np.arange(T + 1, dtype=np.float32)[:, None], actions=np.zeros(T, np.int64),
                   rewards=np.full(T, r, np.float32), policies=np.full((T, 2), 0.5, np.float32),
                   root_values=np.zeros(T, np.float32), terminated=terminated)


def test_nstep_known_answers():
    g = 0.5
    # one window: states 0..3 of a terminated episode of 3 steps, then padding
    valid = np.array([[True, True, True, True, False]])
    acted = np.array([[True, True, True, False, False]])
    term = np.array([[False, False, False, True, False]])
    r = np.array([[1.0, 1.0, 1.0, 0.0, 0.0]])
    v = np.full((1, 5), 10.0)
    z, ok = nstep_targets(r, v, valid, acted, term, g, n=2)
    assert ok[0, :4].all() and not ok[0, 4]
    assert z[0, 0] == pytest.approx(1 + g * 1 + g**2 * 10)  # bootstrap from state 2
    assert z[0, 1] == pytest.approx(1 + g * 1 + 0.0)  # state 3 is terminal: bootstrap 0
    assert z[0, 2] == pytest.approx(1.0)
    assert z[0, 3] == 0.0  # terminal state's own value
    # a cut episode: its last state bootstraps from its value and has no target itself
    term_cut = np.zeros_like(term)
    z, ok = nstep_targets(r, v, valid, acted, term_cut, g, n=2)
    assert z[0, 2] == pytest.approx(1 + g * 10) and not ok[0, 3]
    # the bootstrap state beyond the window: no target
    z, ok = nstep_targets(r[:, :2], v[:, :2], valid[:, :2], acted[:, :2], term[:, :2], g, n=2)
    assert not ok.any()


def test_sample_windows_pad_and_mark():
    rp = Replay(100)
    rp.add(_ep(3, True))
    b = rp.sample(np.random.default_rng(0), 64, 6, left_pad=2)
    for row in range(64):
        vals = b["states"][row, b["valid"][row], 0]
        assert np.all(np.diff(vals) == 1)  # consecutive states of one episode
        last = np.flatnonzero(b["valid"][row])[-1]
        if vals[-1] == 3:
            assert b["terminal"][row, last] and not b["acted"][row, last]
    assert (~b["valid"][:, 0]).any()  # some windows start before the episode (left padding)


def test_capacity_and_errors():
    rp = Replay(5)
    rp.add(_ep(3, False))
    rp.add(_ep(3, False))
    assert rp.transitions == 3 and len(rp.episodes) == 1
    with pytest.raises(ValueError, match="disagree"):
        Episode(np.zeros((3, 1)), np.zeros(3, np.int64), np.zeros(3), np.zeros((3, 2)), np.zeros(3), True)
    with pytest.raises(ValueError, match="empty"):
        Replay(3).sample(np.random.default_rng(0), 1, 2)
