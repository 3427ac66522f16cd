"""`edge profile`: compare compute schedules and backends on the same seeds — success, NFE,
latency and projected on-device cost — from fresh runs or re-read run directories."""

from __future__ import annotations

import sys
from pathlib import Path

from edge.cli import add_deprecated_alias, add_subparser
from edge.commands._sim_args import SIMS, TASKS


def register(sub) -> None:
    p = add_subparser(sub, "profile", "Profile schedulers x backends: success, NFE, latency, projected device cost.", """
  edge profile --task stack --schedulers fixed:10x8,fixed:2x8 --backends onnxruntime --episodes 5
  edge profile --schedulers fixed:10x8,eqrl --episodes 50 --workers 2 --device orin-nano,agx-orin
  edge profile --runs runs/profile-x/runs --out runs/profile-x2     # re-read run directories
  edge profile --schedulers eqrl:runs/my_adapter,fixed:10x8 --reference fixed:10x8""")
    p.add_argument("--task", default="stack", choices=TASKS, help="task family")
    p.add_argument("--sim", default="mujoco", choices=SIMS, help="physics engine")
    p.add_argument("--checkpoint", default="", metavar="CKPT", help="VLA checkpoint (default: the shipped stack model)")
    p.add_argument("--no-verify", action="store_true", help="skip the checkpoint's sha256 check")
    p.add_argument("--world-model", default="", metavar="DIR",
                   help="comet arms: the world-model checkpoint (default: the shipped model for --task: push3 or reach3)")
    p.add_argument("--schedulers", default=None,
                   help="comma-separated arms: fixed:KxC | dvac[:K] | eqrl[:ADAPTER_DIR] | comet[:N] (the "
                        "world-model planner with N simulations, --task push or reach, one move per decision, sync; "
                        "comet = the model's own number, labelled apart from comet:16) | comet-ahead[:N] (the "
                        "planner async: a decision every tick, searched from after the queued move); either "
                        "with +mask (the workspace mask: comet-ahead+mask:N) and @MS (a decision's deadline in "
                        "ms: comet-ahead:32@40) "
                        "(default fixed:10x8,fixed:2x8; with --runs: every arm found)")
    p.add_argument("--backends", default=None,
                   help="comma-separated: torch, onnxruntime, tensorrt (default onnxruntime); for comet arms, "
                        "what runs the search's model passes (torch or onnxruntime)")
    p.add_argument("--episodes", type=int, default=5, help="episodes per arm (seeds SEED .. SEED+N-1)")
    p.add_argument("--seed", type=int, default=100000,
                   help="first episode seed; episode i uses seed+i (VLA evaluation seeds)")
    p.add_argument("--device", default="all",
                   help="comma-separated target devices for the projections, or all "
                        "(orin-nano, orin-nx, agx-orin, thor, x86-cpu, x86-gpu)")
    p.add_argument("--workers", type=int, default=1, help="processes running arms (or shards) in parallel")
    p.add_argument("--shard-episodes", type=int, default=0,
                   help="episodes per run directory (0 = one run per arm); shards change the noise seed")
    p.add_argument("--runs", nargs="+", default=None, metavar="DIR",
                   help="re-read these run directories (or folders of them) instead of running "
                        "(default: none, run the arms)")
    p.add_argument("--reference", default=None, help="reference arm for relative cost, the paired difference in success and McNemar (default: the first)")
    mode = p.add_argument("--query-mode", default="sync", choices=("sync", "async"),
                          help="as edge run --query-mode; sync, as the K x C grid and the EQRL "
                               "evaluation (comparable with both); comet arms run sync, comet-ahead arms async")
    add_deprecated_alias(p, "--execution", mode)
    p.add_argument("--latency", default="constant", choices=_latency_kinds(),
                   help="how inference latency is charged on the virtual clock (device: the projected "
                        "time on --latency-device; measured: each query's measured time)")
    p.add_argument("--latency-ms", type=float, default=0.0,
                   help="--latency constant: ms charged per query")
    p.add_argument("--latency-device", default="orin-nano", help="--latency device: the target device")
    p.add_argument("--noise-temperature", type=float, default=0.5,
                   help="scale of each query's initial noise (as edge run)")
    p.add_argument("--max-steps", type=int, default=0, help="control steps per episode (0 = task default)")
    p.add_argument("--video-episodes", type=int, default=0, help="save a GIF of the first N episodes per arm")
    p.add_argument("--grid", default=None, help="K x C grid JSON for the Pareto context "
                                                "(default benchmarks/results/vla_grid.json when present)")
    p.add_argument("--no-calibrate", action="store_true",
                   help="skip timing the parts on this host (no measured cost breakdown; planner arms' projections "
                        "then leave out the search tree's bookkeeping)")
    p.add_argument("--out", default=None, help="output directory (default runs/profile-<time>)")
    p.add_argument("--runs-dir", default=None, help="where new run directories go (default OUT/runs)")
    p.set_defaults(func=run)


#: the flags that set up the runs profile makes (with --runs it makes none; --no-verify still applies to
#: the checkpoints whose costs it reads)
_RUN_SETUP = ("--task", "--sim", "--checkpoint", "--world-model", "--episodes", "--seed", "--query-mode",
              "--latency", "--latency-ms", "--latency-device", "--noise-temperature", "--max-steps",
              "--video-episodes", "--workers", "--shard-episodes", "--runs-dir")


def _latency_kinds() -> tuple[str, ...]:
    """The runtime's latency kinds (``clock.latency``)."""
    import dataclasses

    from edge.runtime.config import ClockSettings

    return next(f.metadata["choices"] for f in dataclasses.fields(ClockSettings) if f.name == "latency")


def run(args) -> int:
    from edge.errors import EdgeError
    from edge.profiler.device_model import DEVICES
    from edge.profiler.profile import ProfileConfig, make_arm, profile

    if args.episodes < 1:
        raise EdgeError(f"--episodes={args.episodes} must be >= 1")
    if args.workers < 1:
        raise EdgeError(f"--workers={args.workers} must be >= 1")
    if args.shard_episodes < 0:
        raise EdgeError(f"--shard-episodes={args.shard_episodes} must be >= 0 (0 = one run per arm)")
    given = getattr(args, "non_default", set())
    if args.runs is not None and (setup := [f for f in _RUN_SETUP if f.lstrip("-").replace("-", "_") in given]):
        raise EdgeError(f"{setup[0]}: sets up the runs profile makes; with --runs it re-reads run directories and "
                        "reports their own settings: drop " + " / ".join(setup))
    if "latency_ms" in given and args.latency != "constant":
        raise EdgeError(f"--latency-ms {args.latency_ms:g}: the charge of --latency constant, but --latency is "
                        f"{args.latency!r}; add --latency constant (or drop --latency-ms)")
    if "latency_device" in given and args.latency != "device":
        raise EdgeError(f"--latency-device {args.latency_device}: the device whose time --latency device charges, but "
                        f"--latency is {args.latency!r}; add --latency device (or drop --latency-device; --device "
                        "picks the projections' targets)")
    devices = list(DEVICES) if args.device == "all" else [d.strip() for d in args.device.split(",") if d.strip()]
    for d in devices:
        if d not in DEVICES:
            raise EdgeError(f"--device {d!r}: choose from {', '.join(DEVICES)} or all")
    arms = None  # with --runs and no --schedulers / --backends: every arm found
    if args.runs is None or args.schedulers or args.backends:
        specs = [x.strip() for x in (args.schedulers or "fixed:10x8,fixed:2x8").split(",") if x.strip()]
        backends = [b.strip() for b in (args.backends or "onnxruntime").split(",") if b.strip()]
        arms = [make_arm(spec, b) for spec in specs for b in backends]
        if args.runs is None and any(a.session.get("policy") == "comet" for a in arms):  # running them
            if args.task not in ("push", "reach"):
                raise EdgeError(f"--task {args.task}: comet arms plan the object tasks; profile them with --task push "
                                "or reach")
            if args.latency in ("device", "per_step"):
                raise EdgeError(f"--latency {args.latency}: charges the VLA network's modelled time, not the "
                                "planner's; comet arms take --latency constant or measured")
            if args.latency == "constant" and not args.latency_ms:
                print("note: comet arms are charged no decision time (--latency constant, 0 ms): each move runs "
                      "on the tick it was decided for, however long the search took; add --latency measured to "
                      "charge it as edge run does", file=sys.stderr)
    if args.world_model and not any(a.session.get("policy") == "comet" for a in arms or ()):
        raise EdgeError("--world-model configures comet arms; add --schedulers comet[:N] or drop it")
    if "noise_temperature" in given and arms:
        own = [a.name for a in arms if a.session.get("scheduler") == "eqrl" or a.session.get("policy") == "comet"]
        if len(own) == len(arms):
            raise EdgeError(f"--noise-temperature {args.noise_temperature:g}: scales the VLA's initial noise; every arm "
                            f"draws its own (eqrl: its adapter's; comet: none): drop it")
        if own:
            print(f"note: --noise-temperature {args.noise_temperature:g} applies to the fixed / dvac arms; "
                  f"{', '.join(own)} draw their own noise (eqrl: the adapter's; comet: none)", file=sys.stderr)
    if args.checkpoint and not Path(args.checkpoint).exists():
        raise EdgeError(f"--checkpoint {args.checkpoint}: not found (a VLA checkpoint directory from "
                        "`edge train vla`, or its model.pt; default: the shipped stack model)")
    pc = ProfileConfig(task=args.task, sim=args.sim, checkpoint=args.checkpoint, episodes=args.episodes,
                       world_model=args.world_model,
                       seed=args.seed, execution=args.query_mode, latency=args.latency, latency_ms=args.latency_ms,
                       latency_device=args.latency_device,
                       noise_temperature=args.noise_temperature, max_steps=args.max_steps,
                       video_episodes=args.video_episodes, verify=not args.no_verify)
    from edge.commands._out import check_writable_dir, make_default_run_dir

    if args.out:
        check_writable_dir(args.out)
    if arms and args.reference is not None:  # the arms to run are known: a reference among none of them fails now
        from edge.profiler.profile import reference_name

        reference_name(arms, args.reference)
    out = Path(args.out) if args.out else make_default_run_dir("profile-")[0]  # made once the checks passed
    if not args.runs and (out / "summary.json").exists():  # re-reading runs (--runs) may rewrite a report
        raise EdgeError(f"--out {out}: holds another profile's report (summary.json); choose a new --out, "
                        "or re-read runs into it with --runs")
    res = profile(pc, arms, out, devices, runs=args.runs or (), workers=args.workers,
                  runs_dir=Path(args.runs_dir) if args.runs_dir else None, reference=args.reference,
                  calibrate=not args.no_calibrate, grid=args.grid, shard_episodes=args.shard_episodes,
                  command=" ".join(["edge", *sys.argv[1:]]) if sys.argv else "edge profile")
    import json

    from edge.profiler.profile import difference_text

    summary = json.loads(res["summary"].read_text())
    width = max([32, *(len(a["name"]) for a in summary["arms"])])
    for a in summary["arms"]:
        p = a["paired_vs_reference"]
        print(f"{a['name']:{width}s} success {a['successes']}/{a['episodes']} "
              f"[{a['ci95'][0]:.2f}, {a['ci95'][1]:.2f}]  NFE/action {a['nfe_per_action'] or 0:.3f}  "
              f"rel {a['relative_nfe_per_action'] or 0:.2f}  vs ref {difference_text(p)}  McNemar p {p['mcnemar_p']:.3f}")
    print(f"wrote {res['html']}, {res['md']}, {res['summary']}")
    return 0
