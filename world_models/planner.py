"""MCTS over a token world model: the root and recurrent functions, and the acting history.

The search (:mod:`world_models.mcts`) sees only two callables, mctx-style:

* ``root(window)`` — one forward pass over the last ``context`` real steps plus the current state
  gives the root's policy prior and value;
* ``recurrent(window, action)`` — the child's state and reward were already predicted with its
  parent (the model's ``branch`` outputs give them for every action in the same pass as the
  parent's prior and value; exactly what COMET's separate pass with the action would give), so one
  pass over the window with the child's state appended gives its prior, value and children. The
  window slides (the oldest block drops), so every node's window has the same shape
  (B, context+1, N, Dz) and left padding is marked invalid.

The discount returned to the search is γ at every node (the model has no termination head).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from edge.config import ConfigError
from world_models import mcts
from world_models.token_model import TokenWorldModel

SEARCHES = ("muzero", "gumbel")


@dataclass(frozen=True)
class PlannerConfig:
    """Search settings (validated)."""

    search: str = "muzero"  # muzero (pUCT) | gumbel (Gumbel MuZero, for small budgets)
    num_simulations: int = 16
    context: int = 4  # real steps before the current one that the model sees
    gamma: float = 0.97
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    max_considered: int = 8  # gumbel: actions at the root

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ConfigError(f"search={self.search!r} is not allowed; choose one of {SEARCHES}")
        if not 1 <= self.num_simulations <= 1000:
            raise ConfigError(f"num_simulations={self.num_simulations} is out of range; allowed [1, 1000]")
        if not 0 <= self.context <= 32:
            raise ConfigError(f"context={self.context} is out of range; allowed [0, 32]")
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"gamma={self.gamma} is out of range; allowed (0, 1]")


class History:
    """Per-environment windows of (state, action) blocks for acting: right-aligned, left-padded."""

    def __init__(self, n_envs: int, context: int, state_shape: tuple[int, ...], dtype: np.dtype) -> None:
        w = context + 1
        self.states = np.zeros((n_envs, w, *state_shape), dtype)
        self.actions = np.zeros((n_envs, w), np.int64)
        self.valid = np.zeros((n_envs, w), bool)

    def reset(self, i: int, state: np.ndarray) -> None:
        self.states[i] = 0
        self.actions[i] = 0
        self.valid[i] = False
        self.states[i, -1], self.valid[i, -1] = state, True

    def push(self, i: int, action: int, state: np.ndarray) -> None:
        self.actions[i, -1] = action
        self.states[i] = np.roll(self.states[i], -1, axis=0)
        self.actions[i] = np.roll(self.actions[i], -1)
        self.valid[i] = np.roll(self.valid[i], -1)
        self.states[i, -1], self.actions[i, -1], self.valid[i, -1] = state, 0, True


class Planner:
    """Acts by tree search with a :class:`TokenWorldModel` (batched over environments).

    ``expand``: another implementation of the model's search pass (z, actions, valid) -> (policy
    logits, value logits, child states, child reward logits), e.g. the ONNX Runtime graph of
    :class:`world_models.onnx_search.OrtExpand`; default: the torch model."""

    def __init__(self, model: TokenWorldModel, cfg: PlannerConfig, expand=None) -> None:
        self.model, self.cfg, self.expand = model, cfg, expand
        self.last_root: mcts.RootFnOutput | None = None

    def to_z(self, states: np.ndarray | torch.Tensor) -> torch.Tensor:
        """(B, W, ...) stored states -> (B, W, N, Dz) model states (pixels: encoded frames)."""
        s = torch.as_tensor(states)
        if self.model.cfg.kind == "pixels":
            b, w = s.shape[:2]
            return self.model.encode_frames(s.reshape(b * w, *s.shape[2:])).view(b, w, 1, -1)
        return s.float().view(*s.shape[:2], self.model.cfg.tokens, self.model.cfg.state_dim)

    @torch.no_grad()
    def _expand(self, z: torch.Tensor, a: torch.Tensor, v: torch.Tensor) -> tuple[np.ndarray, np.ndarray, dict]:
        """One pass: the last block's prior and value, and its children's states and rewards. With a
        numpy pass (ONNX Runtime: ``expand.numpy_pass``, ``expand.run``) the embedding is numpy and no
        torch op runs per node."""
        if getattr(self.expand, "numpy_pass", False) is True:
            z, a, v = np.asarray(z, np.float32), np.asarray(a, np.int64), np.asarray(v, bool)
            pol, val, child_z, child_r = self.expand.run(z, a, v)
            sup = self.model.support
            emb = {"z": z, "a": a, "v": v, "child_z": child_z, "child_r": sup.decode_np(child_r)}
            return pol.astype(np.float64), sup.decode_np(val), emb
        if self.expand is None:
            out = self.model(z, a, v, heads="last", branch=True)
            pol, val = out["policy_logits"][:, -1], out["value_logits"][:, -1]
            child_z, child_r = out["branch_next_z"], out["branch_reward_logits"]
        else:
            pol, val, child_z, child_r = self.expand(z, a, v)
        value = self.model.support.decode(val).numpy().astype(np.float64)
        prior = pol.numpy().astype(np.float64)
        emb = {"z": z, "a": a, "v": v, "child_z": child_z, "child_r": self.model.support.decode(child_r)}
        return prior, value, emb

    @torch.no_grad()
    def root(self, states, actions, valid) -> mcts.RootFnOutput:
        prior, value, emb = self._expand(self.to_z(states), torch.as_tensor(actions), torch.as_tensor(valid))
        return mcts.RootFnOutput(prior_logits=prior, value=value, embedding=emb)

    @torch.no_grad()
    def recurrent(self, emb: dict, action: np.ndarray) -> tuple[mcts.RecurrentFnOutput, dict]:
        """The child reached by ``action`` from each node: its state and reward were predicted with
        the parent (branch outputs); one pass over the slid window gives its prior and value."""
        if isinstance(emb["z"], np.ndarray):  # the numpy pass: the same steps in numpy
            z, a, v = emb["z"], emb["a"].copy(), emb["v"]
            act = np.asarray(action, np.int64)
            rows = np.arange(z.shape[0])
            a[:, -1] = act
            reward = emb["child_r"][rows, act]  # decoded in float64
            z2 = np.concatenate([z[:, 1:], emb["child_z"][rows, act][:, None]], 1)
            a2 = np.concatenate([a[:, 1:], np.zeros_like(a[:, :1])], 1)
            v2 = np.concatenate([v[:, 1:], np.ones_like(v[:, :1])], 1)
            prior, value, emb2 = self._expand(z2, a2, v2)
            return mcts.RecurrentFnOutput(reward=reward, discount=np.full(z.shape[0], self.cfg.gamma),
                                          prior_logits=prior, value=value), emb2
        z, a, v = emb["z"], emb["a"].clone(), emb["v"]
        act = torch.as_tensor(action, dtype=torch.int64)
        rows = torch.arange(z.shape[0])
        a[:, -1] = act
        reward = emb["child_r"][rows, act].numpy().astype(np.float64)
        z2 = torch.cat([z[:, 1:], emb["child_z"][rows, act].unsqueeze(1)], 1)
        a2 = torch.cat([a[:, 1:], torch.zeros_like(a[:, :1])], 1)
        v2 = torch.cat([v[:, 1:], torch.ones_like(v[:, :1])], 1)
        prior, value, emb2 = self._expand(z2, a2, v2)
        out = mcts.RecurrentFnOutput(reward=reward, discount=np.full(z.shape[0], self.cfg.gamma),
                                     prior_logits=prior, value=value)
        return out, emb2

    def advance(self, root: mcts.RootFnOutput, action: np.ndarray) -> mcts.RootFnOutput:
        """The root one step ahead: the state the model predicts after ``action`` (B,) from each
        root (one model pass), with its prior and value, for a search whose first move is already
        decided (a move that runs while the search computes)."""
        out, emb = self.recurrent(root.embedding, np.asarray(action, np.int64))
        return mcts.RootFnOutput(prior_logits=out.prior_logits, value=out.value, embedding=emb)

    def plan(self, hist: History, rng: np.random.Generator, explore: bool, temperature: float = 1.0,
             rows: np.ndarray | None = None, after: np.ndarray | None = None,
             invalid_actions: np.ndarray | None = None, stop: mcts.StopFn | None = None) -> mcts.SearchOutput:
        """Search from the current state of each environment in ``rows`` (default: all); with
        ``after`` (one action per searched environment), from the state the model predicts after
        that action instead (:meth:`advance`). ``self.last_root`` keeps the current state's root
        (its embedding's ``child_z``: the predicted next state for every action). ``invalid_actions``
        (searched environments, A) bool: root actions the search does not consider. ``stop``: ends the
        search before a simulation when it returns True (:func:`world_models.mcts.muzero_policy`)."""
        sl = slice(None) if rows is None else rows
        root = self.last_root = self.root(hist.states[sl], hist.actions[sl], hist.valid[sl])
        if after is not None:
            root = self.advance(root, after)
        return run_search(root, self.recurrent, self.cfg, rng, explore, temperature, invalid_actions, stop)


def run_search(root: mcts.RootFnOutput, recurrent: mcts.RecurrentFn, cfg: PlannerConfig,
               rng: np.random.Generator, explore: bool = False, temperature: float = 1.0,
               invalid_actions: np.ndarray | None = None, stop: mcts.StopFn | None = None) -> mcts.SearchOutput:
    """The search ``cfg`` names over any root / recurrent functions; without ``explore`` no Gumbel
    or Dirichlet noise and the most visited action (as the agents act at evaluation)."""
    if cfg.search == "gumbel":
        return mcts.gumbel_muzero_policy(root, recurrent, cfg.num_simulations, rng,
                                         max_num_considered_actions=cfg.max_considered,
                                         gumbel_scale=1.0 if explore else 0.0, invalid_actions=invalid_actions,
                                         stop=stop)
    return mcts.muzero_policy(root, recurrent, cfg.num_simulations, rng, dirichlet_alpha=cfg.dirichlet_alpha,
                              dirichlet_fraction=cfg.dirichlet_fraction if explore else 0.0,
                              temperature=temperature if explore else 0.0, invalid_actions=invalid_actions,
                              stop=stop)
