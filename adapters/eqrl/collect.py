"""QueryEnv workers for EQRL: each owns one :class:`edge.runtime.query_env.QueryEnv` and answers
``reset`` / ``step`` with small numpy payloads (features, context, the executed chunk in the VLA's
latent units), so the learner's replay never holds an image.

Two vector forms with one interface (``chunk_len``, ``action_dim``, ``send(i, kind, arg)``,
``recv(i)``, ``close()``) and identical payloads (both answer through :func:`answer`):
:class:`VecQueryEnv` over local processes (pipes) and :class:`RayVecQueryEnv` over Ray actors."""

from __future__ import annotations

import collections
import logging
import multiprocessing as mp
import os
from typing import Any

from adapters.eqrl.schedule import pad_chunk

log = logging.getLogger("adapters.eqrl.collect")


def open_env(session: dict, threads: int = 1) -> Any:
    """A QueryEnv on the session dict (short names or dotted paths of
    :class:`~edge.runtime.config.RuntimeConfig`),
    with headless rendering and ``threads`` OpenMP threads unless the environment says otherwise."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    from edge.runtime.query_env import QueryEnv
    from edge.runtime.config import RuntimeConfig

    return QueryEnv(RuntimeConfig.of(**session))


def answer(env: Any, kind: str, arg: Any) -> tuple[str, Any]:
    """One request to a worker's env -> its reply ``(kind, payload)``:

    * ``("reset", seed | (seed, options))`` -> ``("obs", (obs, seed))``;
    * ``("step", action)`` -> ``("step", (obs, reward, terminated, truncated, small))`` with
      ``small`` = ticks, executed, nfe, K, C, the executed chunk (latent units, padded to H after
      the executed length; None when no chunk was accepted) and the episode record at its end;
    * an exception -> ``("error", "Type: message")`` (the worker stays up)."""
    try:
        if kind == "reset":
            seed, options = arg if isinstance(arg, tuple) else (arg, None)
            obs, info = env.reset(seed=seed, options=options)
            return "obs", (obs, info["seed"])
        if kind == "step":
            obs, r, term, trunc, info = env.step(arg)
            chunk = env.policy.to_latent(info["chunk"]) if info["chunk"] is not None else None
            small = {"ticks": info["ticks"], "executed": info["executed"], "nfe": info["nfe"],
                     "K": info["plan"].num_steps, "C": info["plan"].execute,
                     "chunk": None if chunk is None else pad_chunk(chunk, max(1, info["executed"])),
                     "episode": info.get("episode")}
            return "step", (obs, r, term, trunc, small)
        raise ValueError(f"unknown request {kind!r} (expected reset or step)")
    except BaseException as err:  # noqa: BLE001 - reported to the learner
        return "error", f"{type(err).__name__}: {err}"


def _worker(conn: Any, session: dict, threads: int) -> None:
    try:
        env = open_env(session, threads)
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(err).__name__}: {err}"))
        return
    conn.send(("ready", (env.chunk_len, env.action_dim)))
    while True:
        try:
            kind, arg = conn.recv()
        except (EOFError, OSError):
            break
        if kind == "close":
            break
        conn.send(answer(env, kind, arg))
    env.close()


class VecQueryEnv:
    """N QueryEnv processes stepped together; ``send`` then ``recv`` so the learner can update in
    between. A worker that dies raises a clear error naming it (its episode is not silently lost)."""

    def __init__(self, n: int, session: dict, threads: int = 1) -> None:
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for _ in range(n):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(b, session, threads), daemon=True)
            p.start()
            b.close()
            self.conns.append(a)
            self.procs.append(p)
        shapes = [self._recv(i) for i in range(n)]
        self.chunk_len, self.action_dim = shapes[0]

    def _recv(self, i: int) -> Any:
        try:
            kind, payload = self.conns[i].recv()
        except (EOFError, OSError):
            raise RuntimeError(f"QueryEnv worker {i} died (exit code {self.procs[i].exitcode})") from None
        if kind == "error":
            raise RuntimeError(f"QueryEnv worker {i}: {payload}")
        return payload

    def send(self, i: int, kind: str, arg: Any = None) -> None:
        self.conns[i].send((kind, arg))

    def recv(self, i: int) -> Any:
        return self._recv(i)

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(("close", None))
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


class _EnvActor:
    """The Ray actor behind :class:`RayVecQueryEnv`: one QueryEnv, the same replies as ``_worker``."""

    def __init__(self, session: dict, threads: int) -> None:
        self.env, self.error = None, None
        try:
            self.env = open_env(session, threads)
        except BaseException as err:  # noqa: BLE001 - reported by ready()
            self.error = f"{type(err).__name__}: {err}"

    def ready(self) -> tuple[str, Any]:
        if self.env is None:
            return "error", self.error
        return "ready", (self.env.chunk_len, self.env.action_dim)

    def call(self, kind: str, arg: Any) -> tuple[str, Any]:
        return answer(self.env, kind, arg)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def _writable(x: Any) -> Any:
    """Ray hands numpy arrays back read-only (zero-copy): copy them, so the payload is what
    :class:`VecQueryEnv` returns."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x if x.flags.writeable else x.copy()
    if isinstance(x, tuple):
        return tuple(_writable(v) for v in x)
    if isinstance(x, list):
        return [_writable(v) for v in x]
    if isinstance(x, dict):
        return {k: _writable(v) for k, v in x.items()}
    return x


class RayVecQueryEnv:
    """N QueryEnv Ray actors (``num_cpus`` each) with :class:`VecQueryEnv`'s interface and payloads:
    ``send`` submits the actor call (Ray runs one caller's calls to an actor in order), ``recv``
    waits for the oldest outstanding one. ``address``: see :func:`edge.runtime.campaign.init_ray`
    (``"local"`` = a fresh local instance, shut down again by :meth:`close`; ``"auto"`` = an existing
    cluster, whose nodes need this package installed). A dead actor raises a RuntimeError naming it."""

    def __init__(self, n: int, session: dict, threads: int = 1, address: str | None = "local",
                 num_cpus: float = 1, **init_kwargs: Any) -> None:
        from edge.runtime.campaign import init_ray, require_ray

        ray = require_ray()
        self._ray = ray
        self._owns_ray = init_ray(address, **init_kwargs)
        self.actors: list[Any] = []
        need, have = n * num_cpus, ray.cluster_resources().get("CPU", 0.0)
        if need > have:  # the actors would wait for CPUs forever (or for an autoscaler)
            msg = (f"{n} QueryEnv actors x {num_cpus:g} CPU need {need:g} CPUs; the Ray cluster has "
                   f"{have:g} (lower envs or the CPUs per actor)")
            if self._owns_ray and address in (None, "", "local"):
                from edge.errors import EdgeError

                self.close()
                raise EdgeError(msg)
            log.warning("%s: waiting for the cluster to grow", msg)
        actor = ray.remote(_EnvActor).options(num_cpus=num_cpus, max_restarts=0)
        self.actors = [actor.remote(session, threads) for _ in range(n)]
        self._pending: list[collections.deque] = [collections.deque() for _ in range(n)]
        try:
            for i, a in enumerate(self.actors):
                self._pending[i].append(a.ready.remote())
            shapes = [self.recv(i) for i in range(n)]
        except BaseException:
            self.close()
            raise
        self.chunk_len, self.action_dim = shapes[0]

    def send(self, i: int, kind: str, arg: Any = None) -> None:
        self._pending[i].append(self.actors[i].call.remote(kind, arg))

    def recv(self, i: int) -> Any:
        ray = self._ray
        ref = self._pending[i].popleft()
        try:
            kind, payload = ray.get(ref)
        except ray.exceptions.RayError as err:  # the actor died (OOM kill, segfault, lost node)
            why = (str(err).strip().splitlines() or [""])[0]
            raise RuntimeError(f"QueryEnv actor {i} died ({type(err).__name__}: {why})") from None
        if kind == "error":
            raise RuntimeError(f"QueryEnv worker {i}: {payload}")
        return _writable(payload)

    def close(self) -> None:
        ray = self._ray
        refs = [a.close.remote() for a in self.actors]
        try:
            ray.wait(refs, num_returns=len(refs), timeout=10)
        except ray.exceptions.RayError:
            pass
        for a in self.actors:
            try:
                ray.kill(a)
            except ray.exceptions.RayError:
                pass
        self.actors = []
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
