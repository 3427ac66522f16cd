"""Does a policy keep its competence when it drives an arm through the serial protocol? The shipped stack
VLA (or, with ``--policy comet``, the world-model planner on ``reach`` / ``push``) deployed exactly as
``edge run --arm bridge`` deploys it (:func:`edge.runtime.arm.deploy`: the bridge
driver, IK from the measured joints, proprio from the telemetry, the MCU's deadlines and watchdog) against
an emulated MCU whose joints are the MuJoCo arm (the HIL bench: :class:`drivers.hil_rig.HilBench`, real
time), seen through the simulator's cameras — against the same policy on the simulated arm (``edge run
--clock real``: the runtime steps the simulator itself), both on the real clock, paired by scene seed.

    python benchmarks/bridge_deploy.py --episodes 100 --out benchmarks/results/bridge_deploy.json
    python benchmarks/bridge_deploy.py --policy comet --task reach --episodes 100 --work runs/bridge_comet \
        --out benchmarks/results/bridge_deploy_comet_reach.json

The VLA runs as ``edge run`` runs it (K, C, seam replace, noise temperature 0.5, inference in a thread);
the planner as ``edge run --policy comet --clock real`` runs it (sync: one move per decision, the search
in a worker process on ONNX Runtime, its 40 ms deadline, the workspace mask).

Per seed the two arms run back to back (bridge, then sim), each episode's outcome is appended to
``--work DIR/episodes.jsonl`` as it ends, and a rerun with the same ``--work`` continues where it stopped
(same settings, refused otherwise). An episode succeeds when the task's success condition holds for the
env's hold time (0.5 s for stack; none for reach, as the planner trained) within its length in
control periods (220 for stack, 60 for reach): both arms get the same number of ticks. The cameras
render without pixel noise and the frozen-frame check is off in both arms (a still simulated scene
renders identical frames); everything else is the deployed path. Reported: each arm's successes (95 %
Wilson), bridge − sim per episode (95 % bootstrap interval, exact McNemar p), the bridge runs' stop
reasons, link round trip, ticks and overruns. Writes JSON (machine, command, versions, git).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import fail, whole, writable_file
from edge.telemetry import machine_info, package_versions

CHECKPOINT = "edge/vla/checkpoints/stack"
SEED = 810000  # scene seeds never used for training or selection (the VLA's demonstrations: 0 ...)


def settings(args: argparse.Namespace) -> dict:
    # end: how a bridge run ends (the env's control periods; before, the VLA's ran out its wall-clock duration)
    if args.policy == "comet":
        return {"policy": "comet", "world_model": args.world_model, "plan_simulations": args.plan_simulations,
                "seed": args.seed, "task": args.task, "driver": driver_overrides(args), "end": "periods",
                **mcu_settings(args)}
    return {"checkpoint": args.checkpoint, "num_steps": args.num_steps, "execute": args.execute,
            "seed": args.seed, "task": "stack", "driver": driver_overrides(args), "end": "periods",
            **mcu_settings(args)}


def mcu_settings(args: argparse.Namespace) -> dict:
    """The emulated MCU's overrides, recorded only when given, and its anti-windup in force (new at stop 59:
    a work directory of the firmware before it is not continued)."""
    return {**({"mcu": mcu_overrides(args)} if args.mcu else {}),
            "mcu_windup_reset_rad": bench_mcu(args.seed, mcu_overrides(args)).windup_reset_rad}


def mcu_overrides(args: argparse.Namespace) -> dict:
    """``--mcu KEY=VALUE`` as McuConfig values of the field's type (numbers only; the bench sets the joint
    count and each scene's seed itself)."""
    from dataclasses import fields

    from firmware_bridge.emulator.config import McuConfig

    types = {f.name: f.type for f in fields(McuConfig) if f.type in ("int", "float", int, float)}
    types.pop("n_joints", None)
    types.pop("seed", None)
    out: dict = {}
    for text in args.mcu:
        key, sep, value = text.partition("=")
        if not sep or key not in types:
            fail(f"--mcu {text!r}: give KEY=VALUE with KEY a numeric McuConfig setting other than "
                             "n_joints and seed, e.g. kp_1_s=100")
        try:
            out[key] = int(value) if types[key] in ("int", int) else float(value)
        except ValueError:
            fail(f"--mcu {text!r}: {value!r} is not a{'n integer' if types[key] in ('int', int) else ' number'}")
        if not math.isfinite(out[key]):
            fail(f"--mcu {text!r}: must be finite")
    return out


def bench_mcu(seed: int, overrides: dict | None = None):
    """The HIL bench's emulated MCU for the Panda (8 joints, 2 ms tick, STATE at 100 Hz, 200 ms watchdog,
    +-4 rad), with ``--mcu`` overrides."""
    from firmware_bridge.emulator.config import McuConfig

    return McuConfig(**{"n_joints": 8, "tick_s": 0.002, "state_period_s": 0.01, "watchdog_ms": 200,
                        "hard_q_min_rad": -4.0, "hard_q_max_rad": 4.0, **(overrides or {}), "seed": seed})


def driver_overrides(args: argparse.Namespace) -> dict:
    """``--driver KEY=VALUE`` as numbers (ValueError naming the flag on a malformed one)."""
    out = {}
    for text in args.driver:
        key, sep, value = text.partition("=")
        if not sep:
            raise ValueError(f"--driver {text!r}: give KEY=VALUE, e.g. gripper_speed_m_s=1")
        try:
            out[key] = float(value)
        except ValueError:
            raise ValueError(f"--driver {text!r}: {value!r} is not a number") from None
    return out


def check_driver(args: argparse.Namespace) -> None:
    """The ``--driver`` settings as the bridge arm's config would take them (ValueError naming the flag)."""
    from drivers.bridge_arm import BridgeArmConfig
    from edge.config import from_dict

    overrides = driver_overrides(args)
    try:
        from_dict(BridgeArmConfig, {**overrides, "port": "/dev/null"})
    except ValueError as err:  # ConfigError is one
        raise ValueError(f"--driver {' '.join(args.driver)}: {err}") from None


def runtime_config(args: argparse.Namespace):
    from edge.runtime.config import RuntimeConfig

    if args.policy == "comet":  # as `edge run --policy comet --clock real` builds it
        from edge.commands.run import PLANNER_DEADLINE_MS

        return RuntimeConfig.of(policy="comet", task=args.task, clock="real", inference="process", execution="sync",
                                num_steps=1, execute=1, world_model=args.world_model,
                                plan_simulations=args.plan_simulations, plan_deadline_ms=PLANNER_DEADLINE_MS,
                                plan_backend="onnxruntime", plan_workspace_mask=True, episodes=1, seed=args.seed)
    return RuntimeConfig.of(policy="vla", task="stack", checkpoint=args.checkpoint, clock="real", inference="thread",
                            num_steps=args.num_steps, execute=args.execute, episodes=1, seed=args.seed)


def bridge_episode(cfg, policy, env, seed: int, out: Path, driver: dict, factory=None,
                   mcu_overrides: dict | None = None) -> dict:
    """One scene through the deployed path: the HIL bench's MCU on a pty, the arm = the sim's."""
    from drivers.hil_rig import HilBench
    from drivers.sim_camera import SimCamera
    from edge.runtime.arm import ArmRun, deploy
    from sim.tasks import success_now

    u = env.unwrapped
    env.reset(seed=seed)
    mcu = bench_mcu(seed, mcu_overrides)
    duration_s = (u.max_steps + 10) * u.control_dt_s  # the tick budget below ends it
    held = {"since": None, "success": False, "first": None}

    def succeeded(now: float) -> bool:  # after every tick; True ends the run (success, or the tick budget)
        if held["first"] is None:
            held["first"] = now
        # control periods since the first tick (an overrun skips some, as the simulated arm steps through them)
        periods = round((now - held["first"]) / u.control_dt_s) + 1
        with bench.lock:
            ok = success_now(u.spec_task, u.scene, u.backend, u.tcp_pose()[0] if u.cfg.task == "reach" else None)
        if not ok:
            held["since"] = None
        elif held["since"] is None:
            held["since"] = now
        if held["since"] is not None and now - held["since"] >= u.cfg.hold_s - 1e-9:
            held["success"] = True
        return held["success"] or periods >= u.max_steps

    bench = HilBench(env, mcu).start()
    try:
        cams = tuple(policy.spec.cameras)
        cam = SimCamera(env, bench.lock, cameras=cams, image_size=int(policy.spec.image_hw[0]), noise_std=0.0,
                        max_frozen_s=math.inf, seed=seed)
        cam.warm_up()
        policy.reset()
        res, summary = deploy(cfg, ArmRun(bench.path, {}, duration_s, u.spec_task.instruction, driver), out,
                              observer=cam, policy=policy, policy_factory=factory,
                              confirm=None, stop_when=succeeded, progress=False)
        trace = bench.trace()
    finally:
        bench.close()
    stop = res.get("stop") or res.get("error_type")
    if stop == "on_tick" and not held["success"]:
        stop = "tick_budget"
    return {"seed": seed, "success": held["success"], "stop": stop,
            "error": res.get("error"), "ticks": res.get("ticks"), "seconds": round(res["t_motion_end"] - res["t0"], 3)
            if res.get("t0") else None, "queries": summary.get("queries"), "overruns": summary.get("overruns"),
            "rig_overruns": trace["rig_overruns"], "rtt_p50_ms": _ms(res["link"].get("rtt_p50_s")),
            "rtt_p99_ms": _ms(res["link"].get("rtt_p99_s")), "interventions": summary.get("interventions_total"),
            "latency_p50_ms": summary.get("latency_p50_ms"), "latency_p99_ms": summary.get("latency_p99_ms"),
            "workspace_clips": (res.get("driver_counts") or {}).get("workspace_clip", 0),
            "windup_resets": trace["counters"].get("windup_resets")}


def _ms(s: float | None) -> float | None:
    return None if s is None or not math.isfinite(s) else round(1000 * s, 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=100, help="paired scenes (seeds --seed ...)")
    ap.add_argument("--seed", type=whole(0), default=SEED, help=f"first scene seed (default {SEED})")
    ap.add_argument("--policy", choices=("vla", "comet"), default="vla",
                    help="vla: the VLA on stack; comet: the world-model planner on --task reach or push")
    ap.add_argument("--task", choices=("stack", "reach", "push"), default=None,
                    help="the scene (default: stack for the VLA, reach for the planner)")
    ap.add_argument("--checkpoint", default=CHECKPOINT, help="the VLA")
    ap.add_argument("--world-model", default="", help="--policy comet: the world model (default: the shipped "
                                                      "model for --task)")
    ap.add_argument("--plan-simulations", type=int, default=0,
                    help="--policy comet: simulations per decision (default 0: the model's)")
    ap.add_argument("--num-steps", type=int, default=None,
                    help="--policy vla: denoising steps K (default: edge run's 10)")
    ap.add_argument("--execute", type=int, default=None,
                    help="--policy vla: actions executed per chunk C (default: edge run's 8)")
    ap.add_argument("--driver", action="append", default=[], metavar="KEY=VALUE",
                    help="a drivers.bridge_arm.BridgeArmConfig setting for the bridge arm, e.g. gripper_speed_m_s=1 "
                         "(repeatable; default: none, the driver's defaults)")
    ap.add_argument("--mcu", action="append", default=[], metavar="KEY=VALUE",
                    help="an emulated MCU setting (firmware_bridge.emulator.config.McuConfig), e.g. kp_1_s=100 "
                         "(repeatable; default: none, the bench's)")
    ap.add_argument("--work", default="runs/bridge_deploy", help="per-episode records and run dirs (resumable)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/bridge_deploy.json", help="JSON written")
    args = ap.parse_args(argv)
    args.task = args.task or ("stack" if args.policy == "vla" else "reach")
    if (args.policy == "vla") != (args.task == "stack"):
        ap.error(f"--task {args.task}: --policy {args.policy} runs "
                 + ("--task stack" if args.policy == "vla" else "--task reach or push"))
    if args.mcu:
        try:
            bench_mcu(args.seed, mcu_overrides(args))
        except (TypeError, ValueError) as err:
            ap.error(f"--mcu: {err}")
    if args.policy == "comet" and not 0 <= args.plan_simulations <= 10000:
        ap.error(f"--plan-simulations {args.plan_simulations}: must be in 0..10000 (0 = the model's)")
    if not 1 <= args.episodes <= 10000:
        ap.error(f"--episodes {args.episodes}: must be in 1..10000")
    if args.policy == "vla" and not Path(args.checkpoint).exists():
        ap.error(f"--checkpoint {args.checkpoint}: not found")
    if args.policy == "comet":
        given = [f for f, v in (("--num-steps", args.num_steps), ("--execute", args.execute),
                                ("--checkpoint", args.checkpoint != CHECKPOINT or None)) if v is not None]
        if given:
            ap.error(f"{' / '.join(given)}: for --policy vla only (the planner decides every tick)")
    args.num_steps = 10 if args.num_steps is None else args.num_steps
    args.execute = 8 if args.execute is None else args.execute
    try:
        check_driver(args)
    except ValueError as err:
        ap.error(str(err))
    from edge.config import ConfigError

    try:
        runtime_config(args)
    except ConfigError as err:
        flags = ("--num-steps {0.num_steps} / --execute {0.execute}" if args.policy == "vla" else
                 "--world-model {0.world_model!r} / --plan-simulations {0.plan_simulations}").format(args)
        ap.error(f"{flags} / --seed {args.seed}: {err}")
    if args.policy == "vla":
        from edge.errors import EdgeError
        from edge.runtime.session import checkpoint_spec

        try:
            chunk = int(checkpoint_spec(args.checkpoint).chunk_len)
        except (EdgeError, OSError) as err:
            ap.error(f"--checkpoint {args.checkpoint}: {err}")
        if args.execute > chunk:
            ap.error(f"--execute {args.execute}: at most the checkpoint's chunk of {chunk} actions")
    os.environ.setdefault("MUJOCO_GL", "egl")
    from tqdm import tqdm

    from edge.robot_spec import load_robot_spec
    from edge.runtime.factories import vla_policy
    from edge.runtime.session import build_runtime, session_env
    from edge.stats import paired, wilson

    work = Path(args.work)
    if work.exists() and not work.is_dir():
        ap.error(f"--work {work}: exists and is not a directory; give a directory for the episode records")
    state = work / "settings.json"
    if state.is_file() and json.loads(state.read_text()) != settings(args):
        ap.error(f"--work {work}: holds episodes of other settings ({state.read_text().strip()}); "
                 "choose another --work")
    cfg = runtime_config(args)
    factory = None
    if args.policy == "comet":  # the search runs in a worker process, built there from the factory
        from edge.errors import EdgeError
        from edge.runtime.session import built_policy

        try:
            policy, _, factory = built_policy(cfg)
        except EdgeError as err:
            ap.error(str(err))
        rt = build_runtime(cfg, None)
    else:
        policy = vla_policy(cfg, load_robot_spec(cfg.scene.robot))
        rt = build_runtime(cfg, None, policy=policy)
    # the settings are written once the policy they name has loaded (a bad one leaves --work as it was)
    work.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps(settings(args)))
    log = work / "episodes.jsonl"
    done = {}
    if log.is_file():
        for line in log.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:  # a line cut by a kill: that seed runs again
                continue
            done[(rec["arm"], rec["seed"])] = rec
    env = session_env(cfg, policy)
    seeds = [args.seed + i for i in range(args.episodes)]
    bar = tqdm(seeds, desc="bridge vs sim", unit="seed")
    try:
        with log.open("a", buffering=1) as f:
            for seed in bar:
                if ("bridge", seed) not in done:
                    run = work / f"bridge_{seed}"
                    if run.exists():  # a run cut by a kill: its records are incomplete
                        import shutil

                        shutil.rmtree(run)
                    rec = {"arm": "bridge", **bridge_episode(cfg, policy, env, seed, run, driver_overrides(args),
                                                                   factory, mcu_overrides(args))}
                    f.write(json.dumps(rec) + "\n")
                    done[("bridge", seed)] = rec
                if ("sim", seed) not in done:
                    t = time.perf_counter()
                    ep = rt.run_episode(seed)
                    rec = {"arm": "sim", "seed": seed, "success": bool(ep["success"]), "stop": ep.get("stop_reason"),
                           "ticks": ep.get("ticks"), "seconds": round(time.perf_counter() - t, 3),
                           "overruns": ep.get("overruns"),
                           **{k: ep[k] for k in ("sim_workspace_clips", "decisions", "cut", "simulations", "masked")
                              if k in ep}}
                    f.write(json.dumps(rec) + "\n")
                    done[("sim", seed)] = rec
                n = seeds.index(seed) + 1
                bar.set_postfix(bridge=sum(done[("bridge", s)]["success"] for s in seeds[:n]),
                                sim=sum(done[("sim", s)]["success"] for s in seeds[:n]))
    finally:
        rt.close()
        env.close()
    from benchmarks.wm_runtime_reach import paired as paired_difference

    bridge = [done[("bridge", s)] for s in seeds]
    sim_ = [done[("sim", s)] for s in seeds]
    b, s = [r["success"] for r in bridge], [r["success"] for r in sim_]
    stops: dict[str, int] = {}
    for r in bridge:
        stops[str(r["stop"])] = stops.get(str(r["stop"]), 0) + 1
    pct = lambda xs, q: None if not xs else round(float(np.percentile(xs, q)), 2)  # noqa: E731
    rtt = [r["rtt_p50_ms"] for r in bridge if r.get("rtt_p50_ms") is not None]
    both = [(x["ticks"], y["ticks"]) for x, y in zip(bridge, sim_)
            if x["success"] and y["success"] and x.get("ticks") and y.get("ticks")]
    ticks_to_success = {"bridge_p50": pct([x for x, _ in both], 50), "sim_p50": pct([y for _, y in both], 50),
                        "bridge_over_sim_p50": pct([x / y for x, y in both], 50), "scenes": len(both),
                        "what": "control ticks until the success condition had held the env's hold_s (stack 0.5 s, reach none), on "
                                "the scenes both arms solved"}
    import subprocess
    from dataclasses import asdict

    git = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    res = {"benchmark": "bridge_deploy", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "versions": package_versions(), "git": git, "settings": settings(args), "episodes": len(seeds),
           "mcu_config": {k: v for k, v in asdict(bench_mcu(args.seed, mcu_overrides(args))).items() if k != "seed"},
           "seeds": [seeds[0], seeds[-1]],
           "arms": {"bridge": {"successes": sum(b), "ci95": list(wilson(sum(b), len(b))), "stops": stops,
                               "ticks_p50": pct([r["ticks"] for r in bridge if r.get("ticks")], 50),
                               "overruns_total": sum(r.get("overruns") or 0 for r in bridge),
                               "rig_overruns_total": sum(r.get("rig_overruns") or 0 for r in bridge),
                               "link_rtt_p50_ms_median": pct(rtt, 50),
                               "decision_latency_p50_ms_median": pct([r["latency_p50_ms"] for r in bridge
                                                                      if r.get("latency_p50_ms") is not None], 50),
                               "decision_latency_p99_ms_median": pct([r["latency_p99_ms"] for r in bridge
                                                                      if r.get("latency_p99_ms") is not None], 50)},
                    "sim": {"successes": sum(s), "ci95": list(wilson(sum(s), len(s))),
                            "overruns_total": sum(r.get("overruns") or 0 for r in sim_)}},
           "ticks_to_success": ticks_to_success, "paired": paired(b, s),
           "bridge_minus_sim": paired_difference(b, s, np.random.default_rng(0)),
           "per_episode": {"seed": seeds, "bridge": [int(x) for x in b], "sim": [int(x) for x in s]}}
    d = res["bridge_minus_sim"]
    print(f"bridge {sum(b)}/{len(b)}  sim {sum(s)}/{len(s)}  bridge - sim {d['difference']:+.3f} {d['ci95']}  "
          f"McNemar p {res['paired']['mcnemar_p']:.3g}  bridge stops {stops}  ticks to success p50 bridge / sim "
          f"{ticks_to_success['bridge_p50']} / {ticks_to_success['sim_p50']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
