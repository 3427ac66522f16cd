"""Episode replay of states (slots or frames, never both) and segment sampling with n-step targets.

An episode of length T stores ``states`` (T+1, ...) (the observation after the last action
included), ``actions`` (T,), ``rewards`` (T,), ``policies`` (T, A) (the search's action weights),
``root_values`` (T,) and whether it ``terminated`` (True) or was cut by the time limit (False,
so its last state is bootstrapped).

:meth:`Replay.sample` returns windows of ``length`` blocks starting anywhere in
[-left_pad, T-1]; blocks before the episode start or after its end are marked invalid and carry
zeros. Everything is numpy; the learner converts to torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Episode:
    states: np.ndarray  # (T+1, ...) float32 slots/latents or uint8 frames
    actions: np.ndarray  # (T,) int64
    rewards: np.ndarray  # (T,) float32
    policies: np.ndarray  # (T, A) float32
    root_values: np.ndarray  # (T,) float32
    terminated: bool

    def __post_init__(self) -> None:
        t = len(self.actions)
        if not (len(self.states) == t + 1 and len(self.rewards) == t == len(self.policies) == len(self.root_values)):
            raise ValueError(f"episode arrays disagree: states {len(self.states)} (want {t + 1}), actions {t}, "
                             f"rewards {len(self.rewards)}, policies {len(self.policies)}")

    def __len__(self) -> int:
        return len(self.actions)


class Replay:
    """FIFO over whole episodes, capped at ``capacity`` transitions."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity={capacity} must be >= 1")
        self.capacity = int(capacity)
        self.episodes: list[Episode] = []
        self.transitions = 0

    def add(self, ep: Episode) -> None:
        if len(ep) == 0:
            raise ValueError("an episode needs at least one transition")
        self.episodes.append(ep)
        self.transitions += len(ep)
        while self.transitions > self.capacity and len(self.episodes) > 1:
            self.transitions -= len(self.episodes.pop(0))

    def sample(self, rng: np.random.Generator, batch: int, length: int, left_pad: int = 0) -> dict[str, np.ndarray]:
        """A batch of windows: states (B, L, ...), actions/rewards (B, L), policies (B, L, A),
        valid (B, L) (a state exists), acted (B, L) (an action was taken from it),
        terminal (B, L) (the state is a terminal one)."""
        if not self.episodes:
            raise ValueError("replay is empty")
        lens = np.array([len(e) for e in self.episodes], float)
        idx = rng.choice(len(self.episodes), size=batch, p=lens / lens.sum())
        ep0 = self.episodes[0]
        shape, n_act = ep0.states.shape[1:], ep0.policies.shape[1]
        out = {
            "states": np.zeros((batch, length, *shape), ep0.states.dtype),
            "actions": np.zeros((batch, length), np.int64), "rewards": np.zeros((batch, length), np.float32),
            "policies": np.zeros((batch, length, n_act), np.float32), "valid": np.zeros((batch, length), bool),
            "acted": np.zeros((batch, length), bool), "terminal": np.zeros((batch, length), bool),
        }
        for b, i in enumerate(idx):
            ep = self.episodes[i]
            t_ep = len(ep)
            start = int(rng.integers(-left_pad, t_ep))
            for j in range(length):
                t = start + j
                if t < 0 or t > t_ep:
                    continue
                out["states"][b, j] = ep.states[t]
                out["valid"][b, j] = True
                if t < t_ep:
                    out["acted"][b, j] = True
                    out["actions"][b, j] = ep.actions[t]
                    out["rewards"][b, j] = ep.rewards[t]
                    out["policies"][b, j] = ep.policies[t]
                else:
                    out["terminal"][b, j] = ep.terminated
        return out


def nstep_targets(rewards: np.ndarray, values: np.ndarray, valid: np.ndarray, acted: np.ndarray,
                  terminal: np.ndarray, gamma: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-step value targets for every block of a window: (targets (B, L), has_target (B, L)).

    z_t = Σ_{i<k} γ^i r_{t+i} + γ^k v_{t+k} with k = n, or fewer where the episode's last state
    comes first; a terminal last state bootstraps 0, a cut one (time limit) its value ``values``.
    No target where the bootstrap state lies past the window, or for a cut episode's last state.
    """
    b_sz, L = rewards.shape
    z = np.zeros((b_sz, L), np.float32)
    ok = np.zeros((b_sz, L), bool)
    for b in range(b_sz):
        for t in range(L):
            if not valid[b, t]:
                continue
            if not acted[b, t]:  # the episode's last state
                ok[b, t] = bool(terminal[b, t])
                continue
            ret, has = 0.0, False
            for i in range(n + 1):
                j = t + i
                if j >= L or not valid[b, j]:
                    break
                if i == n or not acted[b, j]:
                    boot = 0.0 if terminal[b, j] else float(values[b, j])
                    ret += gamma**i * boot
                    has = True
                    break
                ret += gamma**i * float(rewards[b, j])
            z[b, t], ok[b, t] = ret, has
    return z, ok
