"""``edge export``: write ONNX graphs (encoder + one denoising step) and metadata for a checkpoint."""

from __future__ import annotations

import argparse

from edge.cli import add_subparser

EXAMPLES = """
  edge export checkpoints/vla_stack --out exports/vla_stack
  edge export checkpoints/vla_stack --out exports/vla_stack --data data/stack   # parity on real frames
"""


def register(subparsers) -> None:
    parser = add_subparser(subparsers, "export", "export a VLA checkpoint to ONNX (encoder + one "
                           "denoising step, dynamic batch) with a parity check against torch",
                           EXAMPLES)
    parser.add_argument("checkpoint", help="checkpoint directory or model.pt")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="max abs difference torch vs onnxruntime allowed")
    parser.add_argument("--data", help="demonstration directory: check parity on its first frames too")
    parser.set_defaults(func=_export)


def _real_inputs(data_dir: str, spec) -> dict:
    import numpy as np

    from edge.vla.language import InstructionCache
    from sim.demos import iter_episodes

    ep = next(iter_episodes(data_dir), None)
    if ep is None:
        return {}
    idx = np.linspace(0, len(ep["action"]) - 1, 3).astype(int)
    lang = InstructionCache(spec.lang_encoder_id, spec.lang_dim, spec.instruction_embeddings)
    out = {cam: ep[cam][idx] for cam in spec.cameras if cam in ep}
    out["proprio"] = ep["proprio"][idx].astype(np.float32)
    out["lang"] = lang([ep["instruction"]] * len(idx))
    return out


def _export(args: argparse.Namespace) -> int:
    from edge.export import export_onnx
    from edge.vla.checkpoint import read_payload
    from edge.vla.spec import ModelSpec

    real = None
    if args.data:
        real = _real_inputs(args.data, ModelSpec.from_dict(read_payload(args.checkpoint)["spec"]))
    meta = export_onnx(args.checkpoint, args.out, opset=args.opset, tolerance=args.tolerance,
                       real_inputs=real)
    worst = max(v for c in meta["parity_max_abs"].values() for v in c.values())
    print(f"wrote {args.out}: {meta['files']['encoder']}, {meta['files']['denoise_step']}, metadata.json")
    print(f"onnx.checker (full) passed; max |torch - onnxruntime| = {worst:.2e} "
          f"(tolerance {args.tolerance:g})")
    return 0
