"""QueryEnv worker processes for EQRL: each owns one :class:`edge.runtime.query_env.QueryEnv` and
answers ``reset`` / ``step`` over a pipe with small numpy payloads (features, context, the executed
chunk in the VLA's latent units), so the learner's replay never holds an image."""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any

from adapters.eqrl.schedule import pad_chunk


def _worker(conn: Any, session: dict, threads: int) -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    from edge.runtime.query_env import QueryEnv
    from edge.runtime.session import SessionConfig

    try:
        env = QueryEnv(SessionConfig(**session))
        policy = env.policy
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(err).__name__}: {err}"))
        return
    conn.send(("ready", (policy.chunk_len, policy.action_dim)))
    while True:
        try:
            kind, arg = conn.recv()
        except (EOFError, OSError):
            break
        try:
            if kind == "close":
                break
            if kind == "reset":
                seed, options = arg if isinstance(arg, tuple) else (arg, None)
                obs, info = env.reset(seed=seed, options=options)
                conn.send(("obs", (obs, info["seed"])))
            elif kind == "step":
                obs, r, term, trunc, info = env.step(arg)
                chunk = policy.to_latent(info["chunk"]) if info["chunk"] is not None else None
                small = {"ticks": info["ticks"], "executed": info["executed"], "nfe": info["nfe"],
                         "K": info["plan"].num_steps, "C": info["plan"].execute,
                         "chunk": None if chunk is None else pad_chunk(chunk, max(1, info["executed"])),
                         "episode": info.get("episode")}
                conn.send(("step", (obs, r, term, trunc, small)))
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            conn.send(("error", f"{type(err).__name__}: {err}"))
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
