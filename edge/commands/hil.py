"""`edge hil`: hardware-in-the-loop fault scenarios through the full stack.

Runtime loop + safety + firmware-bridge driver + serial link (pty) + fault proxy + emulated MCU whose
joints are the MuJoCo arm, in real time. Each scenario (``configs/hil/<name>.yaml``) injects one
fault, states the expected safe behaviour and is judged on the recorded trace; the report is a
Markdown + JSON table (scenario, fault, expected, observed, time-to-safe, pass).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from edge.cli import add_subparser

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
#: the host runtime's config sections ``edge hil --set`` reaches (edge.runtime.config.RuntimeConfig)
RUNTIME_SECTIONS = ("scheduler", "worker", "queue", "loop", "safety")


def register(sub) -> None:
    p = add_subparser(sub, "hil", "Run HIL fault scenarios (emulated MCU on a pty, MuJoCo physics) and write a report.", """
  edge hil --list                              # the scenario catalogue (configs/hil/*.yaml)
  edge hil --scenario link_cut                 # one scenario; run dir runs/hil-<time>/
  edge hil --scenario bit_flip --scenario nan_action --out runs/hil-smoke
  edge hil --all --out runs/hil --publish      # whole catalogue; copy the report to benchmarks/results/
  edge hil --all --policy replay               # the replayed scripted expert instead of the shipped VLA
  edge hil --scenario link_cut --set watchdog_ms=400   # the same fault on a rig with a slower watchdog""")
    p.add_argument("--scenario", action="append", default=[], metavar="NAME",
                   help="scenario name (repeatable; default: none, give --all or --scenario); a "
                        "sweep's rows are selected by its base name")
    p.add_argument("--all", action="store_true", help="run the whole catalogue")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--out", default=None, help="run directory, new or empty (default: runs/hil-<timestamp>)")
    p.add_argument("--catalogue", default=None, help="scenario directory (default configs/hil)")
    p.add_argument("--policy", default="auto", choices=("auto", "replay", "vla"),
                   help="replay = the scripted expert replayed as chunks; vla = the shipped checkpoint; "
                        "auto = vla if the checkpoint exists")
    p.add_argument("--checkpoint", default=None, metavar="CKPT",
                   help="VLA checkpoint (default edge/vla/checkpoints/stack)")
    p.add_argument("--publish", action="store_true",
                   help="also write hil_report.{md,json} to benchmarks/results/")
    p.add_argument("--config", metavar="YAML", default=None,
                   help="rig settings (keys of HilRigConfig, e.g. watchdog_ms) applied on top of the "
                        "catalogue's rig.yaml (default: none)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one rig setting after --config, e.g. --set watchdog_ms=300, or a "
                        "setting of the host runtime's worker, queue, loop or safety section, e.g. "
                        "--set safety.stale_s=0.3 (repeatable; default: none)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge.hil.harness import (
        CATALOGUE_DIR,
        HilContext,
        load_catalogue,
        load_rig,
        run_scenario,
    )
    from edge.hil.report import harness_failure, write_report
    from edge.runtime.session import DEFAULT_CHECKPOINT
    from edge.errors import EdgeError
    from edge.telemetry import machine_info

    from edge.config import ConfigError

    catalogue = Path(args.catalogue) if args.catalogue else CATALOGUE_DIR
    if not catalogue.is_dir():
        raise EdgeError(f"--catalogue {catalogue}: " + ("a file; give the scenario directory (its *.yaml files)"
                                                       if catalogue.exists() else "no such scenario directory"))
    try:
        scenarios = load_catalogue(catalogue)
    except (ConfigError, ValueError, OSError) as err:
        raise EdgeError(f"--catalogue {catalogue}: {_one_line(err)}") from None
    if args.list and (args.all or args.scenario):
        raise EdgeError("--list lists the whole catalogue and runs nothing; drop --all / --scenario")
    if args.list:
        for sc in scenarios:
            print(f"{sc.name:<28} {sc.fault}")
        return 0
    if args.all == bool(args.scenario):
        raise EdgeError("give either --all or --scenario NAME (see --list)")
    if args.scenario:
        known = {sc.name.split("@")[0] for sc in scenarios}
        missing = [n for n in args.scenario if n.split("@")[0] not in known]
        if missing:
            raise EdgeError(f"--scenario {missing[0]}: unknown; known: {', '.join(sorted(known))}")
        rows = {sc.name for sc in scenarios}
        missing = [n for n in args.scenario if "@" in n and n not in rows]
        if missing:  # a sweep's row by its full name: it must be one of the sweep's rows
            base = missing[0].split("@")[0]
            raise EdgeError(f"--scenario {missing[0]}: no such row of {base}; its rows: "
                            f"{', '.join(r for r in sorted(rows) if r.split('@')[0] == base)} (or {base} for all)")
        scenarios = [sc for sc in scenarios if sc.name in args.scenario or sc.name.split("@")[0] in args.scenario]
    checkpoint = Path(args.checkpoint) if args.checkpoint else DEFAULT_CHECKPOINT
    policy = args.policy
    if args.checkpoint and policy == "replay":
        raise EdgeError(f"--checkpoint {args.checkpoint}: --policy replay replays the scripted expert and loads no "
                        "checkpoint; drop --checkpoint (or use --policy vla)")
    if args.checkpoint and not checkpoint.exists() and policy != "replay":  # a path given must exist
        raise EdgeError(f"--checkpoint {args.checkpoint}: not found; give a VLA checkpoint from `edge train vla`, "
                        "or drop --checkpoint (the shipped one), or use --policy replay")
    if policy == "auto":  # only the shipped default may be missing (a package without it): replay then
        policy = "vla" if checkpoint.exists() else "replay"
    elif policy == "vla" and not checkpoint.exists():
        raise EdgeError(f"checkpoint {checkpoint} not found; train one with `edge train vla` or use --policy replay")
    rig = load_rig(catalogue)
    # --set KEY=V: a rig key, or a dotted key of the host runtime's sections (safety.stale_s=0.3)
    runtime_sets = [s for s in args.set if s.split("=", 1)[0].split(".")[0] in RUNTIME_SECTIONS]
    rig_sets = [s for s in args.set if s not in runtime_sets]
    for s_ in runtime_sets:  # the host runs the fixed schedule: only its section is read
        key = s_.split("=", 1)[0]
        if key.startswith("scheduler.") and not key.startswith("scheduler.fixed.") and s_ != "scheduler.kind=fixed":
            raise EdgeError(f"--set {s_}: the HIL host runs the fixed schedule (K, C from the rig: execute, "
                            "chunk_len), so only scheduler.fixed.* applies; drop it")
    if args.config and not Path(args.config).is_file():
        raise EdgeError(f"--config {args.config}: " + ("a directory; give a rig settings file (YAML)"
                                                      if Path(args.config).is_dir() else "no such file"))
    if args.config or rig_sets:
        from edge.config import layer_config

        try:
            rig = layer_config(rig, args.config, rig_sets)
        except ConfigError as err:
            msg = _one_line(err)
            raise EdgeError("--config " + msg.removeprefix("config file ") if msg.startswith("config file ")
                            else msg) from None
    if runtime_sets:
        from edge.runtime.config import load_runtime_config

        load_runtime_config(None, None, runtime_sets)  # a bad key or value stops here, before anything runs
    if rig.execute > rig.chunk_len:
        raise EdgeError(f"execute={rig.execute}: more actions per chunk than the chunk holds (chunk_len "
                        f"{rig.chunk_len}); set execute <= chunk_len")
    if runtime_sets:  # the host's settings nothing in it would read (after the rig's own checks)
        from edge.hil.host import HostSpec, host_config
        from edge.runtime.config import unread_settings

        vla = policy == "vla"  # the host's schedule and seam as edge.hil.harness sets them (a VLA: rtc)
        spec = HostSpec(port="", out_dir="", chunk_len=rig.chunk_len, execute=rig.execute, num_steps=10 if vla else 1,
                        seam="rtc" if vla else "replace")
        base, host = host_config(spec), host_config(dataclasses.replace(spec, runtime=list(runtime_sets)))
        unread = unread_settings(host, base=base)
        if not vla:  # the replayed expert: no denoising steps or initial noise
            changed = {k for k, v in host.dotted().items() if base.dotted().get(k) != v}
            unread += [(k, "the replayed expert runs no denoising steps and draws no noise", "drop it")
                       for k in ("scheduler.fixed.num_steps", "worker.noise_temperature") if k in changed]
        for path, why, _ in unread:
            raise EdgeError(f"--set {path}={host.dotted()[path]}: {why} (the HIL host: real clock, inference in "
                            "a thread); drop it")
    from edge.robot_spec import load_robot_spec

    try:
        robot = load_robot_spec(rig.robot)
    except (ConfigError, ValueError, OSError) as err:
        raise EdgeError(f"robot={rig.robot}: {_one_line(err)}") from None
    period_ms = 1000.0 * robot.period_s
    if rig.watchdog_ms <= period_ms:  # the host sends one command per period: the watchdog would fire between
        raise EdgeError(f"watchdog_ms={rig.watchdog_ms}: not longer than the {robot.name} control period "
                        f"({period_ms:g} ms); the MCU would fault between two commands: set watchdog_ms > {period_ms:g}")
    if policy == "vla":
        _check_vla(checkpoint, rig)
    if args.publish and not args.all:
        raise EdgeError("--publish writes the committed catalogue report; use it with --all")
    if args.publish and not RESULTS_DIR.is_dir():
        raise EdgeError(f"--publish writes the source checkout's {RESULTS_DIR}, which this installation has not; "
                        "run it from a checkout of the project")
    if args.publish and (args.config or args.set):
        raise EdgeError("--publish writes the committed catalogue report, which runs on the catalogue's "
                        "rig.yaml; drop --config/--set or --publish")
    from edge.commands._out import check_writable_dir, make_default_run_dir

    out = Path(args.out) if args.out else make_default_run_dir("hil-")[0]

    check_writable_dir(out)
    if out.is_dir() and any(out.iterdir()):  # two runs' traces and reports never mix
        raise EdgeError(f"--out {out}: not empty (another run's files are there); choose a new or empty --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EdgeError(f"cannot create run directory {out}: {err.strerror}; choose another --out") from None

    ctx = HilContext(rig, policy=policy, checkpoint=str(checkpoint), runtime=tuple(runtime_sets))
    rows = []
    t_start = time.perf_counter()
    print(f"HIL: {len(scenarios)} scenario runs, policy {policy}, run directory {out}")
    interrupted = None  # the scenario a Ctrl-C stopped (its arm stopped under control; its trace is kept)
    from edge.runtime.arm import operator_signals

    try:
        with operator_signals():  # SIGTERM (a supervisor's stop) as Ctrl-C: the arm stops under control
            for sc in scenarios:
                t = time.perf_counter()
                try:
                    row = run_scenario(sc, ctx, out / sc.name.replace("@", "_"))
                except KeyboardInterrupt:
                    interrupted = sc.name
                    break
                except EdgeError:
                    raise
                except Exception as err:  # noqa: BLE001 - a harness failure fails this row, the rest still run
                    row = harness_failure(sc, err)
                rows.append(row)
                tts = "-" if row["time_to_safe_s"] is None else f"{row['time_to_safe_s'] * 1000:.0f} ms"
                print(f"  {'pass' if row['pass'] else 'FAIL'}  {sc.name:<26} time-to-safe {tts:>7}  "
                      f"({time.perf_counter() - t:.1f} s)", flush=True)
                for k, v in row["failed"].items():
                    print(f"        {k}: {v}")
    finally:
        ctx.close()
    import shlex

    meta = {
        "command": "edge " + shlex.join(args.argv),
        "policy": policy,
        "rig": dataclasses.asdict(rig),
        "rig_summary": (f"control 20 Hz (T = 50 ms), MCU watchdog W = {rig.watchdog_ms} ms, tick "
                        f"{rig.mcu_tick_s * 1000:g} ms, STATE {rig.mcu_state_hz:g} Hz, command validity "
                        f"{rig.command_valid_for_s * 1000:g} ms, host telemetry-age limit "
                        f"{rig.state_timeout_s * 1000:g} ms, {rig.sim} physics in real time over a pty; "
                        f"bounds get +{rig.margin_s * 1000:g} ms scheduling margin; policy: {policy}"),
        "machine": machine_info(),
        "notes": _notes(policy, checkpoint, rig),
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    if interrupted is not None:
        meta["notes"].append(f"interrupted (Ctrl-C or SIGTERM) in scenario {interrupted}: {len(rows)} of {len(scenarios)} "
                             "scenario runs finished and are reported; the interrupted one's host and MCU traces (host/, bench.json) "
                             "are in its folder, not judged")
        md, _ = write_report(rows, out, meta)
        print(f"\ninterrupted in {interrupted}: {len(rows)} of {len(scenarios)} scenario runs finished "
              f"({sum(r['pass'] for r in rows)} pass); report {md} (not published)", file=sys.stderr)
        return 130
    md, _ = write_report(rows, out, meta)
    if args.publish:
        write_report(rows, RESULTS_DIR, meta)
        print(f"published to {RESULTS_DIR}/hil_report.md")
    passed = sum(r["pass"] for r in rows)
    print(f"\n{passed}/{len(rows)} pass in {meta['wall_s']} s; report {md}")
    return 0 if passed == len(rows) else 1


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _check_vla(checkpoint: Path, rig) -> None:
    """The VLA the host will run, checked before anything is written: a verified checkpoint whose
    chunk holds the rig's C, in a scene with its cameras."""
    from edge.errors import EdgeError
    from edge.vla.checkpoint import read_payload
    from edge.vla.spec import ModelSpec
    from edge.vla.verify import NO_VERIFY_HINT

    try:
        spec = ModelSpec.from_dict(read_payload(checkpoint, verify=True)["spec"])
    except (EdgeError, OSError, KeyError, TypeError, ValueError) as err:
        why = _one_line(err).replace("; " + NO_VERIFY_HINT, "").replace(", or " + NO_VERIFY_HINT, "")
        hint = "" if "edge train vla" in why else "; give a VLA checkpoint from `edge train vla`"
        raise EdgeError(f"--checkpoint {checkpoint}: {why}{hint} (edge hil loads only verified checkpoints), "
                        "or use --policy replay") from None
    if rig.execute > spec.chunk_len:
        raise EdgeError(f"execute={rig.execute}: the VLA's chunks hold {spec.chunk_len} actions ({checkpoint}); "
                        f"set execute <= {spec.chunk_len}")
    if rig.sim == "pybullet" and "wrist" in spec.cameras:
        raise EdgeError("sim=pybullet: the HIL rig's PyBullet scene renders no wrist camera, which the VLA "
                        f"reads ({checkpoint}); run it on mujoco, or use --policy replay")


def _notes(policy: str, checkpoint: Path, rig) -> list[str]:
    """Facts a reader of the report needs: which policy, and how the clock and CPU were shared."""
    import json

    notes = []
    if policy == "vla":
        manifest = checkpoint / "manifest.json"
        info = json.loads(manifest.read_text()) if manifest.is_file() else {}
        try:
            where = checkpoint.resolve().relative_to(RESULTS_DIR.parents[1])
        except ValueError:
            where = checkpoint
        notes.append(f"policy: VLA {where} (onnxruntime, 1 thread; manifest step {info.get('step')}/"
                     f"{info.get('steps')}, complete={info.get('complete')}); host-subprocess scenarios "
                     "(host_sigint, host_sigterm, host_sigkill) replay the scripted expert")
    else:
        notes.append("policy: the scripted expert (sim.experts) recorded on the scene and replayed as timed "
                     "action chunks (open loop)")
    notes.append("real time: MCU emulator (tick %g ms), fault proxy and %s physics on one service thread, host "
                 "loop at 20 Hz on the same 2-core machine; rig_overruns in the JSON counts late service "
                 "ticks (caught up in firmware time)" % (rig.mcu_tick_s * 1000,
                                                         {"mujoco": "MuJoCo", "pybullet": "PyBullet"}[rig.sim]))
    return notes
