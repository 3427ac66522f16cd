"""One encoder's FG-ARI and slot identity pooled over several judgement runs of
``benchmarks/slot_carry_iters.py``: the per-episode values of every run that measured that encoder
(by its weights' sha256) at the given tracking rounds and prior, on held-out seeds that no two runs
share, as one set of episodes with 95 % bootstrap intervals over episodes.

    python benchmarks/slot_pool_judgements.py --encoder world_models/checkpoints/slots_push3_v2 \\
        --judgements benchmarks/results/slot_ft_seq8_judgement.json benchmarks/results/slot_prior_judgement.json \\
        benchmarks/results/slot_k7_judgement.json benchmarks/results/slot_fg_judgement.json \\
        --out benchmarks/results/slot_v2_pooled_judgements.json

A run whose held-out seeds overlap another's is refused (exit 2), as is one that did not measure the
encoder. Writes JSON (machine, command, the runs and seeds used).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info

METRICS = ("fg_ari_attn", "fg_ari_decoder", "identity_rate_attn", "identity_rate_decoder")


def entries(result: dict, sha256: str, carry_iters: int, carry_prior: float) -> list[dict]:
    """The per-seed result entries of one judgement file for the encoder, rounds and prior."""
    return [r for r in result.get("results", []) if r.get("sha256") == sha256
            and r.get("carry_iters") == carry_iters and float(r.get("carry_prior", 0.0)) == carry_prior]


def pool(per_episode: dict[str, list[float]], rng: np.random.Generator) -> dict:
    """Per metric, ``slot_carry_iters.bootstrap_mean`` of the per-episode values, rounded to 4 places."""
    from benchmarks.slot_carry_iters import bootstrap_mean

    out = {}
    for k, v in per_episode.items():
        b = bootstrap_mean(v, rng)
        out[k] = {**b, "mean": None if b["mean"] is None else round(b["mean"], 4),
                  "ci95": None if b["ci95"] is None else [round(c, 4) for c in b["ci95"]]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", required=True, help="the encoder directory (its manifest's sha256 picks its results)")
    ap.add_argument("--judgements", nargs="+", required=True, help="JSON files of benchmarks/slot_carry_iters.py")
    ap.add_argument("--carry-iters", type=int, default=1, help="tracking rounds of the results pooled")
    ap.add_argument("--carry-prior", type=float, default=0.0, help="tracking prior of the results pooled")
    ap.add_argument("--seed", type=whole(0), default=0, help="seeds the bootstrap")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/slot_pooled_judgements.json")
    args = ap.parse_args(argv)
    manifest = Path(args.encoder) / "manifest.json"
    if not manifest.is_file():
        ap.error(f"--encoder {args.encoder}: no manifest.json there (want a slot-encoder directory)")
    sha = json.loads(manifest.read_text()).get("sha256")
    if not sha:
        ap.error(f"--encoder {args.encoder}: its manifest has no sha256")
    per_ep: dict[str, list[float]] = {k: [] for k in METRICS}
    runs, seen = [], {}
    for f in args.judgements:
        try:
            result = json.loads(Path(f).read_text())
            if not isinstance(result, dict):
                raise ValueError(f"its JSON is a {type(result).__name__}, not a slot_carry_iters.py output")
        except (OSError, ValueError) as e:
            print(f"error: --judgements {f}: {e}", file=sys.stderr)
            return 2
        mine = entries(result, sha, args.carry_iters, args.carry_prior)
        if not mine:
            print(f"error: --judgements {f}: no result of --encoder {args.encoder} (sha256 {sha[:12]}…) at "
                  f"--carry-iters {args.carry_iters} --carry-prior {args.carry_prior:g}", file=sys.stderr)
            return 2
        for r in mine:
            if r["seed"] in seen:
                print(f"error: --judgements {f}: held-out seed {r['seed']} was also judged in {seen[r['seed']]}; "
                      "pool runs on disjoint seeds only", file=sys.stderr)
                return 2
            seen[r["seed"]] = f
            for k in METRICS:
                per_ep[k].extend(r["per_episode"][k])
        runs.append({"file": f, "seeds": [r["seed"] for r in mine], "data_hashes": [r.get("data_hash") for r in mine],
                     "episodes": sum(r["eval_episodes"] for r in mine),
                     "identity_rate_attn": round(float(np.nanmean(np.concatenate(
                         [np.asarray(r["per_episode"]["identity_rate_attn"], float) for r in mine]))), 4)})
    pooled = pool(per_ep, np.random.default_rng(args.seed))
    for run in runs:
        print(f"{run['file']}: seeds {run['seeds']}, {run['episodes']} episodes, identity (attention) "
              f"{run['identity_rate_attn']:.3f}")
    print("pooled: " + "  ".join(f"{k} {v['mean']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}] ({v['episodes']})"
                                 for k, v in pooled.items()))
    res = {"benchmark": "slot_pool_judgements", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "encoder": args.encoder, "encoder_sha256": sha, "carry_iters": args.carry_iters,
           "carry_prior": args.carry_prior, "runs": runs,
           "pooled_note": "mean over the episodes of every run, 95 % bootstrap interval over episodes",
           "pooled": pooled}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
