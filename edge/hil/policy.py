"""Policies for HIL runs: a replay of the scripted expert as action chunks, and policy-side faults.

HIL faults are about the stack (link, firmware, loop, safety), not about the policy's skill, so the
default policy is the simulator's scripted expert (``sim.experts``) recorded once on the scene
before the run and replayed as timed action chunks (``ReplayPolicy``): action ``k`` is for control
tick ``k`` after the first observation, whatever the latency. It needs nothing but the
observation's time, so it also runs in a host subprocess that has no access to the simulator.
The replay is open loop: the arm follows the expert's motion through the whole stack, but a grasp
may miss (the MCU's servo lags the simulator's own position control).

``FaultyPolicy`` wraps any ChunkPolicy and, from a given time, returns NaN chunks, pushes the
TCP out of the workspace, drives a joint past its limit, or stalls inside ``encode`` (inference stall).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.contracts import Observation, reset_policy_episode


class ReplayPolicy:
    """ChunkPolicy replaying ``actions`` (N, Da) at ``rate_hz``; past the end it holds.

    ``encode`` maps the observation time to the tick index since the first observation;
    ``sample`` returns actions ``[k, k + H)`` (noise and step count are ignored).
    """

    backend_name = "replay"

    def __init__(self, actions: np.ndarray, rate_hz: float, layout: str, chunk_len: int = 16) -> None:
        a = np.asarray(actions, np.float32)
        if a.ndim != 2 or len(a) == 0:
            raise ValueError(f"actions must be (N, Da) with N >= 1, got shape {a.shape}")
        self.actions = a
        self.chunk_len, self.action_dim = int(chunk_len), int(a.shape[1])
        self.control_rate_hz, self.action_layout = float(rate_hz), layout
        hold = a[-1].copy()
        if layout == "ee_delta":
            hold[:-1] = 0.0  # zero TCP delta, last gripper command
        self._hold = hold
        self._t0: float | None = None

    def encode(self, obs: Observation) -> int:
        if self._t0 is None:
            self._t0 = obs.t_s
        return round((obs.t_s - self._t0) * self.control_rate_hz)

    def sample(self, features: Any, noise: np.ndarray, num_steps: int) -> np.ndarray:
        k = int(features)
        out = np.repeat(self._hold[None], self.chunk_len, axis=0)
        take = self.actions[max(k, 0): k + self.chunk_len]
        out[: len(take)] = take
        return out


@dataclass
class PolicyFault:
    """A policy-side fault from monotonic time ``t_s`` on (set by the harness at motion start)."""

    kind: str  # "nan" | "workspace" | "joint_limit" | "stall"
    t_s: float = float("inf")
    stall_s: float = 30.0  # "stall": encode blocks this long (or until release())
    joint: int = 6  # "joint_limit": which joint to drive past its upper limit
    overshoot_rad: float = 0.6
    ramp_rad_s: float = 2.0
    delta: tuple[float, ...] = (0.0, 0.0, -0.03, 0.0)  # "workspace": TCP delta per tick


class FaultyPolicy:
    """Wraps a ChunkPolicy; from ``fault.t_s`` on, the fault replaces or delays its output."""

    def __init__(self, inner: Any, fault: PolicyFault, q_max_rad: np.ndarray | None = None) -> None:
        self.inner, self.fault = inner, fault
        self.chunk_len, self.action_dim = inner.chunk_len, inner.action_dim
        self.control_rate_hz, self.action_layout = inner.control_rate_hz, inner.action_layout
        self.backend_name = f"{getattr(inner, 'backend_name', 'policy')}+{fault.kind}"
        self.q_max_rad = q_max_rad
        self._release = threading.Event()
        self.stalled = 0
        self.faulty_chunks = 0

    def release(self) -> None:
        """End a stall now (the harness calls this before closing the worker)."""
        self._release.set()

    def reset(self, obs: Any = None) -> None:
        """New episode: the wrapped policy's episode memory too."""
        reset_policy_episode(self.inner, obs)

    def encode(self, obs: Observation) -> tuple[Any, float]:
        if self.fault.kind == "stall" and obs.t_s >= self.fault.t_s and not self.stalled:
            self.stalled += 1
            self._release.wait(self.fault.stall_s)
        return self.inner.encode(obs), obs.t_s

    def sample(self, features: tuple[Any, float], noise: np.ndarray, num_steps: int) -> np.ndarray:
        inner_features, t_obs = features
        actions = np.array(self.inner.sample(inner_features, noise, num_steps), np.float32)
        f = self.fault
        if f.kind in ("stall",) or t_obs < f.t_s:
            return actions
        self.faulty_chunks += 1
        if f.kind == "nan":
            return np.full_like(actions, np.nan)
        if f.kind == "workspace":
            actions[:, : len(f.delta)] = f.delta
            return actions
        if f.kind == "joint_limit":
            if self.action_layout != "joint_pos" or self.q_max_rad is None:
                raise ValueError("joint_limit fault needs the joint_pos layout and q_max_rad")
            period = 1.0 / self.control_rate_hz
            t = t_obs - f.t_s + period * np.arange(self.chunk_len)
            target = self.q_max_rad[f.joint] + f.overshoot_rad
            actions[:, f.joint] = np.minimum(actions[:, f.joint] + f.ramp_rad_s * t, target)
            return actions
        raise ValueError(f"unknown policy fault {f.kind!r}")


def expert_actions(env: Any, seed: int, n_steps: int) -> dict[str, np.ndarray]:
    """Roll the scripted expert for ``n_steps`` on ``env`` (reset to ``seed``) and return its
    ``ee_delta`` actions (N, 5) and the env's joint targets + gripper (N, 8) for a ``joint_pos``
    replay. Leaves the env reset to ``seed`` again (the HIL run starts from the same scene)."""
    from sim.experts import make_expert

    u = env.unwrapped if hasattr(env, "unwrapped") else env
    u.reset(seed=seed)
    expert = make_expert(u.cfg.task)
    expert.reset(u, seed)
    ee, joint = [], []
    for _ in range(n_steps):
        a, _ = expert.act()
        u.step(a)
        ee.append(a)
        joint.append(np.append(u._q_target, float(np.clip(a[-1], 0.0, 1.0))))
    u.reset(seed=seed)
    return {"ee_delta": np.asarray(ee, np.float32), "joint_pos": np.asarray(joint, np.float32)}
