"""How hard were an evaluation's push3 scenes? Success against the cube's start distance from the goal.

A push3 episode's scene (where the red cube, the goal square and the arm start) is drawn from its
seed, so two sets of evaluation seeds can differ in difficulty by chance. This script reads
``benchmarks/wm_sim_search.py`` result files, rebuilds each episode's first state from its seed
(``ObjectTaskEnv.reset``, nothing played) and reports, per file, the start distances (cube–goal and
TCP–cube, metres). For each kind of arm (the simulator's own search, and each cell of the trained
agents: ``agent``, ``learned_dynamics``, ...) it fits a logistic model of success on the cube–goal
start distance to the episodes of the ``--fit`` files, and, for each ``--predict`` file, compares
the successes the fit expects on that file's scenes with those observed: the probability of at most
(and of at least) the observed count, under independent episodes with the fitted probabilities
(Poisson binomial; episodes of two agents on the same scenes are not independent, which makes these
probabilities too small if anything). A file can be both fitted and predicted; then the check is
optimistic.

    python benchmarks/wm_push_scene_difficulty.py \\
        --fit R/comet_vs_monolithic_push3_oracle_96k/wm_sim_search.json R/.../wm_sim_search_third_set.json \\
        --predict R/comet_vs_monolithic_push3_oracle_96k/wm_sim_search_curve_seeds.json \\
        --out R/comet_vs_monolithic_push3_oracle_96k/wm_push_scene_difficulty.json      # ~15 s
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from edge.argtypes import writable_file
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision


def arm_kind(arm: dict) -> str:
    """``simulator:<search>:<sims>`` for the simulator's own search, else the agent cell's name."""
    return arm["cell"] if arm.get("cell") else f"simulator:{arm['search']}:{arm['simulations']}"


def read_results(path: str) -> list[dict]:
    """The push3 arms of a wm_sim_search result file: kind, name, per-episode seeds and successes."""
    try:
        res = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable JSON file ({err})") from None
    arms = res.get("arms") if isinstance(res, dict) else None
    if not isinstance(arms, list) or not arms:
        raise ValueError(f"{path}: no 'arms' list: not a benchmarks/wm_sim_search.py result file")
    out = []
    for a in arms:
        if not isinstance(a, dict):
            raise ValueError(f"{path}: an arm that is no JSON object: not a benchmarks/wm_sim_search.py result file")
        if a.get("task") != "push3":
            continue
        seeds, succ = a.get("per_episode_seed"), a.get("per_episode_success")
        if not isinstance(seeds, list) or not isinstance(succ, list) or len(seeds) != len(succ):
            raise ValueError(f"{path}: arm {a.get('name')!r} has no per-episode seeds and successes")
        out.append({"kind": arm_kind(a), "name": a["name"], "seeds": [int(s) for s in seeds],
                    "success": np.array(succ, float)})
    if not out:
        raise ValueError(f"{path}: no push3 arm")
    return out


def start_distances(seeds: list[int]) -> dict[int, tuple[float, float]]:
    """seed -> (cube–goal, TCP–cube) distance in metres at the episode's start (push3, default settings,
    as every wm_sim_search arm plays it)."""
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv

    env = ObjectTaskEnv(ObjectTaskConfig(task="push3"))
    try:
        out = {}
        for s in sorted(set(seeds)):
            _, info = env.reset(seed=int(s))
            red = np.asarray(info["object_poses"]["red"][:2], float)
            tcp = np.asarray(env.env.tcp_pose()[0][:2], float)
            out[s] = (float(np.linalg.norm(red - info["goal_m"])), float(np.linalg.norm(tcp - red)))
        return out
    finally:
        env.close()


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, float)))  # no overflow for large |z|


def fit_logistic(x: np.ndarray, y: np.ndarray, iters: int = 50) -> tuple[float, float]:
    """(intercept, slope) of P(y=1) = σ(a + b·x), maximum likelihood by Newton's method (a tiny ridge
    keeps it finite when the successes are separable by distance)."""
    X = np.c_[np.ones_like(x), x]
    w = np.zeros(2)
    for _ in range(iters):
        p = sigmoid(X @ w)
        grad = X.T @ (y - p) - 1e-3 * w
        hess = (X * (p * (1 - p))[:, None]).T @ X + 1e-3 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w += step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


def poisson_binomial(p: np.ndarray) -> np.ndarray:
    """P(K = k), k = 0..len(p), for a sum of independent Bernoulli(p_i)."""
    dist = np.array([1.0])
    for pi in p:
        dist = np.convolve(dist, [1.0 - pi, pi])
    return dist


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", nargs="+", required=True, metavar="FILE",
                    help="wm_sim_search result files whose episodes the success models are fitted to")
    ap.add_argument("--predict", nargs="*", default=[], metavar="FILE",
                    help="wm_sim_search result files whose successes are compared with the fits' expectation")
    ap.add_argument("--out", type=writable_file, required=True, help="JSON report")
    args = ap.parse_args(argv)
    try:
        files = {f: read_results(f) for f in dict.fromkeys([*args.fit, *args.predict])}
    except ValueError as err:
        ap.error(str(err))
    dist = start_distances([s for arms in files.values() for a in arms for s in a["seeds"]])
    res = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine_info(), "git_revision": git_revision(),
           "distance": "cube–goal start distance, metres (TCP–cube alongside)", "files": {}, "fits": {}, "predicted": {}}
    for f, arms in files.items():
        seeds = sorted({s for a in arms for s in a["seeds"]})
        d = np.array([dist[s] for s in seeds])
        res["files"][f] = {"episodes": len(seeds), "cube_goal_m_p25_p50_p75": np.percentile(d[:, 0], [25, 50, 75]).round(4).tolist(),
                           "tcp_cube_m_p50": round(float(np.median(d[:, 1])), 4),
                           "arms": {a["name"]: {"kind": a["kind"], "successes": int(a["success"].sum()),
                                                "episodes": len(a["seeds"])} for a in arms}}
    kinds = sorted({a["kind"] for f in args.fit for a in files[f]})
    for kind in kinds:
        x = np.concatenate([[dist[s][0] for s in a["seeds"]] for f in args.fit for a in files[f] if a["kind"] == kind])
        y = np.concatenate([a["success"] for f in args.fit for a in files[f] if a["kind"] == kind])
        a0, b = fit_logistic(x, y)
        res["fits"][kind] = {"episodes": len(y), "successes": int(y.sum()), "intercept": round(a0, 4),
                             "slope_per_m": round(b, 4),
                             "success_at_cube_goal_m": {f"{m:.2f}": round(float(sigmoid(a0 + b * m)), 4)
                                                        for m in (0.10, 0.15, 0.20, 0.25)}}
        for f in args.predict:
            arms = [a for a in files[f] if a["kind"] == kind]
            if not arms:
                continue
            xs = np.concatenate([[dist[s][0] for s in a["seeds"]] for a in arms])
            p = sigmoid(a0 + b * xs)
            pk = poisson_binomial(p)
            obs = int(sum(a["success"].sum() for a in arms))
            res["predicted"].setdefault(f, {})[kind] = {
                "arms": [a["name"] for a in arms], "episodes": len(xs), "observed": obs,
                "expected": round(float(p.sum()), 2),
                "expected_at_fit_rate": round(float(y.mean() * len(xs)), 2),
                "p_at_most_observed": round(float(pk[:obs + 1].sum()), 4),
                "p_at_least_observed": round(float(pk[obs:].sum()), 4)}
    print(json.dumps({"files": {f: {k: v for k, v in r.items() if k != "arms"} for f, r in res["files"].items()},
                      "fits": res["fits"], "predicted": res["predicted"]}, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
