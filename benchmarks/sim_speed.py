"""Simulator speed, side by side for MuJoCo and PyBullet (issue 2 targets on a 2-core CPU: MuJoCo
>= 500 control steps/s without rendering and >= 500 frames/s at 96x96).

    python benchmarks/sim_speed.py [--out benchmarks/results/sim_speed.json] [--episodes 10]
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

import sim  # noqa: E402
from sim.rollout import expert_episode  # noqa: E402


def rate(fn, n: int) -> float:
    fn()  # warm-up
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t)


def measure(sim_name: str, episodes: int) -> dict:
    env = sim.make_env("stack", sim=sim_name, render_images=False)
    env.reset(seed=0)
    b = env.backend
    rng = np.random.default_rng(0)
    acts = rng.uniform(-0.005, 0.005, (4000, 5)).astype(np.float32)
    acts[:, 4] = 0.0
    it = iter(acts)
    out = {
        "physics_steps_per_s": rate(lambda: b.step(1), 5000),
        "control_steps_per_s_no_render": rate(lambda: env.step(next(it)), 1000),
        "substeps_per_control_step": env.n_substeps,
    }
    for size in (96, 224):
        out[f"render_fps_{size}"] = rate(lambda: b.render("front", size, size), 300 if size == 96 else 100)
    env_r = sim.make_env("stack", sim=sim_name)
    env_r.reset(seed=0)
    it2 = iter(acts)
    out["control_steps_per_s_with_96px_render"] = rate(lambda: env_r.step(next(it2)), 300)
    t = time.perf_counter()
    succ = sum(expert_episode(env, 500 + i, keep_frames=False)["success"] for i in range(episodes))
    out["expert_episodes_per_min"] = 60 * episodes / (time.perf_counter() - t)
    out["expert_episodes_measured"] = episodes
    out["expert_successes"] = succ
    env.close()
    env_r.close()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/sim_speed.json")
    ap.add_argument("--episodes", type=int, default=10)
    a = ap.parse_args()
    res = {"machine": {"platform": platform.platform(), "python": sys.version.split()[0],
                       "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                       "load_avg_at_start": os.getloadavg()},
           "command": " ".join([sys.executable.split("/")[-1], *sys.argv]),
           "mujoco_renderer": f"MUJOCO_GL={os.environ['MUJOCO_GL']}, collision-hull render model, no shadows/reflections/MSAA",
           "pybullet_renderer": "TinyRenderer (DIRECT), collision-hull render model"}
    for s in ("mujoco", "pybullet"):
        res[s] = measure(s, a.episodes)
        print(s, json.dumps(res[s], indent=1), flush=True)
    res["ratio_mujoco_over_pybullet"] = {k: res["mujoco"][k] / res["pybullet"][k] for k in res["mujoco"]
                                         if isinstance(res["mujoco"][k], float) and res["pybullet"].get(k)}
    res["targets"] = {"mujoco_control_steps_per_s_no_render>=500": res["mujoco"]["control_steps_per_s_no_render"] >= 500,
                      "mujoco_render_fps_96>=500": res["mujoco"]["render_fps_96"] >= 500}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res["targets"]))
