"""`edge data record`: scripted-expert demonstrations in the format of :mod:`sim.demos`."""

from __future__ import annotations

import argparse

from edge.backends import BACKENDS
from edge.cli import add_deprecated_alias, add_subparser
from edge.commands._sim_args import add_env_args, check_env_args, make_env
from edge.errors import EdgeError


class _IntDefault(int):
    """A default value of an int flag: equal to the number, and tells "not given" from "given"."""


class _FloatDefault(float):
    """A default value of a float flag (see :class:`_IntDefault`)."""


def register(sub) -> None:
    p = add_subparser(sub, "data", "Record and inspect demonstration datasets.", """
  edge data record --task stack --sim mujoco --episodes 200 --out data/stack_mj
  edge data record --task pick_place --sim pybullet --episodes 50 --out data/pp_pb --wrist
  edge data info data/stack_mj""")
    dsub = p.add_subparsers(dest="data_command", metavar="<action>")
    r = add_subparser(dsub, "record", "Record expert demonstrations (resumable; atomic per episode).", """
  edge data record --task stack --episodes 200 --out data/stack_mj
  # interrupted? run the same command again: finished episodes are kept, the rest recorded
  # DAgger: the VLA drives (K = --num-steps, C = --execute), the expert labels every state
  edge data record --task stack --wrist --out data/stack_dagger --checkpoint checkpoints/vla_stack --num-steps 10 --execute 8""")
    add_env_args(r, episodes=100)
    r.add_argument("--out", required=True, help="dataset directory (created; reopened to resume)")
    r.add_argument("--wrist", action="store_true", help="also record the wrist camera")
    r.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    r.add_argument("--action-noise", type=float, default=0.0, metavar="M",
                   help="DART recovery data: execute the expert's action plus Gaussian position noise "
                        "(per-episode std uniform in [0, M] metres; the clean action is recorded; the "
                        "expert must drive: not with --checkpoint)")
    r.add_argument("--approach-offset", type=float, default=0.04, metavar="M",
                   help="largest side offset (m, per axis) of the expert's approach via-point above "
                        "the object; 0 = descend straight above it (no hidden via-point for a "
                        "single-frame policy to guess)")
    r.add_argument("--place-held-object", action="store_true",
                   help="the expert carries and places the held block's centre over the target, "
                        "compensating an off-centre grasp (default: the TCP's, as its own grasps are "
                        "centred); matters for DAgger labels, where the policy grasped")
    r.add_argument("--regrasp-off-centre", type=float, default=0.0, metavar="M",
                   help="DAgger labels (with --checkpoint): where the policy closed the gripper with the "
                        "block more than M metres off the TCP along the fingers (which closing cannot "
                        "centre), the expert opens and grasps again over the block's centre instead of "
                        "finishing that grasp; 0 = off (e.g. 0.01)")
    r.add_argument("--keep-failures", action="store_true",
                   help="also write episodes where the expert failed (marked success=false; a DAgger "
                        "recording keeps every episode and refuses the flag)")
    d = r.add_argument_group("DAgger: policy-driven episodes labelled by the expert")
    d.add_argument("--checkpoint", "--dagger", dest="checkpoint", metavar="CKPT", default=None,
                   help="DAgger: drive the arm with this VLA checkpoint and record the expert's action "
                        "for every state it visits (all episodes are kept: the labels are the "
                        "expert's; training uses them whatever the run's outcome); --dagger is the "
                        "same flag (default: none, the scripted expert drives)")
    k = d.add_argument("--num-steps", type=int, default=_IntDefault(10), metavar="K",
                       help="with --checkpoint: denoising steps K per query (default 10)")
    c = d.add_argument("--execute", type=int, default=_IntDefault(8), metavar="C",
                       help="with --checkpoint: actions executed per query C (default 8)")
    add_deprecated_alias(d, "--dagger-k", k)
    add_deprecated_alias(d, "--dagger-c", c)
    d.add_argument("--noise-temperature", type=float, default=_FloatDefault(0.5), metavar="T",
                   help="with --checkpoint: scale of the policy's initial noise (as edge run; default 0.5)")
    d.add_argument("--expert-mix", type=float, default=_FloatDefault(0.0), metavar="P",
                   help="with --checkpoint: probability that the expert, not the policy, executes a "
                        "chunk (default 0)")
    d.add_argument("--backend", default="onnxruntime", choices=BACKENDS,
                   help="with --checkpoint: inference backend for the policy")
    r.set_defaults(func=record)
    sc = add_subparser(dsub, "scenes", "Record the first front frame of many drawn scenes with the "
                       "objects' positions (training data of the scene locator, model.scene_memory).", """
  edge data scenes --task stack --episodes 20000 --seed 7000000 --out data/stack_scenes""")
    add_env_args(sc, episodes=20000)
    sc.add_argument("--out", required=True, help="scene directory (new or empty; created)")
    sc.set_defaults(func=scenes)
    i = add_subparser(dsub, "info", "Summarise a dataset directory.", "  edge data info data/stack_mj")
    i.add_argument("path", help="dataset directory (edge data record --out)")
    i.set_defaults(func=info)


def record(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tqdm import tqdm

    from sim import demos
    from sim.env import ACTION_LAYOUT, MAX_DPOS_M, PROPRIO_LAYOUT
    from sim.experts import PHASES
    from sim.rollout import expert_episode

    if not 0.0 <= args.action_noise <= MAX_DPOS_M:
        raise EdgeError(f"--action-noise={args.action_noise} must lie in [0, {MAX_DPOS_M}] metres "
                        "(a std of a few millimetres, e.g. 0.008)")
    if not 0.0 <= args.approach_offset <= 0.1:
        raise EdgeError(f"--approach-offset={args.approach_offset} must lie in [0, 0.1] metres")
    if not 0.0 <= args.regrasp_off_centre <= 0.03:
        raise EdgeError(f"--regrasp-off-centre={args.regrasp_off_centre} must lie in [0, 0.03] metres "
                        "(e.g. 0.01)")
    if args.regrasp_off_centre and args.checkpoint is None:
        raise EdgeError("--regrasp-off-centre relabels the policy's grasps: it needs a DAgger "
                        "recording, --checkpoint CKPT (alias --dagger; the expert's own grasps are "
                        "centred)")
    policy_flags = {"--num-steps": "num_steps", "--execute": "execute", "--noise-temperature": "noise_temperature",
                    "--expert-mix": "expert_mix"}
    given = [f"{flag} {getattr(args, key)}" for flag, key in policy_flags.items()
             if not isinstance(getattr(args, key), (_IntDefault, _FloatDefault))]
    if args.backend != "onnxruntime":  # (its default)
        given.append(f"--backend {args.backend}")
    if args.checkpoint is not None and args.keep_failures:
        raise EdgeError("--keep-failures: a DAgger recording (--checkpoint) keeps every episode already (the labels "
                        "are the expert's); drop --keep-failures")
    if args.checkpoint is not None and args.action_noise:
        raise EdgeError(f"--action-noise {args.action_noise}: perturbs the scripted expert's actions when it drives; "
                        "in a DAgger recording (--checkpoint) the policy drives and the expert only labels: drop "
                        "--action-noise")
    if given and args.checkpoint is None:
        raise EdgeError(f"{', '.join(given)}: set{'s' if len(given) == 1 else ''} the policy of a DAgger recording "
                        "(--checkpoint CKPT); the scripted expert acts alone here: drop "
                        f"{'it' if len(given) == 1 else 'them'} or add --checkpoint")
    check_env_args(args)  # before the output folder and a DAgger policy are looked at
    from pathlib import Path

    from edge.commands._out import foreign_entries

    out = Path(args.out)
    others = foreign_entries(out)
    if others and not (out / "meta.json").is_file():
        what = ("a VLA checkpoint" if (out / "model.pt").exists() else "an ONNX export" if
                (out / "metadata.json").exists() else "other files (" + ", ".join(others[:4]) + ")")
        raise EdgeError(f"--out {out}: holds {what}, not a demonstration dataset; record into a new --out")
    policy, dagger = None, None
    if args.checkpoint is not None:
        if not Path(args.checkpoint).exists():
            raise EdgeError(f"--checkpoint {args.checkpoint}: not found (a VLA checkpoint directory from "
                            "`edge train vla`, or its model.pt)")
        policy, dagger = _dagger_policy(args)
        if "wrist" in policy.spec.cameras and not args.wrist:
            raise EdgeError(f"--checkpoint {args.checkpoint} uses the wrist camera; add --wrist")
        h, w = (int(x) for x in policy.spec.image_hw)
        if (args.image_size, args.image_size) != (h, w):
            raise EdgeError(f"--image-size {args.image_size}: the VLA's camera images are {h}x{w}, fixed by its "
                            f"checkpoint {args.checkpoint}; record with --image-size {h}")
    env = make_env(args, wrist_camera=args.wrist)
    u = env.unwrapped
    meta = {
        # the physics step resolved (0 = "the engine's default" would hide a change of that default)
        "task": args.task, "sim": args.sim, "env_config": {**asdict(u.cfg), "physics_dt_s": u.cfg.physics_step_s},
        "control_rate_hz": u.cfg.control_rate_hz, "action_layout": list(ACTION_LAYOUT),
        "proprio_layout": list(PROPRIO_LAYOUT), "phases": list(PHASES),
        "action_noise_m": args.action_noise,
        "expert_approach_offset_m": args.approach_offset,
        "expert_place_held_object": args.place_held_object,
        "expert_regrasp_off_centre_m": args.regrasp_off_centre,
        "dagger": dagger,
        "cameras": {"front": [args.image_size, args.image_size]}
        | ({"wrist": [args.image_size, args.image_size]} if args.wrist else {}),
    }
    _check_resume(args.out, meta)
    try:
        root = demos.prepare_dir(args.out, meta)
    except ValueError as err:
        raise EdgeError(str(err)) from None
    done = demos.done_seeds(root)
    seeds = [args.seed + i for i in range(args.episodes)]
    todo = [s for s in seeds if s not in done]
    ok = failed = 0
    bar = tqdm(todo, desc=f"record {args.task}/{args.sim}", unit="ep", initial=len(seeds) - len(todo),
               total=len(seeds), disable=args.no_progress)
    for seed in bar:
        if policy is not None:
            from edge.training.vla.rollout import dagger_episode

            ep = dagger_episode(env, policy, seed, args.num_steps, args.execute, args.noise_temperature,
                                args.expert_mix, approach_offset_m=args.approach_offset,
                                place_held_object=args.place_held_object,
                                regrasp_off_centre_m=args.regrasp_off_centre)
        else:
            ep = expert_episode(env, seed, action_noise_m=args.action_noise,
                                approach_offset_m=args.approach_offset,
                                place_held_object=args.place_held_object)
        ok += ep["success"]
        failed += not ep["success"]
        if ep["success"] or args.keep_failures or policy is not None:
            demos.write_episode(root, seed, {k: v for k, v in ep.items()
                                            if k not in ("steps", "regrasps", "sim_diverged")})
        bar.set_postfix(success=f"{ok}/{ok + failed}")
    env.close()
    if policy is not None:
        print(f"recorded {ok + failed} policy-driven episode{'' if ok + failed == 1 else 's'} labelled by the expert ({ok} of the "
              f"runs succeeded) into {root}; {len(seeds) - len(todo)} were already there")
    else:
        print(f"recorded {ok} successful episode{'' if ok == 1 else 's'} ({failed} expert failure{'' if failed == 1 else 's'} "
              f"{'kept' if args.keep_failures else 'skipped'}) into {root}; "
              f"{len(seeds) - len(todo)} were already there")
    return 0


#: meta.json keys a resumed recording must share with the dataset (as sim.demos.prepare_dir, plus
#: the cameras and their image sizes), and the values older recordings imply when a key is absent
RESUME_KEYS = ("task", "sim", "action_layout", "proprio_layout", "control_rate_hz", "env_config",
               "cameras", "action_noise_m", "expert_approach_offset_m", "expert_place_held_object",
               "expert_regrasp_off_centre_m", "dagger")
RESUME_DEFAULTS = {"action_noise_m": 0.0, "expert_approach_offset_m": 0.04,
                   "expert_place_held_object": False, "expert_regrasp_off_centre_m": 0.0}


def _first_difference(key: str, old, new) -> tuple[str, object, object] | None:
    """The first (dotted key, old, new) where two meta values differ, descending into dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            diff = _first_difference(f"{key}.{k}", old.get(k), new.get(k))
            if diff is not None:
                return diff
        return None
    return None if old == new else (key, old, new)


def _check_resume(out: str, meta: dict) -> None:
    """A recording into an existing dataset must match it; the error names the differing key."""
    import json
    from pathlib import Path

    path = Path(out) / "meta.json"
    if not path.is_file():
        return
    meta = json.loads(json.dumps(meta, default=str))  # as it would be stored (tuples -> lists)
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise EdgeError(f"--out {out}: {path} is not readable ({err}); record into a new --out") from None
    from sim.demos import FORMAT_NAME

    if old.get("format") != FORMAT_NAME:  # scenes, a run, anything else: not a dataset to add to
        kind = ("a run (edge run)" if (Path(out) / "ticks.jsonl").exists() else
                {"edge-scenes": "scenes (edge data scenes)"}.get(old.get("format"), f"format {old.get('format')!r}"))
        raise EdgeError(f"--out {out}: holds {kind}, not a demonstration dataset; record into a new --out")
    for key in RESUME_KEYS:
        if key == "cameras" and key not in old:
            continue  # recorded before the cameras were listed: env_config says it
        was, now = old.get(key, RESUME_DEFAULTS.get(key)), meta.get(key, RESUME_DEFAULTS.get(key))
        if key == "env_config" and isinstance(was, dict) and isinstance(now, dict):
            from sim.env import with_new_env_defaults

            was = with_new_env_defaults(was, now)  # settings added since, at their defaults
        diff = _first_difference(key, was, now)
        if diff is not None:
            name, was, now = diff
            how = ("this build's physics step for the engine differs (docs/sim.md, Rates); record into "
                   "a new --out directory") if name == "env_config.physics_dt_s" else \
                "resume with the flags it was recorded with or record into a new --out directory"
            raise EdgeError(f"--out {out}: the existing dataset has {name}={was!r}, this recording has "
                            f"{name}={now!r}; {how}")


def _dagger_policy(args: argparse.Namespace):
    """The checkpoint that drives a DAgger recording, and the meta entry that pins it."""
    from edge.export import sha256_file
    from edge.vla import checkpoint as ckpt
    from edge.vla_policy import load_policy

    for name, value, lo, hi in (("--num-steps", args.num_steps, 1, 100), ("--execute", args.execute, 1, 64),
                                ("--noise-temperature", args.noise_temperature, 0.0, 4.0),
                                ("--expert-mix", args.expert_mix, 0.0, 1.0)):
        if not lo <= value <= hi:
            raise EdgeError(f"{name}={value} must lie in [{lo}, {hi}]")
    path = ckpt.resolve(args.checkpoint)
    policy = load_policy(path, args.backend)
    if args.execute > policy.chunk_len:
        raise EdgeError(f"--execute={args.execute} exceeds the checkpoint's chunk length {policy.chunk_len}")
    return policy, {"checkpoint": str(args.checkpoint), "model_sha256": sha256_file(path),
                    "K": args.num_steps, "C": args.execute, "noise_temperature": args.noise_temperature,
                    "expert_mix": args.expert_mix}


def scenes(args: argparse.Namespace) -> int:
    from pathlib import Path

    from edge.commands._out import check_writable_dir, foreign_entries
    from sim.scenes import record_scenes

    check_writable_dir(args.out)
    out = Path(args.out)
    others = foreign_entries(out)
    if others:  # scenes never overwrite a dataset, a run or other scenes
        shown = ", ".join(others[:4])
        raise EdgeError(f"--out {out}: not empty ({shown}); scenes are written into a new or empty directory: "
                        "choose another --out")
    env = make_env(args)
    try:
        rec = record_scenes(env, args.episodes, args.seed, args.out,
                            meta={"task": args.task, "sim": args.sim, "distribution": args.distribution})
    finally:
        env.close()
    print(f"wrote {rec['count']} scenes to {args.out} in {rec['wall_s']} s")
    return 0


def read_episode_checked(path):
    """One episode file, or an EdgeError naming it when it is truncated or corrupt."""
    import zipfile
    import zlib

    from sim import demos

    try:
        return demos.read_episode(path)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as err:
        detail = str(err).splitlines()[0] if str(err) else "truncated"
        if "pickled" in detail:  # numpy's guess for bytes that are not a zip archive at all
            detail = "not an .npz (zip) archive"
        raise EdgeError(f"{path}: not a readable episode file ({type(err).__name__}: {detail[:120]}); "
                        "it is truncated or corrupt: delete it (edge data record --out on this "
                        "directory re-records its seed)") from None


def find_bad_episode(roots) -> str | None:
    """The first unreadable episode file under the dataset directories ``roots``, as an error
    message (None if every file reads)."""
    from pathlib import Path

    for root in roots if isinstance(roots, (list, tuple)) else [roots]:
        for path in sorted((Path(root) / "episodes").glob("ep_*.npz")):
            try:
                read_episode_checked(path)
            except EdgeError as err:
                return str(err)
    return None


def info(args: argparse.Namespace) -> int:
    from pathlib import Path

    import numpy as np

    from sim import demos

    if not Path(args.path).exists():
        raise EdgeError(f"{args.path}: does not exist (a dataset directory from `edge data record`)")
    try:
        meta = demos.read_meta(args.path)
    except ValueError as err:
        raise EdgeError(str(err)) from None
    eps = [read_episode_checked(p) for p in sorted((Path(args.path) / "episodes").glob("ep_*.npz"))]
    steps = [len(e["action"]) for e in eps]
    phases = np.concatenate([e["phase"] for e in eps]) if eps else np.zeros(0, int)
    print(f"{args.path}: task={meta['task']} sim={meta['sim']} episodes={len(eps)} "
          f"success={sum(e['success'] for e in eps)} steps/episode={np.mean(steps) if steps else 0:.1f}")
    dagger = meta.get("dagger")
    if dagger:  # success counts the policy's runs; the labels are the expert's
        print(f"  DAgger recording: policy {dagger.get('checkpoint')} (K={dagger.get('K')}, C={dagger.get('C')}, "
              f"expert mix {dagger.get('expert_mix')}), actions labelled by the expert")
    for i, name in enumerate(meta["phases"]):
        print(f"  phase {name:<9} {np.mean(phases == i) * 100 if len(phases) else 0:5.1f}% of steps")
    return 0
