"""How far the measured TCP follows a commanded move: for every executed move of at least ``--min-move-m``
(xy), the measured TCP's displacement along the move one and two control ticks later, as a fraction of the
move; and the lag: how far the TCP measured one tick later is from the TCP target (the episode's first
measured TCP plus every move sent since). Reads run directories' ``ticks.jsonl`` (any ``edge run``, simulated or ``--arm bridge``, and the run
directories ``bridge_deploy.py`` keeps), one group per ``--runs LABEL=GLOB``.

    python benchmarks/arm_tracking.py --runs "bridge=runs/bridge_deploy_comet_reach/bridge_8120[0-9][0-9]" \
        --runs sim=runs/sim_reach_812000 --out benchmarks/results/arm_tracking_comet_reach.json

A tick's record holds the TCP measured at the tick's start and the command sent in it, so a move sent at
tick k has had one period when tick k + 1 is recorded. Writes JSON (machine, command, versions, git).
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import number, writable_file
from edge.telemetry import machine_info, package_versions


def episodes(ticks_file: Path) -> list[list[dict]]:
    """One ticks.jsonl's records, grouped by episode, each in slot order."""
    from edge.telemetry import read_jsonl

    by_ep: dict[int, list[dict]] = {}
    for rec in read_jsonl(ticks_file):  # a run killed mid-line: its cut last line is skipped
        by_ep.setdefault(int(rec.get("ep", 0)), []).append(rec)
    return [sorted(ticks, key=lambda r: r["slot"]) for ticks in by_ep.values()]


def fractions(ticks_file: Path, min_move_m: float) -> tuple[list[float], list[float], list[float]]:
    """(one tick later, two ticks later) fractions of each move in one ticks.jsonl, and each move's lag (m)."""
    one, two, lag = [], [], []
    for ticks in episodes(ticks_file):
        target = np.asarray(ticks[0]["ee_pos_m"][:3], float)
        for i in range(len(ticks) - 2):
            t = ticks[i]
            sent = t.get("sent")
            if sent:
                target = target + np.asarray(sent[:3], float)
            if t.get("kind") != "act" or not sent or ticks[i + 2]["slot"] != t["slot"] + 2:
                continue
            move = np.asarray(sent[:2], float)
            size = float(np.linalg.norm(move))
            if size < min_move_m:
                continue
            u, p0 = move / size, np.asarray(t["ee_pos_m"][:2], float)
            one.append(float(np.dot(np.asarray(ticks[i + 1]["ee_pos_m"][:2]) - p0, u) / size))
            two.append(float(np.dot(np.asarray(ticks[i + 2]["ee_pos_m"][:2]) - p0, u) / size))
            lag.append(float(np.linalg.norm(target - np.asarray(ticks[i + 1]["ee_pos_m"][:3], float))))
    return one, two, lag


def releases(ticks_file: Path, holding: float = 0.3, let_go: float = 0.2) -> list[tuple[float, float, int, bool]]:
    """Every open command sent while the fingers held something, in one ticks.jsonl: (the gripper's
    measured closure fell by how much one tick later, two ticks later; for how many ticks open was
    commanded; did the fingers let go, their closure under ``let_go`` by the second tick after the open
    command's last). The closure is the runtime's gripper reading: 0 open .. 1 closed (0.47 on the 4.3 cm
    cube). Counted where the two ticks after the command's first are recorded (consecutive slots); a tick
    with no command sent ends an open command."""
    out = []
    for ticks in episodes(ticks_file):
        g = [float(t["gripper"]) if t.get("gripper") is not None else float("nan") for t in ticks]
        cmd = [float(t["sent"][-1]) if t.get("sent") else None for t in ticks]
        for i in range(1, len(ticks) - 2):
            if cmd[i] is None or cmd[i - 1] is None or not (cmd[i] < 0.5 <= cmd[i - 1]) or not g[i] > holding:
                continue
            if ticks[i + 2]["slot"] != ticks[i]["slot"] + 2 or any(np.isnan(g[i:i + 3])):
                continue
            j = i
            while j < len(ticks) and cmd[j] is not None and cmd[j] < 0.5:
                j += 1
            out.append((g[i] - g[i + 1], g[i] - g[i + 2], j - i, bool(np.nanmin(g[i:j + 3]) < let_go)))
    return out


def summary(xs: list[float]) -> dict:
    q = np.percentile(xs, [25, 50, 75]) if xs else [None] * 3
    return {"p25": None if q[0] is None else round(float(q[0]), 4), "p50": None if q[1] is None else round(float(q[1]), 4),
            "p75": None if q[2] is None else round(float(q[2]), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", action="append", required=True, metavar="LABEL=GLOB",
                    help="a group of run directories (a glob; repeatable: one group each)")
    ap.add_argument("--min-move-m", type=number(0, lo_open=True), default=0.015, help="smallest commanded xy move counted (default 0.015)")
    ap.add_argument("--gripper", action="store_true",
                    help="also the gripper's answer to open commands sent while the fingers held something: its "
                         "closure's fall one and two ticks later, how long open was commanded, how often it let go")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/arm_tracking.json", help="JSON written")
    args = ap.parse_args(argv)
    groups = {}
    for spec in args.runs:
        label, sep, pattern = spec.partition("=")
        if not sep or not label or not pattern:
            ap.error(f"--runs {spec!r}: give LABEL=GLOB, e.g. bridge=runs/bridge_deploy_comet_reach/bridge_*")
        dirs = sorted(p for p in glob.glob(pattern) if (Path(p) / "ticks.jsonl").is_file())
        if not dirs:
            ap.error(f"--runs {spec!r}: no run directory with a ticks.jsonl matches {pattern!r}")
        one, two, lag = [], [], []
        for d in dirs:
            try:
                a, b, c = fractions(Path(d) / "ticks.jsonl", args.min_move_m)
            except ValueError as err:  # a damaged record inside the file: named, with its line
                ap.error(f"--runs {spec!r}: {err}; leave that run out or repair the file")
            one += a
            two += b
            lag += c
        groups[label] = {"pattern": pattern, "run_dirs": len(dirs), "moves": len(one),
                         "one_tick_later": summary(one), "two_ticks_later": summary(two), "lag_m": summary(lag)}
        print(f"{label}: {len(one)} moves in {len(dirs)} run dirs; along the move one tick later "
              f"{groups[label]['one_tick_later']['p50']}, two ticks later {groups[label]['two_ticks_later']['p50']}; "
              f"lag {groups[label]['lag_m']['p50']} m (medians)")
        if args.gripper:
            rel = [r for d in dirs for r in releases(Path(d) / "ticks.jsonl")]
            let = [r[3] for r in rel]
            groups[label]["gripper"] = {
                "open_commands_while_holding": len(rel),
                "closure_fall_one_tick_later": summary([r[0] for r in rel]),
                "closure_fall_two_ticks_later": summary([r[1] for r in rel]),
                "open_ticks": summary([float(r[2]) for r in rel]),
                "let_go_fraction": round(float(np.mean(let)), 4) if let else None,
                "one_tick_open_commands": sum(r[2] == 1 for r in rel),
                "one_tick_open_commands_let_go": sum(r[2] == 1 and r[3] for r in rel),
                "open_commands_per_run_dir": round(len(rel) / len(dirs), 3)}
            gr = groups[label]["gripper"]
            print(f"  gripper: {len(rel)} open commands while holding; closure fell "
                  f"{gr['closure_fall_one_tick_later']['p50']} one tick later, {gr['closure_fall_two_ticks_later']['p50']} "
                  f"two ticks later, open for {gr['open_ticks']['p50']} ticks (medians); {gr['let_go_fraction']} of them let go")
    git = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    res = {"benchmark": "arm_tracking", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "git": git, "min_move_m": args.min_move_m, "gripper": args.gripper,
           "groups": groups,
           "what": "the measured TCP's xy displacement along each commanded move, as a fraction of the move, "
                   "one and two control ticks after the tick that sent it; lag_m: the distance from the TCP "
                   "target (first measured TCP + the moves sent) to the TCP measured one tick after each move; gripper: open "
                   "commands (sent < 0.5 after >= 0.5) while the measured closure was > 0.3, let go = the closure "
                   "under 0.2 by the second tick after the open command's last"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
