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
from typing import Any

from edge.stats import paired, wilson

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
