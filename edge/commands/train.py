"""``edge train vla``: train the reference VLA on recorded demonstrations (resumable)."""

from __future__ import annotations

import argparse
from pathlib import Path

from edge.cli import add_subparser

PRESETS_DIR = Path(__file__).resolve().parents[2] / "configs" / "train"
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
    vla.add_argument("--task", default="stack", help="task the demonstrations are for")
    vla.add_argument("--data", required=True, nargs="+",
                     help="demonstration directory (edge data record); several are trained on as one")
    vla.add_argument("--init", metavar="CKPT",
                     help="fine-tune: start from this checkpoint's weights and normalisation "
                          "(same architecture); recorded in the manifest")
    vla.add_argument("--out", required=True,
                     help="checkpoint directory: model.pt, manifest.json, train_state.pt")
    vla.add_argument("--preset", choices=PRESETS, default="default",
                     help="settings from configs/train/vla_<preset>.yaml (tiny: seconds, for tests)")
    vla.add_argument("--config", help="a YAML settings file instead of --preset")
    vla.add_argument("--steps", type=int, help="optimiser steps (overrides the preset)")
    vla.add_argument("--seed", type=int, help="training seed (overrides the preset)")
    vla.add_argument("--resume", action="store_true",
                     help="continue the run in --out from its last saved step")
    vla.add_argument("--eval-episodes", type=int, help="sim episodes per evaluation (0 = none)")
    vla.add_argument("--eval-every", type=int, help="evaluate every N steps (0 = only at the end)")
    vla.add_argument("--no-eval", action="store_true", help="skip evaluation in sim")
    vla.add_argument("--no-progress", action="store_true", help="no progress bar")
    vla.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override any setting, e.g. --set batch_size=32 --set model.d_model=96")
    vla.set_defaults(func=_train_vla)
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

    from edge.config import load_config
    from edge.errors import EdgeError
    from edge.vla.checkpoint import TRAIN_STATE_FILE
    from edge.vla.train import TrainVLAConfig, VLATrainer

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    preset = Path(args.config) if args.config else PRESETS_DIR / f"vla_{args.preset}.yaml"
    config = load_config(TrainVLAConfig, preset, _overrides(args))
    out = Path(args.out)
    if not args.resume and (out / TRAIN_STATE_FILE).exists():
        raise EdgeError(f"{out} already holds a training run; pass --resume to continue it or "
                        "choose another --out")
    trainer = VLATrainer(config, args.task, args.data, out, resume=args.resume,
                         progress=not args.no_progress, init=args.init)
    manifest = trainer.run()
    metrics = manifest["metrics"]
    print(f"wrote {out / 'model.pt'} ({manifest['model']['bytes'] / 1e6:.1f} MB, "
          f"{manifest['model']['parameters']['total']:,} parameters) and {out / 'manifest.json'}")
    print(f"steps {manifest['step']}, wall {manifest['wall_time_s']:.0f} s, "
          f"final loss {metrics['final_loss']:.4f}, success "
          + ("n/a (no evaluation)" if metrics["final_success_rate"] is None
             else f"{metrics['final_success_rate']:.0%}"))
    return 0
