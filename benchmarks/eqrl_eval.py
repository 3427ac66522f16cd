"""EQRL against fixed schedules on the same seeds (issue 19): success (95 % Wilson interval), NFE per
executed action, relative NFE against the default cell and the best fixed cell, inference ms per
executed action, episode length, queries per episode, paired exact McNemar tests, mean K and C.

Every arm runs the same episodes (seeds seed..seed+N-1) through the runtime loop on the virtual
clock with zero charged latency, in shards of ``--shard`` episodes (one runtime session each, noise
seeded by its first env seed, as in ``vla_grid.py``) spread over ``--workers`` processes. The
default evaluation seeds (40,000,000..) were never used for training (20,000,000..) or selection.
Resumable: finished shards are kept in the output file.

    python benchmarks/eqrl_eval.py --episodes 300 --arms fixed:10x8,fixed:2x8,eqrl
    python benchmarks/eqrl_eval.py --adapter runs/eqrl_stack --episodes 50 --out /tmp/e.json
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


def parse_arm(arm: str) -> dict:
    """``fixed:KxC`` | ``dvac`` | ``eqrl`` | ``eqrl:DIR`` -> session overrides (ValueError naming --arms)."""
    kind, _, arg = arm.partition(":")
    if kind == "fixed":
        try:
            k, c = (int(v) for v in arg.lower().split("x"))
        except ValueError:
            raise ValueError(f"--arms: {arm!r}: write fixed:KxC, e.g. fixed:2x8") from None
        if not (1 <= k <= 100 and 1 <= c):
            raise ValueError(f"--arms: {arm!r}: K in [1, 100], C >= 1")
        return {"scheduler": "fixed", "num_steps": k, "execute": c}
    if kind == "dvac":
        return {"scheduler": "dvac", "num_steps": 3}
    if kind == "eqrl":
        if "+noise:" in arg:  # eqrl:SCHEDULE_DIR+noise:NOISE_DIR: K, C from one adapter, noise from another
            arg, _, noise = arg.partition("+noise:")
            return {"scheduler": "eqrl", "adapter": arg, "scheduler.eqrl.noise_adapter": noise}
        return {"scheduler": "eqrl", "adapter": arg}
    if kind == "eqrl-mean":  # the adapter's noise at its mode instead of sampled
        return {"scheduler": "eqrl", "adapter": arg, "adapter_noise": "mean"}
    raise ValueError(f"--arms: unknown arm {arm!r} (fixed:KxC, dvac, eqrl[:DIR[+noise:DIR]], eqrl-mean[:DIR])")


NEAR_M = 0.06  # "near" = the TCP within 6 cm of the block to grasp, or of its place on the base


def phase_of(env) -> str:
    """Privileged task phase at a query (information only; the scheduler never sees it):
    ``near_block`` (the block to move not lifted, TCP within 6 cm of it), ``near_base`` (lifted,
    TCP within 6 cm of its place on the base), else ``free``."""
    import numpy as np

    u = env.unwrapped
    order = u.spec_task.order
    block, base = order[-1], order[-2]
    pos, _ = u.backend.object_pose(block)
    half = u.scene.object(block).half_size_m[2]
    tcp, _ = u.tcp_pose()
    if pos[2] < half + 0.02:
        return "near_block" if np.linalg.norm(tcp - pos) < NEAR_M else "free"
    place = np.asarray(u.backend.object_pose(base)[0]) + np.array([0.0, 0.0, 2 * half])
    return "near_base" if np.linalg.norm(tcp - place) < NEAR_M else "free"


class PhaseTap:
    """Wraps the session's scheduler: records the privileged phase at every plan()."""

    def __init__(self, inner, env) -> None:
        self.inner, self.env, self.phases = inner, env, []
        self.name = getattr(inner, "name", "?")
        if hasattr(inner, "refine"):
            self.refine = inner.refine

    def plan(self, features, history):
        self.phases.append(phase_of(self.env))
        return self.inner.plan(features, history)

    def reset(self) -> None:
        self.inner.reset()

    def observe(self, result) -> None:
        if hasattr(self.inner, "observe"):
            self.inner.observe(result)


def shard_config(job: dict):
    """The shard's RuntimeConfig before its query mode (raises ConfigError / ValueError)."""
    from edge.runtime.config import RuntimeConfig

    return RuntimeConfig.of(task="stack", sim=job.get("sim", "mujoco"), distribution=job.get("distribution", "train"),
                        instructions=job.get("instructions", "train"),
                        checkpoint=job["checkpoint"], seam="replace", execution="sync",
                        latency="constant", latency_ms=job.get("latency_ms", 0.0), episodes=job["n"],
                        seed=job["seed0"], record_ticks=False, video_episodes=0,
                        noise_temperature=job["noise_temperature"], **parse_arm(job["arm"]))


def run_shard(job: dict) -> dict:
    from edge.profiler.episodes import episode_rows
    from edge.runtime.registry import SCHEDULERS
    from edge.runtime.session import build_runtime
    from edge.telemetry import read_run

    cfg = shard_config(job)
    mode = job.get("query_mode", "auto")
    if mode == "async" or (mode == "auto" and cfg.clock.latency_ms > 0):
        from edge.runtime.config import apply_settings

        cfg = apply_settings(cfg, [("execution", "async")])
    t0 = time.perf_counter()
    eps = []
    with tempfile.TemporaryDirectory() as tmp:
        from edge.runtime.session import policy_loader

        loader, robot = policy_loader(cfg)
        policy = loader()
        rt = build_runtime(cfg, tmp, policy=policy, robot=robot,
                           scheduler=SCHEDULERS.resolve(cfg.scheduler.kind)(cfg, policy))
        tap = PhaseTap(rt.loop.worker.scheduler, rt.env)
        rt.loop.worker.scheduler = tap
        try:
            for i in range(cfg.run.episodes):
                tap.phases = []
                e = rt.run_episode(cfg.run.seed + i)
                eps.append((e, list(tap.phases)))
        finally:
            rt.close()
        rows = episode_rows(read_run(tmp))
    out = []
    for row, (e, phases) in zip(rows, eps):
        assert row["seed"] == e["seed"]
        out.append({**row, "phase": phases[: len(row["K"])]})
    return {"arm": job["arm"], "seed0": job["seed0"], "episodes": out, "wall_s": time.perf_counter() - t0}


def arm_summary(eps: list[dict]) -> dict:
    """The profiler's pooled numbers (:func:`edge.profiler.episodes.pool`) plus K / C per phase."""
    from edge.profiler.episodes import pool

    return {**pool(eps), "per_phase": per_phase(eps)}


def per_phase(eps: list[dict]) -> dict:
    """Mean K, C, difficulty u and the share of queries per privileged phase."""
    import numpy as np

    rows = [(p, k, c, u) for e in eps for p, k, c, u in zip(e["phase"], e["K"], e["C"], e["u"])]
    out = {}
    for ph in ("free", "near_block", "near_base"):
        sel = [r for r in rows if r[0] == ph]
        if sel:
            us = [r[3] for r in sel if r[3] is not None]
            out[ph] = {"queries": len(sel), "share": len(sel) / len(rows), "mean_K": float(np.mean([r[1] for r in sel])),
                       "mean_C": float(np.mean([r[2] for r in sel])),
                       "mean_u": float(np.mean(us)) if us else None}
    us = [(r[3], r[0] != "free") for r in rows if r[3] is not None]
    if len(us) > 2 and len({h for _, h in us}) == 2:
        out["u_vs_near_corr"] = float(np.corrcoef([u for u, _ in us], [float(h) for _, h in us])[0, 1])
    return out


def compare(results: dict, default: str) -> None:
    """Every arm against the default arm and the best fixed arm (paired, :func:`edge.profiler.episodes.versus`)."""
    from edge.profiler.episodes import best_cell, versus

    arms = results["arms"]
    best = best_cell(arms, [a for a in arms if a.startswith("fixed:")])
    results["best_fixed"] = best
    for a, s in arms.items():
        for ref_name, ref in (("default", default), ("best_fixed", best)):
            if ref in arms and ref != a:
                s[f"vs_{ref_name}"] = versus(s, arms[ref], ref)


def plot(results: dict, grid_path: Path, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    if grid_path.is_file():
        cells = list(json.loads(grid_path.read_text())["cells"].values())
        pts = sorted((c["nfe_per_action"], c["success_rate"]) for c in cells)
        ax.scatter(*zip(*pts), c="0.7", s=18, label="fixed grid (gate seeds, 100/cell)")
        front, best = [], -1.0
        for x, y in pts:
            if y > best:
                front.append((x, y))
                best = y
        ax.step(*zip(*front), where="post", c="0.5", lw=1, label="grid Pareto front")
    for name, s in results["arms"].items():
        lo, hi = s["ci95"]
        ax.errorbar([s["nfe_per_action"]], [s["success_rate"]], yerr=[[s["success_rate"] - lo], [hi - s["success_rate"]]],
                    marker="o", capsize=3, label=f"{name} ({s['successes']}/{s['episodes']})")
    ax.set_xscale("log")
    ax.set_xlabel("NFE per executed action")
    ax.set_ylabel("success (95% CI)")
    ax.set_title(f"EQRL vs fixed schedules, stack, {results['episodes']} paired episodes per arm")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="edge/vla/checkpoints/stack", help="the frozen VLA")
    ap.add_argument("--adapter", default="", help="adapter dir for the 'eqrl' arm ('' = the shipped one)")
    ap.add_argument("--arms", default="fixed:10x8,fixed:2x8,eqrl",
                    help="comma-separated: fixed:KxC, dvac, eqrl[:DIR] (noise sampled from the adapter; "
                         "DIR+noise:DIR2 = K, C from DIR, noise from DIR2), "
                         "eqrl-mean[:DIR] (the noise's mode)")
    ap.add_argument("--default-arm", default="fixed:10x8", help="the reference for relative NFE")
    ap.add_argument("--episodes", type=whole(1), default=300)
    ap.add_argument("--seed", type=whole(0), default=40_000_000, help="first evaluation seed")
    ap.add_argument("--workers", type=whole(1), default=2, help="local worker processes")
    ap.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="run the shards as Ray tasks (auto = an existing cluster; no address = a fresh local one)")
    ap.add_argument("--shard", type=whole(1), default=25)
    ap.add_argument("--noise-temperature", type=float, default=0.5)
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="constant inference latency on the virtual clock (> 0 runs async)")
    ap.add_argument("--sim", default="mujoco", choices=("mujoco", "pybullet"), help="physics engine")
    ap.add_argument("--distribution", default="train", choices=("train", "ood"), help="scene randomisation")
    ap.add_argument("--instructions", default="train", choices=("train", "paraphrase"),
                    help="instruction phrasings: as in training, or held-out paraphrases (same scenes)")
    ap.add_argument("--query-mode", default="auto", choices=("auto", "sync", "async"),
                    help="how episodes query the VLA: auto = sync at 0 ms latency, async above it")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/eqrl_eval.json")
    a = ap.parse_args(argv)
    arms = [s if not (s == "eqrl" and a.adapter) else f"eqrl:{a.adapter}" for s in a.arms.split(",")]
    from edge.runtime.session import checkpoint_spec

    if not Path(a.checkpoint).exists():
        ap.error(f"--checkpoint {a.checkpoint}: no VLA checkpoint there")
    from edge.errors import EdgeError

    try:
        chunk = int(checkpoint_spec(a.checkpoint).chunk_len)
    except (EdgeError, OSError) as err:
        ap.error(f"--checkpoint {a.checkpoint}: {err}")
    for arm, given in zip(arms, a.arms.split(",")):
        try:
            overrides = parse_arm(arm)
        except ValueError as err:
            ap.error(str(err))
        c = overrides.get("execute")
        for key in ("adapter", "scheduler.eqrl.noise_adapter"):  # loaded and verified now, not in the eqrl
            if overrides.get("scheduler") == "eqrl" and key in overrides:  # arm's first shard after the others ran
                from adapters.eqrl.checkpoint import load_agent
                from adapters.eqrl.deploy import _adapter_path

                try:
                    load_agent(_adapter_path(overrides[key]))
                except (EdgeError, RuntimeError, KeyError, ValueError) as err:  # a damaged or mismatched one too
                    flag = f"--adapter {a.adapter}" if given == "eqrl" and a.adapter else f"--arms {arm!r}"
                    ap.error(f"{flag}: {err}")
        if c is not None and c > chunk:  # the runtime would cut it to the chunk without a word
            ap.error(f"--arms: {arm!r}: C={c} is longer than the checkpoint's chunk of {chunk}")
        try:
            shard_config({"arm": arm, "seed0": a.seed, "n": 1, "checkpoint": a.checkpoint, "sim": a.sim,
                          "noise_temperature": a.noise_temperature, "latency_ms": a.latency_ms,
                          "distribution": a.distribution, "instructions": a.instructions})
        except (EdgeError, ValueError) as err:
            ap.error(f"--arms {arm!r} with --noise-temperature {a.noise_temperature}, --latency-ms {a.latency_ms}: {err}")
    if a.default_arm not in arms:  # allowed (arms compared only with each other), but said
        print(f"note: --default-arm {a.default_arm} is not among --arms {a.arms}: no arm is compared against it",
              file=sys.stderr)
    if a.ray:
        from edge.runtime.campaign import require_ray

        try:
            require_ray()
        except EdgeError as err:
            ap.error(f"--ray {a.ray}: {err}")
    out = Path(a.out)
    try:
        results = json.loads(out.read_text()) if out.exists() else {}
    except (OSError, ValueError) as err:
        ap.error(f"--out {out}: not a readable JSON ({err}); choose another --out")
    if not isinstance(results, dict):
        ap.error(f"--out {out}: not a result of this script; choose another --out")
    ident = {"checkpoint": a.checkpoint, "episodes": a.episodes, "seed": a.seed, "shard": a.shard,
             "noise_temperature": a.noise_temperature, "latency_ms": a.latency_ms}
    for key, default in (("query_mode", "auto"), ("sim", "mujoco"), ("distribution", "train"),
                         ("instructions", "train")):
        if getattr(a, key) != default:  # absent from older result files, which all ran the default
            ident[key] = getattr(a, key)
    if a.sim != "mujoco":  # PyBullet's default physics step changed (2 ms -> 1/300 s): runs never mix
        from sim.env import EnvConfig

        ident["physics_step_s"] = EnvConfig(sim=a.sim).physics_step_s
    if results and any(results.get(k) != v for k, v in ident.items()):
        diff = {k: (results.get(k), v) for k, v in ident.items() if results.get(k) != v}
        ap.error(f"--out {out}: holds another evaluation's settings {diff} (its, this one's); choose another --out or delete it")
    results.update(ident, command=" ".join(["python", *sys.argv]), machine=machine_info())
    shards = results.setdefault("shards", {})
    starts = range(a.seed, a.seed + a.episodes, a.shard)
    jobs = [{"arm": arm, "seed0": s0, "n": min(a.shard, a.seed + a.episodes - s0), "checkpoint": a.checkpoint,
             "noise_temperature": a.noise_temperature, "latency_ms": a.latency_ms, "query_mode": a.query_mode,
             "sim": a.sim, "distribution": a.distribution, "instructions": a.instructions}
            for arm in arms for s0 in starts if f"{arm}@{s0}" not in shards]
    where = f"as Ray tasks ({a.ray})" if a.ray else f"over {a.workers} local worker processes"
    print(f"{len(jobs)} shards to run {where}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    from edge.runtime.campaign import run_campaign

    def keep(_i: int, sh: dict) -> None:  # partial results survive an interruption
        shards[f"{sh['arm']}@{sh['seed0']}"] = sh
        wins = sum(e["success"] for e in sh["episodes"])
        print(f"{sh['arm']} seeds {sh['seed0']}..: {wins}/{len(sh['episodes'])} ({sh['wall_s']:.0f} s)", flush=True)
        out.write_text(json.dumps(results, indent=1))

    run_campaign(run_shard, jobs, workers=a.workers, ray_address=a.ray, on_result=keep, desc="eqrl eval")
    results["arms"] = {}
    for arm in arms:
        eps = [e for s0 in starts if f"{arm}@{s0}" in shards for e in shards[f"{arm}@{s0}"]["episodes"]]
        if len(eps) == a.episodes:
            results["arms"][arm] = arm_summary(eps)
    compare(results, a.default_arm)
    out.write_text(json.dumps(results, indent=1))
    for name, s in results["arms"].items():
        print(f"{name:>24}: {s['successes']}/{s['episodes']} ({s['ci95'][0]:.2f}-{s['ci95'][1]:.2f})  "
              f"NFE/action {s['nfe_per_action']:.3f}  ms/action {s['inference_ms_per_action']:.2f}  "
              f"mean K {s['mean_K']:.2f} C {s['mean_C']:.2f}  "
              + "  ".join(f"{k}: relNFE {v['relative_nfe']:.2f} p={v['mcnemar_p']:.3f}"
                          for k, v in s.items() if k.startswith("vs_")))
    plot(results, Path("benchmarks/results/vla_grid.json"), out.with_suffix(".png"))


if __name__ == "__main__":
    main()
