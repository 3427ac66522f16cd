"""Simulator speed, side by side: MuJoCo and PyBullet through the project's env, and peer
simulators (panda-gym, robosuite) in their own virtualenvs, interleaved in the same minutes.

    python benchmarks/sim_speed.py                                   # the project's sims only
    python benchmarks/sim_speed.py --peer panda-gym=/tmp/pg/bin/python --peer robosuite=/tmp/rs/bin/python

Each peer runs its speed script from ``--anchors`` (``../shared/anchors/`` next to the
repository, or ``$EDGE_ANCHORS``; see its README for the virtualenvs) in a subprocess. The rounds
alternate project / peer / project ..., so the machine's load hits both; the JSON stores every
round, the medians, the ratios per round (the figure to read: absolute rates on a shared machine
move by 2x between hours) and the load average before and after.

Targets (issue 23): MuJoCo control steps/s without rendering >= 2x panda-gym PandaStack;
with the VLA's cameras (front + wrist, 96x96) >= 300 steps/s; PyBullet >= panda-gym.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sim  # noqa: E402
from edge.argtypes import fail, writable_file  # noqa: E402
from edge.telemetry import machine_info  # noqa: E402
from sim.env import EnvConfig  # noqa: E402
from sim.rollout import expert_episode  # noqa: E402

SIMPLIFIED_CELL_M = 0.01  # env.render_mesh_cell_m of the "simplified meshes" figures
PEER_SCRIPTS = {"panda-gym": "panda_gym_speed.py", "robosuite": "robosuite_speed.py"}
# a peer script's figures: "<label> control steps/s ...: 497" / "render 96x96 Tiny fps: 20.0"
_FIGURE = re.compile(r"^(?P<label>[^:\n]*(?:steps/s|fps)[^:\n]*):\s*(?P<value>[0-9.]+)", re.MULTILINE)


def rate(fn, n: int, repeats: int = 3) -> float:
    """Best of ``repeats`` timings of ``n`` calls (calls per second); one warm-up call first."""
    fn()
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = max(best, n / (time.perf_counter() - t))
    return best


def _stepper(env, n: int, read_every: int = 0):
    """A closure stepping ``env`` with small random end-effector actions (reset on episode end);
    ``read_every`` > 0: read the cameras of every that-many-th observation (a lazily rendering env)."""
    rng = np.random.default_rng(0)
    acts = rng.uniform(-0.005, 0.005, (n, 5)).astype(np.float32)
    acts[:, 4] = 0.0
    i = 0

    def step():
        nonlocal i
        obs, _, term, trunc, _ = env.step(acts[i % n])
        i += 1
        if read_every and i % read_every == 0:
            obs["front"], obs["wrist"]  # noqa: B018 - the read renders them
        if term or trunc:
            env.reset(seed=i)
    return step


def parse_sim(spec: str) -> tuple[str, float]:
    """``mujoco`` / ``pybullet`` (the engine's default physics step) or ``NAME:DT`` (``physics_dt_s``)."""
    name, _, dt = spec.partition(":")
    try:
        step = float(dt) if dt else 0.0
    except ValueError:
        step = -1.0
    if name not in ("mujoco", "pybullet") or not (math.isfinite(step) and step >= 0):
        fail(f"--sims {spec!r}: expected mujoco or pybullet, optionally with :PHYSICS_DT_S (e.g. pybullet:0.002)")
    try:
        EnvConfig(sim=name, physics_dt_s=step)
    except ValueError as err:
        fail(f"--sims {spec!r}: {err}")
    return name, step


def measure_project(sim_spec: str, quick: bool = False) -> dict:
    """Control steps/s of the project's stack env: no images, the VLA's two 96x96 cameras, one camera."""
    n = 200 if quick else 1000
    sim_name, dt = parse_sim(sim_spec)
    sim_kw = {"sim": sim_name, "physics_dt_s": dt}
    env = sim.make_env("stack", render_images=False, **sim_kw)
    env.reset(seed=0)
    b = env.unwrapped.backend
    out = {"physics_control_steps_per_s": rate(lambda: b.step(env.unwrapped.n_substeps), n),
           "control_steps_per_s_no_render": rate(_stepper(env, 4 * n), n),
           "substeps_per_control_step": env.unwrapped.n_substeps,
           "physics_step_s": env.unwrapped.cfg.physics_step_s}
    env.close()
    for cams, key in ((True, "control_steps_per_s_front_wrist_96px"), (False, "control_steps_per_s_front_96px")):
        env = sim.make_env("stack", wrist_camera=cams, **sim_kw)
        env.reset(seed=0)
        out[key] = rate(_stepper(env, n), max(20, n // 10))
        if cams:
            backend = env.unwrapped.backend
            out["render_fps_96"] = rate(lambda: backend.render("front", 96, 96), max(20, n // 5))  # noqa: B023
        env.close()
    if sim_name == "mujoco":  # the same two cameras with the robot's meshes simplified for rendering
        env = sim.make_env("stack", wrist_camera=True, render_mesh_cell_m=SIMPLIFIED_CELL_M, **sim_kw)
        env.reset(seed=0)
        out["control_steps_per_s_front_wrist_96px_simplified_meshes"] = rate(_stepper(env, n), max(20, n // 10))
        backend = env.unwrapped.backend
        out["render_fps_96_simplified_meshes"] = rate(lambda: backend.render("front", 96, 96), max(20, n // 5))
        env.close()
    # as the runtime observes: images rendered lazily and read on every 8th step (one query per C = 8
    # executed actions), the other steps render nothing
    env = sim.make_env("stack", wrist_camera=True, lazy_images=True, **sim_kw)
    env.reset(seed=0)
    out["control_steps_per_s_front_wrist_96px_read_every_8"] = rate(_stepper(env, n, read_every=8), max(40, n // 5))
    env.close()
    return out


def measure_expert(sim_spec: str, episodes: int) -> dict:
    sim_name, dt = parse_sim(sim_spec)
    env = sim.make_env("stack", sim=sim_name, physics_dt_s=dt, render_images=False)
    t = time.perf_counter()
    succ = sum(expert_episode(env, 500 + i, keep_frames=False)["success"] for i in range(episodes))
    env.close()
    return {"expert_episodes_per_min": 60 * episodes / (time.perf_counter() - t),
            "expert_episodes": episodes, "expert_successes": int(succ)}


def run_peer(python: str, script: Path, timeout_s: float = 900) -> dict:
    """Run a peer's speed script; its figures keyed by their printed labels."""
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    t = time.perf_counter()
    r = subprocess.run([python, script.name], cwd=script.parent, capture_output=True, text=True,
                       timeout=timeout_s, env=env, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{python} {script}: exit {r.returncode}\n{r.stderr[-2000:]}")
    figs = {m["label"].strip(): float(m["value"]) for m in _FIGURE.finditer(r.stdout)}
    if not figs:
        raise RuntimeError(f"{python} {script}: printed no 'steps/s' or 'fps' figure:\n{r.stdout[-1000:]}")
    return {**figs, "wall_s": time.perf_counter() - t}


def peer_version(python: str, package: str) -> str:
    r = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                       capture_output=True, text=True, check=False)
    return r.stdout.strip() or "unknown"


def _parse_peers(specs: list[str], anchors: Path) -> dict[str, tuple[str, Path]]:
    peers = {}
    for spec in specs:
        name, sep, python = spec.partition("=")
        if not sep or name not in PEER_SCRIPTS:
            fail(f"--peer {spec!r}: expected NAME=PYTHON with NAME one of {sorted(PEER_SCRIPTS)}")
        python = os.path.abspath(python)  # the peer runs from its script's directory
        if not Path(python).is_file():
            fail(f"--peer {spec!r}: {python} is not a file; create the peer's virtualenv (see "
                     f"{anchors / 'README.md'})")
        script = anchors / PEER_SCRIPTS[name]
        if not script.is_file():
            fail(f"--peer {name}: {script} not found; pass --anchors DIR (the peer speed scripts)")
        package = name if name != "panda-gym" else "panda_gym"
        if peer_version(python, package) == "unknown":  # before any round is measured
            fail(f"--peer {spec!r}: {package} is not installed for {python}; install it in that virtualenv (see "
                 f"{anchors / 'README.md'})")
        peers[name] = (python, script)
    return peers


def summarise(rounds: list[dict], peers: dict) -> dict:
    """Medians over rounds, and the ratios per round (project figure / peer figure, same round)."""
    med = {}
    for part in rounds[0]:
        med[part] = {k: statistics.median(r[part][k] for r in rounds)
                     for k, v in rounds[0][part].items() if isinstance(v, float)}
    ratios = {}
    key = "control_steps_per_s_no_render"
    sims = [s for s in rounds[0] if s not in peers]
    for name in peers:
        label = next((k for k in rounds[0][name] if "steps/s" in k and "render" in k and "no render" in k), None)
        if label is None:
            continue
        for sim_name in sims:
            per_round = [r[sim_name][key] / r[name][label] for r in rounds]
            ratios[f"{sim_name}_no_render_over_{name}"] = {"per_round": per_round,
                                                          "median": statistics.median(per_round)}
    return {"median": med, "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/sim_speed.json", help="JSON written (default: %(default)s)")
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=PYTHON",
                    help=f"a peer and its virtualenv's python (repeatable; default: none); NAME: {sorted(PEER_SCRIPTS)}")
    ap.add_argument("--anchors", type=Path,
                    default=Path(os.environ.get("EDGE_ANCHORS", ROOT.parent / "shared" / "anchors")),
                    help="directory of the peer speed scripts (default: $EDGE_ANCHORS or ../shared/anchors)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds project/peers (default: %(default)s)")
    ap.add_argument("--sims", nargs="+", default=["mujoco", "pybullet"], metavar="SIM[:DT]",
                    help="project simulators measured, each at its default physics step or at "
                         "physics_dt_s DT, e.g. pybullet:0.002 (default: both, default steps)")
    ap.add_argument("--episodes", type=int, default=10, help="expert episodes per sim, once (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help="fewer steps per figure (a smoke run)")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        fail(f"--rounds {a.rounds}: must be >= 1")
    if a.episodes < 0:
        fail(f"--episodes {a.episodes}: must be >= 0 (0: no expert episodes)")
    for spec in a.sims:
        parse_sim(spec)
    peers = _parse_peers(a.peer, a.anchors)
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=False).stdout.strip()
    res = {"machine": machine_info(), "command": " ".join(["python", *sys.argv]), "git_revision": rev,
           "load_avg_before": os.getloadavg(),
           "versions": {"peers": {n: peer_version(p, n if n != "panda-gym" else "panda_gym")
                                  for n, (p, _) in peers.items()}},
           "renderers": {"mujoco": f"MUJOCO_GL={os.environ['MUJOCO_GL']}, collision meshes as the render model, "
                                   "no shadows/reflections/MSAA",
                         "pybullet": "TinyRenderer (DIRECT), collision meshes as the render model",
                         "mujoco_simplified_meshes": f"the same, robot meshes simplified: render_mesh_cell_m="
                                                     f"{SIMPLIFIED_CELL_M}"}}
    rounds = []
    for i in range(a.rounds):
        rnd = {}
        for s in a.sims:
            rnd[s] = measure_project(s, a.quick)
            print(f"round {i + 1} {s}: " + ", ".join(f"{k} {v:.4g}" for k, v in rnd[s].items()), flush=True)
        for name, (python, script) in peers.items():
            rnd[name] = run_peer(python, script)
            print(f"round {i + 1} {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in rnd[name].items()), flush=True)
        rounds.append(rnd)
    res["rounds"] = rounds
    res.update(summarise(rounds, peers))
    res["expert"] = {s: measure_expert(s, a.episodes) for s in a.sims} if a.episodes else {}
    res["load_avg_after"] = os.getloadavg()
    med = res["median"]
    t = {}
    if "mujoco" in med:
        t["mujoco_front_wrist_96px>=300"] = med["mujoco"]["control_steps_per_s_front_wrist_96px"] >= 300
        t["mujoco_front_wrist_96px_simplified_meshes>=300"] = \
            med["mujoco"]["control_steps_per_s_front_wrist_96px_simplified_meshes"] >= 300
    for key, want, name in (("mujoco_no_render_over_panda-gym", 2.0, "mujoco_no_render>=2x_panda-gym"),
                            ("pybullet_no_render_over_panda-gym", 1.0, "pybullet_no_render>=panda-gym")):
        if key in res["ratios"]:
            t[name] = res["ratios"][key]["median"] >= want
    res["targets"] = t
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(json.dumps({"ratios": {k: round(v["median"], 2) for k, v in res["ratios"].items()}, "targets": t}))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
