"""Training curves of an adapter run (``train_log.jsonl``): success and NFE per executed action over
training episodes (moving averages), the prior gate and the cost weight.

    python -m adapters.eqrl.curves runs/eqrl_stack benchmarks/results/eqrl_training.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def plot_training(run_dir: str | Path, out: str | Path, window: int = 50) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [json.loads(x) for x in (Path(run_dir) / "train_log.jsonl").read_text().splitlines() if x.strip()]
    ep = np.array([r["episode"] for r in rows])
    succ = np.array([float(r["success"]) for r in rows])
    nfe = np.array([r["nfe_per_action"] for r in rows])
    k = np.ones(window) / window

    def ma(x: np.ndarray) -> np.ndarray:
        return np.convolve(x, k, mode="valid")

    fig, (a, b) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    a.plot(ep[window - 1:], ma(succ), c="C0")
    a.set_ylabel(f"success ({window}-episode mean)")
    a.set_ylim(0, 1.02)
    a.grid(alpha=0.3)
    a2 = a.twinx()
    a2.plot(ep, [r["gate"] for r in rows], c="0.6", ls="--", label="prior gate")
    a2.plot(ep, [r["lambda_cost"] for r in rows], c="C3", ls=":", label="cost weight")
    a2.set_ylim(0, 1.02)
    a2.legend(loc="lower left", fontsize=8)
    b.plot(ep[window - 1:], ma(nfe), c="C1")
    b.set_ylabel("NFE per executed action")
    b.set_xlabel("training episode (stochastic policy)")
    b.grid(alpha=0.3)
    fig.suptitle(f"EQRL training: {Path(run_dir).name}, {len(rows)} episodes")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return Path(out)


if __name__ == "__main__":
    plot_training(sys.argv[1], sys.argv[2])
