"""The composition layer: where concrete classes are wired into a running runtime, and the public
Python API of the runtime::

    from edge.runtime import RuntimeConfig, run_session
    res = run_session(RuntimeConfig.of(episodes=2, num_steps=2), "runs/x")

* :mod:`edge.runtime.config` — :class:`RuntimeConfig`, one nested section per component (scene,
  policy, backend, scheduler with a section per kind, worker, queue, loop, clock, safety, run), YAML
  presets (``configs/run/``) and ``--set`` overrides by dotted path or short name.
* :mod:`edge.runtime.registry` — lazy ``name -> "module:factory"`` tables (schedulers, policies);
  a user's own ``pkg.module:factory`` plugs in through the same lookup.
* :mod:`edge.runtime.session` — :func:`build_runtime` (sim env -> driver -> loop + safety, queue,
  worker, telemetry) and :func:`run_session`, the one episode runner used by ``edge run``, the VLA
  grid, the latency benchmarks and the EQRL evaluation.
* :mod:`edge.runtime.query_env` — :class:`QueryEnv`, the query-level RL environment (one step = one
  query) on the same runtime path, and its vector form over local processes.
* :mod:`edge.runtime.campaign` — many seeded episodes as deterministic shards over local worker
  processes, with retry of a dying worker and per-episode records in seed order.

This package may import ``sim`` and ``drivers`` (it is the app layer); the on-robot core of ``edge``
never imports it. Names are imported on first use, so ``import edge.runtime`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RuntimeConfig": "edge.runtime.config", "load_runtime_config": "edge.runtime.config",
    "build_runtime": "edge.runtime.session", "run_session": "edge.runtime.session",
    "Runtime": "edge.runtime.session", "SessionResult": "edge.runtime.session",
    "QueryEnv": "edge.runtime.query_env", "SCHEDULERS": "edge.runtime.registry",
    "POLICIES": "edge.runtime.registry",
}

__all__ = ["POLICIES", "SCHEDULERS", "QueryEnv", "Runtime", "RuntimeConfig", "SessionResult", "build_runtime",
           "load_runtime_config", "run_session"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'edge.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
