"""Two arms of two ``wm_real_clock.py`` results paired by episode seed (e.g. the real clock deciding
in a worker process in one run against a worker thread in another run on the same seeds).

    python benchmarks/wm_real_clock_pair.py \\
        benchmarks/results/wm_real_clock_64_process.json:real \\
        benchmarks/results/wm_real_clock_64_thread_520k.json:real \\
        --out benchmarks/results/wm_real_clock_64_process_vs_thread.json

Each argument is ``RESULT.json:ARM``. Reported: first − second success per episode (95 % bootstrap
interval, exact McNemar), each arm's successes, decision p50 / p99, moves per tick, and each run's
command and git revision. The two runs must cover the same seeds (refused otherwise). Writes JSON
(machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import writable_file
from edge.telemetry import machine_info, package_versions


def read_arm(spec: str) -> tuple[dict, dict]:
    """(the result file's JSON, its arm) for ``RESULT.json:ARM``; raises ValueError naming what is wrong."""
    path, _, arm = spec.rpartition(":")
    if not path or not arm:
        raise ValueError(f"{spec!r}: give RESULT.json:ARM, e.g. benchmarks/results/wm_real_clock.json:real")
    try:
        res = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read a wm_real_clock result ({err})") from None
    if not isinstance(res, dict) or not isinstance(res.get("arms"), dict):
        raise ValueError(f"{path}: not a wm_real_clock result (no arms)")
    if res.get("benchmark") != "wm_real_clock" or arm not in res.get("arms", {}):
        raise ValueError(f"{path}: not a wm_real_clock result with an arm {arm!r} "
                         f"(arms: {', '.join(res.get('arms', {})) or 'none'})")
    return res, res["arms"][arm]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", help="RESULT.json:ARM (the difference is first − second)")
    ap.add_argument("second", help="RESULT.json:ARM")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_real_clock_pair.json", help="JSON written")
    args = ap.parse_args(argv)
    try:
        (r1, a1), (r2, a2) = read_arm(args.first), read_arm(args.second)
    except ValueError as err:
        ap.error(str(err))
    s1, s2 = a1["per_episode"]["seed"], a2["per_episode"]["seed"]
    if sorted(s1) != sorted(s2) or len(set(s1)) != len(s1):
        ap.error(f"{args.first} and {args.second} cover different seeds ({len(s1)} vs {len(s2)} episodes, "
                 f"{len(set(s1) & set(s2))} shared): pair runs of the same --seed and --episodes")
    from benchmarks.wm_runtime_reach import paired

    won2 = dict(zip(s2, a2["per_episode"]["success"]))
    first = list(a1["per_episode"]["success"])
    second = [won2[s] for s in s1]
    res = {"benchmark": "wm_real_clock_pair", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "seeds": [min(s1), max(s1)], "episodes": len(s1),
           "arms": {}, "paired_first_minus_second": paired(first, second, np.random.default_rng(0))}
    for key, spec, r, a in (("first", args.first, r1, a1), ("second", args.second, r2, a2)):
        res["arms"][key] = {"spec": spec, "run_command": r.get("command"), "run_git": r.get("git"),
                            "real_inference": r.get("real_inference", "(not recorded: a thread before stop 51)"),
                            "successes": a["successes"], "decision_ms": a["decision_ms"],
                            "moves_per_tick": a["moves_per_tick"]}
    p = res["paired_first_minus_second"]
    for key, v in res["arms"].items():
        print(f"{key:6s} {v['spec']}: {v['successes']}/{len(s1)}  decision p50 / p99 {v['decision_ms']['p50']} / "
              f"{v['decision_ms']['p99']} ms  moves/tick {v['moves_per_tick']}")
    print(f"first - second {p['difference']:+.3f} {p['ci95']}  ({p['only_first']} / {p['only_second']} discordant)  "
          f"McNemar p {p['mcnemar_exact_p']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
