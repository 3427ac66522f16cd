"""The VLA's success grid over denoising steps K × executed actions C (issue 3) — the baseline every
compute scheduler is judged against.

Every cell runs the same episodes (seeds seed..seed+N-1, same noise seeds) through the runtime
loop on the virtual clock with zero inference latency (so execution is exactly "query, execute C
actions, query again"). Per cell: success with a 95% Wilson interval, NFE per executed action, and
where failed episodes stopped (``sim.tasks.PROGRESS_STAGES``), and each episode's outcome in seed
order (``success_by_seed``, for paired comparisons of two models). A cell runs as shards of
``--shard`` episodes (one runtime session each, its noise seeded by its first env seed) spread over
the workers, so one cell uses every core and the result does not depend on ``--workers``.
Resumable: finished cells and shards are kept; the machine's package versions are stored with
the results (a success rate is comparable only on the same physics and inference stack).

    python benchmarks/vla_grid.py --episodes 100 --workers 2
    python benchmarks/vla_grid.py --ks 10 --cs 8 --distribution ood --out benchmarks/results/vla_ood.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info


def run_shard(job: dict) -> dict:
    """One shard of a cell: episodes seed0 .. seed0+n-1 in one runtime session (its own noise seed
    ``seed0``). Returns the profiler's per-episode rows; :func:`cell_from_shards` pools them."""
    from edge.profiler.episodes import episode_rows
    from edge.runtime.config import RuntimeConfig
    from edge.runtime.session import run_session
    from edge.telemetry import read_run

    cfg = RuntimeConfig.of(task="stack", sim=job["sim"], distribution=job["distribution"], checkpoint=job["checkpoint"],
                        backend=job["backend"], num_steps=job["k"], execute=job["c"], seam="replace",
                        execution="sync", latency="constant", latency_ms=0.0, episodes=job["n"],
                        seed=job["seed0"], record_ticks=True, video_episodes=0,
                        noise_temperature=job["noise_temperature"],
                        **{"scene.render_mesh_cell_m": job["render_mesh_cell_m"]})
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run_session(cfg, tmp, progress=False)
        rows = episode_rows(read_run(tmp))
    keep = ("seed", "success", "max_stage", "steps", "nfe", "executed", "queries", "sim_diverged", "compute_s")
    return {"K": job["k"], "C": job["c"], "seed0": job["seed0"], "episodes": [{k: r[k] for k in keep} for r in rows],
            "wall_s": time.perf_counter() - t0}


def stamp(results: dict, argv: list[str]) -> dict:
    """The settings themselves (beyond ``open_resumable``'s identity); ``command`` / ``machine`` of
    this invocation, and in ``invocations`` the command, machine and git revision of every one that
    added to the file (a start and its resumes; a file with results from before they were recorded
    starts the list with an ``unrecorded`` entry). Shards name the invocation that ran them."""
    from edge.vla.manifest import git_revision

    command, machine = " ".join(argv), machine_info()
    results.update({"task": "stack", "n_blocks": 2, "command": command, "machine": machine})
    if "invocations" not in results and (results.get("cells") or results.get("shards")):
        results["invocations"] = [{"unrecorded": "results written before invocations were recorded"}]
    results.setdefault("invocations", []).append({"command": command, "machine": machine, "git": git_revision()})
    return results


def cell_from_shards(k: int, c: int, shards: list[dict]) -> dict:
    """Pool a cell's shards with the profiler (:func:`edge.profiler.episodes.pool`): success with a
    95 % Wilson interval, NFE per executed action, the furthest task stage reached by failed
    episodes, per-episode outcomes in seed order."""
    from edge.profiler.episodes import pool

    rows = [{"queries": 0, **e} for sh in shards for e in sh["episodes"]]  # older shards lack queries
    p = pool(rows)
    keep = ("episodes", "successes", "success_rate", "ci95", "nfe_per_action", "failure_stage", "sim_diverged",
            "mean_steps", "success_by_seed")
    return {"K": k, "C": c, **{key: p[key] for key in keep}, "wall_s": sum(sh["wall_s"] for sh in shards),
            "invocations": sorted({sh["invocation"] for sh in shards if "invocation" in sh})}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cells = list(results["cells"].values())
    ks = sorted({c["K"] for c in cells})
    cs = sorted({c["C"] for c in cells})
    grid = np.full((len(ks), len(cs)), np.nan)
    for c in cells:
        grid[ks.index(c["K"]), cs.index(c["C"])] = c["success_rate"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    im = a.imshow(grid, vmin=0, vmax=1, cmap="viridis", origin="lower")
    a.set_xticks(range(len(cs)), cs)
    a.set_yticks(range(len(ks)), ks)
    a.set_xlabel("executed actions per query C")
    a.set_ylabel("denoising steps K")
    for i in range(len(ks)):
        for j in range(len(cs)):
            if not np.isnan(grid[i, j]):
                a.text(j, i, f"{grid[i, j]:.0%}", ha="center", va="center", color="w" if grid[i, j] < 0.6 else "k")
    fig.colorbar(im, ax=a, label="success")
    a.set_title(f"stack-2 success ({results['episodes']} episodes/cell, "
                f"noise T={results.get('noise_temperature', 1.0)})")
    for c in cs:
        pts = sorted((x["nfe_per_action"], x["success_rate"], x["ci95"]) for x in cells if x["C"] == c)
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        err = [[p[1] - p[2][0] for p in pts], [p[2][1] - p[1] for p in pts]]
        b.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=f"C={c}")
    b.set_xscale("log")
    b.set_xlabel("NFE per executed action (K / C)")
    b.set_ylabel("success (95% CI)")
    b.set_ylim(0, 1)
    b.legend(fontsize=8)
    b.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def open_resumable(out: Path, identity: dict) -> dict:
    """The results file to resume (or a new one), refused when it was made with other settings or
    another model file (``identity`` + the checkpoint's sha256, which is added to it)."""
    from edge.export import sha256_file
    from edge.vla.checkpoint import resolve

    identity = {**identity, "checkpoint_sha256": sha256_file(resolve(identity["checkpoint"]))}
    from edge.argtypes import read_json_dict

    results = read_json_dict(out, "--out", "a results file of this script", "choose another --out") if out.exists() else {}
    # render_mesh_cell_m: files written before the option ran with the meshes as they are
    stored = {k: results.get(k, 0.0 if k == "render_mesh_cell_m" else None) for k in identity}
    if results and stored != identity:
        diff = {k: (stored[k], v) for k, v in identity.items() if stored[k] != v}
        print(f"error: --out {out}: made with other settings or another model file (stored vs now: {diff}); "
              "choose another --out, or delete it to start over", file=sys.stderr)
        raise SystemExit(2)
    results.update(identity)
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="edge/vla/checkpoints/stack")
    ap.add_argument("--backend", default="onnxruntime")
    ap.add_argument("--sim", default="mujoco", choices=("mujoco", "pybullet"))
    ap.add_argument("--distribution", default="train", choices=("train", "ood"))
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=whole(0), default=100000)
    ap.add_argument("--ks", default="1,2,3,5,10")
    ap.add_argument("--cs", default="1,2,4,8,16")
    ap.add_argument("--workers", type=int, default=2, help="processes; shards of all cells are spread over them")
    ap.add_argument("--shard", type=int, default=25,
                    help="episodes per runtime session (each its own noise seed); results depend on it, "
                         "not on --workers")
    ap.add_argument("--noise-temperature", type=float, default=0.5,
                    help="scale of each query's initial noise (default 0.5, the runtime's; 1 = as trained)")
    ap.add_argument("--render-mesh-cell-m", type=float, default=0.0,
                    help="MuJoCo: draw the robot with its meshes simplified on this grid (m); 0 = as they are")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/vla_grid.json")
    a = ap.parse_args(argv)
    out = Path(a.out)
    _check_args(ap, a)
    identity = {"checkpoint": a.checkpoint, "sim": a.sim, "distribution": a.distribution,
                "episodes": a.episodes, "seed": a.seed, "noise_temperature": a.noise_temperature, "shard": a.shard}
    from sim.env import EnvConfig

    try:  # a bad value or engine fails here, not in every shard
        env_cfg = EnvConfig(sim=a.sim, render_mesh_cell_m=a.render_mesh_cell_m)
    except ValueError as err:
        ap.error(f"--render-mesh-cell-m {a.render_mesh_cell_m} (--sim {a.sim}): {err}")
    if a.sim != "mujoco":  # PyBullet's default physics step changed (2 ms -> 1/300 s): runs never mix
        identity["physics_step_s"] = env_cfg.physics_step_s
    identity["render_mesh_cell_m"] = a.render_mesh_cell_m  # other pixels: runs never mix
    results = open_resumable(out, identity)
    stamp(results, ["python", *sys.argv])
    results.setdefault("cells", {})
    shards = results.setdefault("shards", {})  # finished shards of unfinished cells (resume)
    cells = [(int(k), int(c)) for k in a.ks.split(",") for c in a.cs.split(",")
             if f"K{k}_C{c}" not in results["cells"]]
    starts = range(a.seed, a.seed + a.episodes, a.shard)
    jobs = [{"k": k, "c": c, "seed0": s0, "n": min(a.shard, a.seed + a.episodes - s0), "checkpoint": a.checkpoint,
             "backend": a.backend, "sim": a.sim, "distribution": a.distribution,
             "noise_temperature": a.noise_temperature, "render_mesh_cell_m": a.render_mesh_cell_m}
            for k, c in cells for s0 in starts if f"K{k}_C{c}_{s0}" not in shards]
    jobs.sort(key=lambda j: (j["k"] / j["c"], j["k"], j["c"], j["seed0"]))  # cheap cells first
    print(f"{len(cells)} cells to run ({len(jobs)} shards of <= {a.shard} episodes), "
          f"{len(results['cells'])} already done", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    from edge.runtime.campaign import run_campaign

    def keep(_i: int, sh: dict) -> None:  # finished shards and cells survive an interruption
        k, c = sh["K"], sh["C"]
        sh["invocation"] = len(results["invocations"]) - 1  # which entry of results["invocations"] ran it
        shards[f"K{k}_C{c}_{sh['seed0']}"] = sh
        mine = [shards[f"K{k}_C{c}_{s0}"] for s0 in starts if f"K{k}_C{c}_{s0}" in shards]
        if len(mine) == len(starts):
            cell = results["cells"][f"K{k}_C{c}"] = cell_from_shards(k, c, mine)
            for s0 in starts:
                del shards[f"K{k}_C{c}_{s0}"]
            print(f"K={k:>2} C={c:>2}: {cell['successes']}/{cell['episodes']} "
                  f"NFE/action {cell['nfe_per_action']:.2f}  fail stages {cell['failure_stage']}  "
                  f"{cell['wall_s']:.0f} s of worker time", flush=True)
        out.write_text(json.dumps(results, indent=2))

    run_campaign(run_shard, jobs, workers=a.workers, on_result=keep, progress=False)
    if len(results["cells"]) > 1:
        plot(results, out.with_suffix(".png"))


def _check_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Bad arguments end here with one line (exit 2), before any shard runs or --out is read."""
    if not Path(a.checkpoint).exists():
        ap.error(f"--checkpoint {a.checkpoint}: no VLA checkpoint there")
    from edge.runtime.session import checkpoint_spec

    from edge.errors import EdgeError

    try:
        chunk = int(checkpoint_spec(a.checkpoint).chunk_len)
    except (EdgeError, OSError) as err:
        ap.error(f"--checkpoint {a.checkpoint}: {err}")
    for flag, text, lo, hi in (("--ks", a.ks, 1, 100), ("--cs", a.cs, 1, chunk)):
        try:
            values = [int(x) for x in text.split(",")]
        except ValueError:
            ap.error(f"{flag} {text}: a comma-separated list of whole numbers, e.g. 1,2,3")
        if any(not lo <= v <= hi for v in values):
            ap.error(f"{flag} {text}: each in [{lo}, {hi}]" + (f" (C: at most the checkpoint's chunk of {chunk})"
                                                             if flag == "--cs" else ""))
    for flag, v in (("--episodes", a.episodes), ("--shard", a.shard), ("--workers", a.workers)):
        if v < 1:
            ap.error(f"{flag} {v}: must be >= 1")
    if a.seed < 0:
        ap.error(f"--seed {a.seed}: must be >= 0")
    if Path(a.out).is_dir():
        ap.error(f"--out {a.out}: a directory; give the result JSON's path")
    from edge.runtime.config import RuntimeConfig

    try:
        RuntimeConfig.of(backend=a.backend, noise_temperature=a.noise_temperature)
    except EdgeError as err:
        ap.error(f"--backend {a.backend} / --noise-temperature {a.noise_temperature}: {err}")


if __name__ == "__main__":
    main()
