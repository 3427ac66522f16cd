"""Does batched stepping pay for vector envs? MuJoCo's native ``rollout`` (C, a thread pool) against
the env's own physics call (``mj_step(model, data, nstep=25)`` per env, one after another), on the
project's stack world with N envs in different states holding their joint targets for one control
step (25 substeps of 2 ms). Physics only: the IK, observation and reward stay in Python either way.

    python benchmarks/mujoco_rollout_speed.py --envs 8 --threads 1 2 --rounds 5

Both paths run the same physics; the script checks that their end states agree bit for bit.
Writes ``benchmarks/results/mujoco_rollout_speed.json`` (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=whole(1), default=8, help="vector size N")
    ap.add_argument("--threads", type=whole(1), nargs="+", default=[1, 2], help="rollout thread counts to measure")
    ap.add_argument("--rounds", type=whole(1), default=5, help="interleaved rounds (medians reported)")
    ap.add_argument("--steps", type=whole(1), default=200, help="control steps per measurement")
    ap.add_argument("--out", type=writable_file, default=str(Path(__file__).resolve().parent / "results" / "mujoco_rollout_speed.json"))
    a = ap.parse_args(argv)
    if any(t > a.envs for t in a.threads):
        ap.error(f"--threads {max(a.threads)}: at most --envs {a.envs} threads (one env per thread at least)")
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco
    from mujoco import rollout

    import sim

    env = sim.make_env("stack", render_images=False)
    u = env.unwrapped
    n_sub = u.n_substeps
    env.reset(seed=0)
    model = u.backend.model  # one compiled world per object count: the same for every stack seed
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    rng = np.random.default_rng(0)
    datas, states, ctrls = [], [], []
    seed = 0
    while len(states) < a.envs:  # N different states from short random episodes, same world
        seed += 1
        env.reset(seed=seed)
        if u.backend.model is not model:  # another object count compiles another world
            continue
        for _ in range(int(rng.integers(1, 20))):
            env.step(rng.uniform(-0.01, 0.01, 5).astype(np.float32))
        d = u.backend.data
        s = np.empty(mujoco.mj_stateSize(model, spec))
        mujoco.mj_getState(model, d, s, spec)
        states.append(s)
        ctrls.append(d.ctrl.copy())
        datas.append(mujoco.MjData(model))
    states, ctrls = np.stack(states), np.stack(ctrls)
    env.close()

    def sequential() -> np.ndarray:
        out = []
        for d, s, c in zip(datas, states, ctrls, strict=True):
            mujoco.mj_setState(model, d, s, spec)
            d.ctrl[:] = c
            mujoco.mj_step(model, d, nstep=n_sub)
            st = np.empty_like(s)
            mujoco.mj_getState(model, d, st, spec)
            out.append(st)
        return np.stack(out)

    control = np.repeat(ctrls[:, None, :], n_sub, axis=1)  # hold the targets for the control step
    pools = {t: rollout.Rollout(nthread=t) if t > 1 else None for t in a.threads}

    def batched(t: int) -> np.ndarray:
        if pools[t] is None:
            st, _ = rollout.rollout(model, datas[0], states, control, nstep=n_sub)
        else:
            st, _ = pools[t].rollout([model] * a.envs, datas[:t], states, control, nstep=n_sub)
        return st[:, -1]

    ref = sequential()
    agree = {t: bool(np.array_equal(batched(t), ref)) for t in a.threads}
    rounds = []
    for _ in range(a.rounds):
        r = {}
        for name, fn in [("sequential", sequential), *((f"rollout_{t}_threads", (lambda t=t: batched(t)))
                                                      for t in a.threads)]:
            t0 = time.perf_counter()
            for _ in range(a.steps):
                fn()
            r[name] = a.steps * a.envs / (time.perf_counter() - t0)  # env control steps per second
        rounds.append(r)
        print("  ".join(f"{k} {v:.0f}" for k, v in r.items()), "env steps/s", flush=True)
    for p in pools.values():
        if p is not None:
            p.close()
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ratios = {k: v / med["sequential"] for k, v in med.items() if k != "sequential"}
    out = {"benchmark": "mujoco_rollout_speed", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "mujoco": mujoco.__version__, "envs": a.envs, "substeps": n_sub, "cpus": os.cpu_count(),
           "load_average_1m": os.getloadavg()[0], "end_states_identical": agree, "rounds": rounds,
           "median_env_steps_per_s": med, "ratio_over_sequential": ratios}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"identical": agree, "ratios": {k: round(v, 2) for k, v in ratios.items()}}))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
