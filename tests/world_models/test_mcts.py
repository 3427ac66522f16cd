"""MuZero / Gumbel MuZero tree search against small exact models: known answers, masking, batching."""

from __future__ import annotations

import time

import numpy as np
import pytest

from world_models.mcts import (
    RecurrentFnOutput,
    RootFnOutput,
    SearchOutput,
    _considered_visits,
    gumbel_muzero_policy,
    muzero_policy,
    tree_index,
    tree_map,
    tree_stack,
)

SEARCHES = {
    "puct": lambda root, fn, n, rng, **kw: muzero_policy(root, fn, n, rng, temperature=0.0, **kw),
    "gumbel": gumbel_muzero_policy,
}
# Gumbel MuZero's action is the Sequential Halving winner by g + logits + σ(q): with Gumbel noise it
# is a sample that now and then differs from the best arm (σ(q) gaps here are 2.5-6 logits). The
# known-answer tests switch the noise off; test_gumbel_noise_rarely_outweighs_the_search keeps it.
EXACT = {"puct": {}, "gumbel": {"gumbel_scale": 0.0}}


class Tabular:
    """A batch of finite deterministic MDPs as a perfect model. Embedding: {"problem", "state"} (B,) int64.

    Tables are indexed [problem, state, action]; ``discount`` 0 marks a terminal step, after which the
    environment sits in an absorbing state with zero reward.
    """

    def __init__(self, next_state, reward, discount, logits=None, value=None):
        self.next_state = np.asarray(next_state)
        self.reward = np.asarray(reward, dtype=float)
        self.discount = np.asarray(discount, dtype=float)
        p, s, a = self.next_state.shape
        self.logits = np.zeros((p, s, a)) if logits is None else np.asarray(logits, dtype=float)
        self.value = np.zeros((p, s)) if value is None else np.asarray(value, dtype=float)
        self.calls = 0

    def root(self, problems):
        problems = np.asarray(problems)
        state = np.zeros_like(problems)
        emb = {"problem": problems, "state": state}
        return RootFnOutput(self.logits[problems, state], self.value[problems, state], emb)

    def recurrent(self, emb, action):
        self.calls += 1
        p, s = emb["problem"], emb["state"]
        nxt = self.next_state[p, s, action]
        out = RecurrentFnOutput(self.reward[p, s, action], self.discount[p, s, action],
                                self.logits[p, nxt], self.value[p, nxt])
        return out, {"problem": p, "state": nxt}


def bandit(rewards=(0.0, 0.2, 1.0, 0.5), logits=None):
    """One step, then terminal: state 0 is the root, state 1 absorbing."""
    r = np.asarray(rewards, dtype=float)
    a = r.size
    reward = np.stack([r, np.zeros(a)])[None]
    lg = None if logits is None else np.stack([np.asarray(logits, float), np.zeros(a)])[None]
    return Tabular(np.ones((1, 2, a), int), reward, np.zeros((1, 2, a)), logits=lg)


def two_step():
    """a0: 0 now, then 1 from s1 (Q* = 0.9); a1: greedy 0.3 then nothing; a2: 0.1 and terminal."""
    nxt = [[1, 2, 3], [3, 3, 3], [3, 3, 3], [3, 3, 3]]
    reward = [[0.0, 0.3, 0.1], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    discount = [[0.9, 0.9, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    return Tabular([nxt], [reward], [discount])


def run(kind, env, problems, n, seed=0, **kw) -> SearchOutput:
    return SEARCHES[kind](env.root(problems), env.recurrent, n, np.random.default_rng(seed), **kw)


# ------------------------------------------------------------------------------------------ known answers


@pytest.mark.parametrize("kind", SEARCHES)
def test_bandit_picks_the_best_arm(kind):
    env = bandit()
    out = run(kind, env, [0, 0, 0], 32, **EXACT[kind])
    assert out.action.tolist() == [2, 2, 2]
    assert env.calls == 32  # one batched model call per simulation
    assert out.visit_counts.sum(axis=1).tolist() == [32, 32, 32]
    visited = out.visit_counts > 0
    np.testing.assert_allclose(out.q_values[visited], np.broadcast_to([0.0, 0.2, 1.0, 0.5], (3, 4))[visited])
    assert np.isnan(out.q_values[~visited]).all()
    # root value: the root's own network value (0) and one return per simulation
    expected = np.nansum(out.visit_counts * np.nan_to_num(out.q_values), axis=1) / 33
    np.testing.assert_allclose(out.root_value, expected)
    np.testing.assert_allclose(out.action_weights.sum(axis=1), 1.0)
    assert (out.max_depth >= 1).all()
    if kind == "puct":
        assert (out.visit_counts.argmax(axis=1) == 2).all()
        assert (np.delete(out.visit_counts, 2, axis=1) < out.visit_counts[:, 2:3]).all()
        np.testing.assert_allclose(out.action_weights, out.visit_counts / 32)
    else:
        assert (out.action_weights.argmax(axis=1) == 2).all()


@pytest.mark.parametrize("kind", SEARCHES)
def test_two_step_prefers_the_far_sighted_action(kind):
    env = two_step()
    out = run(kind, env, [0, 0, 0], 128, **EXACT[kind])  # pUCT needs ~100 with a zero value head
    assert out.action.tolist() == [0, 0, 0]
    assert (out.max_depth >= 2).all()
    # with the reward behind it found, Q(a0) approaches 0.9 and exceeds the greedy 0.3
    assert (out.q_values[:, 0] > 0.6).all() and np.allclose(out.q_values[:, 1], 0.3)


@pytest.mark.parametrize("kind", SEARCHES)
def test_a_misleading_prior_is_overcome(kind):
    env = bandit(rewards=(0.1, 0.0, 0.0, 1.0), logits=(2.0, 0.0, 0.0, 0.0))  # prior 0.71 on a bad arm
    out = run(kind, env, [0, 0, 0], 64, **EXACT[kind])
    assert out.action.tolist() == [3, 3, 3]
    if kind == "puct":
        assert (out.visit_counts[:, 3] > out.visit_counts[:, 0]).all()


# ------------------------------------------------------------------------------------------ masking, errors


@pytest.mark.parametrize("kind", SEARCHES)
def test_invalid_actions_are_never_visited_nor_chosen(kind):
    env = bandit()
    invalid = np.array([[False, False, True, False], [True, False, False, True], [True, True, True, False]])
    kw = {"invalid_actions": invalid} if kind == "gumbel" else {"invalid_actions": invalid, "temperature": 1.0}
    fn = muzero_policy if kind == "puct" else gumbel_muzero_policy
    for seed in range(5):
        out = fn(env.root([0, 0, 0]), env.recurrent, 24, np.random.default_rng(seed), **kw)
        assert (out.visit_counts[invalid] == 0).all()
        assert not invalid[np.arange(3), out.action].any()
        assert (out.action_weights[invalid] == 0).all()
    best = run(kind, env, [0, 0, 0], 24, invalid_actions=invalid, **EXACT[kind])
    assert best.action.tolist() == [3, 2, 3]


@pytest.mark.parametrize("kind", SEARCHES)
def test_bad_inputs_raise_naming_the_argument(kind):
    env = bandit()
    root = env.root([0, 0])
    rng = np.random.default_rng(0)
    fn = SEARCHES[kind]
    with pytest.raises(ValueError, match="invalid_actions.*batch elements \\[1\\]"):
        fn(root, env.recurrent, 4, rng, invalid_actions=np.array([[False] * 4, [True] * 4]))
    with pytest.raises(ValueError, match="invalid_actions has shape"):
        fn(root, env.recurrent, 4, rng, invalid_actions=np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="num_simulations=0"):
        fn(root, env.recurrent, 0, rng)
    with pytest.raises(ValueError, match="root.value has shape"):
        fn(RootFnOutput(root.prior_logits, np.zeros(3), root.embedding), env.recurrent, 4, rng)
    with pytest.raises(ValueError, match="root.prior_logits has shape"):
        fn(RootFnOutput(np.zeros(4), np.zeros(2), root.embedding), env.recurrent, 4, rng)
    with pytest.raises(ValueError, match="root.embedding leaf"):
        fn(RootFnOutput(root.prior_logits, root.value, {"s": np.zeros(3)}), env.recurrent, 4, rng)

    def short_reward(emb, action):
        out, nxt = env.recurrent(emb, action)
        return RecurrentFnOutput(out.reward[:1], out.discount, out.prior_logits, out.value), nxt

    with pytest.raises(ValueError, match="recurrent_fn reward has shape"):
        fn(root, short_reward, 4, rng)


def test_option_ranges_are_checked():
    env = bandit()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="temperature=-1"):
        muzero_policy(env.root([0]), env.recurrent, 4, rng, temperature=-1)
    with pytest.raises(ValueError, match="dirichlet_fraction=2"):
        muzero_policy(env.root([0]), env.recurrent, 4, rng, dirichlet_fraction=2)
    with pytest.raises(ValueError, match="max_num_considered_actions=0"):
        gumbel_muzero_policy(env.root([0]), env.recurrent, 4, rng, max_num_considered_actions=0)


# ------------------------------------------------------------------------------------------ batching, determinism


def mixed_problems():
    """Three bandits with the best arm at 2, 0 and 3."""
    r = np.array([[0.0, 0.2, 1.0, 0.5], [0.9, 0.1, 0.0, 0.3], [0.0, 0.0, 0.4, 0.8]])
    reward = np.stack([r, np.zeros_like(r)], axis=1)
    return Tabular(np.ones((3, 2, 4), int), reward, np.zeros((3, 2, 4)))


@pytest.mark.parametrize("kind", SEARCHES)
def test_batch_elements_are_independent(kind):
    env = mixed_problems()
    kw = {"dirichlet_fraction": 0.0} if kind == "puct" else {}
    batch = run(kind, env, [0, 1, 2, 0], 20, seed=7, **kw)
    alone = run(kind, env, [0], 20, seed=7, **kw)  # row 0 sees the same noise draw as the batch's row 0
    for field in ("action", "action_weights", "root_value", "visit_counts", "q_values", "max_depth"):
        got = getattr(batch, field)
        assert got.shape[0] == 4
        np.testing.assert_array_equal(got[:1], getattr(alone, field), err_msg=field)
    assert batch.action.tolist() == [2, 0, 3, 2]
    if kind == "puct":
        assert batch.visit_counts.sum(axis=1).tolist() == [20] * 4
        np.testing.assert_array_equal(batch.visit_counts[0], batch.visit_counts[3])


@pytest.mark.parametrize("kind", SEARCHES)
def test_same_seed_same_output(kind):
    env = two_step()
    fn = muzero_policy if kind == "puct" else gumbel_muzero_policy  # defaults: noise on, sampling at T=1
    a, b = (fn(env.root([0] * 4), env.recurrent, 16, np.random.default_rng(3)) for _ in range(2))
    for field in ("action", "action_weights", "root_value", "visit_counts", "q_values", "max_depth"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.action_weights.shape == (4, 3) and a.q_values.shape == (4, 3) and a.root_value.shape == (4,)


def test_temperature_sampling_follows_visits():
    env = bandit()
    out = muzero_policy(env.root([0] * 400), env.recurrent, 16, np.random.default_rng(1), temperature=1.0)
    chosen = np.bincount(out.action, minlength=4) / 400
    np.testing.assert_allclose(chosen, out.action_weights.mean(axis=0), atol=0.06)
    assert (out.visit_counts[np.arange(400), out.action] > 0).all()


def test_greedy_ties_are_broken_by_prior():
    env = bandit(rewards=(0.0, 0.0), logits=(0.0, 0.3))  # the second simulation goes to arm 0: 1 visit each
    out = muzero_policy(env.root([0]), env.recurrent, 2, np.random.default_rng(0), temperature=0.0,
                        dirichlet_fraction=0.0)
    assert out.visit_counts.tolist() == [[1, 1]] and out.action.tolist() == [1]


# ------------------------------------------------------------------------------------------ embeddings


class PathChain:
    """A chain of length 4 whose embedding records the whole action path, to check the gathering.

    Action 1 moves right (reward 1 on reaching the end, terminal), action 0 quits with 0.05
    (terminal); γ = 0.9, so going right is worth 0.9³ = 0.73. The value head is a rough guide,
    0.5 · position / 4. Embedding: {"path": (B, L) actions padded with -1, "meta": ((B,) owning batch
    index, (B,) done flag)}, numpy arrays or torch tensors.
    """

    LENGTH = 4

    def __init__(self, batch, steps, xp):
        self.batch, self.xp, self.seen = batch, xp, [set() for _ in range(batch)]
        self.wrap = np.array if xp is np else xp.tensor
        self.edges = [set() for _ in range(batch)]
        self.L = steps + 1

    def root(self):
        b = self.batch
        emb = {"path": self.xp.full((b, self.L), -1), "meta": (self.xp.arange(b), self.xp.zeros(b))}
        for i in range(b):
            self.seen[i].add(())
        return RootFnOutput(np.zeros((b, 2)), np.zeros(b), emb)

    def recurrent(self, emb, action):
        path, (owner, done) = emb["path"], emb["meta"]
        assert isinstance(path, type(self.xp.zeros(1))) and tuple(path.shape) == (self.batch, self.L)
        new_path, reward, discount, new_done, value = [], [], [], [], []
        for b in range(self.batch):
            assert int(owner[b]) == b, "embedding gathered from another batch element"
            p = tuple(int(x) for x in path[b] if int(x) >= 0)
            assert p in self.seen[b], f"parent path {p} was never produced"
            assert (p, int(action[b])) not in self.edges[b], "edge expanded twice"
            self.edges[b].add((p, int(action[b])))
            q = p + (int(action[b]),)
            self.seen[b].add(q)
            new_path.append(list(q) + [-1] * (self.L - len(q)))
            alive = not done[b]
            right = alive and action[b] == 1
            reward.append(1.0 if right and len(q) == self.LENGTH else (0.05 if alive and action[b] == 0 else 0.0))
            end = not alive or action[b] == 0 or len(q) >= self.LENGTH
            discount.append(0.0 if end else 0.9)
            new_done.append(float(end))
            value.append(0.0 if end else 0.5 * len(q) / self.LENGTH)
        out = RecurrentFnOutput(np.array(reward), np.array(discount), np.zeros((self.batch, 2)), np.array(value))
        return out, {"path": self.wrap(new_path), "meta": (owner, self.wrap(new_done))}


def torch_or_skip():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("kind", SEARCHES)
def test_parent_embeddings_are_gathered_per_batch_element(kind, backend):
    xp = np if backend == "numpy" else torch_or_skip()
    env = PathChain(batch=3, steps=40, xp=xp)
    out = SEARCHES[kind](env.root(), env.recurrent, 40, np.random.default_rng(0), **EXACT[kind])
    assert all(len(e) == 40 for e in env.edges)
    assert out.action.tolist() == [1, 1, 1]
    assert (out.max_depth >= PathChain.LENGTH).all()


def test_tree_helpers():
    tree = {"a": np.arange(6).reshape(3, 2), "b": (np.arange(3), [np.ones((3, 1))])}
    row = tree_index(tree, 1)
    assert row["a"].tolist() == [2, 3] and row["b"][0] == 1 and row["b"][1][0].tolist() == [1.0]
    stacked = tree_stack([row, tree_index(tree, 0)])
    assert stacked["a"].tolist() == [[2, 3], [0, 1]] and isinstance(stacked["b"], tuple)
    assert tree_map(lambda x: x.shape, tree)["b"][1][0] == (3, 1)
    with pytest.raises(ValueError, match="empty"):
        tree_stack([])


def test_tree_stack_uses_torch_for_tensors():
    torch = torch_or_skip()
    stacked = tree_stack([{"x": torch.ones(2)}, {"x": torch.zeros(2)}])
    assert isinstance(stacked["x"], torch.Tensor) and stacked["x"].shape == (2, 2)


# ------------------------------------------------------------------------------------------ Gumbel specifics


def test_sequential_halving_schedule():
    assert _considered_visits(4, 8) == [0, 0, 0, 0, 1, 1, 2, 2]
    assert _considered_visits(2, 4) == [0, 0, 1, 1]
    assert _considered_visits(1, 3) == [0, 1, 2]
    assert _considered_visits(16, 4) == [0, 0, 0, 0]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_gumbel_small_budgets(n):
    env = bandit()
    out = gumbel_muzero_policy(env.root([0] * 3), env.recurrent, n, np.random.default_rng(0))
    assert ((out.action >= 0) & (out.action < 4)).all()
    assert (out.visit_counts[np.arange(3), out.action] > 0).all()  # the winner is a visited action
    np.testing.assert_allclose(out.action_weights.sum(axis=1), 1.0)
    assert (out.visit_counts.sum(axis=1) == n).all()
    if n == 4:
        assert (out.visit_counts == 1).all()  # every arm once: the first Sequential Halving phase
        exact = gumbel_muzero_policy(env.root([0] * 3), env.recurrent, n, np.random.default_rng(0), gumbel_scale=0.0)
        assert exact.action.tolist() == [2, 2, 2]


def test_gumbel_halving_keeps_the_better_half():
    env = bandit()
    out = gumbel_muzero_policy(env.root([0]), env.recurrent, 8, np.random.default_rng(0), gumbel_scale=0.0)
    assert out.visit_counts.tolist() == [[1, 1, 3, 3]] and out.action.tolist() == [2]
    # improved policy: softmax(logits + σ(q)), σ = (50 + 3) · 0.1 · q on the min-max normalised q
    expected = np.exp(5.3 * np.array([0.0, 0.2, 1.0, 0.5]))
    np.testing.assert_allclose(out.action_weights[0], expected / expected.sum())


@pytest.mark.parametrize(("env", "n", "best", "rate"), [
    (bandit(), 4, 2, 0.85), (bandit(), 32, 2, 0.9), (two_step(), 64, 0, 0.95),
    (bandit(rewards=(0.1, 0.0, 0.0, 1.0), logits=(2.0, 0.0, 0.0, 0.0)), 64, 3, 0.95),
])
def test_gumbel_noise_rarely_outweighs_the_search(env, n, best, rate):
    out = gumbel_muzero_policy(env.root([0] * 200), env.recurrent, n, np.random.default_rng(0))
    assert (out.action == best).mean() >= rate


def test_search_overhead_is_small():
    """Overhead per simulation at B=8, A=8 with a trivial model (a loose bound; the target is < 2 ms)."""
    b, a = 8, 8

    def model(emb, action):
        return RecurrentFnOutput(np.ones(b) * 0.1, np.full(b, 0.9), np.zeros((b, a)), np.zeros(b)), {"s": emb["s"] + 1}

    root = RootFnOutput(np.zeros((b, a)), np.zeros(b), {"s": np.zeros((b, 4))})
    for fn in (muzero_policy, gumbel_muzero_policy):
        fn(root, model, 32, np.random.default_rng(0))
        t0 = time.perf_counter()
        fn(root, model, 32, np.random.default_rng(0))
        assert (time.perf_counter() - t0) / 32 < 10e-3


@pytest.mark.parametrize("kind", SEARCHES)
def test_a_stopped_search_runs_and_reports_the_simulations_it_was_let_run(kind):
    asked = []

    def stop_after(k):
        def stop(done):
            asked.append(done)
            return done >= k
        return stop

    env = two_step()
    out = run(kind, env, [0, 0], 16, stop=stop_after(5), **EXACT[kind])
    assert out.simulations == 5 and env.calls == 5 and asked == [1, 2, 3, 4, 5]
    assert out.visit_counts.sum(axis=1).tolist() == [5, 5]
    env = two_step()
    first = run(kind, env, [0, 0], 16, stop=lambda done: True, **EXACT[kind])
    assert first.simulations == 1 and env.calls == 1  # the first simulation always runs
    assert run(kind, two_step(), [0, 0], 16, **EXACT[kind]).simulations == 16


def test_a_stopped_puct_search_is_the_search_of_that_budget():
    """pUCT's selection does not depend on the budget: stopped after k it is exactly a k-simulation search."""
    stopped = run("puct", two_step(), [0, 0, 0], 32, stop=lambda done: done >= 7)
    full = run("puct", two_step(), [0, 0, 0], 7)
    for field in ("action", "visit_counts", "root_value", "max_depth"):
        np.testing.assert_array_equal(getattr(stopped, field), getattr(full, field))


@pytest.mark.parametrize("kind", SEARCHES)
def test_a_stop_that_never_fires_changes_nothing(kind):
    a = run(kind, two_step(), [0, 0], 12, seed=3)
    b = run(kind, two_step(), [0, 0], 12, seed=3, stop=lambda done: False)
    for field in ("action", "action_weights", "root_value", "visit_counts", "max_depth", "simulations"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(np.isnan(a.q_values), np.isnan(b.q_values))


def test_a_stopped_gumbel_search_acts_on_a_most_visited_valid_action():
    invalid = np.array([[False, True, False, False], [False, False, False, True]])
    for k in range(1, 17):
        env = bandit()
        out = run("gumbel", env, [0, 0], 16, stop=lambda done, k=k: done >= k, invalid_actions=invalid)
        rows = np.arange(2)
        assert out.simulations == k and env.calls == k
        assert (out.visit_counts[rows, out.action] == out.visit_counts.max(axis=1)).all()
        assert (out.visit_counts[rows, out.action] >= 1).all() and not invalid[rows, out.action].any()
