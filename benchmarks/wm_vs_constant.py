"""Final world-model agents against the best constant action, on the same fresh episodes.

A success rate is only meaningful next to what a trivial policy gets. On ``reach3`` the cubes lie
in front of the arm's start, so repeating one action for the whole episode already
reaches the red cube in a fifth of the episodes (the uniform random policy: 4 %).
``object_task_scripted.py`` picks the best constant action on selection seeds of its own and
plays it on evaluation seeds; run it on the final evaluations' seeds::

    python benchmarks/object_task_scripted.py --tasks reach3 --episodes 100 --seed0 800000000 \\
        --out benchmarks/results/object_task_scripted_final_eval_seeds.json

This script then pairs every method of one or more ``wm_final_eval.py`` outputs with it: episode
i of each training seed against the constant action's episode i (the same env seed), pooled over
training seeds, with the exact McNemar p::

    python benchmarks/wm_vs_constant.py \\
        --constant benchmarks/results/object_task_scripted_final_eval_seeds.json \\
        --final 6k_seeds_0-2=benchmarks/results/comet_vs_monolithic_e500/final_eval_reach3_all.json ... \\
        --out benchmarks/results/wm_vs_constant_action.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edge.argtypes import writable_path
from edge.errors import EdgeError
from edge.stats import paired
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision


def load_constant(path: Path, task: str) -> dict:
    try:
        r = json.loads(path.read_text())["tasks"][task]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EdgeError(f"--constant {path}: no {task!r} results of object_task_scripted.py ({e}); "
                        f"run it with --tasks {task} and the final evaluations' --seed0") from None
    if "constant_action" not in r:
        raise EdgeError(f"--constant {path}: {task!r} has no constant-action reference; "
                        "run object_task_scripted.py with --constant-select-episodes > 0")
    return r["constant_action"]


def compare(final: dict, const: dict, label: str) -> dict:
    """Every method of one wm_final_eval.py output vs the constant action (pooled over training seeds)."""
    out = {}
    for method, m in final["methods"].items():
        a, b = "", ""
        for seed, run in sorted(m["runs"].items(), key=lambda kv: int(kv[0])):
            if run["seed0"] != const["seed0"] or run["episodes"] > const["episodes"]:
                raise EdgeError(f"{label}: {method} seed {seed} played {run['episodes']} episodes from seed "
                                f"{run['seed0']}, the constant action {const['episodes']} from {const['seed0']}; "
                                "they must share seeds (object_task_scripted.py --seed0 / --episodes)")
            a += run["per_episode"]
            b += "".join("1" if s else "0" for s in const["per_episode_success"][:run["episodes"]])
        p = paired(a, b)
        out[method] = {"training_seeds": sorted(int(s) for s in m["runs"]), "episodes": p["episodes"],
                       "success": p["successes_a"] / p["episodes"], "ci95": p["ci95_a"],
                       "constant_success": p["successes_b"] / p["episodes"],
                       "only_method": p["only_a"], "only_constant": p["only_b"], "mcnemar_p": p["mcnemar_p"]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--constant", type=Path, required=True, help="object_task_scripted.py output (with constant_action)")
    ap.add_argument("--task", default="reach3", choices=["reach3", "push3"])
    ap.add_argument("--final", nargs="+", required=True, metavar="LABEL=FILE", help="wm_final_eval.py outputs")
    ap.add_argument("--out", type=writable_path, default="benchmarks/results/wm_vs_constant_action.json")
    args = ap.parse_args(argv)
    const = load_constant(args.constant, args.task)
    res: dict = {"machine": machine_info(), "git": git_revision(),
                 "settings": {"constant": str(args.constant), "task": args.task, "final": args.final,
                              "out": str(args.out)},
                 "constant_action": {k: const[k] for k in ("best_action", "select_success_per_action", "select_seed0",
                                                         "select_episodes", "seed0", "episodes", "successes",
                                                         "success", "wilson95")},
                 "comparisons": {}}
    for item in args.final:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise EdgeError(f"--final {item!r}: write LABEL=FILE, e.g. 6k=benchmarks/results/.../final_eval.json")
        try:
            final = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise EdgeError(f"--final {item!r}: cannot read {path} ({e})") from None
        if not isinstance(final, dict) or not isinstance(final.get("methods"), dict):
            raise EdgeError(f"--final {item!r}: {path} is not a wm_final_eval.py output (no 'methods')")
        if final.get("settings", {}).get("task", args.task) != args.task:
            raise EdgeError(f"--final {item!r}: task {final['settings']['task']!r}, not --task {args.task!r}")
        res["comparisons"][label] = compare(final, const, label)
        for method, r in res["comparisons"][label].items():
            print(f"{label:>14} {method:>15}: {r['success']:.3f} vs constant {r['constant_success']:.3f} "
                  f"(+{r['only_method']} / -{r['only_constant']}, McNemar p {r['mcnemar_p']:.2g})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except EdgeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
