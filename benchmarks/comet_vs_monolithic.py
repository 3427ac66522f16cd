"""COMET against monolithic world models through the same pipeline and planner (issue 21).

Every (task, method, seed) is one ``edge train world-model`` run to the same environment-step
budget, evaluated every ``--eval-every`` steps on the same fixed evaluation seeds (never used for
training). Runs live in ``--runs`` and are resumable: rerunning this script continues unfinished
runs and skips finished ones, so the comparison can be spread over several sessions. ``--report``
only aggregates what exists.

Methods (all with the same MCTS, budget and loss weights):

* ``comet`` — frozen encoder slots, action–slot fusion, object-causal heads;
* ``comet_nofusion`` / ``comet_nocausal`` — the ablations;
* ``flat_slots`` — the same frozen slots flattened into one token per step (monolithic over slots);
* ``pixels`` — a CNN encoder trained end to end, one latent token per step (UniZero/MuZero-style);
* ``pixels_ae`` — the same model over a frozen CNN encoder pretrained as an autoencoder on the slot
  encoder's own frames (``--pixel-encoder``, ``edge train pixel-encoder``): the monolithic model
  with the same pretraining advantage as the slot models;
* ``oracle`` — COMET over object-state slots (the upper bound; no vision); ``KIND@oracle`` — an
  ablation or the flattened monolithic model over the same object-state slots (structure without
  the encoder's quality).

Report (JSON + one plot per task): normalised score (success rate; a uniform-random policy, also
measured, scores ≈ 0) per evaluation point, mean over seeds with a bootstrap 95 % band; area
under the curve over the first half of the budget; environment steps for each method to reach
80 % of the monolithic model's final score (``--monolithic``, default ``pixels``), and COMET's
ratio to the monolithic model's (goal ≤ 1/3); diagnostics of each final model: 1- and 5-step relative prediction error,
relevance per entity, MCTS root-value error.

    python benchmarks/comet_vs_monolithic.py --tasks push3 reach3 --seeds 0 1 2 --env-steps 20000
    python benchmarks/comet_vs_monolithic.py --report
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from edge.argtypes import whole, writable_dir
from edge.telemetry import machine_info
from world_models.object_env import TASKS

METHODS = ("comet", "comet_nofusion", "comet_nocausal", "flat_slots", "pixels", "pixels_ae", "oracle",
           "comet_nofusion@oracle", "comet_nocausal@oracle", "flat_slots@oracle")
MONOLITHIC = "pixels"
ROOT = Path(__file__).resolve().parents[1]


def run_dir(args: argparse.Namespace, task: str, method: str, seed: int) -> Path:
    return Path(args.runs) / f"{task}_{method.replace('@', '_at_')}_s{seed}"


def run_args(method: str, task: str, seed: int, args: argparse.Namespace, out: Path) -> list[str]:
    cmd = [str(Path(sys.executable).with_name("edge")), "train", "world-model", "--out", str(out), "--task", task,
           "--seed", str(seed), "--env-steps", str(args.env_steps), "--no-progress",
           "--set", f"eval_every={args.eval_every}", "--set", f"eval_episodes={args.eval_episodes}",
           "--set", f"checkpoint_every={args.eval_every}", "--set", f"planner.num_simulations={args.simulations}"]
    if method == "oracle" or method.endswith("@oracle"):
        from world_models.object_env import ObjectTaskConfig

        n = ObjectTaskConfig(task=task).n_entities
        kind = "comet" if method == "oracle" else method.split("@")[0]
        cmd += ["--kind", kind, "--obs", "oracle", "--set", f"model.num_slots={n}"]
    elif method == "pixels":
        cmd += ["--kind", "pixels", "--obs", "pixels"]
    elif method == "pixels_ae":  # the pixel model over a frozen, pretrained pixel encoder
        cmd += ["--kind", "pixels", "--obs", "pixels", "--encoder", args.pixel_encoder]
    else:
        # always named: the preset's rounds (1) are not the encoder's own (0)
        cmd += ["--kind", method, "--obs", "slots", "--encoder", args.encoder,
                "--set", f"encoder_carry_iters={getattr(args, 'encoder_carry_iters', 0)}"]
    for s in args.set:
        cmd += ["--set", s]
    if (out / "train_state.pt").is_file():
        cmd.append("--resume")
    return cmd


def finished(out: Path, env_steps: int) -> bool:
    m = out / "metrics.json"
    return m.is_file() and json.loads(m.read_text()).get("env_steps", 0) >= env_steps


# keys this script sets on every run's command line (checked by check_run_matches or by the run's name)
COMMAND_KEYS = {"env.task", "seed", "env_steps", "eval_every", "eval_episodes", "checkpoint_every",
                "planner.num_simulations", "model.kind", "obs", "encoder", "encoder_carry_iters", "model.num_slots"}


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


class RunMismatch(ValueError):
    """A saved run made with other settings than asked for now (main: exit 2 naming it)."""


def check_set_overrides(out: Path, cfg: dict, overrides: list[str]) -> None:
    """Refuse a saved run whose configuration differs from what is asked for now: from a ``--set
    KEY=VALUE``, or, for a key not set and not on this script's command line, from the preset's value
    (``configs/train/wm_default.yaml``; a key the run does not record counts at its default)."""
    import yaml

    from edge.config import flatten, read_yaml
    from edge.resources import config_dir
    from world_models.train import RunConfig, to_dict

    default = flatten(to_dict(RunConfig()))
    default.update(flatten(read_yaml(config_dir("train", "wm_default.yaml"))))  # the preset edge train reads
    saved = flatten(cfg)
    asked = {}
    for item in overrides:
        key, _, text = item.partition("=")
        asked[key] = (yaml.safe_load(text), text)
    for key in sorted(set(default) | set(saved)):
        if key in COMMAND_KEYS:
            continue
        was = saved.get(key, default.get(key))
        want, text = asked.get(key, (default.get(key), None))
        if not _same(was, want):
            now = text if text is not None else f"{want!r} (the preset's; pass --set {key}={was} to reuse the run)"
            raise RunMismatch(f"{out} was trained with {key}={was!r}, not {now}; use another --runs directory")


def check_run_matches(out: Path, method: str, args: argparse.Namespace) -> None:
    """Refuse (RunMismatch naming the run) a saved run of a slot method made with another encoder or
    other tracking rounds than asked for now: run directories are named by task, method and seed
    only, so such a run would otherwise be skipped as finished and averaged into this report."""
    m = out / "manifest.json"
    if not m.is_file():
        return
    cfg = json.loads(m.read_text()).get("config", {})
    check_set_overrides(out, cfg, args.set)
    if method in ("pixels", "oracle") or "@" in method:
        return
    if method == "pixels_ae":
        if Path(cfg.get("encoder", "")).resolve() != Path(args.pixel_encoder).resolve():
            raise RunMismatch(f"{out} was trained with --pixel-encoder {cfg.get('encoder')}, not "
                             f"{args.pixel_encoder}; use another --runs directory")
        return
    saved = (Path(cfg.get("encoder", "")).resolve(), int(cfg.get("encoder_carry_iters", 0)))
    now = (Path(args.encoder).resolve(), int(getattr(args, "encoder_carry_iters", 0)))
    if saved != now:
        raise RunMismatch(f"{out} was trained with --encoder {cfg.get('encoder')} --encoder-carry-iters "
                         f"{saved[1]}, not {args.encoder} / {now[1]}; use another --runs directory")


def check_run_settings(args: argparse.Namespace, ap: argparse.ArgumentParser) -> None:
    """Each task and method's `edge train world-model` command line, checked as that command checks
    it (settings, encoders), before any run starts: a --set one of them refuses is an error here."""
    from edge.cli import build_parser
    from edge.commands.train import world_model_config
    from edge.errors import EdgeError

    parser = build_parser()
    for t in args.tasks:
        for m in args.methods:
            cmd = run_args(m, t, args.seeds[0], args, run_dir(args, t, m, args.seeds[0]))
            try:
                world_model_config(parser.parse_args(cmd[1:]))
            except EdgeError as err:
                ap.error(f"{t} / {m}: {err}")


def launch(args: argparse.Namespace) -> list[str]:
    """Train every run not finished yet; returns the names of those that failed."""
    for t in args.tasks:
        for m in args.methods:
            for s in args.seeds:
                check_run_matches(run_dir(args, t, m, s), m, args)
    todo = [(t, m, s) for t in args.tasks for m in args.methods for s in args.seeds
            if not finished(run_dir(args, t, m, s), args.env_steps)]
    print(f"{len(todo)} runs to do, {args.jobs} at a time", file=sys.stderr)
    running: list[tuple[subprocess.Popen, str, float]] = []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # a stopped benchmark stops its training runs too (they checkpoint: rerun to resume them)
    old_term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _launch_loop(args, todo, running, env)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        for p, name, _ in running:
            if p.poll() is None:
                p.terminate()
                print(f"{name}: stopped (resumable)", file=sys.stderr)
        for p, _, _ in running:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def _last_line(path: Path) -> str:
    lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()] if path.is_file() else []
    return lines[-1].strip() if lines else "no output"


def _launch_loop(args: argparse.Namespace, todo: list, running: list, env: dict) -> list[str]:
    log_of: dict[str, Path] = {}
    failed: list[str] = []
    while todo or running:
        while todo and len(running) < args.jobs:
            t, m, s = todo.pop(0)
            out = run_dir(args, t, m, s)
            out.mkdir(parents=True, exist_ok=True)
            if not (out / "train_state.pt").is_file() and (out / "curve.jsonl").is_file():
                (out / "curve.jsonl").unlink()  # stopped before its first checkpoint: nothing to resume
                print(f"{out.name}: stopped before its first checkpoint; started over", file=sys.stderr)
            with open(out / "train.log", "a") as log:  # the child keeps its own handle
                p = subprocess.Popen(run_args(m, t, s, args, out), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
            running.append((p, out.name, time.time()))
            log_of[out.name] = out / "train.log"
            print(f"started {out.name}", file=sys.stderr)
        time.sleep(5)
        for item in list(running):
            p, name, t0 = item
            if p.poll() is not None:
                running.remove(item)
                print(f"{name}: exit {p.returncode} after {time.time() - t0:.0f} s", file=sys.stderr)
                if p.returncode:
                    failed.append(name)
                    print(f"{name}: failed, see {log_of[name]} ({_last_line(log_of[name])})", file=sys.stderr)
    return failed


def read_curve(out: Path) -> list[dict]:
    """A run's curve so far; a report taken while the run appends a point skips that half-written line."""
    from edge.telemetry import read_jsonl

    return read_jsonl(out / "curve.jsonl")


def bootstrap_band(x: np.ndarray, rng: np.random.Generator, n: int = 2000) -> tuple[float, float]:
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    means = rng.choice(x, size=(n, len(x)), replace=True).mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def random_policy_score(task: str, episodes: int) -> float:
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
    from world_models.train import EVAL_SEED0

    env = ObjectTaskEnv(ObjectTaskConfig(task=task))
    rng = np.random.default_rng(0)
    wins = 0
    for e in range(episodes):
        env.reset(seed=EVAL_SEED0 + e)
        while True:
            _, _, term, trunc, info = env.step(int(rng.integers(8)))
            if term or trunc:
                wins += int(info["success"])
                break
    env.close()
    return wins / episodes


def steps_to(curve_steps: np.ndarray, mean: np.ndarray, level: float) -> int | None:
    hit = np.flatnonzero(mean >= level - 1e-9)
    return int(curve_steps[hit[0]]) if len(hit) else None


def level_above(mono_final: float, floor: float = 0.0) -> float | None:
    """80 % of the monolithic model's final gain over ``floor`` (a reference policy's score on the
    same evaluation seeds; 0 gives the issue's level, 80 % of the final score). None when the
    monolithic model ends at or below the floor: it sets no level then."""
    return floor + 0.8 * (mono_final - floor) if mono_final > floor else None


def ratio_bootstrap(method: tuple[np.ndarray, np.ndarray], mono: tuple[np.ndarray, np.ndarray],
                    rng: np.random.Generator, n: int = 2000, floor: float = 0.0) -> dict:
    """The steps ratio (method / monolithic, each to the level ``level_above(monolithic final,
    floor)``) over seed resamples of both methods: its 2.5/50/97.5 percentiles (a method that never
    reaches the level counts as infinite, written as null) and the share of resamples at or below
    1/3 and 1/4. Resamples with no level, or whose level the monolithic model already meets at step
    0, have no ratio and are left out (counted)."""
    (sx, smat), (mx, mmat) = method, mono
    ratios, undefined = [], 0
    for _ in range(n):
        m = mmat[rng.integers(len(mmat), size=len(mmat))]
        c = smat[rng.integers(len(smat), size=len(smat))]
        level = level_above(float(m[:, -1].mean()), floor)
        ms = steps_to(mx, m.mean(0), level) if level is not None else None
        if not ms:
            undefined += 1
            continue
        cs = steps_to(sx, c.mean(0), level)
        ratios.append(np.inf if cs is None else cs / ms)
    if not ratios:
        return {"resamples": n, "undefined": undefined}
    r = np.array(ratios)
    return {"resamples": n, "undefined": undefined,
            "p2.5_50_97.5": [None if np.isinf(v) else float(v)
                             for v in (np.percentile(r, q, method="nearest") for q in (2.5, 50, 97.5))],
            "share_le_1_3": float(np.mean(r <= 1 / 3 + 1e-9)), "share_le_1_4": float(np.mean(r <= 0.25 + 1e-9))}


def diagnostics(out: Path) -> dict:
    from world_models import diagnostics as dg
    from world_models.policy import load_world_model
    from world_models.train import load_encoder

    cfg, model, _ = load_world_model(out)
    enc = load_encoder(cfg.encoder, cfg.encoder_carry_iters) if cfg.obs == "slots" else None
    ro = dg._rollouts(cfg, model, enc, 6, 950_000_000)
    return {"prediction_error": dg.prediction_error(cfg, model, enc, rollouts=ro),
            "relevance": dg.relevance_by_entity(cfg, model, enc, rollouts=ro)}


def report(args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(0)
    res: dict = {"machine": machine_info(), "settings": {k: v for k, v in vars(args).items() if k != "func"},
                 "tasks": {}}
    for task in args.tasks:
        rt = {"random_policy_success": random_policy_score(task, args.eval_episodes), "methods": {}}
        mats: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for m in args.methods:
            for s in args.seeds:
                check_run_matches(run_dir(args, task, m, s), m, args)
            curves = {s: read_curve(run_dir(args, task, m, s)) for s in args.seeds}
            curves = {s: c for s, c in curves.items() if c}
            missing = [run_dir(args, task, m, s).name for s in args.seeds if s not in curves]
            if missing:  # said, and recorded: a report over fewer seeds than asked for
                print(f"note: --runs {args.runs}: no curve yet for {', '.join(missing)}; "
                      + (f"{task} / {m} is reported over the other seeds" if curves else f"{task} / {m} left out"),
                      file=sys.stderr)
                rt.setdefault("missing_runs", []).extend(missing)
            if not curves:
                continue
            # seeds that reached the budget; a run still in progress is listed, not averaged in
            # (its shorter curve would truncate every seed's to the common points)
            done = {s: c for s, c in curves.items() if c[-1]["env_steps"] >= args.env_steps}
            partial = {str(s): {"env_steps": c[-1]["env_steps"], "success": c[-1]["success"]}
                       for s, c in curves.items() if s not in done}
            curves = done or curves
            common = sorted(set.intersection(*({r["env_steps"] for r in c} for c in curves.values())))
            mat = np.array([[next(r["success"] for r in c if r["env_steps"] == st) for st in common]
                            for c in curves.values()])  # (seeds, points)
            band = [bootstrap_band(mat[:, j], rng) for j in range(len(common))]
            steps = np.array(common)
            mats[m] = (steps, mat)
            half = steps <= args.env_steps / 2
            auc = float(np.trapezoid(mat.mean(0)[half], steps[half]) / max(steps[half][-1], 1)) if half.sum() > 1 else None
            last = {s: c[-1] for s, c in curves.items()}
            entry = {"seeds": sorted(curves), "env_steps": common, "mean": mat.mean(0).round(4).tolist(),
                     "lo": [round(b[0], 4) for b in band], "hi": [round(b[1], 4) for b in band],
                     "per_seed": {str(s): mat[i].round(4).tolist() for i, s in enumerate(curves)},
                     "final_mean": float(mat[:, -1].mean()), "auc_first_half": auc,
                     "complete": all(finished(run_dir(args, task, m, s), args.env_steps) for s in curves),
                     "unfinished_seeds": partial,
                     "root_value_abs_err": float(np.mean([r["root_value_abs_err"] for r in last.values()])),
                     "wall_s_per_run": float(np.mean([r.get("wall_s", 0.0) for r in last.values()]))}
            if not args.no_diagnostics and entry["complete"]:
                entry["diagnostics"] = diagnostics(run_dir(args, task, m, min(curves)))
            rt["methods"][m] = entry
        mono_name = args.monolithic
        rt["monolithic"] = mono_name
        mono = rt["methods"].get(mono_name)
        if mono:
            level = 0.8 * mono["final_mean"]
            rt["level_80pct_of_monolithic_final"] = level
            for m, e in rt["methods"].items():
                e["steps_to_level"] = steps_to(np.array(e["env_steps"]), np.array(e["mean"]), level) if level > 0 else None
            ms, cs = mono.get("steps_to_level"), (rt["methods"].get("comet") or {}).get("steps_to_level")
            rt["comet_over_monolithic_steps"] = (cs / ms) if cs is not None and ms else None
            for m, e in rt["methods"].items():  # how sure the ratio is, over seed resamples
                if m != mono_name:
                    e["steps_ratio_bootstrap"] = ratio_bootstrap(mats[m], mats[mono_name], rng)
        res["tasks"][task] = rt
        plot(task, rt, Path(args.out))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comet_vs_monolithic.json").write_text(json.dumps(res, indent=2))
    (out / "table.md").write_text("\n\n".join(markdown_table(t, rt) for t, rt in res["tasks"].items()) + "\n")
    return res


def _fmt(v: float | None, nd: int = 2) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def _steps(e: dict, rt: dict) -> str:
    if not rt.get("level_80pct_of_monolithic_final"):
        return "–"  # no level: no monolithic run, or its final score is 0
    return "never" if e.get("steps_to_level") is None else str(e["steps_to_level"])


def markdown_table(task: str, rt: dict) -> str:
    """One task's results as a Markdown table (written beside the JSON as ``table.md``)."""
    lines = [(f"### {task}: random policy {rt['random_policy_success']:.2f}; level = 0.8 × monolithic "
              f"({rt.get('monolithic', MONOLITHIC)}) final = "
              f"{_fmt(rt.get('level_80pct_of_monolithic_final'))}; comet/monolithic steps = "
              f"{_fmt(rt.get('comet_over_monolithic_steps'))}"),
             ("| method | seeds | final [95 % band] | AUC first half | steps to level | steps ratio p2.5 / p50 / p97.5 "
              "(share ≤ 1/3, ≤ 1/4) | root-value abs err | pred err h1 / h5 | relevance p (policy, value) "
              "robot / goal / target / distractor |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for m, e in rt["methods"].items():
        seeds = f"{len(e['seeds'])}" + (f" (+{len(e['unfinished_seeds'])} unfinished)" if e["unfinished_seeds"] else "")
        rb = e.get("steps_ratio_bootstrap") or {}
        if "p2.5_50_97.5" in rb:
            ratio = " / ".join("∞" if v is None else f"{v:.2f}" for v in rb["p2.5_50_97.5"])
            ratio += f" ({rb['share_le_1_3']:.2f}, {rb['share_le_1_4']:.2f})"
        else:
            ratio = "–"
        dg = e.get("diagnostics") or {}
        pe = dg.get("prediction_error") or {}
        rel = dg.get("relevance")
        rel_s = " / ".join("–" if rel.get(k) is None else f"{rel[k][0]:.2f}, {rel[k][1]:.2f}"
                           for k in ("robot", "goal", "target", "distractor")) if rel else "–"
        lines.append(f"| {m} | {seeds} | {e['final_mean']:.2f} [{e['lo'][-1]:.2f}, {e['hi'][-1]:.2f}] | "
                     f"{_fmt(e['auc_first_half'], 3)} | {_steps(e, rt)} | "
                     f"{ratio} | {_fmt(e['root_value_abs_err'])} | "
                     f"{_fmt(pe.get('h1'), 3)} / {_fmt(pe.get('h5'), 3)} | {rel_s} |")
    return "\n".join(lines)


def plot(task: str, rt: dict, out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, e in rt["methods"].items():
        x = np.array(e["env_steps"])
        ax.plot(x, e["mean"], label=f"{m} (n={len(e['seeds'])})")
        ax.fill_between(x, e["lo"], e["hi"], alpha=0.2)
    if "level_80pct_of_monolithic_final" in rt:
        ax.axhline(rt["level_80pct_of_monolithic_final"], ls="--", c="grey", lw=0.8, label="80 % of monolithic final")
    ax.axhline(rt["random_policy_success"], ls=":", c="k", lw=0.8, label="random policy")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("normalised score (success rate)")
    ax.set_title(f"{task}: world model + MCTS, mean over seeds, bootstrap 95 % band", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"curves_{task}.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=["push3", "reach3"], choices=TASKS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--seeds", nargs="+", type=whole(0), default=[0, 1, 2])
    ap.add_argument("--env-steps", type=whole(1), default=20000)
    ap.add_argument("--eval-every", type=whole(1), default=2000)
    ap.add_argument("--eval-episodes", type=whole(1), default=32)
    ap.add_argument("--simulations", type=whole(1), default=16, help="MCTS simulations per decision")
    ap.add_argument("--encoder", default="world_models/checkpoints/slots_push3_v2", help="the frozen slot encoder")
    ap.add_argument("--encoder-carry-iters", type=int, default=1,
                    help="slot methods: the encoder's tracking rounds per carried frame (0 = the encoder's own)")
    ap.add_argument("--pixel-encoder", default="world_models/checkpoints/pixels_push3",
                    help="pixels_ae: the pretrained pixel encoder its runs freeze")
    ap.add_argument("--monolithic", default=MONOLITHIC, choices=("pixels", "pixels_ae", "flat_slots"),
                    help="the method whose final score sets the level (80 %%) and the steps ratios")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra settings for every run")
    ap.add_argument("--jobs", type=whole(1), default=2, help="runs at once (one core each)")
    ap.add_argument("--runs", default="runs/wm_bench", help="where the training runs live (resumable)")
    ap.add_argument("--out", type=writable_dir, default="benchmarks/results/comet_vs_monolithic")
    ap.add_argument("--report", action="store_true", help="only aggregate the runs that exist")
    ap.add_argument("--no-diagnostics", action="store_true", help="skip the final models' diagnostics")
    args = ap.parse_args(argv)
    if args.monolithic not in args.methods:  # allowed (a run that adds methods), but said
        print(f"note: --monolithic {args.monolithic} is not among --methods: this report has no level and no "
              "steps ratios", file=sys.stderr)
    for text in args.set:
        if "=" not in text or not text.partition("=")[0].strip():
            ap.error(f"--set {text!r}: give KEY=VALUE, e.g. --set model.width=64")
    if Path(args.runs).exists() and not Path(args.runs).is_dir():
        ap.error(f"--runs {args.runs}: exists and is not a directory; give the directory for the training runs")
    if args.report and not Path(args.runs).is_dir():
        ap.error(f"--runs {args.runs}: no such directory (nothing to report; run without --report first)")
    if args.report and not any(read_curve(run_dir(args, t, m, s)) for t in args.tasks for m in args.methods
                               for s in args.seeds):
        ap.error(f"--runs {args.runs}: no run of {' / '.join(args.tasks)} × {', '.join(args.methods)} × seeds "
                 f"{' '.join(map(str, args.seeds))} there (e.g. {run_dir(args, args.tasks[0], args.methods[0], args.seeds[0])}"
                 "/curve.jsonl); check --runs, or run without --report first")
    if not 0 <= args.encoder_carry_iters <= 10:
        ap.error(f"--encoder-carry-iters {args.encoder_carry_iters}: must be in 0..10 (0 = the encoder's own)")
    if not args.report:
        if any(m not in ("oracle", "pixels", "pixels_ae") and "@" not in m for m in args.methods) \
                and not Path(args.encoder).exists():
            ap.error(f"--encoder {args.encoder}: no slot encoder there (train one with `edge train slot-encoder`)")
        if "pixels_ae" in args.methods and not Path(args.pixel_encoder).exists():
            ap.error(f"--pixel-encoder {args.pixel_encoder}: no pixel encoder there (train one with "
                     "`edge train pixel-encoder`)")
        check_run_settings(args, ap)
        try:
            failed = launch(args)
        except RunMismatch as err:
            ap.error(str(err))
        if failed:  # no report over runs that did not train (an earlier report stays as it was)
            print(f"error: {len(failed)} run(s) failed: {', '.join(failed)}; each one's train.log says why. The "
                  "others are kept: fix the cause and rerun to resume (or pass --report to aggregate the runs that exist). "
                  "No report written.", file=sys.stderr)
            return 1
    try:
        res = report(args)
    except RunMismatch as err:
        ap.error(str(err))
    for task, rt in res["tasks"].items():
        print(f"{task}: random {rt['random_policy_success']:.2f}; " + "; ".join(
            f"{m} final {e['final_mean']:.2f} auc {e['auc_first_half'] if e['auc_first_half'] is None else round(e['auc_first_half'], 3)} "
            f"steps->80% {e.get('steps_to_level')}" for m, e in rt["methods"].items())
            + f"; comet/monolithic steps {rt.get('comet_over_monolithic_steps')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
