"""Campaigns: many independent jobs (shards of seeded episodes) over local worker processes or a Ray
cluster, with the same results in job order whatever the executor.

    results = run_campaign(run_shard, jobs, workers=2)              # local processes (spawn)
    results = run_campaign(run_shard, jobs, ray_address="auto")     # an existing Ray cluster
    results = run_campaign(run_shard, jobs, ray_address="local")    # a fresh local Ray instance

:func:`init_ray` is the one place that connects to Ray (campaigns, ``edge train adapter --ray``).

``fn`` must be a picklable top-level function of one job (a dict). A worker process that dies (OOM
kill, segfault) is reported and its unfinished jobs are retried in a fresh pool, up to ``retries``
times, never silently dropped; ``on_result(index, result)`` sees each result as it completes (write
partial results there), and Ctrl-C cancels what has not started and re-raises.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from edge.errors import EdgeError

log = logging.getLogger("edge.campaign")


class CampaignError(EdgeError):
    """Jobs still failed after the retries."""


def run_campaign(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int = 1,
                 ray_address: str | None = None, retries: int = 2,
                 on_result: Callable[[int, Any], None] | None = None, progress: bool = True,
                 desc: str = "campaign") -> list[Any]:
    """Run ``fn(job)`` for every job; returns the results in job order. ``workers``: local processes
    (1 = in this process); ``retries`` (>= 0): how often a dying worker's job is run again."""
    from tqdm import tqdm

    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise EdgeError(f"run_campaign(workers={workers!r}): give a number of worker processes >= 1 "
                        "(1 = run the jobs in this process)")
    if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or retries < 0:
        raise EdgeError(f"run_campaign(retries={retries!r}): must be an integer >= 0")

    results: list[Any] = [None] * len(jobs)
    done = [False] * len(jobs)
    bar = tqdm(total=len(jobs), desc=desc, unit="job", disable=not progress)

    def finish(i: int, res: Any) -> None:
        results[i], done[i] = res, True
        bar.update(1)
        if on_result is not None:
            on_result(i, res)

    try:
        if ray_address is not None:
            _run_ray(fn, jobs, ray_address, finish, retries)
        elif workers <= 1:
            for i, job in enumerate(jobs):
                finish(i, fn(job))
        else:
            _run_pool(fn, jobs, workers, finish, done, retries)
    finally:
        bar.close()
    return results


def _run_pool(fn, jobs, workers, finish, done, retries) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    attempt = 0
    while True:
        todo = [i for i, d in enumerate(done) if not d]
        if not todo:
            return
        broken = False
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(fn, jobs[i]): i for i in todo}
            try:
                pending = set(futures)
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        try:
                            finish(futures[f], f.result())
                        except BrokenProcessPool:
                            broken = True
            except KeyboardInterrupt:
                for f in futures:
                    f.cancel()
                raise
        if not broken:
            return
        attempt += 1
        left = sum(not d for d in done)
        if attempt > retries:
            raise CampaignError(f"a worker process died; {left} job(s) still failed after {retries} retries")
        log.warning("a worker process died; retrying %d unfinished job(s) (attempt %d of %d)",
                    left, attempt, retries)


RAY_MISSING = "--ray needs Ray: pip install ray (in a checkout: pip install -c constraints.txt -e '.[dist]')"


def require_ray() -> Any:
    """The ``ray`` module, or an :class:`EdgeError` (one line naming the ``dist`` extra) without it."""
    try:
        import ray
    except ImportError:
        raise EdgeError(RAY_MISSING) from None
    return ray


def init_ray(address: str | None = "local", **init_kwargs: Any) -> bool:
    """Connect to Ray: ``"auto"`` = an existing cluster, ``"ray://..."`` / ``host:port`` = that
    cluster, ``None`` / ``""`` / ``"local"`` = a fresh local instance (``init_kwargs`` go to
    ``ray.init``, e.g. ``num_cpus``). An instance this process already has is reused as it is.
    Returns True when this call started (or connected) Ray, so the caller may ``ray.shutdown()``
    when done; raises :class:`EdgeError` (see :func:`require_ray`) when Ray is not installed."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    kwargs = {"ignore_reinit_error": True, "log_to_driver": False, **init_kwargs}
    ray.init(address=None if address in (None, "", "local") else address, **kwargs)
    return True


def _run_ray(fn, jobs, address, finish, retries) -> None:
    ray = require_ray()
    init_ray(address)
    remote = ray.remote(max_retries=retries)(fn)
    refs = {remote.remote(job): i for i, job in enumerate(jobs)}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for r in ready:
            try:
                finish(refs[r], ray.get(r))
            except ray.exceptions.RayError as err:
                raise CampaignError(f"job {refs[r]} failed on Ray after {retries} retries: {err}") from None
