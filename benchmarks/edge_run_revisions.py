"""The same `edge run` at two code revisions, side by side on the same seeds.

    python benchmarks/edge_run_revisions.py --before ea6efe4 --episodes 100 --seed 600000 \
        --out benchmarks/results/wm_deadline_from_request.json -- \
        --policy comet --task reach --query-mode sync --clock real --inference process \
        --plan-simulations 64 --set max_steps=31

Two arms of ``edge run ARGS`` (everything after ``--``) over the same ``--episodes`` seeds:

* ``before``: the code at ``--before REV``, checked out into a temporary git worktree and imported
  from there (the worktree first on ``PYTHONPATH``; this checkout's virtual environment);
* ``after``: the code at ``--after REV`` the same way, or by default this checkout's code,
  uncommitted and untracked changes included (``after_dirty``): then leave the checkout alone while
  it runs (each block starts a new process, which imports what is there then).

Each arm runs with its own tree as the working directory: give paths after ``--`` (a world model,
a config) as absolute paths, or they resolve inside each arm's tree (a tracked file at that
revision).

The arms run in blocks of ``--block`` episodes that alternate (each arm's run directory resumed
block by block), so the machine's drift falls on both. Reported per arm from the run records
(:func:`benchmarks.wm_lookahead.arm_stats`): successes, decision latency p50 / p99 (observation to
result, the loop's view), moves per tick, the planner's counts; paired per seed: after − before
success (95 % bootstrap interval, exact McNemar) and the after − before difference of the decision
latency's p50 and p99 with 95 % bootstrap intervals over episodes (resampled in pairs). On a real
clock keep the machine otherwise idle. Writes JSON (machine, command, versions, both revisions).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions

ROOT = Path(__file__).resolve().parents[1]

RUN = "import sys; from edge.cli import main; sys.exit(main())"


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def latency_by_episode(run_dir: Path) -> dict[int, np.ndarray]:
    """Each episode's query latencies (ms), keyed by its seed."""
    eps = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines() if x.strip()]
    seed = {e["ep"]: e["seed"] for e in eps}
    out: dict[int, list[float]] = {s: [] for s in seed.values()}
    for line in (run_dir / "queries.jsonl").read_text().splitlines():
        if line.strip():
            q = json.loads(line)
            if q.get("ep") in seed and q.get("latency_s") is not None:
                out[seed[q["ep"]]].append(1e3 * float(q["latency_s"]))
    return {s: np.array(v) for s, v in out.items()}


def latency_difference(after: dict[int, np.ndarray], before: dict[int, np.ndarray], seeds: list[int],
                       rng: np.random.Generator, n_boot: int = 2000) -> dict:
    """after − before of the pooled decision latency's p50 and p99 (ms), with 95 % bootstrap
    intervals: episodes resampled with replacement, the same seeds in both arms."""
    def pct(lat: dict[int, np.ndarray], pick: np.ndarray, q: float) -> float:
        vals = np.concatenate([lat[seeds[i]] for i in pick])
        return float(np.percentile(vals, q)) if vals.size else float("nan")

    idx = np.arange(len(seeds))
    out = {}
    for q in (50, 99):
        point = pct(after, idx, q) - pct(before, idx, q)
        boots = []
        for _ in range(n_boot):
            pick = rng.integers(0, len(seeds), len(seeds))
            boots.append(pct(after, pick, q) - pct(before, pick, q))
        lo, hi = np.nanpercentile(boots, [2.5, 97.5])
        out[f"p{q}_ms"] = {"difference": round(point, 2), "ci95": [round(float(lo), 2), round(float(hi), 2)]}
    return out


def _edge_run_refuses(run_args: list[str]) -> str:
    """What this checkout's `edge run` parser says of ``run_args`` ('' if it takes them): a typo ends here,
    not in the first arm's worktree (the other revision's parser may differ; its arm says so if it does)."""
    import contextlib
    import io

    from edge.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            build_parser().parse_args(["run", *run_args])
    except SystemExit as e:
        if e.code:
            lines = [x for x in err.getvalue().splitlines() if x.strip()]
            return lines[-1].split(" error: ", 1)[-1] if lines else f"exit {e.code}"
    return ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="%(prog)s --before REV [options] -- EDGE_RUN_ARGS")
    ap.add_argument("--before", required=True, metavar="REV", help="the git revision of the 'before' arm")
    ap.add_argument("--after", default=None, metavar="REV",
                    help="the git revision of the 'after' arm (default: this checkout as it is, uncommitted changes included)")
    ap.add_argument("--episodes", type=int, default=30, help="episodes per arm (seeds SEED .. SEED+N-1, paired)")
    ap.add_argument("--seed", type=whole(0), default=600000, help="first episode seed")
    ap.add_argument("--block", type=int, default=25, help="episodes per block; the arms alternate block by block")
    ap.add_argument("--runs-dir", default="/tmp/edge_run_revisions", help="where the two arms' run directories go (must not exist)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/edge_run_revisions.json", help="JSON written")
    args = ap.parse_args(own)
    if not run_args:
        ap.error("give the `edge run` arguments after `--` (e.g. -- --policy comet --task reach)")
    for bad in ("--episodes", "--seed", "--out", "--resume"):
        if any(a == bad or a.startswith(bad + "=") for a in run_args):
            ap.error(f"{bad} after `--`: the benchmark sets it for both arms; drop it")
    if args.episodes < 2 or args.block < 1:
        ap.error(f"--episodes {args.episodes} / --block {args.block}: need >= 2 episodes and blocks >= 1")
    said = _edge_run_refuses(run_args) if args.after is None else ""  # the after arm is this checkout: its
    if said:  # parser judges them before a worktree is made or an arm plays
        ap.error(f"the `edge run` arguments after `--`: edge run says: {said}")
    runs = Path(args.runs_dir).resolve()  # the before arm runs inside its worktree
    if runs.exists():
        ap.error(f"--runs-dir {runs} exists: give a new directory (the arms' runs must not mix with old ones)")
    revs = {}
    for flag, rev in (("--before", args.before), ("--after", args.after)):
        if rev is not None:
            try:
                revs[flag] = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
            except subprocess.CalledProcessError:
                ap.error(f"{flag} {rev}: not a commit of this repository")
    before_rev = revs["--before"]
    after_rev = revs.get("--after") or _git("rev-parse", "HEAD")
    dirty = args.after is None and bool(_git("status", "--porcelain"))  # untracked files are imported too

    from benchmarks.wm_lookahead import arm_stats
    from benchmarks.wm_runtime_reach import paired

    # a termination (kill, a session's end) unwinds like Ctrl-C: the running arm is stopped and the
    # temporary worktree removed
    old_term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="edge_before_") as tmp:
        trees = {"before": Path(tmp) / "before", "after": Path(tmp) / "after" if args.after else ROOT}
        added = []
        try:
            for name, rev in (("before", before_rev), ("after", after_rev if args.after else None)):
                if rev is not None:
                    _git("worktree", "add", "--detach", str(trees[name]), rev)
                    added.append(trees[name])
            arms = {k: (t, {**os.environ, "PYTHONPATH": str(t)}) for k, t in trees.items()}
            wall = dict.fromkeys(arms, 0.0)
            names = list(arms)
            for b, done in enumerate(range(0, args.episodes, args.block)):
                total = min(done + args.block, args.episodes)
                for name in names[b % 2:] + names[:b % 2]:
                    cwd, env = arms[name]
                    cmd = [sys.executable, "-c", RUN, "run", *run_args, "--seed", str(args.seed),
                           "--episodes", str(total), "--out", str(runs / name), *(["--resume"] if done else [])]
                    t0 = time.perf_counter()
                    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
                    wall[name] += time.perf_counter() - t0
                    if proc.returncode != 0:
                        print(f"error: arm {name}: edge {' '.join(cmd[3:])} exited {proc.returncode}:\n"
                              f"{proc.stderr[-2000:]}", file=sys.stderr)
                        return 2
                    print(f"{name:7s} {total}/{args.episodes} episodes", flush=True)
        finally:
            signal.signal(signal.SIGTERM, old_term)
            for t in added:  # each, whatever the others do; then drop any stale entry
                subprocess.run(["git", "worktree", "remove", "--force", str(t)], cwd=ROOT, capture_output=True)
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)

    seeds = list(range(args.seed, args.seed + args.episodes))
    res: dict = {"benchmark": "edge_run_revisions", "machine": machine_info(),
                 "command": " ".join(["python", "benchmarks/edge_run_revisions.py", *argv]),
                 "versions": package_versions(), "edge_run_args": run_args,
                 "revisions": {"before": before_rev, "after": after_rev, "after_dirty": dirty},
                 "seeds": [seeds[0], seeds[-1]], "block": args.block, "arms": {}}
    won, lat = {}, {}
    for name in ("before", "after"):
        st = arm_stats(runs / name)
        if st["per_episode"]["seed"] != seeds:
            print(f"error: arm {name} ran other seeds than {seeds[0]}..{seeds[-1]}", file=sys.stderr)
            return 2
        won[name] = st["per_episode"]["success"]
        lat[name] = latency_by_episode(runs / name)
        summary = json.loads((runs / name / "summary.json").read_text())
        st["clock"] = {k: summary.get(k) for k in ("overruns", "lateness_p99_ms", "jitter_p99_ms", "tick_overhead_p50_ms",
                                                  "tick_overhead_p99_ms") if k in summary}
        eps = [json.loads(x) for x in (runs / name / "episodes.jsonl").read_text().splitlines() if x.strip()]
        for k in ("simulations", "cut"):
            st["planner"][k] = sum(e.get(f"planner_{k}") or 0 for e in eps)
        waits = [e["planner_wait_ms"] for e in eps if e.get("planner_wait_ms") is not None]
        st["planner"]["wait_ms_mean"] = round(float(np.mean(waits)), 3) if waits else None
        res["arms"][name] = {"wall_s": round(wall[name], 1), **st}
    rng = np.random.default_rng(0)
    res["paired_after_minus_before"] = {"success": paired(won["after"], won["before"], rng),
                                        "decision_latency": latency_difference(lat["after"], lat["before"], seeds, rng)}
    for name, v in res["arms"].items():
        print(f"{name:7s} {v['successes']}/{v['episodes']}  decision p50 / p99 {v['decision_ms']['p50']} / "
              f"{v['decision_ms']['p99']} ms  moves/tick {v['moves_per_tick']}  planner {v['planner']}  {v['clock']}")
    d = res["paired_after_minus_before"]
    print(f"after - before: success {d['success']['difference']:+.3f} {d['success']['ci95']}  "
          f"latency {d['decision_latency']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
