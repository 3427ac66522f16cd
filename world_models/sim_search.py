"""Tree search with the simulator as its model: what the planner does when the model is perfect.

The search (:mod:`world_models.mcts`) sees only a root output and a recurrent function, so the
learned world model can be swapped for the simulator itself. :class:`SimulatorModel` gives the two
over a batch of :class:`~world_models.object_env.ObjectTaskEnv` (MuJoCo): a node's embedding is an
index into the row's stored snapshots; expanding a child restores the parent's snapshot, steps
the simulator once without rendering and stores the child's snapshot. Rewards and terminations
are the task's own (shaping included); the prior is uniform and the value of every leaf is 0,
so the search is a budgeted lookahead on the true dynamics with no learned value.

This is a reference, not an agent: it needs the simulator's state, which a robot does not have.
It separates the two things a learned model-based agent must get right, the model and the value
over the horizon the search does not see (``benchmarks/wm_sim_search.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from world_models import mcts
from world_models.object_env import N_ACTIONS, ObjectTaskEnv
from world_models.planner import PlannerConfig


class SimulatorModel:
    """mctx-shaped ``root`` / ``recurrent`` over the true simulator, one env per batch row.

    ``root()`` snapshots each env's current state; :meth:`recurrent` expands children from stored
    snapshots. A terminal child (task success) is absorbing: reward 0, discount 0 below it.
    :meth:`release` puts every env back in its root state (call it after each search).
    """

    def __init__(self, envs: Sequence[ObjectTaskEnv], gamma: float = 0.97) -> None:
        if not envs:
            raise ValueError("SimulatorModel needs at least one env")
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma={gamma} is out of range; allowed (0, 1]")
        self.envs, self.gamma = list(envs), float(gamma)
        self._store: list[list[tuple[dict, bool]]] = [[] for _ in self.envs]
        self.steps = 0  # simulator steps taken by searches (for cost reports)

    def root(self) -> mcts.RootFnOutput:
        for i, env in enumerate(self.envs):
            self._store[i] = [(env.snapshot(), False)]
        b = len(self.envs)
        return mcts.RootFnOutput(prior_logits=np.zeros((b, N_ACTIONS)), value=np.zeros(b),
                                 embedding=np.zeros(b, np.int64))

    def recurrent(self, emb: np.ndarray, action: np.ndarray) -> tuple[mcts.RecurrentFnOutput, np.ndarray]:
        b = len(self.envs)
        reward, discount, child = np.zeros(b), np.zeros(b), np.zeros(b, np.int64)
        for i, env in enumerate(self.envs):
            snap, terminal = self._store[i][int(emb[i])]
            if terminal:
                child[i] = int(emb[i])
                continue
            env.restore(snap)
            r, success = env.simulate(int(action[i]))
            self.steps += 1
            reward[i], discount[i] = r, 0.0 if success else self.gamma
            child[i] = len(self._store[i])
            self._store[i].append((env.snapshot(), success))
        out = mcts.RecurrentFnOutput(reward=reward, discount=discount,
                                     prior_logits=np.zeros((b, N_ACTIONS)), value=np.zeros(b))
        return out, child

    def release(self) -> None:
        for i, env in enumerate(self.envs):
            if self._store[i]:
                env.restore(self._store[i][0][0])
            self._store[i] = []


def search(model: SimulatorModel, cfg: PlannerConfig, rng: np.random.Generator) -> mcts.SearchOutput:
    """One search from every env's current state, without exploration noise; envs left as found."""
    root = model.root()
    try:
        if cfg.search == "gumbel":
            return mcts.gumbel_muzero_policy(root, model.recurrent, cfg.num_simulations, rng,
                                             max_num_considered_actions=cfg.max_considered, gumbel_scale=0.0)
        return mcts.muzero_policy(root, model.recurrent, cfg.num_simulations, rng,
                                  dirichlet_fraction=0.0, temperature=0.0)
    finally:
        model.release()


def play_episode(env: ObjectTaskEnv, seed: int, cfg: PlannerConfig,
                 on_step: Callable[[int], None] | None = None) -> dict:
    """One episode acting by search with the simulator: success, steps, simulator steps searched,
    decision times (s) and the deepest node per decision."""
    model = SimulatorModel([env], gamma=cfg.gamma)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    decide_s: list[float] = []
    depth: list[int] = []
    success, t = False, 0
    for t in range(1, env.cfg.steps + 1):
        t0 = time.perf_counter()
        out = search(model, cfg, rng)
        decide_s.append(time.perf_counter() - t0)
        depth.append(int(out.max_depth[0]))
        _, _, success, truncated, _ = env.step(int(out.action[0]))
        if on_step is not None:
            on_step(t)
        if success or truncated:
            break
    return {"seed": seed, "success": bool(success), "steps": t, "search_sim_steps": model.steps,
            "decide_s": decide_s, "max_depth": depth}
