"""``edge train vla``: train the reference VLA on recorded demonstrations (resumable)."""

from __future__ import annotations

import argparse
from pathlib import Path

from edge.cli import add_subparser
from edge.commands._sim_args import TASKS
from edge.resources import config_dir

PRESETS_DIR = config_dir("train")
PRESETS = ("tiny", "default")

EXAMPLES = """
  edge train vla --task stack --data data/stack --out checkpoints/vla_stack
  edge train vla --task stack --data data/stack --out /tmp/vla_tiny --preset tiny
  edge train vla --task stack --data data/stack --out checkpoints/vla_stack --resume
  edge train vla --data data/stack --out ck --steps 4000 --eval-every 1000 --set threads=1
"""


def register(subparsers) -> None:
    parser = add_subparser(subparsers, "train", "train a model on demonstrations", EXAMPLES)
    models = parser.add_subparsers(dest="model", metavar="<model>")
    vla = add_subparser(models, "vla", "train the flow-matching VLA (EMA weights, checkpoint + "
                        "manifest, periodic evaluation in sim)", EXAMPLES)
    vla.add_argument("--task", default="stack", choices=TASKS,
                     help="task the demonstrations are for (and the evaluation runs)")
    vla.add_argument("--data", required=True, nargs="+",
                     help="demonstration directory (edge data record); several are trained on as one")
    vla.add_argument("--init", metavar="CKPT",
                     help="fine-tune: start from this checkpoint's weights and normalisation "
                          "(same architecture); recorded in the manifest (default: none, train "
                          "from scratch)")
    vla.add_argument("--out", required=True,
                     help="checkpoint directory: model.pt, manifest.json, train_state.pt")
    vla.add_argument("--preset", choices=PRESETS, default="default",
                     help="settings from configs/train/vla_<preset>.yaml (tiny: seconds, for tests)")
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
                       "QueryEnv processes (checkpoint + manifest, resumable)", """
  edge train adapter --out runs/eqrl_stack
  edge train adapter --out /tmp/eqrl_tiny --preset tiny
  edge train adapter --out runs/eqrl_stack --resume
  edge train adapter --out runs/eqrl_dsrl --set mode=noise_only""")
    ad.add_argument("--out", required=True, help="adapter directory: adapter.pt, train_state.pt, manifest.json")
    ad.add_argument("--checkpoint", default=None, metavar="CKPT", help="the frozen VLA (default: the shipped checkpoint)")
    ad.add_argument("--preset", choices=PRESETS, default="default",
                    help="settings from configs/train/eqrl_<preset>.yaml (tiny: seconds, for tests)")
    ad.add_argument("--config", metavar="YAML",
                    help="a YAML settings file instead of --preset (default: the --preset file)")
    ad.add_argument("--resume", action="store_true", help="continue the run in --out from its last save")
    ad.add_argument("--no-progress", action="store_true", help="no progress bar")
    ad.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override any setting (repeatable; default: none), e.g. --set "
                         "episodes=300 --set mode=noise_only")
    ad.set_defaults(func=_train_adapter)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _overrides(args: argparse.Namespace) -> list[str]:
    out = list(args.set)
    for flag, key in ((args.steps, "steps"), (args.seed, "seed"),
                      (args.eval_episodes, "eval_episodes"), (args.eval_every, "eval_every_steps")):
        if flag is not None:
            out.append(f"{key}={flag}")
    if args.no_eval:
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
    from edge.vla.train import TrainVLAConfig, VLATrainer

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    preset = Path(args.config) if args.config else PRESETS_DIR / f"vla_{args.preset}.yaml"
    config = load_config(TrainVLAConfig, preset, _overrides(args))
    out = Path(args.out)
    check_writable_dir(out)  # before the data is loaded and the steps are spent
    if not args.resume and (out / TRAIN_STATE_FILE).exists():
        raise EdgeError(f"{out} already holds a training run; pass --resume to continue it or "
                        "choose another --out")
    created = not out.exists()
    try:
        trainer = VLATrainer(config, args.task, args.data, out, resume=args.resume,
                             progress=not args.no_progress, init=args.init)
        manifest = trainer.run()
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
    from adapters.eqrl.train import STATE_FILE, AdapterTrainer
    from edge.config import load_config
    from edge.errors import EdgeError
    from edge.runtime.session import DEFAULT_CHECKPOINT

    preset = Path(args.config) if args.config else PRESETS_DIR / f"eqrl_{args.preset}.yaml"
    config = load_config(EqrlConfig, preset, list(args.set))
    out = Path(args.out)
    if not args.resume and (out / STATE_FILE).exists():
        raise EdgeError(f"{out} already holds an adapter training run; pass --resume to continue it "
                        "or choose another --out")
    checkpoint = args.checkpoint or str(DEFAULT_CHECKPOINT)
    if not Path(checkpoint).exists():
        raise EdgeError(f"--checkpoint {checkpoint}: no such VLA checkpoint")
    manifest = AdapterTrainer(config, out, checkpoint, resume=args.resume,
                              progress=not args.no_progress).run()
    print(f"adapter: {out} ({manifest['metrics']})")
    return 0
