"""The world-model planner's decision time per search budget: measured on this host, split into its
parts, checked against the device model on this host's CPU, and projected on the target devices.

    python benchmarks/planner_device_cost.py --simulations 4 8 16 32 64 \\
        --out benchmarks/results/planner_device_cost.json

A :class:`world_models.policy.WorldModelPolicy` (default: the shipped ``comet_reach3``, its search on
ONNX Runtime, one thread) decides on the frames of ``--episodes`` uniform-random-policy episodes of
the model's own object task (rendered once), episode by episode with every budget in turn (the order
rotating, so the machine's drift falls on all); per budget every decision is split into the encoder
(everything before the search), the search's model passes (each timed around the call, the supports'
decoding included) and the tree's bookkeeping (the rest of the search), and the passes are counted.
With ``--lookahead`` each search after an episode's first starts from after the previous move (async's
extra pass).

The device model (:mod:`edge.profiler.planner_cost`) counts the networks once; its ``x86-cpu`` entry
(fitted to the VLA's onnxruntime timings on this host: ``device_calibration.json``) predicts the encoder
and the pass, and with the measured bookkeeping the decision — reported against the measured medians
as a relative error. Each target device's projected decision time adds this host's measured
bookkeeping (not projected: a slower CPU core makes the projection an underestimate); per device the
largest budget whose projected decision fits the control period (``--tick-ms``). Writes JSON (machine,
command, versions) and a figure beside it.
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


def _p(xs: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(xs, float), q)), 4)


def budget_row(m: dict, cost, tick_ms: float) -> dict:
    """One budget's measured split, the x86-cpu check and the devices' projections."""
    from edge.profiler.device_model import DEVICES, part_time_s
    from edge.profiler.planner_cost import decision_time_s

    n = m["simulations"]
    tree_per_sim = [t / n for t in m["tree_ms"]]
    tree_s = float(np.median(tree_per_sim)) / 1e3
    passes = sorted(set(m["passes"]))
    measured = {"decision_p50_ms": _p(m["decision_ms"], 50), "decision_p99_ms": _p(m["decision_ms"], 99),
                "encoder_p50_ms": _p(m["encoder_ms"], 50), "pass_p50_ms": _p(m["pass_ms"], 50),
                "passes_p50_ms": _p(m["passes_ms"], 50), "tree_p50_ms": _p(m["tree_ms"], 50),
                "tree_per_simulation_p50_ms": round(1e3 * tree_s, 4), "decisions": len(m["decision_ms"]),
                "passes_per_decision": passes}
    cpu = DEVICES["x86-cpu"]
    ahead = m["lookahead"]
    pred_enc = 1e3 * part_time_s(cost.encoder, cpu)
    pred_pass = 1e3 * part_time_s(cost.step, cpu)
    pred_dec = 1e3 * decision_time_s(cost, cpu, n, ahead=ahead, tree_s=tree_s)
    check = {"encoder_ms": round(pred_enc, 4), "pass_ms": round(pred_pass, 4), "decision_ms": round(pred_dec, 4),
             "encoder_rel_error": round((pred_enc - measured["encoder_p50_ms"]) / measured["encoder_p50_ms"], 4),
             "pass_rel_error": round((pred_pass - measured["pass_p50_ms"]) / measured["pass_p50_ms"], 4),
             "decision_rel_error": round((pred_dec - measured["decision_p50_ms"]) / measured["decision_p50_ms"], 4)}
    projected = {}
    for name, d in DEVICES.items():
        model_ms = 1e3 * decision_time_s(cost, d, n, ahead=ahead)
        projected[name] = {"decision_ms": round(model_ms + 1e3 * n * tree_s, 4), "networks_ms": round(model_ms, 4),
                           "tree_ms": round(1e3 * n * tree_s, 4),
                           "fits_tick": bool(model_ms + 1e3 * n * tree_s <= tick_ms)}
    return {"simulations": n, "measured": measured, "x86_cpu_model": check, "projected": projected}


def plot(rows: list[dict], tick_ms: float, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["simulations"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    p50 = [r["measured"]["decision_p50_ms"] for r in rows]
    p99 = [r["measured"]["decision_p99_ms"] for r in rows]
    ax.errorbar(ns, p50, yerr=[np.zeros(len(ns)), np.subtract(p99, p50)], fmt="o-", color="k", capsize=3,
                label="this host, measured (p50, bar to p99)")
    for name, style in (("x86-cpu", ":"), ("orin-nano", "-"), ("agx-orin", "--"), ("thor", "-."), ("x86-gpu", "-")):
        ax.plot(ns, [r["projected"][name]["decision_ms"] for r in rows], style, marker=".",
                label=f"{name}, projected" + (" (the device model's CPU entry)" if name == "x86-cpu" else ""))
    ax.axhline(tick_ms, color="r", lw=0.8)
    ax.text(ns[0], tick_ms * 1.05, f"control period {tick_ms:g} ms", color="r", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("simulations per decision")
    ax.set_ylabel("decision time (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-model", default="", metavar="DIR",
                    help="a world-model directory from `edge train world-model` (default: the shipped comet_reach3)")
    ap.add_argument("--simulations", type=int, nargs="+", default=[4, 8, 16, 32, 64], help="search budgets per decision")
    ap.add_argument("--episodes", type=int, default=4, help="episodes of --steps frames each")
    ap.add_argument("--steps", type=int, default=30, help="decisions per episode")
    ap.add_argument("--seed", type=whole(0), default=0, help="seeds the frames' episodes and the searches")
    ap.add_argument("--backend", default="onnxruntime", choices=("torch", "onnxruntime"), help="what runs the search's passes")
    ap.add_argument("--threads", type=int, default=1, help="torch threads and onnxruntime intra-op threads")
    ap.add_argument("--lookahead", action="store_true", help="search from after the previous move (async's extra pass)")
    ap.add_argument("--tick-ms", type=float, default=50.0, help="the control period a decision should fit (ms)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/planner_device_cost.json")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    from benchmarks.wm_plan_latency import check_args

    check_args(ap, args)
    if not args.tick_ms > 0:
        ap.error(f"--tick-ms {args.tick_ms}: must be > 0")
    from tqdm import tqdm

    from edge.errors import EdgeError
    from world_models.device_cost import count_world_model, measure_decisions
    from world_models.policy import SHIPPED_BY_TASK, load_world_model
    from world_models.slot_pretrain import random_episodes

    wm = args.world_model or str(SHIPPED_BY_TASK["reach"])
    try:
        cfg, _, manifest = load_world_model(wm)
        cost = count_world_model(wm)
    except (EdgeError, OSError, ValueError, KeyError) as e:
        print(f"error: --world-model {wm}: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    frames, data_hash = random_episodes(args.episodes, args.steps, args.seed, task=cfg.env.task,
                                        image_size=cfg.env.image_size, progress=not args.no_progress)
    # episode by episode, every budget in turn (the order rotating), so the machine's drift falls on all
    measured: dict[int, dict] = {}
    bar = tqdm(total=frames.shape[0] * len(args.simulations), desc="episodes x budgets", disable=args.no_progress)
    for ep in range(frames.shape[0]):
        k = ep % len(args.simulations)
        for n in args.simulations[k:] + args.simulations[:k]:
            m = measure_decisions(wm, frames[ep:ep + 1], n, args.backend, args.threads, args.seed, args.lookahead)
            acc = measured.setdefault(n, {key: [] for key, v in m.items() if isinstance(v, list)} | {
                key: v for key, v in m.items() if not isinstance(v, list)})
            for key, v in m.items():
                if isinstance(v, list):
                    acc[key] += v
            bar.update()
    bar.close()
    rows = [budget_row(measured[n], cost, args.tick_ms) for n in args.simulations]
    for r in rows:
        m, c = r["measured"], r["x86_cpu_model"]
        print(f"{r['simulations']:4d} simulations: measured p50 {m['decision_p50_ms']:.1f} ms (encoder {m['encoder_p50_ms']:.2f}, "
              f"pass {m['pass_p50_ms']:.3f} x {m['passes_per_decision']}, tree {m['tree_per_simulation_p50_ms']:.3f}/sim); "
              f"x86-cpu model {c['decision_ms']:.1f} ms ({c['decision_rel_error']:+.0%}); orin-nano "
              f"{r['projected']['orin-nano']['decision_ms']:.1f} ms")
    largest = {d: max((r["simulations"] for r in rows if r["projected"][d]["fits_tick"]), default=None)
               for d in rows[0]["projected"]}
    res = {"benchmark": "planner_device_cost", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "world_model": wm,
           "model_sha256": (manifest.get("files") or {}).get("model.pt"), "model_kind": cfg.model.kind,
           "obs": cfg.obs, "search": cfg.planner.search, "backend": args.backend, "threads": args.threads,
           "lookahead": args.lookahead, "tick_ms": args.tick_ms, "frames_data_hash": data_hash,
           "episodes": int(frames.shape[0]), "steps": int(frames.shape[1]), "seed": args.seed,
           "cost_profile": cost.to_json(), "budgets": rows, "largest_budget_within_tick": largest,
           "wall_s": round(time.perf_counter() - t0, 1),
           "notes": ["measured: this host, one thread; the encoder is everything before the search (the frame's crop, "
                     "the slot encoder on torch, the history); a pass is timed around the planner's call (the graph "
                     "and the supports' decoding); the tree is the search's time outside its passes",
                     "projected: networks by the device model (edge/profiler/device_model.py: published peaks, "
                     "assumed efficiency and launch overhead; nothing was run on those devices) plus the tree's "
                     "bookkeeping as measured on this host (not projected)"]}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    png = out.with_suffix(".png")
    plot(rows, args.tick_ms, png, f"{Path(wm).name} ({cfg.planner.search} search on {args.backend}, "
                                  f"{args.threads} thread): decision time per budget")
    print(f"wrote {out} and {png}; largest budget within {args.tick_ms:g} ms: {largest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
