"""Final world-model agents on fresh seeds, paired across methods (issue 21).

The comparison's curves (``comet_vs_monolithic.py``) evaluate every run on the same 24 seeds at
each point: enough for a curve, too few to tell two final scores apart. This script loads each
run's final model (``model.pt`` in an ``edge train world-model`` directory), plays
``--episodes`` greedy episodes per training seed on seeds never used for training or for the
curves (``--seed0`` onwards; the same seeds for every method), and pools the training seeds. It
reports each method's success with a Wilson interval and, against ``--reference``, the paired
win/loss counts and the exact McNemar p (episode i of training seed s is paired with episode i
of the reference's training seed s).

    python benchmarks/wm_final_eval.py --runs runs/wm_bench_e500 --task reach3 \\
        --methods comet flat_slots pixels --seeds 0 1 2 --episodes 100 \\
        --out benchmarks/results/wm_final_eval_reach3.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from edge.argtypes import whole, writable_file
from edge.errors import EdgeError
from edge.stats import paired, wilson
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision

SEED0 = 800_000_000  # training uses seed * 10^7 + n, the curves 900,000,000 + n, diagnostics 950,000,000 + n
USED_SEEDS = ((900_000_000, 1_000_000), (950_000_000, 1_000_000))  # (start, length) blocks that are not fresh


def run_dir(runs: Path, task: str, method: str, seed: int) -> Path:
    return runs / f"{task}_{method.replace('@', '_at_')}_s{seed}"


def evaluate_run(path: Path, episodes: int, seed0: int) -> dict:
    """Success per episode of one run's final model on seeds seed0 .. seed0 + episodes - 1."""
    import torch

    from world_models.policy import load_world_model
    from world_models.train import Trainer

    cfg, model, manifest = load_world_model(path)
    enc_sha = encoder_sha256(path, cfg, manifest)
    tr = Trainer(cfg, path, progress=False)  # builds the planner and frozen encoder; writes nothing
    tr.model.load_state_dict(model.state_dict())
    tr.model.eval()
    envs = tr._make_envs(min(cfg.n_envs, episodes))
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            ev = tr.evaluate(envs, episodes, seed0=seed0)
    finally:
        for e in envs:
            e.close()
    return {"per_episode": "".join("1" if x else "0" for x in ev["per_episode"]), "success": ev["success"],
            "model_sha256": manifest["files"]["model.pt"], "encoder_sha256": enc_sha, "episodes": episodes,
            "seed0": seed0, "wall_s": time.perf_counter() - t0}


def encoder_sha256(path: Path, cfg, manifest: dict) -> str | None:
    """The frozen encoder's sha256 as it is on disk now; it must be the one the run trained with."""
    from edge.digest import sha256_file
    from world_models.train import encoder_weights_file, unused_slot_encoder

    if not cfg.encoder or unused_slot_encoder(cfg):  # none, or a pixel run's unused preset slot encoder
        return None
    f = encoder_weights_file(cfg.encoder)
    now = sha256_file(f) if f.is_file() else None
    want = (manifest.get("files") or {}).get("encoder")
    if now is None or (want and now != want):
        raise EdgeError(f"{path}: its encoder {f} is missing or is not the one it was trained with "
                        f"(sha256 {want}); restore that encoder or retrain the run")
    return now


def reusable(old: dict | None, path: Path, episodes: int, seed0: int) -> dict | None:
    """An earlier result (from ``--reuse``) for the same final model and encoder (sha256), episodes
    and seeds, or None. The evaluation code itself is assumed unchanged (the output records its git revision)."""
    from world_models.policy import load_world_model

    if not old or old.get("episodes") != episodes or old.get("seed0") != seed0:
        return None
    cfg, _, manifest = load_world_model(path)
    if old.get("model_sha256") == manifest["files"]["model.pt"] \
            and old.get("encoder_sha256") == encoder_sha256(path, cfg, manifest):
        return {**old, "reused": True}
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs/wm_bench", help="the comparison's training runs")
    ap.add_argument("--task", default="reach3", choices=("push3", "reach3"))
    ap.add_argument("--methods", nargs="+", default=["comet", "flat_slots", "pixels"])
    ap.add_argument("--reference", default="pixels", help="the method every other is paired against")
    ap.add_argument("--seeds", nargs="+", type=whole(0), default=[0, 1, 2], help="training seeds (runs) to pool")
    ap.add_argument("--episodes", type=int, default=100, help="evaluation episodes per run")
    ap.add_argument("--seed0", type=int, default=SEED0, help="first evaluation seed (fresh: see the module doc)")
    ap.add_argument("--reuse", nargs="+", default=[], metavar="JSON",
                    help="earlier outputs: runs whose model, encoder, episodes and seeds match one of their "
                         "entries are not replayed (the last matching file's entry is used)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_final_eval.json")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        ap.error(f"--episodes {args.episodes}: must be at least 1")
    for flag, vals in (("--seeds", args.seeds), ("--methods", args.methods)):
        if len(set(vals)) != len(vals):
            ap.error(f"{flag} {' '.join(map(str, vals))}: repeated entries would count the same episodes twice")
    if args.seed0 < 0:
        ap.error(f"--seed0 {args.seed0}: must be >= 0")
    for start, length in USED_SEEDS:
        if args.seed0 < start + length and start < args.seed0 + args.episodes:
            ap.error(f"--seed0 {args.seed0} with --episodes {args.episodes} overlaps seeds {start}..{start + length - 1}, "
                     f"which the training curves or diagnostics use; pick fresh seeds (default {SEED0})")
    if args.reference not in args.methods:
        ap.error(f"--reference {args.reference}: not among --methods {args.methods}")
    missing = [str(run_dir(Path(args.runs), args.task, m, s)) for m in args.methods for s in args.seeds
               if not (run_dir(Path(args.runs), args.task, m, s) / "model.pt").is_file()]
    if not Path(args.runs).is_dir():
        ap.error(f"--runs {args.runs}: no such directory (the training runs of benchmarks/comet_vs_monolithic.py)")
    if missing:
        ap.error(f"--runs {args.runs}: no finished run (model.pt) at: {', '.join(missing)}; run "
                 "benchmarks/comet_vs_monolithic.py first")

    earlier: dict = {}  # (method, seed) -> the --reuse files' entries for that run, in file order
    for f in args.reuse:
        try:
            for m, entry in json.loads(Path(f).read_text())["methods"].items():
                for s, r in (entry.get("runs") or {}).items():
                    earlier.setdefault((m, s), []).append(r)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            ap.error(f"--reuse {f}: not a wm_final_eval output ({e.__class__.__name__}: {e})")
    # every run's model and encoder are checked before the first is evaluated (minutes each)
    from world_models.policy import load_world_model

    for m in args.methods:
        for s in args.seeds:
            path = run_dir(Path(args.runs), args.task, m, s)
            try:
                cfg, _, manifest = load_world_model(path)
                encoder_sha256(path, cfg, manifest)
            except EdgeError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
    runs: dict[str, dict[str, dict]] = {}
    for m in args.methods:
        runs[m] = {}
        for s in args.seeds:
            path = run_dir(Path(args.runs), args.task, m, s)
            try:
                r = next((x for x in (reusable(old, path, args.episodes, args.seed0)
                                      for old in reversed(earlier.get((m, str(s)), []))) if x is not None), None)
                if r is None:
                    r = evaluate_run(path, args.episodes, args.seed0)
            except EdgeError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            runs[m][str(s)] = r
            print(f"{m} seed {s}: {r['success']:.2f} " + ("(reused)" if r.get("reused") else f"({r['wall_s']:.0f} s)"),
                  file=sys.stderr)
    res: dict = {"machine": machine_info(), "git": git_revision(), "settings": vars(args), "methods": {}}
    ref = "".join(runs[args.reference][str(s)]["per_episode"] for s in args.seeds)
    for m in args.methods:
        pooled = "".join(runs[m][str(s)]["per_episode"] for s in args.seeds)
        k, n = pooled.count("1"), len(pooled)
        entry = {"successes": k, "episodes": n, "success": k / n, "ci95": list(wilson(k, n)),
                 "per_seed": {s: r["success"] for s, r in runs[m].items()}, "runs": runs[m]}
        if m != args.reference:
            p = paired(pooled, ref)
            from edge.profiler.episodes import bootstrap_difference  # this - reference, 95 % bootstrap

            entry["vs_reference"] = {"only_this": p["only_a"], "only_reference": p["only_b"], "mcnemar_p": p["mcnemar_p"],
                                     **bootstrap_difference([c == "1" for c in pooled], [c == "1" for c in ref])}
        res["methods"][m] = entry
    res["pairs"] = {}
    for i, a in enumerate(args.methods):  # every pair, on the same episodes
        for b in args.methods[i + 1:]:
            p = paired(*("".join(runs[x][str(s)]["per_episode"] for s in args.seeds) for x in (a, b)))
            res["pairs"][f"{a} vs {b}"] = {"only_" + a: p["only_a"], "only_" + b: p["only_b"], "mcnemar_p": p["mcnemar_p"]}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    for m, e in res["methods"].items():
        vs = e.get("vs_reference")
        print(f"{m}: {e['successes']}/{e['episodes']} = {e['success']:.3f} [{e['ci95'][0]:.3f}, {e['ci95'][1]:.3f}]"
              + (f"; vs {args.reference}: +{vs['only_this']} / -{vs['only_reference']}, McNemar p {vs['mcnemar_p']:.3g}, "
                 f"difference {vs['difference']:+.3f} [{vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f}]"
                 if vs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
