"""``edge train vla``: train the reference VLA on recorded demonstrations (resumable)."""

from __future__ import annotations

import argparse
import math
import shutil
from pathlib import Path
from typing import Any

from edge.cli import add_subparser
from edge.commands._sim_args import EXPERT_TASKS
from edge.resources import config_dir

# world_models.token_model.KINDS (literal here so that parsing the command line does not import torch)
WM_KINDS = ("comet", "comet_nofusion", "comet_nocausal", "flat_slots", "pixels")

PRESETS_DIR = config_dir("train")
PRESETS = ("tiny", "default")

EXAMPLES = """
  edge train vla --task stack --data data/stack --out checkpoints/vla_stack
  edge train vla --task stack --data data/stack --out /tmp/vla_tiny --preset tiny
  edge train vla --task stack --data data/stack --out checkpoints/vla_stack --resume
  edge train vla --data data/stack --out ck --steps 4000 --eval-every 1000 --set threads=1
"""


def register(subparsers) -> None:
    parser = add_subparser(subparsers, "train", "train the VLA, the EQRL adapter, slot / pixel encoders and world models", EXAMPLES)
    models = parser.add_subparsers(dest="model", metavar="<model>")
    vla = add_subparser(models, "vla", "train the flow-matching VLA (EMA weights, checkpoint + "
                        "manifest, periodic evaluation in sim)", EXAMPLES)
    vla.add_argument("--task", default="stack", choices=EXPERT_TASKS,
                     help="task the demonstrations are for (and the evaluation runs)")
    vla.add_argument("--data", required=True, nargs="+",
                     help="demonstration directory (edge data record); several are trained on as one")
    vla.add_argument("--init", metavar="CKPT",
                     help="fine-tune: start from this checkpoint's weights and normalisation "
                          "(same architecture); recorded in the manifest (default: none, train "
                          "from scratch)")
    vla.add_argument("--out", required=True,
                     help="checkpoint directory: model.pt, manifest.json, train_state.pt")
    vla.add_argument("--preset", choices=PRESETS, default=None,
                     help="settings from configs/train/vla_<preset>.yaml (default: default; tiny: seconds, for tests)")
    vla.add_argument("--config", metavar="YAML",
                     help="a YAML settings file instead of --preset (default: the --preset file)")
    vla.add_argument("--steps", type=int, help="optimiser steps (default: the preset's)")
    vla.add_argument("--seed", type=int, help="training seed (default: the preset's)")
    vla.add_argument("--resume", action="store_true",
                     help="continue the run in --out from its last saved step")
    vla.add_argument("--eval-episodes", type=int,
                     help="sim episodes per evaluation (0 = none; default: the preset's)")
    vla.add_argument("--eval-every", type=int,
                     help="evaluate every N steps (0 = only at the end; default: the preset's)")
    vla.add_argument("--no-eval", action="store_true", help="skip evaluation in sim")
    vla.add_argument("--no-progress", action="store_true", help="no progress bar")
    vla.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override any setting (repeatable; default: none), e.g. --set "
                          "batch_size=32 --set model.d_model=96; the evaluation's K and C are "
                          "eval_num_steps and eval_execute")
    vla.set_defaults(func=_train_vla)
    ad = add_subparser(models, "adapter", "train the EQRL scheduling adapter on the frozen VLA in "
                       "QueryEnv processes or Ray actors (checkpoint + manifest, resumable)", """
  edge train adapter --out runs/eqrl_stack
  edge train adapter --out /tmp/eqrl_tiny --preset tiny
  edge train adapter --out runs/eqrl_stack --resume
  edge train adapter --out runs/eqrl_dsrl --set mode=noise_only
  edge train adapter --out runs/eqrl_stack --ray               # QueryEnvs as actors of a fresh local Ray
  edge train adapter --out runs/eqrl_stack --ray auto          # ... of an existing Ray cluster""")
    ad.add_argument("--out", required=True, help="adapter directory: adapter.pt, train_state.pt, manifest.json")
    ad.add_argument("--checkpoint", default=None, metavar="CKPT", help="the frozen VLA (default: the shipped checkpoint)")
    ad.add_argument("--preset", choices=PRESETS, default=None,
                    help="settings from configs/train/eqrl_<preset>.yaml (default: default; tiny: seconds, for tests)")
    ad.add_argument("--config", metavar="YAML",
                    help="a YAML settings file instead of --preset (default: the --preset file)")
    ad.add_argument("--resume", action="store_true", help="continue the run in --out from its last save")
    ad.add_argument("--no-progress", action="store_true", help="no progress bar")
    ad.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="run the QueryEnvs as Ray actors (1 CPU each; needs the 'dist' extra): no "
                         "ADDRESS = a fresh local Ray instance, auto = an existing cluster, or a "
                         "cluster's address (default: local processes)")
    ad.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override any setting (repeatable; default: none), e.g. --set "
                         "episodes=300 --set mode=noise_only")
    ad.set_defaults(func=_train_adapter)
    wm = add_subparser(models, "world-model", "train a world model + MCTS agent on an object task "
                       "(COMET slots, its ablations, or the monolithic baselines; resumable)", """
  edge train world-model --out runs/wm/comet_s0                     # COMET on push3 over the shipped slot encoder
  edge train world-model --out runs/wm/px_s0 --kind pixels --obs pixels
  edge train world-model --out runs/wm/oracle --obs oracle --set model.num_slots=5
  edge train world-model --out /tmp/wm_tiny --preset tiny
  edge train world-model --out runs/wm/comet_s0 --resume --env-steps 40000""")
    wm.add_argument("--out", required=True, help="run directory: model.pt, manifest.json, metrics.json, curve.jsonl, train_state.pt")
    wm.add_argument("--preset", choices=PRESETS, default=None,
                    help="settings from configs/train/wm_<preset>.yaml (default: default; tiny: seconds, for tests)")
    wm.add_argument("--config", metavar="YAML", help="a YAML settings file instead of --preset (default: none)")
    wm.add_argument("--kind", default=None, choices=WM_KINDS, help="world model (default: the preset's)")
    wm.add_argument("--task", default=None, choices=("push3", "reach3"), help="object task: push3 or reach3 (default: the preset's)")
    wm.add_argument("--obs", default=None, choices=("oracle", "slots", "pixels"), help="oracle, slots or pixels (default: the preset's)")
    wm.add_argument("--encoder", default=None, metavar="DIR",
                    help="--obs slots: the frozen slot encoder (default: the shipped slots_push3_v2, with one "
                         "tracking round per carried frame: encoder_carry_iters=1); --obs pixels: "
                         "a pretrained pixel encoder to freeze (`edge train pixel-encoder`; default: none, the "
                         "CNN learns end to end)")
    wm.add_argument("--env-steps", type=int, default=None, help="environment-step budget (default: the preset's)")
    wm.add_argument("--seed", type=int, default=None, help="training seed (default: the preset's)")
    wm.add_argument("--resume", action="store_true", help="continue the run in --out (a larger --env-steps extends it)")
    wm.add_argument("--no-progress", action="store_true",
                    help="no progress bar (the line per evaluation still prints)")
    wm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override any setting (repeatable; default: none), e.g. --set planner.num_simulations=8")
    wm.set_defaults(func=_train_world_model)
    se = add_subparser(models, "slot-encoder", "collect frames of an object task and train the "
                       "Slot Attention encoder the world models freeze (resumable)", """
  edge train slot-encoder --out runs/slots/enc        # 20k + 1.6k frames, 2500 steps: the shipped slots_push3
  edge train slot-encoder --out runs/slots/v2 --steps 8000   # the shipped slots_push3_v2 (the world models' default)
  edge train slot-encoder --out /tmp/slots_tiny --preset tiny --frames 64 --eval-frames 32 --steps 2
  edge train slot-encoder --out runs/slots_rgbd --steps 8000 --set in_channels=4   # RGB-D frames (depth channel)
  edge train slot-encoder --out runs/slots_play --policy play --init-from world_models/checkpoints/slots_push3_v2 \
      --steps 2000 --lr 2e-4 --warmup-steps 100    # fine-tune a shipped encoder on object-play frames
  (more recipes, with what each measured: docs/world_models.md)""")
    se.add_argument("--out", required=True, help="encoder directory: encoder.pt, manifest.json, metrics.json, "
                    "log.jsonl, data_train.npz, data_eval.npz, train_state.pt")
    _add_frame_args(se)
    se.add_argument("--steps", type=int, default=2500, help="optimiser steps")
    se.add_argument("--preset", choices=PRESETS, default="default", help="encoder size (tiny: for tests)")
    se.add_argument("--seed", type=int, default=0, help="training seed")
    se.add_argument("--batch-size", type=int, default=8, help="sequences per optimiser step")
    se.add_argument("--seq-len", type=int, default=4, help="consecutive frames per sample (slots carried over)")
    se.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override an encoder setting (repeatable; default: none), e.g. --set carry_iters=1")
    se.add_argument("--lr", type=float, default=4e-4, help="peak learning rate")
    se.add_argument("--warmup-steps", type=int, default=500, help="linear learning-rate warmup")
    se.add_argument("--eval-every", type=int, default=2000, help="held-out FG-ARI / identity every N steps")
    se.add_argument("--keep-every", type=int, default=0, metavar="N",
                    help="also keep the weights every N steps as weights_<step>.pt, for choosing a step "
                         "afterwards (default 0: none)")
    se.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1; more help only on otherwise idle cores)")
    se.add_argument("--init-from", default=None, metavar="PATH",
                    help="start from another encoder run's weights (its directory, train_state.pt or "
                    "manifest.json; same architecture, except that tracking rounds and loss weights may differ "
                    "and --set num_slots may add slots, --set in_channels=4 a depth channel to an RGB encoder); "
                    "default: random init")
    se.add_argument("--resume", action="store_true",
                    help="continue the run in --out from its train_state.pt (a larger --steps extends it)")
    se.set_defaults(func=_train_slot_encoder)
    pe = add_subparser(models, "pixel-encoder", "pretrain the pixel world model's CNN as an autoencoder on "
                       "frames collected as for the slot encoder (resumable)", """
  edge train pixel-encoder --out runs/pixels_ae --steps 6000      # frames as edge train slot-encoder collects them
  edge train pixel-encoder --out /tmp/px_tiny --frames 64 --eval-frames 32 --steps 2 --set channels=4 --set width=8
  edge train world-model --out runs/wm/px_ae_s0 --kind pixels --obs pixels --encoder runs/pixels_ae""")
    pe.add_argument("--out", required=True, help="encoder directory: encoder.pt, manifest.json, metrics.json, "
                    "log.jsonl, data_train.npz, data_eval.npz, train_state.pt")
    _add_frame_args(pe)
    pe.add_argument("--steps", type=int, default=6000, help="optimiser steps")
    pe.add_argument("--seed", type=int, default=0, help="training seed")
    pe.add_argument("--batch-size", type=int, default=32, help="frames per optimiser step")
    pe.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    pe.add_argument("--eval-every", type=int, default=1000, help="held-out reconstruction error every N steps")
    pe.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override an encoder setting (repeatable; default: none; image_size, channels, width, "
                         "fg_weight; they must match the world model's image_size, cnn_channels and width)")
    pe.add_argument("--resume", action="store_true",
                    help="continue the run in --out from its train_state.pt (a larger --steps extends it)")
    pe.set_defaults(func=_train_pixel_encoder)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _overrides(args: argparse.Namespace) -> list[str]:
    out = list(args.set)
    for flag, key in ((args.steps, "steps"), (args.seed, "seed"),
                      (args.eval_episodes, "eval_episodes"), (args.eval_every, "eval_every_steps")):
        if flag is not None:
            out.append(f"{key}={flag}")
    if args.no_eval:
        from edge.errors import EdgeError

        for flag, value in (("--eval-episodes", args.eval_episodes), ("--eval-every", args.eval_every)):
            if value:  # 0 agrees with --no-eval
                raise EdgeError(f"{flag} {value}: --no-eval runs no evaluation; drop one of them")
        out.append("eval_episodes=0")
    return out


def _train_vla(args: argparse.Namespace) -> int:
    import logging
    import zipfile
    import zlib

    from edge.commands._out import check_writable_dir
    from edge.commands.data import find_bad_episode
    from edge.config import load_config
    from edge.errors import EdgeError
    from edge.vla.checkpoint import TRAIN_STATE_FILE
    from edge.training.vla.train import TrainVLAConfig, VLATrainer

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    preset = _settings_file(args, "vla")
    config = load_config(TrainVLAConfig, preset, _overrides(args))
    out = Path(args.out)
    check_writable_dir(out)  # before the data is loaded and the steps are spent
    from sim.demos import read_meta

    for d in args.data or ():
        try:
            read_meta(d)
        except (OSError, ValueError) as e:
            raise EdgeError(f"--data {d}: {e}") from None
    if args.init and not Path(args.init).exists():
        raise EdgeError(f"--init {args.init}: no VLA checkpoint there (a directory with model.pt, or the file)")
    if not args.resume and (out / TRAIN_STATE_FILE).exists():
        raise EdgeError(f"{out} already holds a training run; pass --resume to continue it or "
                        "choose another --out")
    from edge.commands._out import foreign_entries

    others = foreign_entries(out)
    if others and not (out / TRAIN_STATE_FILE).exists():
        what = ("a VLA checkpoint without its training state" if (out / "model.pt").exists() else
                "other files (" + ", ".join(others[:4]) + ")")
        raise EdgeError(f"--out {out}: holds {what}; a training run goes into a new or empty directory "
                        "(or its own, with --resume): choose another --out")
    created = not out.exists()
    try:
        trainer = VLATrainer(config, args.task, args.data, out, resume=args.resume,
                             progress=not args.no_progress, init=args.init)
        manifest = trainer.run()
    except EdgeError:  # a clear refusal already (settings, --init, resume): no episode to blame
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as err:
        bad = find_bad_episode(list(args.data))  # a truncated / corrupt episode file: name it
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        if bad is not None:
            raise EdgeError(f"--data: {bad}") from None
        if isinstance(err, OSError) and not isinstance(err, FileNotFoundError):
            raise EdgeError(f"--out {out}: cannot write the checkpoint ({err}); choose another --out") from None
        raise
    metrics = manifest["metrics"]
    print(f"wrote {out / 'model.pt'} ({manifest['model']['bytes'] / 1e6:.1f} MB, "
          f"{manifest['model']['parameters']['total']:,} parameters) and {out / 'manifest.json'}")
    print(f"steps {manifest['step']}, wall {manifest['wall_time_s']:.0f} s, "
          f"final loss {metrics['final_loss']:.4f}, success "
          + ("n/a (no evaluation)" if metrics["final_success_rate"] is None
             else f"{metrics['final_success_rate']:.0%}"))
    return 0


def _train_adapter(args: argparse.Namespace) -> int:
    from adapters.eqrl.config import EqrlConfig
    from adapters.eqrl.train import LOG_FILE, STATE_FILE, AdapterTrainer
    from edge.config import load_config
    from edge.errors import EdgeError
    from edge.runtime.session import DEFAULT_CHECKPOINT

    preset = _settings_file(args, "eqrl")
    config = load_config(EqrlConfig, preset, list(args.set))
    unread = [f"{k}={getattr(config, k)}" for k in ("eval_seed", "eval_every", "eval_episodes")
              if getattr(config, k) != getattr(EqrlConfig(), k)]
    if unread:  # kept in the config so earlier runs' manifests still load
        raise EdgeError(f"{unread[0]}: edge train adapter runs no periodic evaluation (evaluate a saved adapter with "
                        "benchmarks/eqrl_eval.py); drop " + " / ".join(u.split("=")[0] for u in unread))
    out = Path(args.out)
    from edge.commands._out import check_writable_dir

    check_writable_dir(out)
    if args.resume and not (out / STATE_FILE).exists():
        raise EdgeError(f"--resume: {out} holds no adapter training run to continue ({STATE_FILE} is missing); "
                        "drop --resume to start one there"
                        + (f" (delete {out} first: its {LOG_FILE} is of a run stopped before its first save)"
                           if (out / LOG_FILE).is_file() and (out / LOG_FILE).stat().st_size else ""))
    if not args.resume and (out / STATE_FILE).exists():
        raise EdgeError(f"--out {out}: already holds an adapter training run; pass --resume to continue it "
                        "or choose another --out")
    if not args.resume and (out / LOG_FILE).is_file() and (out / LOG_FILE).stat().st_size:  # stopped before its first save
        raise EdgeError(f"--out {out}: holds {LOG_FILE} of a run stopped before its first save (no {STATE_FILE} "
                        f"to resume); delete {out} or choose another --out")
    checkpoint = args.checkpoint or str(DEFAULT_CHECKPOINT)
    if not Path(checkpoint).exists():
        raise EdgeError(f"--checkpoint {checkpoint}: no such VLA checkpoint")
    if args.resume:
        _check_adapter_resume(out, config, checkpoint)
    if args.ray is not None:
        from edge.runtime.campaign import require_ray

        require_ray()  # before anything is built: one line naming the 'dist' extra
    manifest = AdapterTrainer(config, out, checkpoint, resume=args.resume,
                              progress=not args.no_progress, ray_address=args.ray).run()
    m = manifest["metrics"]
    rate = m.get("train_success_last200")
    nfe = m.get("train_nfe_per_action_last200")
    print(f"adapter: {out} ({m.get('train_episodes')} training episodes; over the last "
          f"{min(200, m.get('train_episodes') or 0)}: success "
          f"{'n/a' if rate is None else f'{rate:.2f}'}, NFE per action {'n/a' if nfe is None else f'{nfe:.3f}'})")
    return 0


#: adapter settings a resumed run may change: more episodes, how often it saves, the env and learner
#: threads and processes (more envs continue the run, not as an uninterrupted run with them would),
#: and the evaluation settings the trainer does not read
ADAPTER_RESUMABLE = ("episodes", "threads", "save_every", "envs", "eval_seed", "eval_every", "eval_episodes")


def _check_adapter_resume(out: Path, config, checkpoint: str) -> None:
    """A resumed adapter run continues with the settings and the VLA it was started with (its manifest's,
    written at every save): EdgeError naming what differs and the command that started it."""
    import json
    import sys

    from adapters.eqrl.train import MANIFEST_FILE
    from edge.config import describe_differences, differences, flatten, to_dict
    from edge.errors import EdgeError

    try:
        manifest = json.loads((out / MANIFEST_FILE).read_text())
        saved = dict(manifest["config"])
    except (OSError, ValueError, KeyError, TypeError) as err:  # killed before its first manifest was written
        print(f"note: --resume: {out / MANIFEST_FILE} is not readable ({err}); the settings it was started with "
              "cannot be checked: resuming from its train_state.pt with these", file=sys.stderr)
        return
    new = to_dict(config)
    saved = {**to_dict(type(config)()), **saved}  # a setting added since the run started: at its default
    known = flatten(new)  # a setting removed since is not compared
    diffs = [d for d in differences(saved, new) if d[0] not in ADAPTER_RESUMABLE and d[0] in known]
    by = f"; it was started by: {manifest['command']}" if manifest.get("command") else ""
    if diffs:
        raise EdgeError(f"--resume: {out} was started with other settings ({describe_differences(diffs)}){by}; "
                        f"resume with its preset / --config / --set (only {', '.join(k for k in ADAPTER_RESUMABLE if not k.startswith('eval_'))} may "
                        "change) or choose another --out")
    vla = manifest.get("vla") or {}
    model = Path(checkpoint) / "model.pt" if Path(checkpoint).is_dir() else Path(checkpoint)
    if vla.get("sha256") and model.is_file():
        from edge.digest import sha256_file

        if sha256_file(model) != vla["sha256"]:
            raise EdgeError(f"--checkpoint {checkpoint}: not the VLA {out} was trained on ({vla.get('path')}, "
                            f"sha256 {vla['sha256'][:12]}…){by}; resume with that checkpoint or choose another --out")
    done = int((manifest.get("counters") or {}).get("episodes", 0))
    if config.episodes < done:
        raise EdgeError(f"episodes={config.episodes}: {out} has trained {done} episodes already; resume with "
                        f"--set episodes={done} or more (a larger number extends the run)")


def _settings_file(args: argparse.Namespace, kind: str) -> Path:
    """--config FILE, or the --preset's file (default: the default preset); not both."""
    from edge.errors import EdgeError

    if args.config and args.preset:
        raise EdgeError(f"--preset {args.preset} and --config {args.config}: the settings file replaces the preset; "
                        "give one of them")
    return Path(args.config) if args.config else PRESETS_DIR / f"{kind}_{args.preset or 'default'}.yaml"


def world_model_config(args: argparse.Namespace) -> Any:
    """The ``RunConfig`` an ``edge train world-model`` command line trains, every setting checked
    (an EdgeError naming the flag or key otherwise); reads the encoder's manifest, writes nothing."""
    import dataclasses
    import sys

    from edge.config import layer_config
    from edge.errors import EdgeError
    from world_models.pixel_pretrain import is_pixel_encoder
    from world_models.train import RunConfig, resolve_shipped, unused_slot_encoder

    preset = _settings_file(args, "wm")
    if not preset.is_file():
        raise EdgeError(f"--config {preset}: " + ("a directory; give a settings file in it" if preset.is_dir()
                                                  else "no such settings file"))
    sets = list(args.set)
    for flag, key in ((args.kind, "model.kind"), (args.task, "env.task"), (args.obs, "obs"),
                      (args.encoder, "encoder"), (args.env_steps, "env_steps"), (args.seed, "seed")):
        if flag is not None:
            sets.append(f"{key}={flag}")
    if args.obs == "pixels" and args.kind is None:
        sets.append("model.kind=pixels")
    config = layer_config(RunConfig(), preset, sets)
    # the presets name the shipped encoders as world_models/checkpoints/...: inside the package
    config = dataclasses.replace(config, encoder=resolve_shipped(config.encoder))
    given = {s.partition("=")[0].strip() for s in args.set}  # keys named on the command line
    if args.encoder is not None:
        given.add("encoder")
    dropped = []  # settings from the preset / --config file that these observations do not use
    if config.encoder and (unused_slot_encoder(config) or config.obs == "oracle"):
        if config.obs == "oracle" and "encoder" in given:
            raise EdgeError(f"--encoder {config.encoder}: --obs oracle reads object states, no encoder; leave it out")
        if "encoder" not in given:  # a pixel run's explicit slot encoder is refused below
            dropped.append(f"encoder={config.encoder}")
            config = dataclasses.replace(config, encoder="")
    if config.obs != "slots" and config.encoder_carry_iters:
        if "encoder_carry_iters" in given:
            raise EdgeError(f"--set encoder_carry_iters={config.encoder_carry_iters}: tracking rounds apply to "
                            f"--obs slots only, not --obs {config.obs}; leave it out")
        dropped.append(f"encoder_carry_iters={config.encoder_carry_iters}")
        config = dataclasses.replace(config, encoder_carry_iters=0)
    n_ent = config.env.n_entities
    if config.obs == "oracle" and config.model.num_slots != n_ent:  # one slot per object the sim reports
        if "model.num_slots" in given:
            raise EdgeError(f"--set model.num_slots={config.model.num_slots}: --obs oracle gives one slot per entity, "
                            f"{n_ent} on {config.env.task} with {config.env.distractors} distractors (robot, goal, "
                            f"target, distractors); set model.num_slots={n_ent} or leave it out")
        if args.config:
            print(f"note: --config {args.config}: model.num_slots={config.model.num_slots} set to {n_ent} "
                  "(--obs oracle gives one slot per entity)", file=sys.stderr)
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, num_slots=n_ent))
    if dropped and args.config:  # the shipped presets' slot-encoder settings are left out without a word
        print(f"note: --config {args.config}: {', '.join(dropped)} not used with obs={config.obs}; left out",
              file=sys.stderr)
    if config.obs == "pixels" and config.encoder and not is_pixel_encoder(config.encoder):
        raise EdgeError(f"--encoder {config.encoder}: no pretrained pixel encoder there (--obs pixels freezes "
                        "one made by `edge train pixel-encoder`; leave --encoder out to learn the CNN end to end)")
    if config.obs == "slots" and not Path(config.encoder).exists():
        raise EdgeError(f"encoder={config.encoder}: no slot encoder there; train one with "
                        "`edge train slot-encoder` or pass --encoder DIR")
    if config.obs == "slots":  # before anything is created: a directory of another kind is refused here
        from world_models.slot_encoder import load_verified

        try:
            enc_slots = load_verified(config.encoder, "slot encoder")[0]["config"]["num_slots"]
        except (OSError, ValueError, KeyError) as e:
            raise EdgeError(f"--encoder {config.encoder}: {e}") from None
        if config.model.num_slots != enc_slots:  # one token per slot of the encoder
            if "model.num_slots" in given:
                raise EdgeError(f"--set model.num_slots={config.model.num_slots}: the encoder {config.encoder} has "
                                f"{enc_slots} slots; set model.num_slots={enc_slots} or leave it out")
            if args.config:
                print(f"note: --config {args.config}: model.num_slots={config.model.num_slots} set to {enc_slots} "
                      "(one token per slot of the encoder)", file=sys.stderr)
            config = dataclasses.replace(config, model=dataclasses.replace(config.model, num_slots=enc_slots))
    return config


def _train_world_model(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from edge.errors import EdgeError
    from world_models.train import CURVE_FILE, STATE_FILE, Trainer

    config = world_model_config(args)
    out = Path(args.out)
    from edge.commands._out import check_writable_dir

    check_writable_dir(out)
    if not args.resume and (out / STATE_FILE).exists():
        raise EdgeError(f"--out {out}: already holds a world-model run; pass --resume to continue it or choose another --out")
    if args.resume and not (out / STATE_FILE).exists():
        raise EdgeError(f"--resume: {out} holds no world-model run ({STATE_FILE}); drop --resume to start one"
                        + (f" (delete {out} first: its {CURVE_FILE} is of a run stopped before its first checkpoint)"
                           if (out / CURVE_FILE).is_file() and (out / CURVE_FILE).stat().st_size else ""))
    if not args.resume and (out / CURVE_FILE).is_file() and (out / CURVE_FILE).stat().st_size:  # stopped before its first checkpoint
        raise EdgeError(f"--out {out}: holds {CURVE_FILE} of a run stopped before its first checkpoint (no "
                        f"{STATE_FILE} to resume); delete {out} or choose another --out")
    command = "edge " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    created = next((q for q in reversed((out, *out.parents)) if not q.exists()), None)  # the topmost made
    try:
        trainer = Trainer(config, out, command=command, progress=not args.no_progress, log=True)
    except Exception:  # (e.g. a pixel encoder of another shape) nothing written: no empty --out left behind
        if created is not None and created.is_dir() and not any(p.is_file() for p in created.rglob("*")):
            shutil.rmtree(created)
        raise
    metrics = trainer.run()
    fin = metrics.get("final") or {}
    print(f"world model: {out} ({config.model.kind}, {config.env.task}, {metrics['env_steps']} env steps, "
          f"{metrics['updates']} updates, {metrics['wall_s']:.0f} s); final success "
          f"{fin.get('success', float('nan')):.2f} over {fin.get('episodes', 0)} evaluation episodes")
    return 0


def _train_slot_encoder(args: argparse.Namespace) -> int:
    from edge.errors import EdgeError
    from world_models import slot_pretrain

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise EdgeError(f"--out {out}: exists and is not a directory; choose another --out")
    _check_encoder_resume(args, out, "slot-encoder")
    try:  # before anything is collected or written
        config = slot_pretrain._config_from_args(args.preset, args.set)
    except ValueError as err:
        raise EdgeError(str(err)) from None
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise EdgeError(f"--lr {args.lr}: must be a finite number > 0")
    if args.init_from is not None:
        try:
            slot_pretrain.load_init_weights(args.init_from, config)
        except (ValueError, FileNotFoundError) as err:
            raise EdgeError(str(err)) from None
    for key in ("frames", "eval_frames", "steps", "batch_size", "seq_len", "warmup_steps", "eval_every", "threads"):
        if getattr(args, key) < 1:
            raise EdgeError(f"--{key.replace('_', '-')} {getattr(args, key)}: must be >= 1")
    if args.keep_every < 0:
        raise EdgeError(f"--keep-every {args.keep_every}: must be >= 0 (0: keep none)")
    import inspect

    episode_len = inspect.signature(slot_pretrain.collect_frames).parameters["episode_len"].default
    if args.seq_len > min(episode_len, args.frames):
        raise EdgeError(f"--seq-len {args.seq_len}: a window cannot be longer than an episode of collected frames "
                        f"({episode_len}) or --frames ({args.frames}); choose 1..{min(episode_len, args.frames)}")
    try:
        slot_pretrain.check_window(config, args.seq_len)
    except ValueError as err:
        raise EdgeError(f"--seq-len {args.seq_len}: {err}") from None
    out.mkdir(parents=True, exist_ok=True)
    # the frames the encoder will read (a --set image_size too; --set in_channels=4: RGB-D frames)
    rc = _collect_frames(args, out, config.image_size, depth=config.in_channels == 4)
    if rc:
        return rc
    return slot_pretrain.main(["train", "--data", str(out / "data_train.npz"), "--eval-data", str(out / "data_eval.npz"),
                               "--out", str(out), "--steps", str(args.steps), "--preset", args.preset,
                               "--seed", str(args.seed), "--batch-size", str(args.batch_size),
                               "--seq-len", str(args.seq_len), "--lr", str(args.lr),
                               "--warmup-steps", str(args.warmup_steps), "--eval-every", str(args.eval_every),
                               "--keep-every", str(args.keep_every), "--threads", str(args.threads), "--summary",
                               *(("--init-from", args.init_from) if args.init_from else ()),
                               *(f"--set={kv}" for kv in args.set)])


def _check_encoder_resume(args: argparse.Namespace, out: Path, kind: str) -> None:
    """An encoder run continues only when asked (``--resume``), as every other trainer's: a command run
    again into the same --out, or into another run's, is refused before anything is collected or written.
    Frames already collected there (and nothing else) are reused by a new run."""
    from edge.errors import EdgeError

    state = out / "train_state.pt"
    if args.resume and not state.is_file():
        raise EdgeError(f"--resume: {out} holds no {kind} training run to continue (no train_state.pt); "
                        "drop --resume to start one there")
    if not args.resume and state.is_file():
        raise EdgeError(f"--out {out}: already holds a {kind} training run (train_state.pt); pass --resume to "
                        "continue it (a larger --steps extends it), or choose another --out")


def _add_frame_args(p: argparse.ArgumentParser) -> None:
    """The frames an encoder is pretrained on (collected into --out by _collect_frames)."""
    p.add_argument("--task", default="push3", choices=("push3", "reach3"), help="scene the frames come from")
    p.add_argument("--frames", type=int, default=20000, help="training frames (seed --data-seed)")
    p.add_argument("--eval-frames", type=int, default=1600,
                   help="held-out frames (seed --data-seed + 1; always uniform random actions)")
    p.add_argument("--data-seed", type=int, default=1, help="seed of the training frames (held-out: +1)")
    p.add_argument("--policy", default="random", choices=("random", "play"),
                   help="actions of the training frames: uniform random, or object play (pushes randomly chosen "
                        "cubes about, so cubes move in many more frames; default random)")


def _collect_frames(args: argparse.Namespace, out: Path, image_size: int, depth: bool = False) -> int:
    """Frames into ``out/data_train.npz`` (``--policy``) and ``out/data_eval.npz`` (random actions) unless
    there already (the same seeds give the same frames, so the slot and pixel encoders can share a data
    hash); a file already there must have been collected with the settings asked for (EdgeError).
    ``depth``: RGB-D frames (the object env's ``depth``; for an encoder with ``in_channels`` 4)."""
    import zipfile

    from edge.errors import EdgeError
    from world_models import slot_pretrain

    from world_models.object_env import ObjectTaskConfig

    env = ObjectTaskConfig()  # the depth range the frames are collected with
    depth_range = {"near_m": env.depth_near_m, "far_m": env.depth_far_m} if depth else None
    for name, n, seed, policy in (("data_train.npz", args.frames, args.data_seed, args.policy),
                                  ("data_eval.npz", args.eval_frames, args.data_seed + 1, "random")):
        path = out / name
        want = {"task": args.task, "seed": seed, "n_frames": n, "image_size": image_size, "policy": policy,
                "depth": depth_range}
        if path.is_file():
            try:
                meta = slot_pretrain.dataset_meta(path)  # the arrays are read (and verified) by training
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
                raise EdgeError(f"{path}: not a readable dataset ({err}); delete it or choose another --out") from None
            have = {**meta, "policy": meta.get("policy", "random"),
                    "depth": slot_pretrain.depth_encoding(meta).get("depth")}
            diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
            if diff:
                raise EdgeError(f"{path} was collected with other settings (there, asked for): {diff}; "
                                "choose another --out, or delete the file to collect it again")
            continue
        rc = slot_pretrain.main(["collect", "--frames", str(n), "--seed", str(seed), "--out", str(path),
                                 "--task", args.task, "--image-size", str(image_size), "--policy", policy,
                                 *(("--depth",) if depth else ())])
        if rc:
            return rc
    return 0


def _train_pixel_encoder(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from edge.errors import EdgeError

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise EdgeError(f"--out {out}: exists and is not a directory; choose another --out")
    _check_encoder_resume(args, out, "pixel-encoder")
    for key in ("frames", "eval_frames", "steps", "batch_size", "eval_every"):
        if getattr(args, key) < 1:
            raise EdgeError(f"--{key.replace('_', '-')} {getattr(args, key)}: must be >= 1")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise EdgeError(f"--lr {args.lr}: must be a finite number > 0")
    values: dict[str, int] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or key not in ("image_size", "channels", "width", "fg_weight"):
            raise EdgeError(f"--set {item!r}: want KEY=VALUE with KEY one of image_size, channels, width, fg_weight")
        try:
            values[key] = int(value)
        except ValueError:
            raise EdgeError(f"--set {item!r}: {key} takes a whole number") from None
    from world_models.pixel_pretrain import PixelEncoderConfig, train_pixel_encoder

    try:
        config = PixelEncoderConfig(**values)
    except ValueError as err:
        raise EdgeError(f"--set: {err}") from None
    out.mkdir(parents=True, exist_ok=True)
    rc = _collect_frames(args, out, config.image_size)
    if rc:
        return rc
    try:
        metrics = train_pixel_encoder(config, out / "data_train.npz", out, args.steps, eval_data_path=out / "data_eval.npz",
                                      batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                                      eval_every=args.eval_every,
                                      command="edge " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    except (ValueError, FileNotFoundError) as err:
        raise EdgeError(str(err)) from None
    print(f"pixel encoder: {out} ({metrics['step']} steps); held-out MSE {metrics.get('eval_mse', float('nan')):.5f}, "
          f"latent variance {metrics.get('latent_var', float('nan')):.3f}")
    return 0
