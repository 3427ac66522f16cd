"""Deployable VLA checkpoints: ``model.pt`` = weights (EMA) + ModelSpec + architecture config.

A checkpoint *directory* (what ``edge train vla --out DIR`` writes)::

    DIR/model.pt          deployable: EMA weights, spec, config       (small; ship this)
    DIR/manifest.json     command, seed, data hash, git revision, metrics, wall time
    DIR/train_state.pt    resume state: raw weights, EMA, optimiser, data cursor (do not ship)

Files are read with ``torch.load(weights_only=True)`` (tensors and plain containers only, never
arbitrary pickled objects) and written atomically (temp file + rename). Before ``model.pt`` is read
it is verified against the sha256 in ``manifest.json`` (:mod:`edge.vla.verify`); ``verify=False``
(``--no-verify``) skips that.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from edge import atomic
from edge.config import ConfigError, from_dict, to_dict
from edge.errors import EdgeError
from edge.vla.model import VLAConfig, VLAModel
from edge.vla.spec import ModelSpec
from edge.vla.verify import verify_checkpoint

FORMAT = "edge-vla"
FORMAT_VERSION = 1
MODEL_FILE = "model.pt"
MANIFEST_FILE = "manifest.json"  # = edge.vla.verify.MANIFEST_FILE
TRAIN_STATE_FILE = "train_state.pt"


def resolve(path: str | Path) -> Path:
    """A checkpoint directory or a ``model.pt`` file -> the ``model.pt`` path (must exist)."""
    p = Path(path)
    if p.is_dir():
        p = p / MODEL_FILE
    if not p.is_file():
        d = Path(path)
        what = ("; it is a run directory (edge run)" if (d / "ticks.jsonl").is_file() else
                "; it is a demonstration dataset (edge data record)" if (d / "episodes").is_dir() else
                "; it is an ONNX export (edge export)" if (d / "metadata.json").is_file() else "")
        raise FileNotFoundError(f"no VLA checkpoint at {path} (expected a directory with {MODEL_FILE} "
                                f"or the file itself){what}; train one with `edge train vla`")
    return p


def save_model(path: str | Path, model: VLAModel, state_dict: dict[str, torch.Tensor] | None = None,
               extra: dict[str, Any] | None = None) -> Path:
    """Write the deployable checkpoint (``state_dict`` defaults to the model's own weights)."""
    sd = state_dict if state_dict is not None else model.state_dict()
    payload = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "spec": model.spec.to_dict(),
        "config": to_dict(model.config),
        "state_dict": {k: v.detach().to("cpu", torch.float32).clone() for k, v in sd.items()},
        "extra": extra or {},
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_torch(p, payload)
    return p


def read_payload(path: str | Path, verify: bool = True) -> dict[str, Any]:
    """The checkpoint's contents (format, spec, config, state_dict, extra). With ``verify`` (the
    default) ``model.pt`` must first match its manifest, else :class:`edge.vla.verify.VerificationError`."""
    p = resolve(path)
    if verify:
        verify_checkpoint(p)
    try:
        payload = torch.load(p, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as err:
        raise EdgeError(f"{p}: not a readable VLA checkpoint ({str(err) or type(err).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise EdgeError(f"{p}: not an {FORMAT} checkpoint")
    if payload.get("version") != FORMAT_VERSION:
        raise EdgeError(f"{p}: checkpoint format v{payload.get('version')} is not supported by this "
                        f"build (reads v{FORMAT_VERSION}); retrain or upgrade")
    return payload


def load_model(
    path: str | Path,
    device: str = "cpu",
    control_rate_hz: float | None = None,
    action_layout: str | tuple[str, ...] | None = None,
    proprio_layout: str | tuple[str, ...] | None = None,
    robot: Any = None,
    verify: bool = True,
) -> VLAModel:
    """Load ``model.pt`` in eval mode on ``device``.

    Pass the configured robot (anything with ``control_rate_hz``, ``action_layout`` and optionally
    ``action_names``, e.g. :class:`edge.robot_spec.RobotSpec`) or the individual values; a checkpoint
    trained for another control rate or action/proprio layout raises
    :class:`edge.vla.spec.CheckpointMismatch`. With ``verify`` (the default) the weights must match
    the sha256 recorded in the checkpoint's ``manifest.json``, else
    :class:`edge.vla.verify.VerificationError` (``verify=False`` loads them anyway).
    """
    p = resolve(path)
    payload = read_payload(p, verify=verify)
    spec = ModelSpec.from_dict(payload["spec"])
    spec.check_robot(robot, control_rate_hz=control_rate_hz, action_layout=action_layout,
                     proprio_layout=proprio_layout, source=str(p))
    try:
        config = from_dict(VLAConfig, payload["config"])
    except ConfigError as err:
        raise EdgeError(f"{p}: stored architecture config is invalid: {err}") from None
    model = VLAModel(config, spec)
    missing, unexpected = model.load_state_dict(payload["state_dict"], strict=False)
    if missing or unexpected:
        raise EdgeError(f"{p}: weights do not match the architecture (missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]}); the file is corrupt or from another build")
    return model.to(device).eval()
