"""``edge export``: write ONNX graphs (encoder + one denoising step) and metadata for a checkpoint."""

from __future__ import annotations

import argparse

from edge.cli import DeprecatedAlias, add_subparser
from edge.errors import EdgeError

#: opsets the TorchScript exporter (torch.onnx.export(dynamo=False)) writes
OPSET_RANGE = (7, 20)

EXAMPLES = """
  edge export --checkpoint checkpoints/vla_stack --out exports/vla_stack
  edge export --checkpoint checkpoints/vla_stack --out exports/vla_stack --data data/stack   # parity on real frames
"""


def register(subparsers) -> None:
    parser = add_subparser(subparsers, "export", "export a VLA checkpoint to ONNX (encoder + one "
                           "denoising step, dynamic batch) with a parity check against torch",
                           EXAMPLES)
    parser.add_argument("--checkpoint", metavar="CKPT", default=None,
                        help="checkpoint directory or model.pt to export (required)")
    parser.add_argument("checkpoint", nargs="?", metavar="CKPT", action=DeprecatedAlias,
                        default=argparse.SUPPRESS, use="--checkpoint CKPT",
                        old="the positional CKPT", help="deprecated: use --checkpoint CKPT")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--opset", type=int, default=17,
                        help=f"ONNX opset, {OPSET_RANGE[0]}..{OPSET_RANGE[1]} (the TorchScript exporter's)")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="max abs difference torch vs onnxruntime allowed (> 0)")
    parser.add_argument("--data", metavar="DIR",
                        help="demonstration directory: check parity on its first frames too (default: "
                             "synthetic inputs only)")
    parser.add_argument("--no-verify", action="store_true",
                        help="export even if model.pt does not match the sha256 in its manifest.json")
    parser.set_defaults(func=_export)


def _real_inputs(data_dir: str, spec) -> dict:
    import numpy as np

    from edge.vla.language import InstructionCache
    from sim.demos import iter_episodes, read_meta

    try:
        read_meta(data_dir)
    except (OSError, ValueError) as e:
        raise EdgeError(f"--data {data_dir}: {e}") from None
    ep = next(iter_episodes(data_dir), None)
    if ep is None:
        raise EdgeError(f"--data {data_dir}: the dataset has no episodes; record some with `edge data record`, "
                        "or drop --data (parity on synthetic inputs only)")
    idx = np.linspace(0, len(ep["action"]) - 1, 3).astype(int)
    lang = InstructionCache(spec.lang_encoder_id, spec.lang_dim, spec.instruction_embeddings)
    out = {cam: ep[cam][idx] for cam in spec.cameras if cam in ep}
    out["proprio"] = ep["proprio"][idx].astype(np.float32)
    out["lang"] = lang([ep["instruction"]] * len(idx))
    return out


def _check_args(args: argparse.Namespace) -> None:
    import math

    if args.checkpoint is None:
        raise EdgeError("--checkpoint CKPT is required: the checkpoint directory or model.pt to export")
    lo, hi = OPSET_RANGE
    if not lo <= args.opset <= hi:
        raise EdgeError(f"--opset {args.opset} is out of range; allowed [{lo}, {hi}] (default 17)")
    if not (math.isfinite(args.tolerance) and args.tolerance > 0):
        raise EdgeError(f"--tolerance {args.tolerance:g} must be a finite number > 0 (the largest "
                        "|torch - onnxruntime| accepted, default 1e-4)")


def _export(args: argparse.Namespace) -> int:
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from edge.commands._out import check_writable_dir, foreign_entries
    from edge.export import METADATA_FILE, export_onnx
    from edge.vla.checkpoint import read_payload
    from edge.vla.spec import ModelSpec

    _check_args(args)
    if not Path(args.checkpoint).exists():
        raise EdgeError(f"--checkpoint {args.checkpoint}: no VLA checkpoint there (a directory with model.pt, "
                        "or the file); train one with `edge train vla`")
    check_writable_dir(args.out)
    real = None
    if args.data:
        spec = read_payload(args.checkpoint, verify=not args.no_verify)["spec"]
        real = _real_inputs(args.data, ModelSpec.from_dict(spec))
    out = Path(args.out)
    others = foreign_entries(out)
    if others and not (out / METADATA_FILE).is_file():  # only an earlier export
        shown = ", ".join(others[:4])
        raise EdgeError(f"--out {out}: holds other files ({shown}), not an earlier export; an export goes into a "
                        "new or empty directory, or over an earlier export: choose another --out")
    created = next((q for q in reversed((out, *out.parents)) if not q.exists()), None)
    # The export is made in a temporary folder on --out's filesystem and moved in only once its parity
    # check passed, so a failed export changes nothing there: a new --out is that folder renamed; over an
    # earlier export the graphs move in first and metadata.json (their hashes) last.
    try:
        if out.exists():
            tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=out))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=out.parent))
    except OSError as err:
        raise EdgeError(f"--out {out}: cannot make the export's temporary folder there ({err.strerror}); "
                        "choose another --out") from None
    try:
        meta = export_onnx(args.checkpoint, tmp, opset=args.opset, tolerance=args.tolerance,
                           real_inputs=real, verify=not args.no_verify)
        if not out.exists():
            os.replace(tmp, out)
        else:
            names = sorted(p.name for p in tmp.iterdir())
            for name in (n for n in names if n != METADATA_FILE):  # the graphs first, their metadata last
                os.replace(tmp / name, out / name)
            os.replace(tmp / METADATA_FILE, out / METADATA_FILE)
    except BaseException as err:
        if created is not None:  # a failed export leaves nothing behind that it created
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(err, RuntimeError) and not isinstance(err, EdgeError):
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise EdgeError(f"ONNX export of {args.checkpoint} at --opset {args.opset} failed: "
                            f"{first}; try the default --opset 17") from None
        if isinstance(err, OSError) and not isinstance(err, FileNotFoundError):
            raise EdgeError(f"--out {out}: cannot move the export in ({err}); choose another --out") from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    worst = max(v for c in meta["parity_max_abs"].values() for v in c.values())
    print(f"wrote {args.out}: {meta['files']['encoder']}, {meta['files']['denoise_step']}, metadata.json")
    print(f"onnx.checker (full) passed; max |torch - onnxruntime| = {worst:.2e} "
          f"(tolerance {args.tolerance:g}; inputs: synthetic"
          + (f" and {len(real['proprio'])} frames of {args.data})" if real else ")"))
    return 0
