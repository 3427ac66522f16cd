"""``QueryEnv``: the runtime as a query-level RL environment (gymnasium API). One ``step`` = one query.

The episode runs on the real runtime path (:func:`edge.runtime.session.build_runtime`: control loop,
inference worker, action queue, safety, sim driver; virtual clock, inline worker) in a helper thread.
The scheduler the loop asks is this env: when the loop wants a plan, the thread hands the frozen
policy's features and the :class:`~edge.contracts.QueryContext` to :meth:`QueryEnv.step`'s caller
and waits for the plan — so what the agent is trained on is exactly what deployment runs. The two
threads strictly alternate; nothing runs concurrently, and the run is deterministic.

Observation (dict):

* ``features`` (D,) float32 — the policy's prefix features for the query's observation;
* ``context`` (8,) float32 — :func:`context_vector` of the QueryContext (queue depth, latency,
  delay, query index, previous K/C, episode progress).

Action: a :class:`~edge.contracts.QueryPlan`, or a dict ``{"noise": (H, Da) | None, "num_steps": K,
"execute": C[, "next_query_in_steps": n]}`` (``noise`` in the policy's latent; None = the worker's
seeded Gaussian noise at the session's temperature, as a fixed schedule gets).

``step`` returns ``(obs, reward, terminated, truncated, info)`` where ``reward`` is the env reward
summed over the ticks that ran until the next query (the sparse task reward: 1 on the success
tick), and ``info`` holds ``ticks`` (control ticks run), ``executed`` (ticks that executed a policy
action), ``nfe`` (denoiser evaluations spent by this query), ``plan`` (the plan as executed) and,
at the episode's end, ``episode`` (its record: success, steps, nfe, executed, ...).
"""

from __future__ import annotations

import math
import queue
import threading
from typing import Any

import numpy as np

from edge.contracts import QueryContext, QueryPlan
from edge.errors import EpisodeAborted
from edge.runtime.config import RuntimeConfig, apply_settings
from edge.runtime.session import build_runtime

CONTEXT_DIM = 8


EPISODE_TICKS_SCALE = 300.0  # progress feature = ticks since the episode's first query / this


def context_vector(ctx: QueryContext, t_first_s: float) -> np.ndarray:
    """QueryContext -> (8,) float32, scaled to about [0, 1]: queue depth / H, latency p50 and p95
    (s, 0 before the first measurement), delay steps / H, query index / 50, previous K / 10,
    previous C / H, ticks since the episode's first query (observed at ``t_first_s``) / 300.

    Everything comes from what a deployed scheduler sees, so training and deployment compute the
    same vector (:class:`adapters.eqrl.deploy.EqrlScheduler` keeps ``t_first_s`` itself)."""
    H = max(1, ctx.chunk_len)
    last = ctx.last_plan
    p50 = 0.0 if math.isnan(ctx.latency_p50_s) else ctx.latency_p50_s
    p95 = 0.0 if math.isnan(ctx.latency_p95_s) else ctx.latency_p95_s
    ticks = round((ctx.t_s - t_first_s) / ctx.period_s) if ctx.period_s > 0 else 0
    return np.array([ctx.queue_depth / H, p50, p95, ctx.delay_steps / H, ctx.query_index / 50.0,
                     0.0 if last is None else last.num_steps / 10.0,
                     0.0 if last is None else last.execute / H,
                     ticks / EPISODE_TICKS_SCALE], np.float32)


class _Abort(EpisodeAborted):
    """The env was reset or closed mid-episode: unwind the episode thread."""


class _Planner:
    """The loop's scheduler: hands each query to the env's caller and returns their plan."""

    name = "query_env"

    def __init__(self) -> None:
        self.to_env: queue.Queue = queue.Queue()
        self.to_loop: queue.Queue = queue.Queue()

    def plan(self, features: Any, history: QueryContext) -> QueryPlan:
        self.to_env.put(("query", features, history))
        plan = self.to_loop.get()
        if plan is None:
            raise _Abort()
        return plan

    def reset(self) -> None:
        pass

    def observe(self, result: Any) -> None:
        self.last_chunk = result.chunk.actions  # (H, Da) physical actions of the accepted query

    last_chunk: Any = None


ACTION_KEYS = ("noise", "num_steps", "execute", "next_query_in_steps", "signals")


def as_plan(action: Any, chunk_len: int) -> QueryPlan:
    """A QueryPlan from a plan or a dict (see the module doc); ``next_query_in_steps`` defaults to C."""
    if isinstance(action, QueryPlan):
        return action
    if not hasattr(action, "get"):
        raise TypeError(f"QueryEnv.step({action!r}): give a QueryPlan or a dict with num_steps, execute "
                        "(optional: noise, next_query_in_steps, signals)")
    unknown = sorted(str(key) for key in action if key not in ACTION_KEYS)
    if unknown:  # a typo'd key would otherwise be ignored
        raise ValueError(f"QueryEnv.step: unknown action key {unknown[0]!r}; the keys are {', '.join(ACTION_KEYS)}")
    missing = [key for key in ("num_steps", "execute") if key not in action]
    if missing:
        raise ValueError(f"QueryEnv.step: the action lacks {', '.join(missing)} (a dict needs num_steps and execute)")

    def whole(key: str, value: Any) -> int:  # 2.0 is 2; 2.5 is refused, not truncated
        if isinstance(value, bool) or not float(value).is_integer():
            raise ValueError(f"QueryEnv.step: {key}={value!r} must be a whole number")
        return int(value)

    k, c = whole("num_steps", action["num_steps"]), whole("execute", action["execute"])
    noise = action.get("noise")
    noise = None if noise is None else np.asarray(noise, np.float32).reshape(chunk_len, -1)
    return QueryPlan(noise=noise, num_steps=k, execute=c,
                     next_query_in_steps=whole("next_query_in_steps", action.get("next_query_in_steps") or c),
                     signals=dict(action.get("signals") or {}))


class QueryEnv:
    """gymnasium-style env over the runtime (see the module doc). ``seed`` in :meth:`reset` picks
    the scene; without one, episodes use ``cfg.run.seed``, ``cfg.run.seed + 1``, ... in order."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, cfg: RuntimeConfig | None = None, policy: Any = None, robot: Any = None) -> None:
        cfg = cfg or RuntimeConfig.of(execution="sync", latency="constant", latency_ms=0.0)
        self.cfg = apply_settings(cfg, [("record_ticks", False), ("video_episodes", 0)])
        self._planner = _Planner()
        self._cmd: queue.Queue = queue.Queue()
        # one thread builds, runs and closes the runtime: the renderer's GL context is bound to it
        self._thread = threading.Thread(target=self._serve, args=(policy, robot), name="query-env",
                                        daemon=True)
        self._thread.start()
        _, runtime, _ = self._wait()
        self.runtime = runtime
        self.policy = runtime.loop.worker.policy
        self.chunk_len, self.action_dim = self.policy.chunk_len, self.policy.action_dim
        self._next_seed = self.cfg.run.seed
        self._in_episode = False
        self._closed = False
        self._ticks = self._executed = 0
        self._reward = 0.0
        self.episode: dict[str, Any] | None = None
        self._feat_dim = 0
        self.observation_space: Any = None  # known after the first reset (the feature width)

    # ------------------------------------------------------------------ the runtime's thread
    def _on_tick(self, rec: Any) -> None:  # rec: edge.records.TickRecord
        self._ticks += 1
        self._executed += int(rec.kind == "act")
        self._reward += float(self.runtime.driver.reward)

    def _serve(self, policy: Any, robot: Any) -> None:
        out = self._planner.to_env
        try:
            runtime = build_runtime(self.cfg, None, policy=policy, robot=robot, scheduler=self._planner)
        except BaseException as err:  # noqa: BLE001 - re-raised on the caller's thread
            out.put(("error", err, None))
            return
        out.put(("ready", runtime, None))
        while True:
            kind, seed = self._cmd.get()
            if kind == "close":
                try:
                    runtime.close()
                except BaseException as err:  # noqa: BLE001
                    out.put(("error", err, None))
                else:
                    out.put(("closed", None, None))
                return
            try:
                ep = runtime.run_episode(seed, on_tick=self._on_tick)
            except _Abort:
                loop = runtime.loop
                if loop.safety.mode.value != "running":  # the loop stopped the arm on the abort
                    loop.reset()
                out.put(("aborted", None, None))
            except BaseException as err:  # noqa: BLE001 - re-raised on the caller's thread
                out.put(("error", err, None))
            else:
                out.put(("done", ep, None))

    def _wait(self) -> tuple[str, Any, Any]:
        kind, a, b = self._planner.to_env.get()
        if kind == "error":
            self._in_episode = False
            raise a
        return kind, a, b

    def _obs(self, features: Any, ctx: QueryContext) -> dict[str, np.ndarray]:
        f = np.asarray(features, np.float32).reshape(-1)
        if self.observation_space is None:
            import gymnasium as gym

            self._feat_dim = f.size
            self.observation_space = gym.spaces.Dict({
                "features": gym.spaces.Box(-np.inf, np.inf, (f.size,), np.float32),
                "context": gym.spaces.Box(-np.inf, np.inf, (CONTEXT_DIM,), np.float32)})
        if ctx.query_index == 0:
            self._t_first = ctx.t_s
        return {"features": f, "context": context_vector(ctx, self._t_first)}

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start the episode ``seed``. ``options={"latency_ms": x}`` charges a constant ``x`` ms per
        query on the virtual clock from this episode on (needs ``latency="constant"``) and clears
        the loop's measured-latency window, so the context reports the new latency from its
        first measurement on (training with latency drawn per episode)."""
        self._abort()
        if options and "latency_ms" in options:
            self.set_latency_ms(float(options["latency_ms"]))
        if seed is None:
            seed = self._next_seed
        self._next_seed = seed + 1
        self._ticks = self._executed = 0
        self._reward = 0.0
        self.episode = None
        self._cmd.put(("episode", seed))
        self._in_episode = True
        kind, features, ctx = self._wait()
        if kind != "query":  # an episode that ends before its first query (cannot happen in the sim)
            self._in_episode = False
            raise RuntimeError(f"QueryEnv: episode {seed} ended before its first query ({kind})")
        return self._obs(features, ctx), {"seed": seed, "context": ctx}

    def set_latency_ms(self, latency_ms: float) -> None:
        """Charge ``latency_ms`` per query from the next episode on (constant latency only)."""
        from edge.clock import ConstantLatency

        if self.cfg.clock.latency != "constant":
            raise ValueError(f"QueryEnv: a per-episode latency needs latency='constant' (got {self.cfg.clock.latency!r})")
        if not 0.0 <= latency_ms <= 10_000.0:
            raise ValueError(f"QueryEnv: latency_ms={latency_ms} outside [0, 10000]")
        if latency_ms > 0.0 and self.cfg.loop.execution != "async":
            raise ValueError(f"QueryEnv: latency_ms={latency_ms} needs execution='async' (sync queries "
                             "never overlap execution, so latency would only pause the arm)")
        self.runtime.loop.worker.latency_model = ConstantLatency(latency_ms / 1000.0)
        self.runtime.loop.reset_latency_stats()

    def step(self, action: Any):
        if not self._in_episode:
            raise RuntimeError("QueryEnv.step() before reset() (or after the episode ended)")
        plan = as_plan(action, self.chunk_len)
        self._ticks = self._executed = 0
        self._reward = 0.0
        self._planner.to_loop.put(plan)
        kind, a, ctx = self._wait()
        info = {"ticks": self._ticks, "executed": self._executed, "nfe": plan.num_steps, "plan": plan,
                "chunk": self._planner.last_chunk}
        reward = self._reward
        if kind == "query":
            return self._obs(a, ctx), reward, False, False, info
        self._in_episode = False
        ep = self.episode = a
        info["episode"] = ep
        success = bool(ep["success"])
        obs = {"features": np.zeros(self._feat_dim, np.float32), "context": np.zeros(CONTEXT_DIM, np.float32)}
        return obs, reward, success, not success, info

    def _abort(self) -> None:
        if not self._in_episode:
            return
        self._planner.to_loop.put(None)  # the planner raises _Abort inside the loop's query
        self._in_episode = False
        kind, _, _ = self._planner.to_env.get()
        assert kind in ("aborted", "done", "error"), kind

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._abort()
        self._cmd.put(("close", None))
        self._wait()
        self._thread.join()
