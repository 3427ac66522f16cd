"""Per-episode rows from run records, and the pooled numbers every evaluation reports — one
implementation for ``edge profile``, the EQRL evaluation and the VLA grid.

A *row* is one episode reduced to what pooling needs (``episode_rows``): seed, success, steps,
NFE, executed actions, queries, the furthest task stage, host compute, and each query's K, C and
difficulty signal ``u``. Rows are small and JSON-ready, so campaigns that run episodes in shards
(one run directory each, deleted afterwards) keep the rows and pool them later (``pool``): success
with a 95 % Wilson interval, NFE per executed action (ΣK / Σ executed actions, as executed),
inference ms per executed action, mean episode length, queries per episode, K / C histograms and
each episode's outcome in seed order (``success_by_seed``) for paired tests (``versus``: exact
McNemar on the shared seeds, relative NFE).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edge.telemetry import RunData

from edge.stats import paired, percentiles, wilson
from edge.telemetry import worker_starts

# the task stages a failed episode may have reached (sim.tasks.PROGRESS_STAGES[:4]; the sim is not
# imported here: the profiler is part of the on-robot side)
FAILURE_STAGES = ("reach", "grasp", "transport", "place")


def episode_rows(run: Any) -> list[dict[str, Any]]:
    """One row per episode of a :class:`edge.telemetry.RunData`, in the order they ran."""
    by_ep: dict[int, list[Any]] = {}
    for q in run.query_records():
        by_ep.setdefault(q.ep, []).append(q)
    rows = []
    for e in run.episode_records():
        qs = by_ep.get(e.ep, [])
        rows.append({"seed": e.seed, "success": bool(e.success), "steps": e.steps, "nfe": e.nfe,
                     "executed": e.executed, "queries": e.queries, "max_stage": e.max_stage,
                     "sim_diverged": bool(e.sim_diverged), "starved": e.starved,
                     "compute_s": sum(q.compute_s for q in qs), "K": [q.K for q in qs], "C": [q.C for q in qs],
                     "u": [(q.signals or {}).get("u") for q in qs]})
    return rows


def pool(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The pooled numbers of an arm (see the module doc); rows are sorted by seed first."""
    eps = sorted(rows, key=lambda e: (e["seed"] is None, e["seed"]))
    n = len(eps)
    if not n:
        raise ValueError("pool: no episodes")
    wins = sum(bool(e["success"]) for e in eps)
    executed = sum(e["executed"] or 0 for e in eps)
    ks = [k for e in eps for k in e.get("K", ())]
    cs = [c for e in eps for c in e.get("C", ())]
    fails = [e for e in eps if not e["success"]]
    out = {"episodes": n, "successes": wins, "success_rate": wins / n, "ci95": list(wilson(wins, n)),
           "nfe_per_action": sum(e["nfe"] or 0 for e in eps) / executed if executed else None,
           "mean_steps": sum(e["steps"] or 0 for e in eps) / n,
           "queries_per_episode": sum(e["queries"] or 0 for e in eps) / n,
           "success_by_seed": "".join("1" if e["success"] else "0" for e in eps)}
    if all("compute_s" in e for e in eps):
        out["inference_ms_per_action"] = 1e3 * sum(e["compute_s"] for e in eps) / executed if executed else None
    if ks:
        out.update(mean_K=sum(ks) / len(ks), mean_C=sum(cs) / len(cs),
                   K_hist={str(k): v for k, v in sorted(Counter(ks).items())},
                   C_hist={str(c): v for c, v in sorted(Counter(cs).items())})
    if all("max_stage" in e for e in eps):
        out["failure_stage"] = {s: sum(e["max_stage"] == i for e in fails) for i, s in enumerate(FAILURE_STAGES)}
    if all("sim_diverged" in e for e in eps):
        out["sim_diverged"] = sum(bool(e["sim_diverged"]) for e in eps)
    return out


def versus(arm: Mapping[str, Any], ref: Mapping[str, Any], ref_name: str) -> dict[str, Any]:
    """``arm`` against ``ref`` (both :func:`pool` outputs on the same seeds): relative NFE, success
    difference, discordant seeds and the exact McNemar p."""
    if len(arm["success_by_seed"]) != len(ref["success_by_seed"]):
        raise ValueError(f"versus {ref_name}: {arm['episodes']} vs {ref['episodes']} episodes; pair on the same seeds")
    p = paired(arm["success_by_seed"], ref["success_by_seed"])
    rel = (arm["nfe_per_action"] / ref["nfe_per_action"]
           if arm.get("nfe_per_action") is not None and ref.get("nfe_per_action") else None)
    return {"arm": ref_name, "relative_nfe": rel, "success_delta": arm["success_rate"] - ref["success_rate"],
            "only_this": p["only_a"], "only_ref": p["only_b"], "mcnemar_p": p["mcnemar_p"]}


def best_cell(arms: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> str | None:
    """The best of ``names``: highest success, then lowest NFE per executed action."""
    cand = [a for a in names if a in arms]
    return max(cand, key=lambda a: (arms[a]["success_rate"], -(arms[a]["nfe_per_action"] or 0.0))) if cand else None


# ------------------------------------------------------------------ a profile arm from its run records
IGNORED_INTERVENTIONS = ("wait_first_plan",)  # holding until the first chunk: not a correction


def arm_stats(runs: Sequence[RunData]) -> dict[str, Any]:
    """Every per-arm number of the profile, from the runs' records alone."""
    runs = [r.finished_only() for r in runs]  # a killed arm's unfinished episode counts toward nothing
    episodes = [e for r in runs for e in r.episode_records()]
    ticks = [(i, t) for i, r in enumerate(runs) for t in r.tick_records()]
    queries = [(i, q) for i, r in enumerate(runs) for q in r.query_records()]
    n = len(episodes)
    wins = sum(bool(e.success) for e in episodes)
    executed = sum(1 for _, t in ticks if t.kind == "act")
    nfe = sum(q.nfe for _, q in queries)
    exec_by_query = Counter((i, t.query_id) for i, t in ticks if t.kind == "act" and t.query_id is not None)
    per_action_ms, wasted = [], 0
    for i, q in queries:
        k = exec_by_query.get((i, q.query_id), 0)
        if k:
            per_action_ms.append(1e3 * q.compute_s / k)
        else:
            wasted += 1
    compute = [1e3 * q.compute_s for _, q in queries]
    latency = [1e3 * q.latency_s for _, q in queries]
    ivs: Counter[str] = Counter()
    for _, t in ticks:
        for kind, _detail in t.interventions or ():
            ivs[kind] += 1

    def pct(xs: list[float], p: float) -> float | None:
        return percentiles(xs, (p,))[0] if xs else None

    # the numbers every evaluation shares come from one implementation (edge.profiler.episodes)
    pooled = pool(row for r in runs for row in episode_rows(r)) if n else {}
    assert not n or pooled["successes"] == wins
    lo, hi = pooled.get("ci95", wilson(wins, n))
    eps_with_query = {(i, q.ep) for i, q in queries}
    # a virtual clock advances one period per tick: deadlines cannot be missed, so none are counted
    virtual = all((r.meta.get("session") or {}).get("clock") == "virtual" for r in runs)
    return {
        "episodes": n, "successes": wins, "success_rate": wins / n if n else None, "ci95": [lo, hi],
        "ticks": len(ticks), "executed_actions": executed, "nfe_total": nfe,
        "nfe_per_action": pooled.get("nfe_per_action"), "success_by_seed": pooled.get("success_by_seed"),
        "queries": len(queries), "queries_per_episode": len(queries) / n if n else None,
        "episodes_with_queries": len(eps_with_query),
        "K_counts": {str(k): v for k, v in sorted(Counter(q.K for _, q in queries).items())},
        "C_counts": {str(k): v for k, v in sorted(Counter(q.C for _, q in queries).items())},
        "mean_K": sum(q.K for _, q in queries) / len(queries) if queries else None,
        "mean_C": sum(q.C for _, q in queries) / len(queries) if queries else None,
        "compute_ms_total": sum(compute),
        "compute_ms_per_action_mean": sum(compute) / executed if executed else None,
        "compute_ms_per_action_p50": pct(per_action_ms, 50.0),
        "compute_ms_per_action_p99": pct(per_action_ms, 99.0),
        "queries_without_executed_action": wasted,
        "compute_p50_ms": pct(compute, 50.0), "compute_p99_ms": pct(compute, 99.0),
        "latency_p50_ms": pct(latency, 50.0), "latency_p99_ms": pct(latency, 99.0),
        "interventions": dict(sorted(ivs.items())),
        "interventions_total": sum(v for k, v in ivs.items() if k not in IGNORED_INTERVENTIONS),
        "overruns": None if virtual else sum(t.overrun_ticks for _, t in ticks),
        "starved_ticks": sum(1 for _, t in ticks if t.starved),
        # seconds each start / resume of the arm's runs took to get its inference worker ready
        "worker_start_s": [s for r in runs for s in worker_starts(r)],
        "per_episode": [{"seed": e.seed, "success": bool(e.success), "steps": e.steps, "queries": e.queries,
                         "nfe": e.nfe, "executed": e.executed} for e in sorted(episodes, key=_seed_key)],
    }


def _seed_key(e: Any) -> tuple[int, int]:
    return (e.seed if e.seed is not None else -1, e.ep)


def bootstrap_difference(a: Sequence[Any], b: Sequence[Any], rng: Any = None, resamples: int = 2000
                         ) -> dict[str, Any]:
    """a − b success per paired episode: the mean and its 95 % bootstrap interval over episodes
    (``resamples`` resamples of the differences; ``rng`` a numpy Generator, default seeded 0), as
    every paired difference in the project's results is reported."""
    import numpy as np

    d = np.asarray([bool(x) for x in a], float) - np.asarray([bool(x) for x in b], float)
    if d.size == 0:
        return {"difference": None, "ci95": None}
    rng = np.random.default_rng(0) if rng is None else rng
    boots = rng.choice(d, size=(resamples, len(d)), replace=True).mean(1)
    return {"difference": round(float(d.mean()), 4),
            "ci95": [round(float(np.percentile(boots, 2.5)), 4), round(float(np.percentile(boots, 97.5)), 4)]}


def compare(stats: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Relative cost and the paired comparison of an arm against the reference arm on their shared
    seeds: exact McNemar, and arm − reference success with its bootstrap interval."""
    a = {e["seed"]: e["success"] for e in ref["per_episode"]}
    b = {e["seed"]: e["success"] for e in stats["per_episode"]}
    seeds = sorted(set(a) & set(b), key=lambda s: (s is None, s))
    out = paired([a[s] for s in seeds], [b[s] for s in seeds])
    out["shared_seeds"] = len(seeds)
    diff = bootstrap_difference([b[s] for s in seeds], [a[s] for s in seeds])
    out["arm_minus_reference"], out["arm_minus_reference_ci95"] = diff["difference"], diff["ci95"]

    def ratio(key: str) -> float | None:
        x, y = stats.get(key), ref.get(key)
        return x / y if x is not None and y else None

    return {"relative_nfe_per_action": ratio("nfe_per_action"),
            "relative_compute_per_action": ratio("compute_ms_per_action_mean"),
            "paired_vs_reference": out}
