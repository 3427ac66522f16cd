"""Where does the VLA go wrong before the grasp? A closed-loop diagnosis per episode (issue 3).

For each evaluation seed the checkpoint drives the MuJoCo arm synchronously (query, execute C
actions, query again — as ``edge.training.vla.rollout.evaluate``) and the script records:

* where the gripper is first commanded closed: the TCP's offset from the block the instruction
  names (the one to pick) and its xy distance to the other block (did it go for the wrong one?);
* how well the training-only auxiliary head localises the named block from the same prefix
  features at the first query (xy error, metres) — i.e. whether the information is in the features;
* for episodes that lift the block and still fail: how close the carried block came to its base (xy)
  and what the front and wrist heads said about the base's position there;
* where the gripper first opens on a lifted block: the block's and the TCP's xy distance to the
  base and the block's xy offset in the hand (a block grasped off-centre and released with the TCP
  over the base lands beside it);
* where the TCP is when the final descent starts (5 cm above the block: below that the hand hides
  the block from both cameras) and what the object head said at that query, and at the query that
  closed the gripper;
* success and the furthest task stage reached.

    python benchmarks/vla_grasp_diagnosis.py --checkpoint edge/vla/checkpoints/stack --episodes 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import existing, number, whole, writable_file  # noqa: E402


def aux_denormaliser(data_dirs: list[str]):
    """(mean, std) of the auxiliary targets over the training data (not stored in checkpoints)."""
    from edge.training.vla.data import object_roles
    from sim.demos import iter_episodes

    rows = [object_roles(ep["object_pos"]) for d in data_dirs for ep in iter_episodes(d, successful_only=True)]
    aux = np.concatenate(rows)
    return aux.mean(0), np.maximum(aux.std(0), 1e-3)


def wrist_estimate(model, obs, lang) -> np.ndarray:
    """The wrist head's estimate of the objects' world positions (n, 3) at this observation (row 0:
    the block to move, row 1: its base): hand-frame offsets rotated as the object token does."""
    import torch

    from edge.vla.model import hand_to_world

    prop = torch.from_numpy(np.asarray(obs["proprio"], np.float32))[None]
    with torch.no_grad():
        local = model.locate_from_wrist(torch.from_numpy(np.asarray(obs["wrist"]))[None],
                                        torch.tensor([lang], dtype=torch.float32))
        world = hand_to_world(local, prop[:, model._quat_index])[0].view(-1, 3) / 10.0
    return prop[0, model._tcp_index].numpy() + world.numpy()


def episode(policy, model, env, seed: int, k: int, c: int, aux_stats, temperature: float = 1.0) -> dict:
    import torch

    u = env.unwrapped
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    policy.reset(obs)
    base, pick = u.spec_task.order[0], u.spec_task.order[1]
    pick0 = np.array(info["object_poses"][pick][:3])
    close, descend, aux_err, steps, done = None, None, None, 0, False
    pred = wrist_pick = wrist_base = None
    carry = None  # while the block is lifted: its closest xy approach to the base
    release, grip_was = None, 0.0  # the first opening of the gripper on a lifted block
    while not done:
        feats = policy.encode(obs)
        lang = policy.spec.instruction_embeddings.get(obs["instruction"])
        front = model.config.aux_source == "front"  # the head reads the front trunk's own output
        if aux_stats is not None and model.aux_head is not None and (lang is not None or not front):
            with torch.no_grad():
                if front:
                    pred = model.locate_objects(torch.from_numpy(np.asarray(obs["front"]))[None],
                                                torch.tensor([lang], dtype=torch.float32)).numpy()[0]
                else:
                    pred = model.aux_head(torch.as_tensor(np.asarray(feats)).reshape(1, -1)).numpy()[0]
            pred = pred * aux_stats[1] + aux_stats[0]
            if getattr(model, "wrist_head", None) is not None:
                wrist_pick, wrist_base = wrist_estimate(model, obs, lang)[:2]
            if aux_err is None:
                aux_err = float(np.linalg.norm(pred[:2] - pick0[:2]))
        noise = (temperature * rng.standard_normal((policy.chunk_len, policy.action_dim))).astype(np.float32)
        for a in policy.sample(feats, noise, k)[:c]:
            tcp, _ = u.tcp_pose()
            p = np.array(info["object_poses"][pick][:3])
            if descend is None and close is None and tcp[2] < p[2] + 0.05:
                # the final descent starts: from here on the hand hides the block from both cameras
                descend = {"step": steps, "xy_to_pick_m": round(float(np.linalg.norm((tcp - p)[:2])), 4)}
                if pred is not None:
                    descend["head_xy_error_m"] = round(float(np.linalg.norm(pred[:2] - p[:2])), 4)
                if wrist_pick is not None:
                    descend["wrist_xy_error_m"] = round(float(np.linalg.norm(wrist_pick[:2] - p[:2])), 4)
            if close is None and a[4] > 0.5:
                tcp, _ = u.tcp_pose()
                p = np.array(info["object_poses"][pick][:3])
                b = np.array(info["object_poses"][base][:3])
                close = {"step": steps, "tcp_minus_pick_m": np.round(tcp - p, 4).tolist(),
                         "xy_to_pick_m": round(float(np.linalg.norm((tcp - p)[:2])), 4),
                         "xy_to_other_m": round(float(np.linalg.norm((tcp - b)[:2])), 4)}
                if pred is not None:  # what the object head said at the query that chose to close
                    close["head_xy_error_m"] = round(float(np.linalg.norm(pred[:2] - p[:2])), 4)
                    close["head_tcp_offset_xy_m"] = round(float(np.linalg.norm(pred[:2] - tcp[:2])), 4)
                if wrist_pick is not None:
                    close["wrist_xy_error_m"] = round(float(np.linalg.norm(wrist_pick[:2] - p[:2])), 4)
            b = np.array(info["object_poses"][base][:3])
            gap = float(np.linalg.norm((p - b)[:2]))
            if p[2] > pick0[2] + 0.02 and (carry is None or gap < carry["xy_to_base_m"]):
                carry = {"step": steps, "xy_to_base_m": round(gap, 4),
                         "height_above_base_m": round(float(p[2] - b[2]), 4)}
                if pred is not None:  # what the heads said about the base at the last query
                    carry["head_base_xy_error_m"] = round(float(np.linalg.norm(pred[3:5] - b[:2])), 4)
                if wrist_base is not None:
                    carry["wrist_base_xy_error_m"] = round(float(np.linalg.norm(wrist_base[:2] - b[:2])), 4)
            if release is None and grip_was > 0.5 and a[4] <= 0.5 and p[2] > pick0[2] + 0.02:
                tcp, _ = u.tcp_pose()
                release = {"step": steps, "block_xy_to_base_m": round(gap, 4),
                           "tcp_xy_to_base_m": round(float(np.linalg.norm((tcp - b)[:2])), 4),
                           "in_hand_offset_xy_m": round(float(np.linalg.norm((p - tcp)[:2])), 4),
                           "height_above_base_m": round(float(p[2] - b[2]), 4)}
            grip_was = float(a[4])
            obs, _, term, trunc, info = env.step(a)
            steps += 1
            done = bool(term or trunc)
            if done:
                break
    return {"seed": seed, "instruction": obs["instruction"], "success": bool(info["success"]),
            "max_stage": int(info.get("max_stage", 0)), "steps": steps, "first_close": close,
            "descent_start": descend, "closest_carry": carry, "first_release": release,
            "aux_xy_error_m": None if aux_err is None else round(aux_err, 4)}


def main(argv: list[str] | None = None) -> None:
    from edge.cli import add_deprecated_alias

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=existing("path"), default="edge/vla/checkpoints/stack")
    ap.add_argument("--episodes", type=whole(1), default=20)
    ap.add_argument("--seed", type=whole(0), default=1_000_000)
    k = ap.add_argument("--num-steps", dest="k", type=whole(1, 100), default=10, metavar="K",
                        help="denoising steps K per query (as edge run)")
    c = ap.add_argument("--execute", dest="c", type=whole(1), default=8, metavar="C",
                        help="actions executed per chunk C (as edge run)")
    add_deprecated_alias(ap, "--k", k)
    add_deprecated_alias(ap, "--c", c)
    ap.add_argument("--noise-temperature", type=number(0, 4), default=0.5,
                    help="scale of each query's initial noise (edge run's default)")
    ap.add_argument("--aux-data", nargs="*", default=None,
                    help="the checkpoint's training data dirs, to de-normalise the auxiliary head "
                         "(default: from its manifest if present, skipped if missing there; given ones must exist)")
    ap.add_argument("--threads", type=whole(1), default=1, help="torch threads (more oversubscribe a small CPU)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/vla_grasp_diagnosis.json")
    args = ap.parse_args(argv)
    for d in args.aux_data or ():
        if not Path(d).is_dir():
            ap.error(f"--aux-data {d}: no such directory")
    import torch

    torch.set_num_threads(args.threads)

    from tqdm import tqdm

    import sim
    from edge.telemetry import machine_info
    from edge.vla.checkpoint import load_model
    from edge.vla_policy import load_policy

    manifest_path = Path(args.checkpoint) / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    dirs = args.aux_data
    if dirs is None:
        d = manifest.get("data", {}).get("dir")
        dirs = [d] if isinstance(d, str) else list(d or [])
    from edge.errors import EdgeError

    try:
        policy = load_policy(args.checkpoint, "torch")
    except (EdgeError, OSError, ValueError) as err:
        ap.error(f"--checkpoint {args.checkpoint}: {err}")
    if args.c > policy.chunk_len:
        ap.error(f"--execute {args.c}: at most the checkpoint's chunk of {policy.chunk_len} actions")
    model = load_model(args.checkpoint)
    if model.token_proj is not None:  # object-token models carry their aux de-normalisation
        aux_stats = (model.aux_mean.numpy(), model.aux_std.numpy())
    else:
        aux_stats = aux_denormaliser(dirs) if dirs and all(Path(x).is_dir() for x in dirs) else None
    env = sim.make_env(task="stack", sim="mujoco", wrist_camera="wrist" in policy.spec.cameras)
    t0 = time.perf_counter()
    eps = [episode(policy, model, env, args.seed + i, args.k, args.c, aux_stats, args.noise_temperature)
           for i in tqdm(range(args.episodes), desc="diagnose", unit="ep")]
    closes = [e["first_close"] for e in eps if e["first_close"]]
    aux = [e["aux_xy_error_m"] for e in eps if e["aux_xy_error_m"] is not None]

    def med(x):
        return round(float(np.median(x)), 4) if x else None

    out = {
        "benchmark": "vla_grasp_diagnosis", "checkpoint": args.checkpoint,
        "checkpoint_step": manifest.get("step"), "init": manifest.get("init"),
        "k": args.k, "c": args.c, "noise_temperature": args.noise_temperature, "episodes": len(eps),
        "seed": args.seed,
        "successes": sum(e["success"] for e in eps),
        "closed_gripper": len(closes),
        "first_close_xy_to_pick_m_median": med([c["xy_to_pick_m"] for c in closes]),
        "first_close_xy_to_pick_m_within_2cm": sum(c["xy_to_pick_m"] <= 0.02 for c in closes),
        "first_close_xy_to_other_m_median": med([c["xy_to_other_m"] for c in closes]),
        "aux_xy_error_m_median": med(aux),
        "descent_start_xy_to_pick_m_median": med([e["descent_start"]["xy_to_pick_m"] for e in eps
                                                  if e["descent_start"]]),
        "head_xy_error_at_descent_m_median": med([e["descent_start"]["head_xy_error_m"] for e in eps
                                                  if e["descent_start"] and "head_xy_error_m" in e["descent_start"]]),
        "wrist_xy_error_at_descent_m_median": med([e["descent_start"]["wrist_xy_error_m"] for e in eps
                                                   if e["descent_start"] and "wrist_xy_error_m" in e["descent_start"]]),
        "wrist_xy_error_at_close_m_median": med([c["wrist_xy_error_m"] for c in closes if "wrist_xy_error_m" in c]),
        # episodes that lifted the block but failed: how close the carried block came to its base
        "failed_after_lift": sum(1 for e in eps if e["closest_carry"] and not e["success"]),
        "failed_after_lift_closest_xy_to_base_m_median": med([e["closest_carry"]["xy_to_base_m"] for e in eps
                                                              if e["closest_carry"] and not e["success"]]),
        "failed_after_lift_head_base_xy_error_m_median": med([
            e["closest_carry"]["head_base_xy_error_m"] for e in eps
            if e["closest_carry"] and not e["success"] and "head_base_xy_error_m" in e["closest_carry"]]),
        "failed_after_lift_wrist_base_xy_error_m_median": med([
            e["closest_carry"]["wrist_base_xy_error_m"] for e in eps
            if e["closest_carry"] and not e["success"] and "wrist_base_xy_error_m" in e["closest_carry"]]),
        # the first release of a lifted block, in failed and in successful episodes
        **{f"{kind}_release_{key}_median": med([e["first_release"][key] for e in eps
                                                 if e["first_release"] and e["success"] == (kind == "success")])
           for kind in ("failed", "success")
           for key in ("block_xy_to_base_m", "tcp_xy_to_base_m", "in_hand_offset_xy_m")},
        "failed_with_release": sum(1 for e in eps if e["first_release"] and not e["success"]),
        "head_xy_error_at_close_m_median": med([c["head_xy_error_m"] for c in closes if "head_xy_error_m" in c]),
        "head_tcp_offset_xy_at_close_m_median": med([c["head_tcp_offset_xy_m"] for c in closes
                                                      if "head_tcp_offset_xy_m" in c]),
        "per_episode": eps,
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_info(), "wall_s": round(time.perf_counter() - t0, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"{out['successes']}/{len(eps)} successes; gripper first closed {out['first_close_xy_to_pick_m_median']} m "
          f"(median xy) from the named block, {out['first_close_xy_to_pick_m_within_2cm']}/{len(closes)} within 2 cm; "
          f"aux head localises it to {out['aux_xy_error_m_median']} m at the first query; wrote {args.out}")


if __name__ == "__main__":
    main()
