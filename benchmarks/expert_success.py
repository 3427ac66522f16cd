"""Scripted-expert success rates over 100 seeds per cell, both sims (issue 2 targets:
stack-2 and pick_place >= 95%, stack-3 >= 90%). Writes benchmarks/results/expert_success.json.

    python benchmarks/expert_success.py [--episodes 100] [--cells stack2,stack3,pick_place,push]
    python benchmarks/expert_success.py --sims pybullet --seed 5000 --physics-dt 0.002 --out other.json

Cells are keyed ``cell/sim`` (``cell/sim@DT`` when ``--physics-dt`` names a step).
"""

import argparse
import json
import sys
from pathlib import Path

from edge.argtypes import writable_file
from edge.commands.expert import run_eval

CELLS = {"stack2": ("stack", 2), "stack3": ("stack", 3), "pick_place": ("pick_place", 2), "push": ("push", 2)}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--sims", default="mujoco,pybullet")
    ap.add_argument("--seed", type=int, default=1000, help="first episode seed (default: %(default)s)")
    ap.add_argument("--physics-dt", type=float, default=0.0,
                    help="env physics_dt_s (default 0: each engine's default step)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/expert_success.json")
    a = ap.parse_args()
    from sim.env import EnvConfig

    for sim_name in a.sims.split(","):
        try:
            EnvConfig(sim=sim_name, physics_dt_s=a.physics_dt)
        except ValueError as err:
            ap.error(f"--physics-dt {a.physics_dt} / --sims {sim_name}: {err}")
    unknown = [c for c in a.cells.split(",") if c not in CELLS]
    if unknown:
        ap.error(f"--cells {a.cells}: unknown cell {unknown[0]!r}; choose from {', '.join(CELLS)}")
    if a.episodes < 1 or a.seed < 0:
        ap.error(f"--episodes {a.episodes} / --seed {a.seed}: episodes >= 1, seed >= 0")
    out = Path(a.out)
    results = {}
    if out.exists():  # cells are added to an earlier result of this script, never to another JSON
        try:
            results = json.loads(out.read_text())
        except (OSError, ValueError) as err:
            ap.error(f"--out {out}: not a readable JSON ({err}); choose another --out")
        cells = set(CELLS)
        if not isinstance(results, dict) or any(k.split("/")[0] not in cells or not isinstance(v, dict)
                                                or "success_rate" not in v for k, v in results.items()):
            ap.error(f"--out {out}: not a result of this script (its keys are cell/sim); choose another --out")
    for sim_name in a.sims.split(","):
        for cell in a.cells.split(","):
            task, n_blocks = CELLS[cell]
            ns = argparse.Namespace(task=task, sim=sim_name, n_blocks=n_blocks, distribution="train",
                                    episodes=a.episodes, seed=a.seed, image_size=96, physics_dt_s=a.physics_dt)
            rep = run_eval(ns, progress=False)
            rep["command"] = " ".join(sys.argv)
            results[f"{cell}/{sim_name}" + (f"@{a.physics_dt:g}" if a.physics_dt else "")] = rep
            out.write_text(json.dumps(results, indent=2))
            print(f"{cell:>10} {sim_name:>8}: {rep['successes']}/{rep['episodes']} "
                  f"CI95 [{rep['ci95'][0]:.2f}, {rep['ci95'][1]:.2f}]  {rep['episodes_per_min']:.0f} ep/min",
                  flush=True)
