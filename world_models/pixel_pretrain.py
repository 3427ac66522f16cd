"""Pixel-encoder pretraining: the monolithic world model's CNN as a plain autoencoder on the frames the
slot encoder is pretrained on.

COMET plans over a slot encoder that was pretrained on random-policy frames before its world model
saw a single environment step. A pixel world model trained end to end starts from nothing. To compare
like with like, the same frames (the same ``data_train.npz``, checked by its ``data_hash``) train the
pixel model's own encoder (:class:`world_models.token_model.PixelEncoder`, the CNN → ``width``
latent) with a transposed-conv decoder and the slot encoder's foreground-weighted reconstruction loss;
``edge train world-model --kind pixels --obs pixels --encoder DIR`` then freezes it, as the slot
models freeze theirs.

``edge train pixel-encoder --out DIR`` (collects the frames into DIR if absent, as ``edge train
slot-encoder`` does, with the same seeds). DIR gets ``encoder.pt`` (``{"kind": "pixel-encoder",
"config", "state_dict"}``: the encoder only), ``manifest.json`` (command, seed, data hash, git
revision, metrics, sha256 of the weights; checked when loaded), ``metrics.json``, ``log.jsonl`` and
``train_state.pt`` (``edge train pixel-encoder ... --resume`` continues from it).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from edge import atomic
from world_models.slot_encoder import fg_weighted_mse
from world_models.slot_pretrain import (
    _check_positive,
    _load_train_state,
    _save_train_state,
    cut_log_after,
    load_dataset,
    lr_at,
)
from world_models.token_model import PixelEncoder

KIND = "pixel-encoder"
WEIGHTS_FILE = "encoder.pt"


@dataclasses.dataclass(frozen=True)
class PixelEncoderConfig:
    """The encoder's shape; must equal the world model's ``image_size``, ``cnn_channels`` and ``width``."""

    image_size: int = 64
    channels: int = 32
    width: int = 64
    fg_weight: int = 10  # extra loss weight of pixels that stand out from their 9x9 neighbourhood (0 = plain MSE)

    def __post_init__(self) -> None:
        if self.image_size < 16 or self.image_size % 16:
            raise ValueError(f"image_size={self.image_size}: must be a multiple of 16, >= 16")
        for key in ("channels", "width"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key}={getattr(self, key)}: must be >= 1")
        if not 0 <= self.fg_weight <= 1000:
            raise ValueError(f"fg_weight={self.fg_weight}: must be in [0, 1000]")


class PixelAutoencoder(nn.Module):
    """:class:`PixelEncoder` (frames → ``width``) and a decoder back to the frame (4 transposed convs)."""

    def __init__(self, cfg: PixelEncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.device = "cpu"  # where train states are loaded to (slot_pretrain's resume helper reads it)
        c, s = cfg.channels, cfg.image_size // 16
        self.encoder = PixelEncoder(cfg.image_size, c, cfg.width)
        self.decoder = nn.Sequential(
            nn.Linear(cfg.width, 4 * c * s * s), nn.GELU(), nn.Unflatten(1, (4 * c, s, s)),
            nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1), nn.GELU(), nn.ConvTranspose2d(2 * c, 2 * c, 4, 2, 1), nn.GELU(),
            nn.ConvTranspose2d(2 * c, c, 4, 2, 1), nn.GELU(), nn.ConvTranspose2d(c, 3, 4, 2, 1))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, S, S, 3) uint8 → reconstruction (B, 3, S, S) in [0, 1] units (not clamped)."""
        return self.decoder(self.encoder(frames))

    def loss(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Reconstruction MSE with the slot encoder's foreground weighting (1 + ``fg_weight``)."""
        x = torch.as_tensor(np.asarray(frames))
        return fg_weighted_mse(self(x), x.permute(0, 3, 1, 2).float() / 255.0, self.cfg.fg_weight)


@torch.no_grad()
def evaluate(model: PixelAutoencoder, arrays: dict[str, np.ndarray], max_frames: int = 1024,
             batch: int = 64) -> dict[str, float]:
    """On held-out frames: the weighted loss, plain MSE and the latent's spread (mean per-dimension
    variance over frames; a collapsed encoder gives ~0)."""
    was = model.training
    model.eval()
    frames = arrays["frames"][:max_frames]
    losses, mses, zs = [], [], []
    for i in range(0, len(frames), batch):
        x = torch.as_tensor(frames[i:i + batch])
        t = x.permute(0, 3, 1, 2).float() / 255.0
        z = model.encoder(x)
        recon = model.decoder(z)  # one pass for all three figures
        losses.append(float(fg_weighted_mse(recon, t, model.cfg.fg_weight)) * len(x))
        mses.append(float(F.mse_loss(recon, t)) * len(x))
        zs.append(z)
    model.train(was)
    z = torch.cat(zs)
    return {"eval_loss": sum(losses) / len(frames), "eval_mse": sum(mses) / len(frames),
            "latent_var": float(z.var(0).mean()), "eval_frames": len(frames)}


def save_pixel_encoder(model: PixelAutoencoder, out_dir: str | Path, *, command: str, seed: int, data_hash: str,
                       metrics: dict) -> Path:
    """Write ``encoder.pt`` (the encoder's weights only) and ``manifest.json``; returns the manifest path."""
    from edge.vla.manifest import git_revision
    from world_models.slot_encoder import sha256_file

    out = Path(out_dir)
    config = dataclasses.asdict(model.cfg)
    weights = out / WEIGHTS_FILE
    atomic.write_torch(weights, {"kind": KIND, "config": config,
                                 "state_dict": {k: v.detach().cpu() for k, v in model.encoder.state_dict().items()}})
    manifest = {"kind": KIND, "file": weights.name, "sha256": sha256_file(weights), "config": config,
                "command": command, "seed": seed, "data_hash": data_hash, "metrics": metrics,
                "git": git_revision(), "torch": torch.__version__}
    return atomic.write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")


def is_pixel_encoder(path: str | Path) -> bool:
    """Whether ``path`` (a directory or its manifest) holds a pretrained pixel encoder."""
    p = Path(path)
    m = p / "manifest.json" if p.is_dir() else p
    try:
        return json.loads(m.read_text()).get("kind") == KIND
    except (OSError, ValueError):
        return False


def load_pixel_encoder(path: str | Path) -> tuple[PixelEncoderConfig, dict, dict]:
    """(config, encoder state dict, manifest) from a directory or its manifest; the weights' sha256
    must match the manifest (ValueError / FileNotFoundError naming the file otherwise)."""
    from world_models.slot_encoder import load_verified

    manifest, blob = load_verified(path, "pixel encoder", kind=KIND)
    return PixelEncoderConfig(**blob["config"]), blob["state_dict"], manifest


def train_pixel_encoder(config: PixelEncoderConfig, data_path: str | Path, out_dir: str | Path, steps: int, *,
                        eval_data_path: str | Path | None = None, batch_size: int = 32, lr: float = 1e-3,
                        warmup_steps: int = 200, half_life_steps: int = 2000, grad_clip: float = 1.0,
                        seed: int = 0, ckpt_every: int = 250, eval_every: int = 1000, log_every: int = 50,
                        command: str | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or continue: ``train_state.pt`` in ``out_dir`` with the same settings) the autoencoder on
    single frames; write the encoder, its manifest and ``metrics.json``; return the final metrics."""
    _check_positive(steps=steps, batch_size=batch_size, lr=lr, warmup_steps=warmup_steps,
                    half_life_steps=half_life_steps, grad_clip=grad_clip, ckpt_every=ckpt_every,
                    eval_every=eval_every, log_every=log_every)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arrays, meta = load_dataset(data_path)
    eval_arrays = load_dataset(eval_data_path)[0] if eval_data_path is not None else None
    if arrays["frames"].shape[1] != config.image_size:
        raise ValueError(f"{data_path} has {arrays['frames'].shape[1]}px frames but image_size={config.image_size}")
    for path, arr in ((data_path, arrays), (eval_data_path, eval_arrays)):
        if arr is not None and arr["frames"].shape[-1] != 3:
            raise ValueError(f"{path} has {arr['frames'].shape[-1]}-channel frames; the pixel encoder reads RGB "
                             "frames: collect without --depth")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = PixelAutoencoder(config)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    settings = {"config": dataclasses.asdict(config), "data_hash": meta["data_hash"], "batch_size": batch_size,
                "lr": lr, "warmup_steps": warmup_steps, "half_life_steps": half_life_steps,
                "grad_clip": grad_clip, "seed": seed}
    state_path, log_path = out / "train_state.pt", out / "log.jsonl"
    step = 0
    evaluated = True
    if state_path.is_file():
        step = _load_train_state(state_path, settings, model, opt, rng)
        log(f"resumed from {state_path} at step {step}")
        evaluated = cut_log_after(log_path, step)
    elif log_path.exists():
        log_path.unlink()

    def record(entry: dict) -> None:
        with open(log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    frames = arrays["frames"]
    model.train()
    t_last, loss_acc, n_acc = time.monotonic(), 0.0, 0
    metrics: dict[str, Any] = {}
    if eval_arrays is not None and not evaluated and step > 0 and (step % eval_every == 0 or step == steps):
        metrics = evaluate(model, eval_arrays)  # killed between its checkpoint and its eval
        record({"step": step, "eval": metrics})
        model.train()
    while step < steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, lr, warmup_steps, half_life_steps)
        loss = model.loss(frames[rng.integers(len(frames), size=batch_size)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        step += 1
        loss_acc, n_acc = loss_acc + loss.item(), n_acc + 1
        if step % log_every == 0 or step == steps:
            now = time.monotonic()
            record({"step": step, "loss": loss_acc / n_acc, "lr": opt.param_groups[0]["lr"],
                    "step_s": (now - t_last) / n_acc})
            log(f"step {step}/{steps} loss {loss_acc / n_acc:.5f} {(now - t_last) / n_acc:.3f} s/step")
            t_last, loss_acc, n_acc = now, 0.0, 0
        if step % ckpt_every == 0 or step == steps:
            _save_train_state(state_path, model, opt, step, rng, settings)
        if eval_arrays is not None and (step % eval_every == 0 or step == steps):
            metrics = evaluate(model, eval_arrays)
            record({"step": step, "eval": metrics})
            log(f"eval @ {step}: " + ", ".join(f"{k} {v:.5f}" for k, v in metrics.items() if isinstance(v, float)))
    if eval_arrays is not None and not metrics:  # resumed after the last step
        metrics = evaluate(model, eval_arrays)
    metrics = {"step": step, **metrics}
    atomic.write_text(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    save_pixel_encoder(model, out, command=command if command is not None else shlex.join([sys.executable, *sys.argv]),
                       seed=seed, data_hash=meta["data_hash"], metrics=metrics)
    return metrics
