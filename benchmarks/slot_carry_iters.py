"""Slot tracking rounds: FG-ARI and slot identity of slot encoders when a frame whose slots start
from the previous frame's gets fewer slot-attention rounds (``SlotEncoderConfig.carry_iters``) than
an episode's first frame (``iters``), on fresh held-out episodes of a uniform-random policy; and
with ``--carry-prior`` the tracking prior (``SlotEncoderConfig.carry_prior``), each setting paired
per episode with the first ``--carry-prior`` listed (``paired`` in the JSON).

    python benchmarks/slot_carry_iters.py --encoders world_models/checkpoints/slots_push3 \
        runs/slots_long/train_state.pt --carry-iters 1 2 3 --seed 4242

An encoder is a shipped directory (its manifest is verified) or a ``train_state.pt`` written by
``edge train slot-encoder`` (a run in progress). The frames are collected fresh with each ``--seed``;
pick one that no training run or earlier selection used. With an RGB-D encoder among them
(``in_channels`` 4) the frames are collected with depth and the RGB encoders read their colour
channels (the same episodes, so the pairs hold). Writes
``benchmarks/results/slot_carry_iters.json`` (machine, command, versions).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info


def load_any(path: str):
    """(model, description) from a shipped encoder directory or a training-state file."""
    from world_models.slot_encoder import load_encoder
    from world_models.slot_pretrain import load_run_weights

    p = Path(path)
    if p.is_file() and p.suffix == ".pt":
        model, settings, step, _ = load_run_weights(p, "--encoders")
        return model, {"path": str(p), "step": step, "data_hash": settings["data_hash"]}
    model, manifest = load_encoder(p)
    return model, {"path": str(p), "step": manifest.get("metrics", {}).get("step"),
                   "data_hash": manifest.get("data_hash"), "sha256": manifest.get("sha256")}


def bootstrap_mean(values, rng: np.random.Generator) -> dict:
    """Mean of the finite ``values``, a 95 % bootstrap interval over them (2,000 resamples from
    ``rng``) and how many there are; mean and interval None where none is finite."""
    x = np.asarray(values, float)
    x = x[np.isfinite(x)]
    if not len(x):
        return {"mean": None, "ci95": None, "episodes": 0}
    boots = rng.choice(x, size=(2000, len(x)), replace=True).mean(1)
    return {"mean": float(x.mean()), "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
            "episodes": len(x)}


def paired_differences(metrics: dict[str, list], ref: dict[str, list], rng: np.random.Generator) -> dict:
    """Per metric, the per-episode differences ``metrics`` − ``ref`` (the same episodes in the same
    order; an episode where either is NaN is left out): their mean, a 95 % bootstrap interval over
    episodes (2,000 resamples from ``rng``) and the number of episodes."""
    out = {}
    for k in metrics:
        d = np.asarray(metrics[k], float) - np.asarray(ref[k], float)
        d = d[np.isfinite(d)]
        if not len(d):
            continue
        boots = rng.choice(d, size=(2000, len(d)), replace=True).mean(1)
        out[k] = {"mean_difference": float(d.mean()),
                  "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))], "episodes": len(d)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoders", nargs="+", required=True, help="encoder directories or train_state.pt files")
    ap.add_argument("--carry-iters", type=int, nargs="+", default=[1, 2, 3],
                    help="tracking rounds to measure (each 1..10)")
    ap.add_argument("--carry-prior", type=float, nargs="+", default=[0.0],
                    help="tracking priors to measure (SlotEncoderConfig.carry_prior, each 0..10; 0 = off)")
    ap.add_argument("--frames", type=whole(40), default=1600, help="frames to collect (40 per episode)")
    ap.add_argument("--seed", type=whole(0), nargs="+", default=[4242],
                    help="seeds of the held-out episodes (one set of --frames each; pooled with bootstrap intervals "
                         "over episodes)")
    ap.add_argument("--episodes", type=whole(1), default=40, help="episodes evaluated (at most frames / 40)")
    ap.add_argument("--pair-encoders", action="store_true",
                    help="also each encoder against every one listed before it: per-episode differences on the same "
                         "episodes, rounds and prior, 95 %% bootstrap intervals (`paired_encoders` in the JSON)")
    ap.add_argument("--out", type=writable_file, default=str(Path(__file__).resolve().parent / "results" / "slot_carry_iters.json"))
    args = ap.parse_args(argv)
    for flag, values in (("--seed", args.seed), ("--encoders", args.encoders), ("--carry-iters", args.carry_iters),
                         ("--carry-prior", [float(b) for b in args.carry_prior])):
        if len(set(values)) != len(values):
            ap.error(f"{flag} {values}: a value given twice would count its episodes twice")
    if args.episodes > args.frames // 40:
        ap.error(f"--episodes {args.episodes}: at most --frames / 40 = {args.frames // 40} (40 frames per episode)")
    for c in args.carry_iters:
        if not 1 <= c <= 10:
            ap.error(f"--carry-iters {c}: each value must be in 1..10")
    for b in args.carry_prior:
        if not 0.0 <= b <= 10.0:
            ap.error(f"--carry-prior {b}: each value must be in 0..10")
    for e in args.encoders:
        if not Path(e).exists():
            ap.error(f"--encoders {e}: no such directory or file")
    import torch

    from world_models.slot_pretrain import collect_frames, evaluate, load_dataset

    torch.set_num_threads(1)
    results, pooled, heldout = [], [], []
    per_ep: dict[tuple[str, int], dict[str, list]] = {}
    loaded = {}
    for enc in args.encoders:
        try:
            loaded[enc] = load_any(enc)
        except (OSError, ValueError, KeyError, RuntimeError) as e:  # a path that is not a slot encoder
            ap.error(f"--encoders {enc}: no slot encoder could be loaded from it ({e}); give an exported "
                     "encoder directory or a training run's train_state.pt")
    # RGB-D encoders (in_channels 4) need depth; RGB encoders read the same frames' colour channels,
    # which are those of a collection without depth (same seed, same episodes): pairs stay paired
    depth = any(m.cfg.in_channels == 4 for m, _ in loaded.values())
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seed:
            data = Path(tmp) / f"heldout_{seed}.npz"
            meta = collect_frames(args.frames, seed, data, progress=False, depth=depth)
            heldout.append({"seed": seed, "frames": args.frames, "data_hash": meta["data_hash"], "depth": depth,
                            **({"depth_settings": meta["depth"]} if depth else {})})
            arrays_all, _ = load_dataset(data)
            for enc in args.encoders:
                model, desc = loaded[enc]
                arrays = {**arrays_all, "frames": arrays_all["frames"][..., :model.cfg.in_channels]}
                base = model.cfg
                for c, prior in [(c, b) for c in args.carry_iters for b in args.carry_prior]:
                    model.cfg = dataclasses.replace(base, carry_iters=c, carry_prior=prior)
                    t = time.perf_counter()
                    with torch.no_grad():
                        r = evaluate(model, arrays, max_episodes=args.episodes, per_episode=True)
                    r.update(desc, carry_iters=c, carry_prior=prior, iters=base.iters, seed=seed,
                             eval_s=round(time.perf_counter() - t, 1))
                    for k, v in r["per_episode"].items():
                        per_ep.setdefault((enc, c, prior), {}).setdefault(k, []).extend(v)
                    results.append(r)
                    print(f"seed {seed} {enc} carry_iters {c} carry_prior {prior:g}: FG-ARI attn {r['fg_ari_attn']:.3f} decoder "
                          f"{r['fg_ari_decoder']:.3f}  identity attn {r['identity_rate_attn']:.3f} decoder "
                          f"{r['identity_rate_decoder']:.3f}", flush=True)
                model.cfg = base
    rng = np.random.default_rng(0)
    for (enc, c, prior), metrics in per_ep.items():
        entry = {"encoder": enc, "carry_iters": c, "carry_prior": prior, "seeds": args.seed}
        for k, v in metrics.items():  # none finite: no episode had a transition with an object in it
            entry[k] = bootstrap_mean(v, rng)
        pooled.append(entry)
        print(f"pooled {enc} carry_iters {c} carry_prior {prior:g}: " + "  ".join(
            f"{k} {entry[k]['mean']:.3f} [{entry[k]['ci95'][0]:.3f}, {entry[k]['ci95'][1]:.3f}]"
            for k in metrics if entry[k]["episodes"]), flush=True)
    paired = []  # each prior against the first --carry-prior listed, same encoder, rounds and episodes
    for (enc, c, prior), metrics in per_ep.items():
        ref = per_ep.get((enc, c, args.carry_prior[0]))
        if prior == args.carry_prior[0] or ref is None:
            continue
        entry = {"encoder": enc, "carry_iters": c, "carry_prior": prior, "reference_carry_prior": args.carry_prior[0],
                 **paired_differences(metrics, ref, rng)}
        paired.append(entry)
        print(f"paired {enc} carry_iters {c} carry_prior {prior:g} - {args.carry_prior[0]:g}: " + "  ".join(
            f"{k} {entry[k]['mean_difference']:+.3f} [{entry[k]['ci95'][0]:+.3f}, {entry[k]['ci95'][1]:+.3f}]"
            for k in metrics if k in entry), flush=True)
    paired_encoders = []  # encoder j against encoder i < j, same rounds, prior and episodes
    for j, enc in enumerate(args.encoders if args.pair_encoders else []):
        for ref_enc in args.encoders[:j]:
            for c, prior in [(c, b) for c in args.carry_iters for b in args.carry_prior]:
                a, ref = per_ep[(enc, c, prior)], per_ep[(ref_enc, c, prior)]
                entry = {"encoder": enc, "reference_encoder": ref_enc, "carry_iters": c, "carry_prior": prior,
                         **paired_differences(a, ref, rng)}
                paired_encoders.append(entry)
                print(f"paired {enc} - {ref_enc} carry_iters {c} carry_prior {prior:g}: " + "  ".join(
                    f"{k} {entry[k]['mean_difference']:+.3f} [{entry[k]['ci95'][0]:+.3f}, {entry[k]['ci95'][1]:+.3f}]"
                    for k in a if k in entry), flush=True)
    out = {"benchmark": "slot_carry_iters", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "torch": torch.__version__, "heldout": heldout,
           "targets": {"fg_ari": 0.8, "identity_rate": 0.95},
           "pooled_note": "mean over episodes of all seeds, 95 % bootstrap interval over episodes",
           "pooled": pooled, "paired_note": "per-episode difference against the first --carry-prior, 95 % "
           "bootstrap interval over episodes", "paired": paired,
           **({"paired_encoders_note": "per-episode difference, encoder minus reference_encoder (listed before it), "
               "95 % bootstrap interval over episodes", "paired_encoders": paired_encoders}
              if args.pair_encoders else {}),
           "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
