"""`edge run`: the main job.

Until the on-robot runtime (control loop + shipped VLA) lands, the default scene is run with the
scripted expert: MuJoCo ``stack`` episodes with a progress bar, a results table, and a run
directory holding ``report.json`` and an animated GIF of the first episode.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from edge.cli import add_subparser
from edge.commands._sim_args import add_env_args, make_env


def register(sub) -> None:
    p = add_subparser(sub, "run", "Run the default scene (MuJoCo stack) and write a run directory.", """
  edge run                                   # 3 stack episodes in MuJoCo, report + GIF in runs/
  edge run --task pick_place --sim pybullet --episodes 5 --out runs/pp""")
    add_env_args(p, episodes=3)
    p.add_argument("--policy", default="expert", choices=("expert",),
                   help="who acts (the VLA policy arrives with the runtime issue)")
    p.add_argument("--out", default=None, help="run directory (default runs/<timestamp>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import imageio.v2 as imageio
    from tqdm import tqdm

    from sim.rollout import expert_episode

    out = Path(args.out or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(f"cannot create run directory {out}: {err.strerror}") from None
    env = make_env(args)
    rows = []
    for i in tqdm(range(args.episodes), desc=f"run {args.task}/{args.sim}", unit="ep"):
        t0 = time.perf_counter()
        ep = expert_episode(env, args.seed + i, keep_frames=True)
        rows.append({"seed": args.seed + i, "instruction": ep["instruction"], "success": ep["success"],
                     "steps": ep["steps"], "sim_time_s": ep["steps"] * env.unwrapped.control_dt_s,
                     "wall_s": time.perf_counter() - t0})
        if i == 0:
            imageio.mimsave(out / "episode0.gif", list(ep["front"][::2]), duration=0.1, loop=0)
    env.close()
    report = {"task": args.task, "sim": args.sim, "policy": args.policy, "episodes": rows,
              "success_rate": sum(r["success"] for r in rows) / len(rows)}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(f"\n{'seed':>5}  {'success':>7}  {'steps':>5}  {'wall s':>6}  instruction")
    for r in rows:
        print(f"{r['seed']:>5}  {str(r['success']):>7}  {r['steps']:>5}  {r['wall_s']:>6.1f}  {r['instruction']}")
    print(f"success {report['success_rate']:.0%} over {len(rows)} episodes; run directory: {out} "
          f"(report.json, episode0.gif)")
    return 0
