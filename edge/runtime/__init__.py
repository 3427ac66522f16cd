"""The composition layer: where concrete classes are wired into a running runtime.

* :mod:`edge.runtime.registry` — lazy ``name -> "module:factory"`` tables (schedulers, policies,
  backends, seams); a user's own ``pkg.module:factory`` plugs in through the same lookup.
* :mod:`edge.runtime.session` — :class:`SessionConfig`, :func:`build_runtime` (sim env -> driver ->
  loop + safety, queue, worker, telemetry) and :func:`run_session`, the one episode runner used by
  ``edge run``, the VLA grid, the latency benchmarks and the EQRL evaluation.
* :mod:`edge.runtime.query_env` — :class:`QueryEnv`, the query-level RL environment (one step = one
  query) on the same runtime path, and its vector form over local processes.
* :mod:`edge.runtime.campaign` — many seeded episodes as deterministic shards over local worker
  processes, with retry of a dying worker and per-episode records in seed order.

This package may import ``sim`` and ``drivers`` (it is the app layer); the on-robot core of ``edge``
never imports it.
"""
