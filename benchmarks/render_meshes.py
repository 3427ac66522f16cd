"""What the simplified render meshes (``EnvConfig.render_mesh_cell_m``) change in MuJoCo's camera
images and cost per frame, beside the meshes as they are.

Pixels: the same seeded random-action episodes are stepped in two envs, one with the option, and
their front and wrist frames compared step by step (the physics is bit-identical, so the states
match). Cost: one 96x96 front frame as it is, with the option, with the robot's meshes hidden
altogether (the floor: what the rest of the scene costs) and with MuJoCo's convex-hull drawing.

    python benchmarks/render_meshes.py --cell 0.01 --seeds 0 1 2 --steps 40
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sim  # noqa: E402
from edge.argtypes import number, whole, writable_file  # noqa: E402
from edge.telemetry import machine_info  # noqa: E402


def frame_ms(backend, n: int = 300) -> float:
    """Median of 3 timings of ``n`` front 96x96 renders, in ms per frame."""
    backend.render("front", 96, 96)
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            backend.render("front", 96, 96)
        runs.append((time.perf_counter() - t) / n * 1e3)
    return float(np.median(runs))


def compare_pixels(cell: float, seeds: list[int], steps: int) -> dict:
    diffs = {"front": [], "wrist": []}
    for seed in seeds:
        envs = [sim.make_env("stack", wrist_camera=True, render_mesh_cell_m=c) for c in (0.0, cell)]
        try:
            obs = [e.reset(seed=seed)[0] for e in envs]
            rng = np.random.default_rng(seed)
            for _ in range(steps):
                a = rng.uniform(-1, 1, envs[0].action_space.shape).astype(np.float32)
                obs = [e.step(a)[0] for e in envs]
                for cam in diffs:
                    diffs[cam].append(np.abs(obs[0][cam].astype(np.int16) - obs[1][cam]))
        finally:
            for e in envs:
                e.close()
    out = {}
    for cam, d in diffs.items():
        d = np.stack(d)
        big = (d > 10).any(axis=-1)  # pixels with a channel off by more than 10 of 255
        out[cam] = {"frames": len(d), "mean_abs_diff": float(d.mean()), "pixels_off_by_more_than_10": float(big.mean()),
                    "max_abs_diff": int(d.max()), "frames_with_such_pixels": int(big.any(axis=(1, 2)).sum()),
                    "max_such_pixels_in_a_frame": int(big.sum(axis=(1, 2)).max())}
    return out


def frame_costs(cell: float) -> dict:
    import mujoco

    out = {}
    for name, c in (("as_is", 0.0), ("simplified", cell)):
        env = sim.make_env("stack", wrist_camera=True, render_mesh_cell_m=c)
        env.reset(seed=0)
        b = env.unwrapped.backend
        out[name] = frame_ms(b)
        if c == 0.0:
            m = b.model
            meshes = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
            groups = m.geom_group[meshes].copy()
            m.geom_group[meshes] = 5  # a group no camera draws
            out["robot_hidden"] = frame_ms(b)
            m.geom_group[meshes] = groups
            b._vopt.flags[mujoco.mjtVisFlag.mjVIS_CONVEXHULL] = True
            out["convex_hulls"] = frame_ms(b)
            b._vopt.flags[mujoco.mjtVisFlag.mjVIS_CONVEXHULL] = False
        env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cell", type=number(0, lo_open=True), default=0.01, help="render_mesh_cell_m compared (default: %(default)s)")
    ap.add_argument("--seeds", type=whole(0), nargs="+", default=[0, 1, 2], help="episode seeds (default: 0 1 2)")
    ap.add_argument("--steps", type=int, default=40, help="random-action steps per seed (default: %(default)s)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/render_meshes.json")
    a = ap.parse_args(argv)
    if a.steps < 1:
        ap.error(f"--steps {a.steps}: must be >= 1")
    from sim.env import EnvConfig

    try:
        EnvConfig(render_mesh_cell_m=a.cell)
    except ValueError as err:
        ap.error(f"--cell {a.cell}: {err}")
    res = {"command": " ".join(["python", *sys.argv]), "machine": machine_info(), "cell_m": a.cell,
           "seeds": a.seeds, "steps": a.steps, "pixels": compare_pixels(a.cell, a.seeds, a.steps),
           "front_frame_ms_96px": frame_costs(a.cell)}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("pixels", "front_frame_ms_96px")}, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
