"""`edge run`: the main job — the default scene (MuJoCo ``stack``) driven by the shipped VLA through
the on-robot runtime (control loop, inference worker, action queue, safety supervisor, telemetry).

``--policy expert`` runs the scripted expert instead (no runtime loop; a reference and a fallback
when no checkpoint is available).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from edge.cli import add_subparser
from edge.commands._session import DEFAULT_CHECKPOINT
from edge.commands._sim_args import add_env_args, make_env


def register(sub) -> None:
    p = add_subparser(sub, "run", "Run the default scene (MuJoCo stack, shipped VLA) and write a run directory.", """
  edge run                                           # 3 stack episodes, shipped VLA, virtual clock
  edge run --episodes 20 --num-steps 5 --execute 8   # fewer denoising steps per query
  edge run --clock real --backend torch              # wall-clock loop, inference in a thread
  edge run --scheduler dvac --seam weighted
  edge run --latency constant --latency-ms 100       # what happens at 100 ms inference latency
  edge run --policy expert --task pick_place --sim pybullet""")
    add_env_args(p, episodes=3)
    p.set_defaults(seed=100000)
    p.add_argument("--policy", default="auto", choices=("auto", "vla", "expert"),
                   help="who acts; auto = the VLA if the checkpoint exists, else the scripted expert")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), help="VLA checkpoint or ONNX export dir")
    p.add_argument("--backend", default="onnxruntime", choices=("torch", "onnxruntime", "tensorrt"))
    p.add_argument("--scheduler", default="fixed", choices=("fixed", "dvac"))
    p.add_argument("--num-steps", type=int, default=10, help="denoising steps K per query")
    p.add_argument("--execute", type=int, default=8, help="actions executed per chunk C")
    p.add_argument("--seam", default="replace", choices=("replace", "weighted", "rtc"))
    p.add_argument("--noise-temperature", type=float, default=0.5,
                   help="scale of each query's initial noise (1 = as trained, 0 = deterministic; "
                        "default 0.5: measured best with the shipped VLA)")
    p.add_argument("--rtc-soft-steps", type=int, default=-1,
                   help="rtc: queued actions after the frozen ones that are softly guided "
                        "(-1 = all, as the RTC paper; 0 = only the frozen ones)")
    p.add_argument("--execution", default="async", choices=("async", "sync"))
    p.add_argument("--clock", default="virtual", choices=("virtual", "real"))
    p.add_argument("--inference", default="auto", choices=("auto", "thread", "process", "inline"),
                   help="where queries run: auto = inline on the virtual clock, a thread on the real "
                        "one; process = a separate worker process (no GIL contention with the loop)")
    p.add_argument("--latency", default="measured", choices=("measured", "constant", "per_step"),
                   help="virtual clock: how inference latency is charged")
    p.add_argument("--latency-ms", type=float, default=0.0, help="--latency constant: ms per query")
    p.add_argument("--driver", default="sim", choices=("sim",),
                   help="robot driver (the firmware-bridge arm is used by `edge hil`)")
    p.add_argument("--out", default=None, help="run directory (default runs/<timestamp>)")
    p.set_defaults(func=run)


def _run_dir(args: argparse.Namespace) -> Path:
    out = Path(args.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(f"cannot create run directory {out}: {err.strerror}") from None
    return out


def run(args: argparse.Namespace) -> int:
    if args.policy == "auto":
        args.policy = "vla" if Path(args.checkpoint).exists() else "expert"
        if args.policy == "expert":
            print(f"no VLA checkpoint at {args.checkpoint}: running the scripted expert instead")
    if args.policy == "expert":
        return run_expert(args)
    from edge.commands._session import SessionConfig, run_session
    from edge.errors import EdgeError
    from edge.telemetry import format_summary

    if not Path(args.checkpoint).exists():
        raise EdgeError(f"checkpoint {args.checkpoint} not found; train one with `edge train vla` "
                        "or run the scripted expert with `edge run --policy expert`")
    cfg = SessionConfig(task=args.task, sim=args.sim, distribution=args.distribution, n_blocks=args.n_blocks,
                        checkpoint=args.checkpoint, backend=args.backend, scheduler=args.scheduler,
                        num_steps=args.num_steps, execute=args.execute, seam=args.seam,
                        rtc_soft_steps=args.rtc_soft_steps, noise_temperature=args.noise_temperature,
                        execution=args.execution, clock=args.clock, inference=args.inference,
                        latency=args.latency,
                        latency_ms=args.latency_ms, episodes=args.episodes, seed=args.seed)
    out = _run_dir(args)
    res = run_session(cfg, out)
    print()
    print(format_summary(res.summary))
    print(f"\nrun directory: {out} (ticks.jsonl, queries.jsonl, episodes.jsonl, summary.json, episode0.gif)")
    return 0


def run_expert(args: argparse.Namespace) -> int:
    import imageio.v2 as imageio
    from tqdm import tqdm

    from sim.rollout import expert_episode

    out = _run_dir(args)
    env = make_env(args)
    rows = []
    for i in tqdm(range(args.episodes), desc=f"expert {args.task}/{args.sim}", unit="ep"):
        t0 = time.perf_counter()
        ep = expert_episode(env, args.seed + i, keep_frames=True)
        rows.append({"seed": args.seed + i, "instruction": ep["instruction"], "success": ep["success"],
                     "steps": ep["steps"], "wall_s": time.perf_counter() - t0})
        if i == 0:
            imageio.mimsave(out / "episode0.gif", list(ep["front"][::2]), duration=0.1, loop=0)
    env.close()
    report = {"task": args.task, "sim": args.sim, "policy": "expert", "episodes": rows,
              "success_rate": sum(r["success"] for r in rows) / len(rows)}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(f"\n{'seed':>6}  {'success':>7}  {'steps':>5}  {'wall s':>6}  instruction")
    for r in rows:
        print(f"{r['seed']:>6}  {r['success']!s:>7}  {r['steps']:>5}  {r['wall_s']:>6.1f}  {r['instruction']}")
    print(f"success {report['success_rate']:.0%} over {len(rows)} episodes; run directory: {out}")
    return 0
