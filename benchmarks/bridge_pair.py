"""Two ``bridge_deploy.py`` runs on the same scene seeds, compared scene by scene: each run's bridge arm
against its simulated arm, and the two runs' bridge arms (and simulated arms) against each other —
successes (Wilson intervals, the difference with a 95 % bootstrap interval, exact McNemar p) and the
ticks to success on the scenes both arms solved (the median of the per-scene ratio with a 95 % bootstrap
interval of that median). Reads each run's ``--work`` directory (``episodes.jsonl``, ``settings.json``).

    python benchmarks/bridge_pair.py --run on=runs/bridge_windup_on --run off=runs/bridge_windup_off \
        --out benchmarks/results/bridge_pair_windup.json

The first ``--run`` is A, the second B; ratios are A over B. Writes JSON (machine, command, versions, git).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import writable_file
from edge.stats import paired
from edge.telemetry import machine_info, package_versions

RESAMPLES = 10_000


def load(work: Path) -> dict[str, dict[int, dict]]:
    """``{arm: {seed: record}}`` from a bridge_deploy work directory (a line cut by a kill is skipped, as
    bridge_deploy.py skips it: that seed has not run)."""
    out: dict[str, dict[int, dict]] = {}
    for i, line in enumerate((work / "episodes.jsonl").read_text().splitlines(), 1):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or "arm" not in rec or "seed" not in rec:
            raise ValueError(f"{work / 'episodes.jsonl'}:{i}: a record without 'arm' and 'seed': not a "
                             "bridge_deploy.py --work directory")
        out.setdefault(rec["arm"], {})[int(rec["seed"])] = rec
    return out


def compare(a: dict[int, dict], b: dict[int, dict], rng: np.random.Generator) -> dict:
    """Arm A against arm B on their common seeds: successes and ticks to success (A over B)."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("no scene seed in common")
    sa = np.array([bool(a[s]["success"]) for s in seeds])
    sb = np.array([bool(b[s]["success"]) for s in seeds])
    res = paired(sa.tolist(), sb.tolist())
    idx = rng.integers(0, len(seeds), (RESAMPLES, len(seeds)))
    diff = (sa.astype(float) - sb)[idx].mean(axis=1)
    res["difference"] = round(float(sa.mean() - sb.mean()), 4)
    res["difference_ci95"] = [round(float(x), 4) for x in np.percentile(diff, [2.5, 97.5])]
    both = [s for s in seeds if a[s]["success"] and b[s]["success"]]
    ta = np.array([a[s]["ticks"] for s in both], float)
    tb = np.array([b[s]["ticks"] for s in both], float)
    ticks: dict = {"scenes": len(both)}
    if both:
        ratio, diff = ta / tb, ta - tb
        idx = rng.integers(0, len(both), (RESAMPLES, len(both)))
        boot = np.median(ratio[idx], axis=1)
        ticks.update({"a_p50": float(np.median(ta)), "b_p50": float(np.median(tb)),
                      "ratio_p50": round(float(np.median(ratio)), 4),
                      "ratio_p50_ci95": [round(float(x), 4) for x in np.percentile(boot, [2.5, 97.5])],
                      "a_minus_b_mean": round(float(diff.mean()), 3),
                      "a_minus_b_mean_ci95": [round(float(x), 3) for x in np.percentile(diff[idx].mean(axis=1), [2.5, 97.5])],
                      "a_shorter": int((ta < tb).sum()), "b_shorter": int((tb < ta).sum()),
                      "within_5_ticks": int((np.abs(diff) <= 5).sum())})
    res["ticks_to_success"] = ticks
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=WORK",
                    help="a bridge_deploy --work directory (give two: A first, then B)")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    ap.add_argument("--out", type=writable_file, required=True, help="JSON written")
    args = ap.parse_args(argv)
    if len(args.run) != 2:
        ap.error(f"--run: give exactly two runs (A and B), got {len(args.run)}")
    if args.seed < 0:
        ap.error(f"--seed {args.seed}: must be >= 0")
    specs = [spec.partition("=") for spec in args.run]
    for spec, (label, sep, _work) in zip(args.run, specs):
        if not sep or not label:
            ap.error(f"--run {spec!r}: give LABEL=WORK, e.g. on=runs/bridge_windup_on")
    if specs[0][0] == specs[1][0]:
        ap.error(f"--run: the two labels must differ, both are {specs[0][0]!r}")
    runs, settings = {}, {}
    for spec, (label, _sep, work) in zip(args.run, specs):
        path = Path(work)
        if not (path / "episodes.jsonl").is_file():
            ap.error(f"--run {spec!r}: {path / 'episodes.jsonl'} not found: give a bridge_deploy.py --work directory")
        try:
            runs[label] = load(path)
        except ValueError as err:
            ap.error(f"--run {spec!r}: {err}")
        if {"bridge", "sim"} - set(runs[label]):
            ap.error(f"--run {spec!r}: {path / 'episodes.jsonl'} lacks a bridge or a sim arm")
        for arm, recs in runs[label].items():
            bad = [s for s, r in recs.items() if r.get("success") and not r.get("ticks")]
            if bad:
                ap.error(f"--run {spec!r}: {arm} episodes of seeds {bad[:5]} succeeded with no ticks recorded")
        if (path / "settings.json").is_file():
            settings[label] = json.loads((path / "settings.json").read_text())
    (la, ra), (lb, rb) = runs.items()
    differ = sorted(k for k in set(settings.get(la, {})) | set(settings.get(lb, {}))
                    if settings.get(la, {}).get(k) != settings.get(lb, {}).get(k))
    for label, r in runs.items():
        print(f"{label}: {len(r['bridge'])} bridge and {len(r['sim'])} sim episodes")
    print(f"settings that differ between the runs: {differ or 'none'}")
    rng = np.random.default_rng(args.seed)
    try:
        comparisons = {f"{la}: bridge over sim": compare(ra["bridge"], ra["sim"], rng),
                       f"{lb}: bridge over sim": compare(rb["bridge"], rb["sim"], rng),
                       f"bridge: {la} over {lb}": compare(ra["bridge"], rb["bridge"], rng),
                       f"sim: {la} over {lb}": compare(ra["sim"], rb["sim"], rng)}
    except ValueError as err:
        ap.error(f"--run {args.run[0]!r} and {args.run[1]!r}: {err}: run them on the same --seed")
    for name, c in comparisons.items():
        t = c["ticks_to_success"]
        print(f"{name}: successes {c['successes_a']} vs {c['successes_b']} of {c['episodes']}, "
              f"difference {c['difference']:+.3f} {c['difference_ci95']}, McNemar p {c['mcnemar_p']:.3g}; ticks to "
              f"success on {t['scenes']} scenes both solved {t.get('a_p50')} vs {t.get('b_p50')}, per-scene ratio "
              f"{t.get('ratio_p50')} {t.get('ratio_p50_ci95')}")
    git = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    res = {"benchmark": "bridge_pair", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "git": git, "runs": {k: v for k, v in (s.split("=", 1) for s in args.run)},
           "settings": settings, "settings_that_differ": differ,
           "comparisons": comparisons, "resamples": RESAMPLES,
           "what": "successes: A vs B on common seeds (difference A - B, 95 % bootstrap over scenes, exact McNemar); "
                   "ticks_to_success: on the scenes both solved, the median of the per-scene ratio A / B with a 95 % "
                   "bootstrap interval of that median, the mean per-scene difference A - B in ticks with its 95 % "
                   "bootstrap interval, and how many scenes differ by at most 5 ticks"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
