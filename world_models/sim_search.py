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

The same search can mix the two halves of a trained agent (:func:`play_agent_episodes`): its
dynamics and rewards with no learned leaves (:class:`MaskedLeaves`: uniform prior, value 0), or
the simulator's dynamics, rewards and termination with the agent's policy prior and value at
every node (:class:`LearnedLeaves`, the model seeing the node's window of oracle slots as it does
when it acts), next to the agent itself and the simulator with no learned leaves.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from world_models import mcts
from world_models.object_env import N_ACTIONS, ObjectTaskEnv
from world_models.planner import History, Planner, PlannerConfig, run_search


Window = tuple[np.ndarray, np.ndarray, np.ndarray]  # one row's (states, actions, valid), as in History


class LearnedLeaves:
    """A trained world model's policy prior and value for search nodes whose state comes from the
    simulator. A node's window is its parent's slid by one block, with the parent's action and the
    node's oracle slots appended: what the model sees when the agent acts (``Planner.recurrent``)."""

    def __init__(self, planner: Planner, observer, prior: bool = True, value: bool = True) -> None:
        if observer.mode != "oracle":
            raise ValueError(f"LearnedLeaves reads the simulator's object states: it needs an oracle-slot "
                             f"model, got obs={observer.mode!r}")
        if not (prior or value):
            raise ValueError("LearnedLeaves with neither the prior nor the value: use SimulatorModel(leaves=None)")
        self.planner, self.observer = planner, observer
        self.prior, self.value = prior, value  # False: uniform prior / value 0 instead of the model's

    def child(self, win: Window, action: int, env: ObjectTaskEnv) -> Window:
        states, actions, valid = win
        state = self.observer.observe([{"oracle": env.oracle_now()}], np.ones(1, bool))[0]
        a = actions.copy()
        a[-1] = action
        return (np.concatenate([states[1:], state[None]]), np.concatenate([a[1:], [0]]),
                np.concatenate([valid[1:], [True]]))

    def evaluate(self, wins: Sequence[Window]) -> tuple[np.ndarray, np.ndarray]:
        """(B, A) prior logits and (B,) values of the windows."""
        import torch

        states, actions, valid = (np.stack([w[k] for w in wins]) for k in range(3))
        prior, value, _ = self.planner._expand(self.planner.to_z(states), torch.as_tensor(actions),
                                               torch.as_tensor(valid))
        return (prior if self.prior else np.zeros_like(prior)), (value if self.value else np.zeros_like(value))


class SimulatorModel:
    """mctx-shaped ``root`` / ``recurrent`` over the true simulator, one env per batch row.

    ``root()`` snapshots each env's current state; :meth:`recurrent` expands children from stored
    snapshots. A terminal child (task success) is absorbing: reward 0, discount 0 below it.
    :meth:`release` puts every env back in its root state (call it after each search). With
    ``leaves``, the prior and value of every node come from a trained model (``root`` then takes
    each row's window); without, the prior is uniform and the value 0.
    """

    def __init__(self, envs: Sequence[ObjectTaskEnv], gamma: float = 0.97,
                 leaves: LearnedLeaves | None = None) -> None:
        if not envs:
            raise ValueError("SimulatorModel needs at least one env")
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma={gamma} is out of range; allowed (0, 1]")
        self.envs, self.gamma, self.leaves = list(envs), float(gamma), leaves
        self._store: list[list[tuple[dict, bool, Window | None]]] = [[] for _ in self.envs]
        self.row_steps = np.zeros(len(self.envs), np.int64)  # simulator steps taken by searches, per env

    @property
    def steps(self) -> int:
        """Simulator steps taken by searches, all envs (for cost reports)."""
        return int(self.row_steps.sum())

    def _heads(self, wins: list) -> tuple[np.ndarray, np.ndarray]:
        b = len(self.envs)
        if self.leaves is None:
            return np.zeros((b, N_ACTIONS)), np.zeros(b)
        return self.leaves.evaluate(wins)

    def root(self, windows: Sequence[Window] | None = None) -> mcts.RootFnOutput:
        if (windows is None) != (self.leaves is None):
            raise ValueError("root(): pass each row's window exactly when the model has learned leaves")
        wins = list(windows) if windows is not None else [None] * len(self.envs)
        for i, env in enumerate(self.envs):
            self._store[i] = [(env.snapshot(), False, wins[i])]
        prior, value = self._heads(wins)
        return mcts.RootFnOutput(prior_logits=prior, value=value, embedding=np.zeros(len(self.envs), np.int64))

    def recurrent(self, emb: np.ndarray, action: np.ndarray) -> tuple[mcts.RecurrentFnOutput, np.ndarray]:
        b = len(self.envs)
        reward, discount, child = np.zeros(b), np.zeros(b), np.zeros(b, np.int64)
        wins: list = []
        for i, env in enumerate(self.envs):
            snap, terminal, win = self._store[i][int(emb[i])]
            if terminal:
                child[i] = int(emb[i])
                wins.append(win)
                continue
            env.restore(snap)
            r, success = env.simulate(int(action[i]))
            self.row_steps[i] += 1
            reward[i], discount[i] = r, 0.0 if success else self.gamma
            if self.leaves is not None:
                win = self.leaves.child(win, int(action[i]), env)
            wins.append(win)
            child[i] = len(self._store[i])
            self._store[i].append((env.snapshot(), success, win))
        prior, value = self._heads(wins)
        out = mcts.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=prior, value=value)
        return out, child

    def release(self) -> None:
        for i, env in enumerate(self.envs):
            if self._store[i]:
                env.restore(self._store[i][0][0])
            self._store[i] = []


class MaskedLeaves:
    """A planner's learned dynamics and rewards, with its prior replaced by a uniform one
    (``prior=False``) and / or its value by 0 (``value=False``)."""

    def __init__(self, planner: Planner, prior: bool = False, value: bool = False) -> None:
        self.planner, self.prior, self.value = planner, prior, value

    def _mask(self, prior: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (prior if self.prior else np.zeros_like(prior)), (value if self.value else np.zeros_like(value))

    def root(self, states, actions, valid) -> mcts.RootFnOutput:
        r = self.planner.root(states, actions, valid)
        prior, value = self._mask(r.prior_logits, r.value)
        return mcts.RootFnOutput(prior_logits=prior, value=value, embedding=r.embedding)

    def recurrent(self, emb: dict, action: np.ndarray) -> tuple[mcts.RecurrentFnOutput, dict]:
        out, emb2 = self.planner.recurrent(emb, action)
        prior, value = self._mask(out.prior_logits, out.value)
        return mcts.RecurrentFnOutput(reward=out.reward, discount=out.discount, prior_logits=prior, value=value), emb2


def search(model: SimulatorModel, cfg: PlannerConfig, rng: np.random.Generator,
           windows: Sequence[Window] | None = None) -> mcts.SearchOutput:
    """One search from every env's current state, without exploration noise; envs left as found."""
    root = model.root(windows)
    try:
        return run_search(root, model.recurrent, cfg, rng)
    finally:
        model.release()


def play_episode(env: ObjectTaskEnv, seed: int, cfg: PlannerConfig) -> dict:
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
        if success or truncated:
            break
    return {"seed": seed, "success": bool(success), "steps": t, "search_sim_steps": model.steps,
            "decide_s": decide_s, "max_depth": depth}


CELLS = ("agent", "learned_dynamics", "learned_dynamics_value", "learned_dynamics_prior",
         "simulator_learned_leaves", "simulator_learned_value", "simulator_learned_prior")
# (prior, value) taken from the model
_MASKED = {"learned_dynamics": (False, False), "learned_dynamics_value": (False, True),
           "learned_dynamics_prior": (True, False)}
_LEAVES = {"simulator_learned_leaves": (True, True), "simulator_learned_value": (False, True),
           "simulator_learned_prior": (True, False)}


def play_agent_episodes(envs: Sequence[ObjectTaskEnv], seeds: Sequence[int], planner: Planner, observer,
                        cell: str) -> list[dict]:
    """Episodes of a trained oracle-slot agent, or of one half of it (:data:`CELLS`), on ``seeds``
    (one env per seed, in lockstep, searches batched over the episodes still running):

    * ``agent``: the agent as it acts (its dynamics, rewards, prior and value);
    * ``learned_dynamics``: its dynamics and rewards, uniform prior and leaf value 0;
    * ``learned_dynamics_value`` / ``learned_dynamics_prior``: its dynamics and rewards with only
      its value (uniform prior) / only its prior (value 0);
    * ``simulator_learned_leaves``: the simulator's dynamics and rewards, its prior and value;
    * ``simulator_learned_value`` / ``simulator_learned_prior``: the same with only its value
      (uniform prior) / only its prior (value 0).

    Search settings are the agent's (``planner.cfg``), without exploration noise."""
    if cell not in CELLS:
        raise ValueError(f"cell={cell!r} is not one of {CELLS}")
    if len(envs) != len(seeds) or not seeds:
        raise ValueError(f"one env per seed: got {len(envs)} envs and {len(seeds)} seeds")
    if observer.mode != "oracle":
        raise ValueError(f"play_agent_episodes needs an oracle-slot agent, got obs={observer.mode!r}")
    cfg, n = planner.cfg, len(envs)
    rng = np.random.default_rng(int(seeds[0]))
    hist = History(n, cfg.context, observer.state_shape, observer.dtype)
    first = observer.observe([env.reset(seed=int(s))[0] for env, s in zip(envs, seeds)], np.ones(n, bool),
                             np.arange(n))
    for i in range(n):
        hist.reset(i, first[i])
    leaves = LearnedLeaves(planner, observer, *_LEAVES[cell]) if cell in _LEAVES else None
    masked = MaskedLeaves(planner, *_MASKED[cell]) if cell in _MASKED else None
    alive = np.ones(n, bool)
    res = [{"seed": int(s), "success": False, "steps": 0, "return": 0.0, "decide_s": [], "max_depth": [],
            "search_sim_steps": 0} for s in seeds]
    while alive.any():
        idx = np.flatnonzero(alive)
        t0 = time.perf_counter()
        if leaves is not None:
            sim = SimulatorModel([envs[i] for i in idx], gamma=cfg.gamma, leaves=leaves)
            out = search(sim, cfg, rng, windows=[(hist.states[i], hist.actions[i], hist.valid[i]) for i in idx])
            for j, i in enumerate(idx):
                res[i]["search_sim_steps"] += int(sim.row_steps[j])
        elif masked is not None:
            out = run_search(masked.root(hist.states[idx], hist.actions[idx], hist.valid[idx]), masked.recurrent,
                             cfg, rng)
        else:
            out = run_search(planner.root(hist.states[idx], hist.actions[idx], hist.valid[idx]),
                             planner.recurrent, cfg, rng)
        dt = (time.perf_counter() - t0) / len(idx)  # a batched search's time, shared by its episodes
        live: list[tuple[int, int, dict]] = []
        for j, i in enumerate(idx):
            a = int(out.action[j])
            obs, reward, success, truncated, _ = envs[i].step(a)
            r = res[i]
            r["steps"] += 1
            r["return"] += reward
            r["decide_s"].append(dt)
            r["max_depth"].append(int(out.max_depth[j]))
            if success or truncated:
                alive[i], r["success"] = False, bool(success)
            else:
                live.append((i, a, obs))
        if live:
            states = observer.observe([o for _, _, o in live], np.zeros(len(live), bool),
                                      np.array([i for i, _, _ in live]))
            for (i, a, _), st in zip(live, states):
                hist.push(i, a, st)
    return res


def load_oracle_agent(path) -> tuple:
    """A trained oracle-slot agent to run over the simulator: ``(RunConfig, Planner, Observer)``.
    EdgeError (naming the run) if it observes anything but oracle slots, or was trained on a
    backend without snapshots."""
    from edge.errors import EdgeError
    from world_models.observer import Observer
    from world_models.policy import load_world_model

    cfg, model, _ = load_world_model(path)
    if cfg.obs != "oracle":
        raise EdgeError(f"{path}: the run observes {cfg.obs!r}; only an oracle-slot agent reads the "
                        "simulator's object states (train with --obs oracle)")
    if cfg.env.sim != "mujoco":
        raise EdgeError(f"{path}: trained on sim={cfg.env.sim!r}; searching or probing with the simulator "
                        "restores snapshots, which only the MuJoCo backend offers")
    return cfg, Planner(model, cfg.planner), Observer.for_run(cfg)


def probe_leaf_values(env: ObjectTaskEnv, seed: int, planner: Planner, observer, behaviour) -> list[dict]:
    """One episode acted by ``behaviour(env) -> action``. At every state each of the 8 actions is
    stepped on the simulator from the same snapshot: its reward, whether it succeeds, how far it
    moves the red cube (m), and the trained model's value of the child, the model seeing the child's
    window as in the ``simulator_learned_value`` search. What one step of that search weighs:
    ``reward + γ·value`` against ``reward`` alone with no learned value. The episode is the one
    ``behaviour`` plays without the probes (the snapshots restore it exactly)."""
    leaves = LearnedLeaves(planner, observer, prior=False, value=True)
    hist = History(1, planner.cfg.context, observer.state_shape, observer.dtype)
    obs, _ = env.reset(seed=seed)
    hist.reset(0, observer.observe([obs], np.ones(1, bool), np.zeros(1, np.int64))[0])
    red = env.env.backend.object_pose7
    rows: list[dict] = []
    for _ in range(env.cfg.steps):
        win = (hist.states[0], hist.actions[0], hist.valid[0])
        snap, cube0 = env.snapshot(), red("red")[:2]
        reward, success, moved, wins = np.zeros(N_ACTIONS), np.zeros(N_ACTIONS, bool), np.zeros(N_ACTIONS), []
        for a in range(N_ACTIONS):
            env.restore(snap)
            reward[a], success[a] = env.simulate(a)
            moved[a] = float(np.linalg.norm(red("red")[:2] - cube0))
            wins.append(leaves.child(win, a, env))
        env.restore(snap)
        _, value = leaves.evaluate(wins)
        a = int(behaviour(env))
        rows.append({"reward": reward, "success": success, "cube_moved_m": moved, "value": np.asarray(value, float),
                     "action": a})
        obs, _, done, truncated, _ = env.step(a)
        if done or truncated:
            break
        hist.push(0, a, observer.observe([obs], np.zeros(1, bool), np.zeros(1, np.int64))[0])
    return rows
