"""Decision latency of the world-model planner (``edge run --policy comet``) with the search's model
passes on torch and on ONNX Runtime, side by side on the same frames.

    python benchmarks/wm_plan_latency.py --simulations 16 64 --episodes 4 \\
        --out benchmarks/results/wm_plan_latency.json

Two :class:`world_models.policy.WorldModelPolicy` instances (``--plan-backend torch`` and
``onnxruntime``) read the same push3 frames (a uniform-random policy's episodes, rendered once by
``slot_pretrain collect``) in lockstep; after each decision both histories record the torch
planner's move, so every decision of the two sees the same inputs. Per budget: decision and search
time p50 / p99 / mean per backend (alternating which runs first), the ratios of the p50s, and how
often the two pick the same move. ``--threads`` each (torch's threads, onnxruntime's intra-op
threads; default 1). Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info, package_versions


def _stats(ms: list[float]) -> dict:
    a = np.asarray(ms, float)
    return {"p50_ms": round(float(np.percentile(a, 50)), 3), "p99_ms": round(float(np.percentile(a, 99)), 3),
            "mean_ms": round(float(a.mean()), 3), "n": int(a.size)}


def compare(world_model: str, frames: np.ndarray, simulations: int, seed: int = 0, progress: bool = True,
            threads: int = 1, torch_tree: bool = False) -> dict:
    """Both backends over frames (E, T, S, S, 3) at one budget (``torch_tree``: and the ONNX pass with
    the tree's per-node work in torch)."""
    from tqdm import tqdm

    from world_models.policy import WorldModelPolicy

    pols = {b: WorldModelPolicy(world_model, simulations=simulations, seed=seed, backend=b, ort_threads=threads)
            for b in ("torch", "onnxruntime")}
    if torch_tree:  # the ONNX pass with the tree's per-node work in torch, as before the numpy pass
        pols["onnxruntime_torch_tree"] = WorldModelPolicy(world_model, simulations=simulations, seed=seed,
                                                          backend="onnxruntime", ort_threads=threads)
        pols["onnxruntime_torch_tree"].planner.expand = _TorchGlue(pols["onnxruntime_torch_tree"].planner.expand)
    names = list(pols)
    same, same_tree, n = 0, 0, 0
    bar = tqdm(total=frames.shape[0] * frames.shape[1], desc=f"{simulations} simulations", disable=not progress)
    for ep in range(frames.shape[0]):
        for p in pols.values():
            p.reset()
        for t in range(frames.shape[1]):
            obs = {"front": frames[ep, t]}
            k = ep * frames.shape[1] + t
            order = names[k % len(names):] + names[:k % len(names)]  # each arm first in turn
            acts = {b: pols[b].encode(obs) for b in order}
            same += acts["torch"] == acts["onnxruntime"]
            if torch_tree:
                same_tree += acts["onnxruntime_torch_tree"] == acts["onnxruntime"]
            n += 1
            for b in names[1:]:
                pols[b].set_executed(acts["torch"])  # every history: the torch planner's move
            bar.update()
    bar.close()
    out = {"simulations": simulations, "decisions": n, "same_move": round(same / n, 4)}
    if torch_tree:
        out["same_move_numpy_vs_torch_tree"] = round(same_tree / n, 4)
    for b, p in pols.items():
        out[b] = {"decision": _stats(p.decision_ms), "search": _stats(p.search_ms)}
    out["onnxruntime_export"] = {k: pols["onnxruntime"].planner.expand.meta.get(k)
                                 for k in ("parity_max_abs", "window", "batch")}
    for part in ("decision", "search"):
        out[f"{part}_p50_ratio_torch_over_ort"] = round(out["torch"][part]["p50_ms"] /
                                                       out["onnxruntime"][part]["p50_ms"], 3)
        if torch_tree:
            out[f"{part}_p50_ratio_torch_tree_over_numpy"] = round(
                out["onnxruntime_torch_tree"][part]["p50_ms"] / out["onnxruntime"][part]["p50_ms"], 3)
    if torch_tree:  # per decision, paired: torch-tree time / numpy time
        r = np.asarray(pols["onnxruntime_torch_tree"].decision_ms) / np.asarray(pols["onnxruntime"].decision_ms)
        out["decision_ratio_torch_tree_over_numpy_paired"] = {
            "median": round(float(np.median(r)), 3), "p10": round(float(np.percentile(r, 10)), 3),
            "p90": round(float(np.percentile(r, 90)), 3)}
    return out


class _TorchGlue:
    """An ONNX pass seen only through its torch interface (no ``run``): the planner then does the
    tree's per-node work in torch, as it did before the numpy pass."""

    def __init__(self, inner) -> None:
        self.inner, self.meta, self.threads = inner, inner.meta, inner.threads

    def __call__(self, z, actions, valid):
        return self.inner(z, actions, valid)


def check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The planner benchmarks' shared checks (exit 2 naming the flag): --episodes, --steps,
    --threads, every --simulations budget, --world-model."""
    for flag, v, lo in (("--episodes", args.episodes, 1), ("--steps", args.steps, 2), ("--threads", args.threads, 1)):
        if v < lo:
            ap.error(f"{flag} {v}: must be >= {lo}")
    for s in args.simulations:
        if not 1 <= s <= 1000:
            ap.error(f"--simulations {s}: each budget must be in 1..1000")
    if args.world_model and not Path(args.world_model).exists():
        ap.error(f"--world-model {args.world_model}: no such directory")
    if getattr(args, "out", None):
        from edge.commands._out import check_writable_file
        from edge.errors import EdgeError

        try:
            check_writable_file(args.out)
        except EdgeError as e:
            ap.error(str(e))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-model", default="", metavar="DIR",
                    help="a world-model directory from `edge train world-model` (default: the shipped comet_push3)")
    ap.add_argument("--simulations", type=int, nargs="+", default=[16, 64], help="search budgets per decision")
    ap.add_argument("--episodes", type=int, default=4, help="push3 episodes of --steps frames each")
    ap.add_argument("--steps", type=int, default=40, help="decisions per episode")
    ap.add_argument("--seed", type=whole(0), default=0, help="seeds the frames' episodes and the searches")
    ap.add_argument("--threads", type=int, default=1, help="torch threads and onnxruntime intra-op threads")
    ap.add_argument("--torch-tree", action="store_true",
                    help="a third arm: the ONNX pass with the tree's per-node work (state windows, support "
                         "decoding) in torch, as before the numpy pass; paired decision-time ratios")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_plan_latency.json")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    check_args(ap, args)
    import torch

    from edge.errors import EdgeError
    from world_models.policy import SHIPPED, WorldModelPolicy, load_world_model
    from world_models.slot_pretrain import random_episodes

    torch.set_num_threads(args.threads)
    wm = args.world_model or str(SHIPPED)
    try:
        cfg, _, manifest = load_world_model(wm)
    except (EdgeError, OSError, ValueError, KeyError) as e:
        print(f"error: --world-model {wm}: {e}", file=sys.stderr)
        return 2
    try:  # a model the runtime cannot plan with (oracle slots, an encoder changed since): before any frame
        WorldModelPolicy(wm, seed=args.seed)
    except (EdgeError, OSError, ValueError, KeyError) as e:
        print(f"error: --world-model: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    frames, data_hash = random_episodes(args.episodes, args.steps, args.seed, image_size=cfg.env.image_size,
                                        progress=not args.no_progress)
    try:
        rows = [compare(wm, frames, s, args.seed, not args.no_progress, args.threads, args.torch_tree)
                for s in args.simulations]
    except EdgeError as e:  # e.g. an oracle-slot model, or one whose encoder changed
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"{r['simulations']} simulations: decision p50 torch {r['torch']['decision']['p50_ms']} ms, onnxruntime "
              f"{r['onnxruntime']['decision']['p50_ms']} ms ({r['decision_p50_ratio_torch_over_ort']}x); search p50 "
              f"{r['torch']['search']['p50_ms']} / {r['onnxruntime']['search']['p50_ms']} ms "
              f"({r['search_p50_ratio_torch_over_ort']}x); same move {r['same_move']:.1%} of {r['decisions']}")
        if args.torch_tree:
            print(f"  ONNX pass, tree in torch: decision p50 {r['onnxruntime_torch_tree']['decision']['p50_ms']} ms; "
                  f"its time / the numpy tree's, paired per decision: median "
                  f"{r['decision_ratio_torch_tree_over_numpy_paired']['median']}x; same move "
                  f"{r['same_move_numpy_vs_torch_tree']:.1%}")
    res = {"benchmark": "wm_plan_latency", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "world_model": wm,
           "model_sha256": (manifest.get("files") or {}).get("model.pt"), "model_kind": cfg.model.kind,
           "search": cfg.planner.search, "threads": args.threads, "onnxruntime_threads": args.threads, "frames_data_hash": data_hash,
           "episodes": int(frames.shape[0]), "steps": int(frames.shape[1]), "seed": args.seed,
           "wall_s": round(time.perf_counter() - t0, 1), "budgets": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
