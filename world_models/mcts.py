"""Batched MuZero-style tree search in numpy: pUCT MuZero and Gumbel MuZero over a learned model.

The search is written only against two callables, in the shape of DeepMind's ``mctx``:

* a root output :class:`RootFnOutput` — ``prior_logits`` (B, A), ``value`` (B,) and an
  ``embedding`` pytree (dict / tuple / list / leaf) of numpy arrays or torch tensors, each with
  leading batch dimension B;
* ``recurrent_fn(embedding, action) -> (RecurrentFnOutput, next_embedding)``, with ``action``
  (B,) int64 and the output's ``reward``, ``discount``, ``value`` (B,) and ``prior_logits`` (B, A).
  The discount carries both γ and termination (0 after a terminal step); the search knows no other γ.

:func:`muzero_policy` (pUCT, Schrittwieser et al. 2020) and :func:`gumbel_muzero_policy`
(Danihelka et al. 2022) return a :class:`SearchOutput`. Each simulation descends one path per
batch element, calls ``recurrent_fn`` once for the whole batch, and backs the new leaf's value up.

Tree layout: arrays of shape (B, N, ...) with N = num_simulations + 1; node 0 is the root, node
k + 1 is the leaf added by simulation k (the same id in every batch element). Embeddings are kept
as a list indexed by node id, each entry the batched pytree ``recurrent_fn`` returned.

Conventions:

* Q of a child = reward + discount · value(child), value(node) = mean of the returns backed up
  through it (a node's own network value counts as its first return).
* pUCT normalises Q by the running min and max of all child Q values seen in the tree of that
  batch element (MuZero's ``MinMaxStats``), clipped to [0, 1]; while that range is empty,
  normalised Q is 0. An unvisited child takes its parent's current value estimate as its Q before
  normalisation (the EfficientZero / LightZero choice), not the pseudocode's 0 after normalisation,
  which ranks every unvisited child with the worst Q in the tree and leaves wide nodes unexplored.
* Gumbel MuZero completes the Q of unvisited children with the mixed value approximation, normalises
  completed Q with the same tree min-max (clipped to [0, 1]) and scales it by
  σ(q) = (maxvisit_init + max_b N(b)) · value_scale · q.
* ``SearchOutput.q_values`` is NaN for unvisited root children.
* ``invalid_actions`` (B, A) bool applies at the root only (as in mctx): never selected, never
  visited, prior renormalised over the valid actions. Interior nodes consider all actions.
* Ties go to the lowest action index (``np.argmax``), except acting at temperature 0 in
  :func:`muzero_policy`, where equal visit counts are broken by the higher (pre-noise) root prior.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "RecurrentFn",
    "RecurrentFnOutput",
    "RootFnOutput",
    "SearchOutput",
    "StopFn",
    "gumbel_muzero_policy",
    "muzero_policy",
    "tree_index",
    "tree_leaves",
    "tree_map",
    "tree_stack",
]


@dataclass(frozen=True)
class RootFnOutput:
    prior_logits: np.ndarray  # (B, A)
    value: np.ndarray  # (B,)
    embedding: Any  # pytree of (B, ...) numpy arrays or torch tensors


@dataclass(frozen=True)
class RecurrentFnOutput:
    reward: np.ndarray  # (B,)
    discount: np.ndarray  # (B,), 0 after a terminal step
    prior_logits: np.ndarray  # (B, A)
    value: np.ndarray  # (B,)


RecurrentFn = Callable[[Any, np.ndarray], "tuple[RecurrentFnOutput, Any]"]


@dataclass(frozen=True)
class SearchOutput:
    action: np.ndarray  # (B,) int64, the action to take
    action_weights: np.ndarray  # (B, A) policy target: visit distribution (pUCT) / improved policy (Gumbel)
    root_value: np.ndarray  # (B,) search value at the root
    visit_counts: np.ndarray  # (B, A) int64 root child visits
    q_values: np.ndarray  # (B, A) root child Q, NaN where unvisited
    max_depth: np.ndarray  # (B,) int64 depth of the deepest node (root = 0)
    simulations: int = -1  # simulations run (the same for every batch element; fewer than asked when stopped)


# ---------------------------------------------------------------------------------------- pytrees


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leafwise over ``tree`` (and trees of the same structure in ``rest``)."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, tree[k], *(r[k] for r in rest)) for k in tree}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # namedtuple
        return type(tree)(*(tree_map(fn, *xs) for xs in zip(tree, *rest)))
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(fn, *xs) for xs in zip(tree, *rest))
    if tree is None:
        return None
    return fn(tree, *rest)


def tree_leaves(tree: Any) -> list[Any]:
    leaves: list[Any] = []
    tree_map(leaves.append, tree)
    return leaves


def tree_index(tree: Any, i: Any) -> Any:
    """``leaf[i]`` for every leaf."""
    return tree_map(lambda x: x[i], tree)


def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")  # a tensor can only exist if torch was imported by someone
    return torch is not None and isinstance(x, torch.Tensor)


def _stack(*xs: Any) -> Any:
    if _is_torch(xs[0]):
        return sys.modules["torch"].stack(xs)
    return np.stack(xs)


def tree_stack(trees: Sequence[Any]) -> Any:
    """Stack same-structured trees leafwise along a new leading axis (np.stack / torch.stack)."""
    if len(trees) == 0:
        raise ValueError("tree_stack needs at least one tree, got an empty sequence")
    return tree_map(_stack, *trees)


def _gather(embeddings: list[Any], nodes: np.ndarray) -> Any:
    """Batched embedding whose row b is row b of ``embeddings[nodes[b]]``."""
    if (nodes == nodes[0]).all():
        return embeddings[int(nodes[0])]
    return tree_stack([tree_index(embeddings[int(n)], b) for b, n in enumerate(nodes)])


# ---------------------------------------------------------------------------------------- checks


def _check_sims(num_simulations: Any) -> int:
    if isinstance(num_simulations, bool) or not isinstance(num_simulations, (int, np.integer)) or num_simulations < 1:
        raise ValueError(f"num_simulations={num_simulations!r} must be an integer >= 1")
    return int(num_simulations)


def _array(name: str, x: Any, shape: tuple[int, ...]) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    if np.isnan(a).any() or np.isposinf(a).any():
        raise ValueError(f"{name} contains NaN or +inf: {a}")
    return a


def _check_embedding(name: str, embedding: Any, batch: int) -> None:
    for leaf in tree_leaves(embedding):
        shape = tuple(getattr(leaf, "shape", ()))
        if not shape or shape[0] != batch:
            raise ValueError(f"{name} leaf has shape {shape}, expected leading batch dimension {batch}")


def _root_logits(root: RootFnOutput, invalid_actions: Any) -> tuple[np.ndarray, np.ndarray]:
    """Root log-probabilities (B, A) with -inf at invalid actions, and the invalid mask (B, A)."""
    logits = np.asarray(root.prior_logits, dtype=np.float64)
    if logits.ndim != 2 or logits.shape[1] < 1:
        raise ValueError(f"root.prior_logits has shape {logits.shape}, expected (B, A)")
    logits = _array("root.prior_logits", logits, logits.shape)
    batch, num_actions = logits.shape
    _array("root.value", root.value, (batch,))
    _check_embedding("root.embedding", root.embedding, batch)
    if invalid_actions is None:
        invalid = np.zeros((batch, num_actions), dtype=bool)
    else:
        invalid = np.asarray(invalid_actions, dtype=bool)
        if invalid.shape != (batch, num_actions):
            raise ValueError(f"invalid_actions has shape {invalid.shape}, expected {(batch, num_actions)}")
    invalid = invalid | np.isneginf(logits)
    dead = np.flatnonzero(invalid.all(axis=1))
    if dead.size:
        raise ValueError(f"invalid_actions marks every action invalid for batch elements {dead.tolist()}")
    return _log_softmax(np.where(invalid, -np.inf, logits)), invalid


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------------------- tree


class _Tree:
    """Search tree of B independent searches, stored in (B, N, ...) arrays."""

    def __init__(self, root: RootFnOutput, root_logits: np.ndarray, num_simulations: int) -> None:
        batch, num_actions = root_logits.shape
        n = num_simulations + 1
        self.B, self.A, self.ar = batch, num_actions, np.arange(batch)
        self.children = np.full((batch, n, num_actions), -1, dtype=np.int64)
        self.parent = np.full((batch, n), -1, dtype=np.int64)
        self.depth = np.zeros((batch, n), dtype=np.int64)
        self.visits = np.zeros((batch, n))
        self.value_sum = np.zeros((batch, n))
        self.reward = np.zeros((batch, n))  # of the edge into the node
        self.discount = np.zeros((batch, n))
        self.net_value = np.zeros((batch, n))
        self.logits = np.zeros((batch, n, num_actions))  # normalised log-probabilities
        self.prior = np.zeros((batch, n, num_actions))
        self.q_min = np.full(batch, np.inf)
        self.q_max = np.full(batch, -np.inf)
        value = np.asarray(root.value, dtype=np.float64)
        self.visits[:, 0], self.value_sum[:, 0], self.net_value[:, 0] = 1.0, value, value
        self.logits[:, 0], self.prior[:, 0] = root_logits, np.exp(root_logits)
        self.embeddings: list[Any] = [root.embedding]
        self.size = 1

    def child_stats(self, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Visit counts (B, A) and Q values (B, A; 0 where unvisited) of the children of ``node``."""
        child = self.children[self.ar, node]
        cidx = np.maximum(child, 0)
        rows = self.ar[:, None]
        n = np.where(child >= 0, self.visits[rows, cidx], 0.0)
        value = self.value_sum[rows, cidx] / np.maximum(self.visits[rows, cidx], 1.0)
        q = np.where(child >= 0, self.reward[rows, cidx] + self.discount[rows, cidx] * value, 0.0)
        return n, q

    def normalise(self, q: np.ndarray) -> np.ndarray:
        span = self.q_max - self.q_min
        ok = span > 0
        return np.where(ok[:, None], (q - self.q_min[:, None]) / np.where(ok, span, 1.0)[:, None], 0.0)

    def expand(self, parent: np.ndarray, action: np.ndarray, out: RecurrentFnOutput, embedding: Any) -> int:
        k, (batch, num_actions) = self.size, (self.B, self.A)
        reward = _array("recurrent_fn reward", out.reward, (batch,))
        discount = _array("recurrent_fn discount", out.discount, (batch,))
        value = _array("recurrent_fn value", out.value, (batch,))
        logits = _array("recurrent_fn prior_logits", out.prior_logits, (batch, num_actions))
        _check_embedding("recurrent_fn embedding", embedding, batch)
        self.children[self.ar, parent, action] = k
        self.parent[:, k], self.depth[:, k] = parent, self.depth[self.ar, parent] + 1
        self.reward[:, k], self.discount[:, k], self.net_value[:, k] = reward, discount, value
        self.logits[:, k] = _log_softmax(logits)
        self.prior[:, k] = np.exp(self.logits[:, k])
        self.embeddings.append(embedding)
        self.size += 1
        return k

    def backup(self, leaf: int, value: np.ndarray) -> None:
        node = np.full(self.B, leaf, dtype=np.int64)
        ret = value.copy()
        idx = self.ar
        while idx.size:
            n = node[idx]
            self.visits[idx, n] += 1.0
            self.value_sum[idx, n] += ret[idx]
            r, d = self.reward[idx, n], self.discount[idx, n]
            q = r + d * self.value_sum[idx, n] / self.visits[idx, n]
            nonroot = n > 0
            b = idx[nonroot]
            self.q_min[b] = np.minimum(self.q_min[b], q[nonroot])
            self.q_max[b] = np.maximum(self.q_max[b], q[nonroot])
            ret[idx] = r + d * ret[idx]
            node[idx] = self.parent[idx, n]
            idx = idx[node[idx] >= 0]


SelectFn = Callable[[_Tree, np.ndarray, bool, int], np.ndarray]


StopFn = Callable[[int], bool]


def _run(tree: _Tree, recurrent_fn: RecurrentFn, num_simulations: int, select: SelectFn,
         should_stop: StopFn | None = None) -> int:
    """Simulate: descend with ``select`` until an unexpanded edge, expand it in one batched call, back
    up. ``should_stop(done)`` is asked before every simulation after the first; True ends the search there.
    Returns the simulations run."""
    for sim in range(num_simulations):
        if sim and should_stop is not None and should_stop(sim):
            return sim
        node = np.zeros(tree.B, dtype=np.int64)
        parent, action = node.copy(), node.copy()
        active = np.ones(tree.B, dtype=bool)
        at_root = True
        while active.any():
            a = select(tree, node, at_root, sim)
            child = tree.children[tree.ar, node, a]
            stop = active & (child < 0)
            parent[stop], action[stop] = node[stop], a[stop]
            active &= ~stop
            node = np.where(active, child, node)
            at_root = False
        out, embedding = recurrent_fn(_gather(tree.embeddings, parent), action)
        leaf = tree.expand(parent, action, out, embedding)
        tree.backup(leaf, tree.net_value[:, leaf])
    return num_simulations


def _root_summary(tree: _Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    zero = np.zeros(tree.B, dtype=np.int64)
    n, q = tree.child_stats(zero)
    q = np.where(n > 0, q, np.nan)
    root_value = tree.value_sum[:, 0] / tree.visits[:, 0]
    max_depth = tree.depth[:, : tree.size].max(axis=1)
    return n, q, root_value, max_depth


# ---------------------------------------------------------------------------------------- pUCT


def muzero_policy(
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    rng: np.random.Generator,
    *,
    dirichlet_alpha: float = 0.3,
    dirichlet_fraction: float = 0.25,
    pb_c_init: float = 1.25,
    pb_c_base: float = 19652.0,
    temperature: float = 1.0,
    invalid_actions: np.ndarray | None = None,
    stop: StopFn | None = None,
) -> SearchOutput:
    """MuZero pUCT search; ``action_weights`` is the root visit distribution.

    Score of child a at a node with N visits: ``Q̄(a) + P(a)·√N/(1 + N(a))·c`` with
    ``c = pb_c_init + log((N + pb_c_base + 1)/pb_c_base)`` and Q̄ the min-max normalised Q.
    Dirichlet(``dirichlet_alpha``) noise is mixed into the root prior (valid actions only) with
    weight ``dirichlet_fraction``. Acting: ``temperature`` 0 takes the most visited action,
    otherwise samples from visits^(1/temperature). ``stop(done)``, asked before every simulation
    after the first, ends the search early when it returns True (an anytime search, e.g. against a
    deadline): the output is that of the simulations run (``SearchOutput.simulations``).
    """
    num_simulations = _check_sims(num_simulations)
    if not dirichlet_alpha > 0:
        raise ValueError(f"dirichlet_alpha={dirichlet_alpha!r} must be > 0")
    if not 0.0 <= dirichlet_fraction <= 1.0:
        raise ValueError(f"dirichlet_fraction={dirichlet_fraction!r} must be in [0, 1]")
    if not pb_c_base > 0:
        raise ValueError(f"pb_c_base={pb_c_base!r} must be > 0")
    if not temperature >= 0:
        raise ValueError(f"temperature={temperature!r} must be >= 0")
    root_logits, invalid = _root_logits(root, invalid_actions)
    net_prior = np.exp(root_logits)
    tree = _Tree(root, root_logits, num_simulations)
    if dirichlet_fraction > 0:
        # Dirichlet over the valid actions only, drawn as normalised Gamma variates
        noise = np.where(invalid, 0.0, rng.gamma(dirichlet_alpha, size=invalid.shape))
        noise += 1e-300 * ~invalid  # a tiny alpha can underflow every draw to 0; then the noise is uniform
        noise /= noise.sum(axis=1, keepdims=True)
        tree.prior[:, 0] = (1.0 - dirichlet_fraction) * net_prior + dirichlet_fraction * noise

    def select(tree: _Tree, node: np.ndarray, at_root: bool, sim: int) -> np.ndarray:
        n, q = tree.child_stats(node)
        n_parent = tree.visits[tree.ar, node]
        parent_value = tree.value_sum[tree.ar, node] / n_parent
        q_bar = np.clip(tree.normalise(np.where(n > 0, q, parent_value[:, None])), 0.0, 1.0)
        c = pb_c_init + np.log((n_parent + pb_c_base + 1.0) / pb_c_base)
        score = q_bar + tree.prior[tree.ar, node] * (c * np.sqrt(n_parent))[:, None] / (1.0 + n)
        if at_root:
            score = np.where(invalid, -np.inf, score)
        return np.argmax(score, axis=1)

    done = _run(tree, recurrent_fn, num_simulations, select, stop)
    n, q, root_value, max_depth = _root_summary(tree)
    if temperature == 0:
        action = np.argmax(np.where(invalid, -np.inf, n + 0.5 * net_prior), axis=1)  # prior < 1 breaks ties only
    else:
        logp = np.where(n > 0, np.log(np.maximum(n, 1.0)) / temperature, -np.inf)
        cdf = np.cumsum(_softmax(logp), axis=1)
        u = rng.random(tree.B) * cdf[:, -1]
        action = np.minimum((cdf <= u[:, None]).sum(axis=1), tree.A - 1)  # first index with cdf > u
    return SearchOutput(
        action=action.astype(np.int64), action_weights=n / n.sum(axis=1, keepdims=True), root_value=root_value,
        visit_counts=n.astype(np.int64), q_values=q, max_depth=max_depth, simulations=done,
    )


# ---------------------------------------------------------------------------------------- Gumbel


def _considered_visits(m: int, num_simulations: int) -> list[int]:
    """Sequential Halving at the root with m considered actions: for each simulation, the visit count
    the next root action must have. Each phase gives every surviving action
    ``max(1, n // (ceil(log2 m) · survivors))`` more visits, then keeps the better half (at least 2)."""
    if m <= 1:
        return list(range(num_simulations))
    rounds = math.ceil(math.log2(m))
    seq: list[int] = []
    survivors, level = m, 0
    while len(seq) < num_simulations:
        extra = max(1, num_simulations // (rounds * survivors))
        for _ in range(extra):
            seq.extend([level] * survivors)
            level += 1
        survivors = max(2, survivors // 2)
    return seq[:num_simulations]


def _sigma_completed_q(
    tree: _Tree, node: np.ndarray, maxvisit_init: float, value_scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """σ(completed Q) (B, A) at ``node`` (unvisited children take the mixed value approximation),
    and the child visit counts (B, A)."""
    n, q = tree.child_stats(node)
    prior = tree.prior[tree.ar, node]
    visited = n > 0
    n_sum = n.sum(axis=1)
    p_visited = (prior * visited).sum(axis=1)
    q_pi = (prior * q * visited).sum(axis=1) / np.maximum(p_visited, 1e-30)
    v_net = tree.net_value[tree.ar, node]
    v_mix = np.where(p_visited > 0, (v_net + n_sum * q_pi) / (1.0 + n_sum), v_net)
    completed = np.clip(tree.normalise(np.where(visited, q, v_mix[:, None])), 0.0, 1.0)
    return ((maxvisit_init + n.max(axis=1)) * value_scale)[:, None] * completed, n


def gumbel_muzero_policy(
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    rng: np.random.Generator,
    *,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    value_scale: float = 0.1,
    maxvisit_init: float = 50.0,
    invalid_actions: np.ndarray | None = None,
    stop: StopFn | None = None,
) -> SearchOutput:
    """Gumbel MuZero: Sequential Halving over the top-m root actions by g + logits, deterministic
    interior selection ``argmax(π'(a) − N(a)/(1 + ΣN))`` with π' = softmax(logits + σ(completed Q)).

    ``action`` is the Sequential Halving winner (the most visited considered action with the highest
    g + logits + σ(q)); ``action_weights`` = softmax(logits + σ(completed Q)) at the root. ``stop``:
    as in :func:`muzero_policy`, but a stopped search is *not* the search of the simulations it ran:
    the halving's schedule is laid out for ``num_simulations`` and truncated where it stopped, so
    the winner is among the actions most visited so far (e.g. 64's schedule stopped after 16 has
    visited each of 8 considered actions twice and halved nothing; stopped inside a round, only the
    actions that round has reached are candidates).
    """
    num_simulations = _check_sims(num_simulations)
    if isinstance(max_num_considered_actions, bool) or not isinstance(max_num_considered_actions, (int, np.integer)) \
            or max_num_considered_actions < 1:
        raise ValueError(f"max_num_considered_actions={max_num_considered_actions!r} must be an integer >= 1")
    if not gumbel_scale >= 0:
        raise ValueError(f"gumbel_scale={gumbel_scale!r} must be >= 0")
    if not value_scale >= 0 or not maxvisit_init >= 0:
        raise ValueError(f"value_scale={value_scale!r} and maxvisit_init={maxvisit_init!r} must be >= 0")
    root_logits, invalid = _root_logits(root, invalid_actions)
    tree = _Tree(root, root_logits, num_simulations)
    gumbel = gumbel_scale * rng.gumbel(size=invalid.shape)
    g_logits = np.where(invalid, -np.inf, gumbel + root_logits)
    m = np.minimum(max_num_considered_actions, (~invalid).sum(axis=1))
    table = np.array([_considered_visits(k, num_simulations) for k in range(tree.A + 1)], dtype=np.float64)
    target = table[m]  # (B, num_simulations)

    def select(tree: _Tree, node: np.ndarray, at_root: bool, sim: int) -> np.ndarray:
        sigma, n = _sigma_completed_q(tree, node, maxvisit_init, value_scale)
        if at_root:
            score = np.where(n == target[:, sim : sim + 1], g_logits + sigma, -np.inf)
            return np.argmax(score, axis=1)
        pi = _softmax(tree.logits[tree.ar, node] + sigma)
        return np.argmax(pi - n / (1.0 + n.sum(axis=1, keepdims=True)), axis=1)

    done = _run(tree, recurrent_fn, num_simulations, select, stop)
    n, q, root_value, max_depth = _root_summary(tree)
    sigma, _ = _sigma_completed_q(tree, np.zeros(tree.B, dtype=np.int64), maxvisit_init, value_scale)
    winner = np.where(n == n.max(axis=1, keepdims=True), g_logits + sigma, -np.inf)
    return SearchOutput(
        action=np.argmax(winner, axis=1).astype(np.int64), action_weights=_softmax(root_logits + sigma),
        root_value=root_value, visit_counts=n.astype(np.int64), q_values=q, max_depth=max_depth, simulations=done,
    )
