"""The steps ratio of a world-model comparison, recomputed against a level above a reference policy.

``comet_vs_monolithic.py`` sets its level at 80 % of the monolithic model's final score (the
issue's definition). Where a trivial policy already scores near that level (on ``reach3`` the best
constant action does), the steps ratio says how soon a method finds the trivial policy. This script
reads the per-seed curves a ``comet_vs_monolithic.json`` already holds (no training, no episodes)
and recomputes, for each file, both levels side by side:

* the issue's: ``0.8 · M`` (M: the monolithic curve's final mean);
* above a floor c: ``c + 0.8 · (M − c)``, 80 % of the monolithic model's final gain over c, where c
  is a reference policy's success on the curves' own evaluation seeds — ``--floor-from`` an
  ``object_task_scripted.py`` output played on those seeds (its best constant action), or
  ``--floor`` a number.

For each level: the steps each method's mean curve needs to reach it, the ratio (method /
monolithic; goal ≤ 1/3) and the ratio over seed resamples of both methods (the floor held fixed).
Writes JSON (machine, command, inputs' hashes) and prints a Markdown table::

    python benchmarks/object_task_scripted.py --tasks reach3 --episodes 24 --seed0 900000000 \\
        --out benchmarks/results/object_task_scripted_curve_seeds.json
    python benchmarks/wm_steps_ratio.py --task reach3 \\
        --results benchmarks/results/comet_vs_monolithic_seeds_6-8/12k_pooled_seeds_0-8/comet_vs_monolithic.json \\
        --floor-from benchmarks/results/object_task_scripted_curve_seeds.json \\
        --out benchmarks/results/wm_steps_ratio_constant_floor.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from comet_vs_monolithic import level_above, ratio_bootstrap, steps_to  # noqa: E402

from edge.argtypes import writable_path
from edge.errors import EdgeError  # noqa: E402
from edge.telemetry import machine_info  # noqa: E402
from edge.vla.manifest import git_revision  # noqa: E402
from world_models.train import EVAL_SEED0  # noqa: E402


def curves(entry: dict) -> tuple[np.ndarray, np.ndarray]:
    """A method's evaluation steps and its (seeds, points) success matrix from a results entry."""
    return np.array(entry["env_steps"]), np.array([entry["per_seed"][str(s)] for s in entry["seeds"]], float)


def ratios(res: dict, task: str, method: str, mono: str, floor: float, resamples: int) -> dict:
    """Level, steps to it and steps ratio (point and over seed resamples) for one results file. Each
    call resamples with its own generator (seed 0), so a file's figures do not depend on the others
    given or their order."""
    rt = res["tasks"].get(task)
    if rt is None:
        raise EdgeError(f"--task {task}: not in this results file (it has {sorted(res['tasks'])})")
    for name in (method, mono):
        if name not in rt["methods"]:
            raise EdgeError(f"method {name!r}: not in this results file's {task} (it has {sorted(rt['methods'])})")
    (sx, smat), (mx, mmat) = curves(rt["methods"][method]), curves(rt["methods"][mono])
    final = float(mmat[:, -1].mean())
    level = level_above(final, floor)
    row = {"seeds": rt["methods"][method]["seeds"], "monolithic_seeds": rt["methods"][mono]["seeds"],
           "env_steps": int(mx[-1]), "monolithic_final": final, "method_final": float(smat[:, -1].mean()),
           "floor": floor, "level": level}
    if level is None:
        return {**row, "note": "the monolithic model ends at or below the floor: no level"}
    ms, cs = steps_to(mx, mmat.mean(0), level), steps_to(sx, smat.mean(0), level)
    row.update(monolithic_steps=ms, method_steps=cs,
               ratio=(cs / ms) if cs is not None and ms else None,
               bootstrap=ratio_bootstrap((sx, smat), (mx, mmat), np.random.default_rng(0), n=resamples, floor=floor))
    return row


def reading(row: dict) -> str:
    """The declared reading: met robustly (point ≤ 1/3 and ≥ 95 % of all resamples ≤ 1/3), on the
    point estimate only, or missed. As in the benchmark, a method at the level from step 0 has ratio
    0; a monolithic model at the level from step 0 leaves no ratio (missed)."""
    if row.get("level") is None:
        return "no level"
    r, b = row.get("ratio"), row.get("bootstrap") or {}
    if row.get("monolithic_steps") == 0:
        return "missed (the monolithic model is at the level from step 0: no ratio)"
    if r is None or r > 1 / 3 + 1e-9:
        return "missed"
    return "met robustly" if share_all(b) >= 0.95 else "met on the point estimate only"


def share_all(b: dict) -> float:
    """The share of all resamples whose ratio is ≤ 1/3: a resample with no ratio (no level, or the
    monolithic model at it from step 0) counts as not meeting the goal."""
    n = b.get("resamples", 0)
    return b.get("share_le_1_3", 0.0) * (n - b.get("undefined", 0)) / n if n else 0.0


def _fmt_row(label: str, row: dict) -> str:
    if row.get("level") is None:
        return f"| {label} | {row['floor']:.3f} | – | {row['monolithic_final']:.3f} | – | – | – | – | no level |"
    b = row["bootstrap"]
    pct = " / ".join("∞" if v is None else f"{v:.2f}" for v in b["p2.5_50_97.5"]) if "p2.5_50_97.5" in b else "–"
    ratio = "–" if row["ratio"] is None else f"{row['ratio']:.2f}"
    return (f"| {label} | {row['floor']:.3f} | {row['level']:.3f} | {row['monolithic_final']:.3f} | "
            f"{row['method_steps'] if row['method_steps'] is not None else 'never'} / {row['monolithic_steps']} | "
            f"{ratio} | {pct} | {share_all(b):.2f} ({b.get('undefined', 0)} with no ratio) | {reading(row)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", nargs="+", type=Path, required=True,
                    help="comet_vs_monolithic.json files (their per-seed curves are read)")
    ap.add_argument("--task", default="reach3")
    ap.add_argument("--method", default="comet", help="the method whose steps are compared")
    ap.add_argument("--monolithic", default="pixels", help="the method whose final score sets the level")
    floor = ap.add_mutually_exclusive_group(required=True)
    floor.add_argument("--floor-from", type=Path,
                       help="an object_task_scripted.py output on the curves' evaluation seeds: its best "
                            "constant action's success is the floor")
    floor.add_argument("--floor", type=float, help="the floor as a success rate in [0, 1)")
    ap.add_argument("--resamples", type=int, default=2000, help="seed resamples for the ratio's spread")
    ap.add_argument("--out", type=writable_path, required=True, help="where to write the JSON")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except EdgeError as e:  # a bad flag, file or value: one line naming it, exit 2
        ap.error(str(e))


def run(args: argparse.Namespace) -> int:
    if args.resamples < 1:
        raise EdgeError(f"--resamples={args.resamples} must be at least 1")
    for p in args.results + ([args.floor_from] if args.floor_from else []):
        if not p.is_file():
            raise EdgeError(f"--results / --floor-from {p}: no such file")
    if args.floor_from is not None:
        from edge.argtypes import read_json_dict

        ref = read_json_dict(args.floor_from, "--floor-from", "an object_task_scripted.py result",
                             "give the JSON object_task_scripted.py wrote")
        ca = ((ref.get("tasks") or {}).get(args.task) or {}).get("constant_action")
        if ca is None:
            raise EdgeError(f"--floor-from {args.floor_from}: no constant-action result for {args.task} "
                            "(run object_task_scripted.py with --constant-select-episodes > 0)")
        c = float(ca["success"])
        if ca.get("seed0", ref["settings"]["seed0"]) != EVAL_SEED0:
            raise EdgeError(f"--floor-from {args.floor_from}: played from seed {ca.get('seed0', ref['settings']['seed0'])}, "
                            f"not on the curves' evaluation seeds (from {EVAL_SEED0}); rerun "
                            f"object_task_scripted.py with --seed0 {EVAL_SEED0}")
        floor_src = {"file": str(args.floor_from), "best_action": ca["best_action"], "episodes": ca["episodes"],
                     "seed0": ref["settings"]["seed0"], "success": c}
    else:
        c = args.floor
        if not 0 <= c < 1:
            raise EdgeError(f"--floor={c} must be a success rate in [0, 1)")
        floor_src = {"value": c}
    rows = []
    for p in args.results:
        try:
            res = json.loads(p.read_text())
            if "tasks" not in res or "eval_episodes" not in res["settings"]:
                raise KeyError("'tasks' or 'settings.eval_episodes'")
        except (ValueError, KeyError, TypeError) as e:
            raise EdgeError(f"--results {p}: not a comet_vs_monolithic.py output ({e.__class__.__name__}: {e})") from None
        if args.floor_from is not None and res["settings"]["eval_episodes"] != floor_src["episodes"]:
            raise EdgeError(f"--results {p}: its curves use {res['settings']['eval_episodes']} evaluation episodes, "
                            f"the floor {floor_src['episodes']}; play the constant action on the same episodes")
        entry = {"results": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                 "issue_level": ratios(res, args.task, args.method, args.monolithic, 0.0, args.resamples),
                 "floor_level": ratios(res, args.task, args.method, args.monolithic, c, args.resamples)}
        entry["issue_level"]["reading"] = reading(entry["issue_level"])
        entry["floor_level"]["reading"] = reading(entry["floor_level"])
        rows.append(entry)
    out = {"machine": machine_info(), "git": git_revision(), "settings": {**vars(args), "results": [str(p) for p in args.results],
           "floor_from": str(args.floor_from) if args.floor_from else None, "out": str(args.out)},
           "floor": floor_src, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(f"| results | floor | level | monolithic final | steps to level: {args.method} / {args.monolithic} | ratio | "
          "resamples with a ratio: p2.5 / p50 / p97.5 | share of all resamples ≤ 1/3 | reading |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in rows:
        name = "/".join(Path(e["results"]).parts[-3:-1])
        print(_fmt_row(f"{name}, issue's level", e["issue_level"]))
        print(_fmt_row(f"{name}, above the floor", e["floor_level"]))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
