"""How long `edge run`'s inference worker takes to be ready, per worker mode: the ``worker_start_s``
each run records (``summary.json``; process mode spawns a process and builds the policy there, a
thread starts at once because the policy is already built in the loop's process).

    python benchmarks/worker_startup.py --policy comet --task reach --modes process thread --repeats 5

Each repeat of each mode is one short ``edge run --clock real`` (one episode of ``--max-steps``
periods) in a fresh process, the modes alternating; reported per mode: every start, median, min
and max, and the ratio of the medians to the first mode. Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions

MODES = ("process", "thread")


class Refused(Exception):
    """``edge run``'s argument parser refused a value this script passed on."""


def run_once(policy: str, task: str, mode: str, max_steps: int, out: Path) -> float:
    """One ``edge run`` with worker ``mode``; its recorded start-up seconds."""
    cmd = [sys.executable, "-m", "edge.cli", "run", "--policy", policy, "--task", task, "--clock", "real",
           "--inference", mode, "--episodes", "1", "--set", f"max_steps={max_steps}", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x.partition("error: ")[2] for x in done.stderr.strip().splitlines() if "error: " in x]
    if done.returncode == 2 and lines and lines[-1].startswith("argument "):
        raise Refused(lines[-1])  # edge run's parser refused --policy / --task: its one line names it
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    starts = json.loads((out / "summary.json").read_text())["worker_start_s"]
    if len(starts) != 1:
        raise RuntimeError(f"{out}/summary.json: want one worker start, got {starts}")
    return float(starts[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default="comet", help="edge run --policy (default comet)")
    ap.add_argument("--task", default="reach", help="edge run --task (default reach)")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="worker modes, in order")
    ap.add_argument("--repeats", type=whole(1), default=5, help="runs per mode (default 5)")
    ap.add_argument("--max-steps", type=whole(1, 100_000), default=20,
                    help="periods of each run's one episode (default 20)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/worker_startup.json")
    args = ap.parse_args(argv)
    if len(set(args.modes)) != len(args.modes):
        ap.error(f"--modes {args.modes}: a mode given twice")
    starts: dict[str, list[float]] = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for m in args.modes:  # alternating, so a drift of the machine touches every mode
                try:
                    starts[m].append(round(run_once(args.policy, args.task, m, args.max_steps,
                                                    Path(tmp) / f"{m}_{i}"), 4))
                except Refused as err:  # --policy / --task as edge run reads them
                    ap.error(f"--policy {args.policy} / --task {args.task}: edge run says: {err}")
                except RuntimeError as err:
                    print(f"error: {err}", file=sys.stderr)
                    return 1
                print(f"{m} run {i + 1}/{args.repeats}: worker ready in {starts[m][-1]:.3f} s", flush=True)
    ref = float(np.median(starts[args.modes[0]]))
    modes = {m: {"start_s": v, "median_s": float(np.median(v)), "min_s": min(v), "max_s": max(v),
                 "median_over_first_mode": round(float(np.median(v)) / ref, 4) if ref > 0 else None}
             for m, v in starts.items()}
    for m, v in modes.items():
        print(f"{m}: median {v['median_s']:.4f} s (min {v['min_s']:.4f}, max {v['max_s']:.4f})")
    out = {"benchmark": "worker_startup", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "policy": args.policy, "task": args.task, "max_steps": args.max_steps,
           "repeats": args.repeats, "modes": modes}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
