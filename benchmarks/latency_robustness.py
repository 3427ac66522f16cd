"""Success of the shipped VLA under injected inference latency, per chunk-seam strategy (issue 4).

Virtual clock: the sim advances one control period per tick and each query is charged a constant
latency, so "what happens at 200 ms" is a reproducible experiment. Async execution with latency
compensation must keep success within 5 points of the zero-latency figure up to 100 ms.
Every cell runs the same episodes (same env and noise seeds). Resumable per cell.

    python benchmarks/latency_robustness.py --episodes 50 --workers 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

from edge.argtypes import whole, whole_list, writable_file
from edge.config import ConfigError

os.environ.setdefault("MUJOCO_GL", "egl")


def cell_config(job: dict):
    """The cell's RuntimeConfig (raises ConfigError / ValueError on a bad setting)."""
    from edge.runtime.config import RuntimeConfig

    seam, _, soft = job["seam"].partition(":")  # "rtc:0" = rtc guiding only the frozen actions
    return RuntimeConfig.of(checkpoint=job["checkpoint"], backend=job["backend"], num_steps=job["k"],
                            execute=job["c"], seam=seam, rtc_soft_steps=int(soft) if soft else -1,
                            noise_temperature=job["noise_temperature"], execution=job["execution"],
                            latency="constant", latency_ms=float(job["latency_ms"]), episodes=job["episodes"],
                            seed=job["seed"], video_episodes=0)


def run_cell(job: dict) -> dict:
    from edge.runtime.session import run_session
    from edge.stats import wilson

    cfg = cell_config(job)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        res = run_session(cfg, tmp, progress=False)
    eps = res.episodes
    k = sum(e["success"] for e in eps)
    return {**{x: job[x] for x in ("seam", "execution", "latency_ms")}, "episodes": len(eps), "successes": k,
            "success_rate": k / len(eps), "ci95": list(wilson(k, len(eps))),
            "dropped_late": res.summary.get("dropped_late"), "starved_ticks": res.summary.get("starved_ticks"),
            "interventions_total": res.summary.get("interventions_total"), "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> None:
    from edge.cli import add_deprecated_alias

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="edge/vla/checkpoints/stack")
    ap.add_argument("--backend", default="onnxruntime")
    ap.add_argument("--episodes", type=whole(1), default=50)
    ap.add_argument("--seed", type=whole(0), default=100000)
    k = ap.add_argument("--num-steps", dest="k", type=int, default=10, metavar="K",
                        help="denoising steps K per query (as edge run)")
    c = ap.add_argument("--execute", dest="c", type=int, default=8, metavar="C",
                        help="actions executed per chunk C (as edge run)")
    add_deprecated_alias(ap, "--k", k)
    add_deprecated_alias(ap, "--c", c)
    ap.add_argument("--latencies-ms", type=whole_list(0), default=[0, 50, 100, 200, 400],
                    help="constant inference latencies to test, ms (default 0,50,100,200,400)")
    ap.add_argument("--seams", default="replace,weighted,rtc,rtc:0",
                    help="seam strategies; rtc:N = rtc guiding the frozen actions and N more "
                         "(rtc = the whole remaining previous chunk, as the RTC paper)")
    ap.add_argument("--with-sync", action="store_true", help="also run sync execution (waits on inference)")
    ap.add_argument("--workers", type=whole(1), default=2)
    ap.add_argument("--noise-temperature", type=float, default=0.5,
                    help="scale of each query's initial noise (edge run's default)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/latency_robustness.json")
    a = ap.parse_args(argv)
    if not Path(a.checkpoint).exists():
        ap.error(f"--checkpoint {a.checkpoint}: no VLA checkpoint there")
    for seam in a.seams.split(","):
        soft = seam.partition(":")[2]
        try:
            cell_config({"checkpoint": a.checkpoint, "backend": a.backend, "k": a.k, "c": a.c, "seam": seam,
                         "noise_temperature": a.noise_temperature, "execution": "async", "latency_ms": 0,
                         "episodes": a.episodes, "seed": a.seed})
            if soft and int(soft) < 0:
                raise ValueError("N must be >= 0")
        except (ConfigError, ValueError) as err:
            ap.error(f"--seams {a.seams} (--backend {a.backend}, --num-steps {a.k}, --execute {a.c}, "
                     f"--noise-temperature {a.noise_temperature}): {seam}: {err}")
    base = {"checkpoint": a.checkpoint, "backend": a.backend, "k": a.k, "c": a.c, "seam": "replace",
            "noise_temperature": a.noise_temperature, "execution": "async", "episodes": a.episodes, "seed": a.seed}
    for lat in a.latencies_ms:  # every cell's settings, before the first cell runs
        try:
            cell_config({**base, "latency_ms": lat})
        except (ConfigError, ValueError) as err:
            ap.error(f"--latencies-ms {lat}: {err}")
    if a.with_sync:
        try:
            cell_config({**base, "execution": "sync", "latency_ms": 0})
        except (ConfigError, ValueError) as err:
            ap.error(f"--with-sync: {err}")
    from edge.errors import EdgeError
    from edge.runtime.session import checkpoint_spec

    try:
        chunk = int(checkpoint_spec(a.checkpoint).chunk_len)
    except (EdgeError, OSError) as err:
        ap.error(f"--checkpoint {a.checkpoint}: {err}")
    if a.c > chunk:
        ap.error(f"--execute {a.c}: at most the checkpoint's chunk ({chunk} actions)")
    from vla_grid import open_resumable  # same directory
    from edge.telemetry import machine_info

    out = Path(a.out)
    results = open_resumable(out, {"checkpoint": a.checkpoint, "episodes": a.episodes, "seed": a.seed,
                                   "K": a.k, "C": a.c, "noise_temperature": a.noise_temperature})
    results.setdefault("cells", {})
    results.update({"command": " ".join(["python", *sys.argv]), "machine": machine_info()})
    modes = [("async", s) for s in a.seams.split(",")] + ([("sync", "replace")] if a.with_sync else [])
    jobs = [{"checkpoint": a.checkpoint, "backend": a.backend, "k": a.k, "c": a.c, "episodes": a.episodes,
             "seed": a.seed, "execution": ex, "seam": seam, "latency_ms": int(lat),
             "noise_temperature": a.noise_temperature}
            for ex, seam in modes for lat in a.latencies_ms
            if f"{ex}/{seam}/{lat}" not in results["cells"]]
    print(f"{len(jobs)} cells to run", flush=True)
    with mp.get_context("spawn").Pool(a.workers) as pool:
        for cell in pool.imap_unordered(run_cell, jobs):
            results["cells"][f"{cell['execution']}/{cell['seam']}/{cell['latency_ms']}"] = cell
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2))
            print(f"{cell['execution']:>5} {cell['seam']:>8} {cell['latency_ms']:>4} ms: "
                  f"{cell['successes']}/{cell['episodes']}", flush=True)
    base = {s: results["cells"].get(f"async/{s}/0") for s in a.seams.split(",")}
    results["within_5_points_up_to_100ms"] = {
        s: all(b["success_rate"] - results["cells"][f"async/{s}/{lat}"]["success_rate"] <= 0.05
               for lat in (50, 100) if f"async/{s}/{lat}" in results["cells"])
        for s, b in base.items() if b}
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
