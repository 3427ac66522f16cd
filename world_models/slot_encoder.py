"""Slot Attention autoencoder (Locatello et al. 2020) for the object tasks, and a per-env slot tracker.

Pipeline for a frame (S, S, 3) uint8 (or RGB-D, (S, S, 4), with ``in_channels=4``):

* CNN: 4 conv layers, 5x5 kernels, the first with stride ``first_stride`` (2 by default) -> (C, F, F)
  features, F = S / ``first_stride``. One stride at most: the cubes are ~5 px wide at 64², so a 32x32
  map keeps each of them on a few cells (stride 1 keeps every pixel, at about 3x the cost).
* soft position embedding (a linear map of the 4-channel grid x, y, 1-x, 1-y), LayerNorm + MLP
  -> N = F² input vectors.
* slot attention, ``iters`` rounds, softmax over slots, GRU + residual MLP updates. The first
  round starts from a *learned fixed* (K, D) initialisation, or from ``init_slots`` when given
  (temporal propagation: the previous frame's slots initialise the next, so slot k keeps its object).
* spatial-broadcast decoder per slot: 8x8 grid + position embedding, stride-2 transposed convs up to
  ``decoder_res``; per slot RGB (RGB-D) + an alpha logit, softmax over slots, composited image. Loss: MSE
  against the frame downsampled (area) to ``decoder_res``, pixel values in [0, 1].

Shapes: frames (B, S, S, C) uint8, C = ``in_channels``; slots (B, K, D); attention masks (B, K, F, F) (each pixel's
softmax over slots); decoder masks (B, K, R, R), R = ``decoder_res``.

Files: ``encoder.pt`` (tensors and plain values only, loaded with ``weights_only=True``) next to a
``manifest.json`` holding the config, training command, seed, data hash, metrics, git revision and
the sha256 of ``encoder.pt``; :func:`load_encoder` refuses a file whose hash differs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from edge import atomic


@dataclass(frozen=True)
class SlotEncoderConfig:
    """Slot autoencoder settings (validated; messages name key, value and range)."""

    num_slots: int = 6  # K: cubes + robot + table/goal background
    slot_dim: int = 64  # D of one slot
    iters: int = 3  # slot-attention rounds per frame
    image_size: int = 64  # side of the input frame in pixels
    # channels of the input frame and of the reconstruction: 3 (RGB) or 4 (RGB-D: the object env's
    # ``depth`` frames, the fourth channel the camera's depth as an 8-bit image)
    in_channels: int = 3
    decoder_res: int = 32  # side of the reconstructed (area-downsampled) frame
    broadcast_res: int = 8  # side of the grid each slot is broadcast onto before upsampling
    cnn_channels: int = 32  # channels of the first two conv layers
    cnn_channels_wide: int = 64  # channels of the last two conv layers (= the feature width)
    mlp_hidden: int = 128  # hidden width of the feature MLP and the slot-update MLP
    decoder_channels: int = 32  # channels of the broadcast decoder
    first_stride: int = 2  # stride of the first conv: the feature map is image_size / first_stride wide
    fg_weight: int = 10  # extra loss weight of pixels that stand out from their neighbourhood (0 = plain MSE)
    # side, in cells of the reconstruction target, of the neighbourhood a pixel is compared with for
    # ``fg_weight`` (odd): inside an object wider than about half of it the pixels are not foreground
    fg_window: int = 9
    # colour difference from that neighbourhood's mean (summed over channels, frames in [0, 1]) above
    # which a pixel is foreground
    fg_threshold: float = 0.15
    # extra loss weight of pixels that changed since the window's previous frame (training with
    # --seq-len > 1; 0 = none): reconstructing where things moved, a cube's small pushes included
    motion_weight: int = 0
    # weight of an action-conditioned next-frame loss (training with --seq-len > 1; 0 = off): a small
    # predictor (:class:`SlotPredictor`, not part of the encoder) maps a frame's slots and the action
    # taken to the next frame's slots, which are decoded and compared with the next frame, so the
    # slots must hold what decides where things go (the arm, the cubes it touches)
    predict_weight: int = 0
    # weight of a slot-space prediction loss (training with --seq-len > 1; 0 = off): the same
    # predictor's next slots against the next frame's slots as encoded, by cosine, with the target
    # held fixed (stop-gradient, as SimSiam / SPR-style objectives do)
    latent_weight: int = 0
    # slot-attention rounds for a frame whose slots start from the previous frame's (tracking);
    # 0 = ``iters``. An episode's first frame always gets ``iters`` (twice: encode_first).
    carry_iters: int = 0
    # tracking prior: while tracking, every round's attention logits get + carry_prior · log m_k(x),
    # where m_k are the previous slots' own decoder masks (what they claimed last frame), so a pixel
    # tends to stay with the slot that held it. 0 = off. An inference setting; needs no extra state.
    carry_prior: float = 0.0
    device: str = "cpu"

    def __post_init__(self) -> None:
        ranges = {"num_slots": (1, 32), "slot_dim": (4, 1024), "iters": (1, 10), "image_size": (16, 256),
                  "decoder_res": (8, 256), "broadcast_res": (2, 64), "cnn_channels": (4, 512),
                  "cnn_channels_wide": (4, 512), "mlp_hidden": (8, 4096), "decoder_channels": (4, 512),
                  "fg_weight": (0, 1000), "fg_window": (3, 63), "motion_weight": (0, 1000), "predict_weight": (0, 1000), "latent_weight": (0, 1000),
                  "carry_iters": (0, 10), "first_stride": (1, 2), "in_channels": (3, 4)}
        for key, (lo, hi) in ranges.items():
            v = getattr(self, key)
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"slot_encoder.{key}={v!r} is out of range; allowed integers [{lo}, {hi}]")
        if isinstance(self.carry_prior, bool) or not isinstance(self.carry_prior, (int, float)) \
                or not 0.0 <= float(self.carry_prior) <= 10.0:
            raise ValueError(f"slot_encoder.carry_prior={self.carry_prior!r} is out of range; allowed numbers [0, 10]")
        if isinstance(self.fg_threshold, bool) or not isinstance(self.fg_threshold, (int, float)) \
                or not 0.0 < float(self.fg_threshold) < 3.0:
            raise ValueError(f"slot_encoder.fg_threshold={self.fg_threshold!r} is out of range; allowed numbers (0, 3)")
        if self.fg_window % 2 == 0:
            raise ValueError(f"slot_encoder.fg_window={self.fg_window} must be odd (a window centred on its pixel)")
        if self.image_size % self.first_stride:
            raise ValueError(f"slot_encoder.image_size={self.image_size} must be a multiple of first_stride="
                             f"{self.first_stride}")
        ratio = self.decoder_res // self.broadcast_res
        if self.decoder_res % self.broadcast_res or ratio & (ratio - 1):
            raise ValueError(f"slot_encoder.decoder_res={self.decoder_res} must be broadcast_res="
                             f"{self.broadcast_res} times a power of two")
        if self.decoder_res > self.image_size or self.image_size % self.decoder_res:
            raise ValueError(f"slot_encoder.decoder_res={self.decoder_res} must divide image_size={self.image_size}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ValueError(f"slot_encoder.device={self.device!r} is not allowed; choose cpu or cuda[:N]")

    @classmethod
    def tiny(cls, **overrides: Any) -> SlotEncoderConfig:
        """A small, fast preset for tests (32x32 frames, 16x16 reconstruction)."""
        base = {"num_slots": 4, "slot_dim": 16, "iters": 2, "image_size": 32, "decoder_res": 16, "broadcast_res": 8,
                "cnn_channels": 8, "cnn_channels_wide": 16, "mlp_hidden": 32, "decoder_channels": 8}
        return cls(**{**base, **overrides})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> SlotEncoderConfig:
        if name not in PRESETS:
            raise ValueError(f"slot_encoder preset {name!r} is not known; choose one of {tuple(PRESETS)}")
        return PRESETS[name](**overrides)

    @property
    def feature_res(self) -> int:
        return self.image_size // self.first_stride

    @property
    def tracking_iters(self) -> int:
        """Slot-attention rounds for a frame initialised from the previous frame's slots."""
        return self.carry_iters or self.iters


PRESETS = {"default": SlotEncoderConfig, "tiny": SlotEncoderConfig.tiny}


class SoftPositionEmbed(nn.Module):
    """Adds a linear map of the (x, y, 1-x, 1-y) grid to channels-last features (B, H, W, C)."""

    def __init__(self, channels: int, res: int) -> None:
        super().__init__()
        lin = torch.linspace(0.0, 1.0, res)
        gy, gx = torch.meshgrid(lin, lin, indexing="ij")
        self.register_buffer("grid", torch.stack([gx, gy, 1 - gx, 1 - gy], -1), persistent=False)  # (H, W, 4)
        self.proj = nn.Linear(4, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(self.grid)


class SlotAttention(nn.Module):
    """Iterative attention from K slots to N inputs; slots compete for inputs (softmax over slots)."""

    def __init__(self, num_slots: int, dim: int, in_dim: int, iters: int, hidden: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.num_slots, self.dim, self.iters, self.eps = num_slots, dim, iters, eps
        self.init_slots = nn.Parameter(torch.randn(num_slots, dim) * dim ** -0.5)  # learned fixed init (K, D)
        self.norm_in, self.norm_slots, self.norm_mlp = nn.LayerNorm(in_dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(in_dim, dim, bias=False)
        self.to_v = nn.Linear(in_dim, dim, bias=False)
        self.gru = nn.GRUCell(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, inputs: torch.Tensor, init_slots: torch.Tensor | None = None, iters: int | None = None,
                prior: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """inputs (B, N, Din), init_slots (B, K, D) | None -> slots (B, K, D), attention (B, K, N);
        ``iters`` rounds (default: the module's); ``prior`` (B, K, N) | None is added to every
        round's attention logits."""
        b = inputs.shape[0]
        if init_slots is None:
            slots = self.init_slots.expand(b, -1, -1)
        else:
            if init_slots.shape != (b, self.num_slots, self.dim):
                raise ValueError(f"init_slots must be (B, K, D) = {(b, self.num_slots, self.dim)}, "
                                 f"got {tuple(init_slots.shape)}")
            slots = init_slots.to(inputs.dtype)
        # Every frame starts from a layer-normalised state: the first round's queries are unchanged
        # (norm_slots normalises anyway), but slots carried over many frames cannot grow in norm.
        slots = F.layer_norm(slots, (self.dim,))
        x = self.norm_in(inputs)
        k, v = self.to_k(x), self.to_v(x)  # (B, N, D)
        scale = self.dim ** -0.5
        for _ in range(self.iters if iters is None else iters):
            prev = slots
            q = self.to_q(self.norm_slots(slots))  # (B, K, D)
            logits = torch.einsum("bkd,bnd->bkn", q, k) * scale
            if prior is not None:
                logits = logits + prior
            attn = torch.softmax(logits, dim=1)  # softmax over slots
            weights = attn + self.eps
            weights = weights / weights.sum(-1, keepdim=True)  # weighted mean over inputs
            updates = torch.einsum("bkn,bnd->bkd", weights, v)
            slots = self.gru(updates.reshape(-1, self.dim), prev.reshape(-1, self.dim)).reshape(b, -1, self.dim)
            slots = slots + self.mlp(self.norm_mlp(slots))
        return slots, attn


class SlotAutoencoder(nn.Module):
    """CNN + slot attention encoder and spatial-broadcast decoder (see the module docstring)."""

    def __init__(self, config: SlotEncoderConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = config or SlotEncoderConfig()
        c1, c2 = cfg.cnn_channels, cfg.cnn_channels_wide
        self.cnn = nn.Sequential(
            nn.Conv2d(cfg.in_channels, c1, 5, stride=cfg.first_stride, padding=2), nn.ReLU(),
            nn.Conv2d(c1, c1, 5, padding=2), nn.ReLU(),
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(),
            nn.Conv2d(c2, c2, 5, padding=2))
        self.enc_pos = SoftPositionEmbed(c2, cfg.feature_res)
        self.enc_mlp = nn.Sequential(nn.LayerNorm(c2), nn.Linear(c2, cfg.mlp_hidden), nn.ReLU(),
                                     nn.Linear(cfg.mlp_hidden, c2))
        self.slot_attention = SlotAttention(cfg.num_slots, cfg.slot_dim, c2, cfg.iters, cfg.mlp_hidden)
        cd = cfg.decoder_channels
        self.dec_in = nn.Linear(cfg.slot_dim, cd)
        self.dec_pos = SoftPositionEmbed(cd, cfg.broadcast_res)
        layers: list[nn.Module] = [nn.Conv2d(cd, cd, 5, padding=2), nn.ReLU()]
        for _ in range((cfg.decoder_res // cfg.broadcast_res).bit_length() - 1):
            layers += [nn.ConvTranspose2d(cd, cd, 5, stride=2, padding=2, output_padding=1), nn.ReLU()]
        # the channels and a mask logit; no extra conv at full resolution: K·B maps there cost most
        layers.append(nn.Conv2d(cd, cfg.in_channels + 1, 3, padding=1))
        self.decoder = nn.Sequential(*layers)
        self.to(cfg.device)

    @property
    def device(self) -> torch.device:
        return self.slot_attention.init_slots.device

    # ------------------------------------------------------------------ encode
    def prepare(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """(B, S, S, C) uint8 -> (B, C, S, S) float in [0, 1] on the model's device (C = ``in_channels``)."""
        x = torch.as_tensor(np.asarray(frames) if not torch.is_tensor(frames) else frames)
        s, c = self.cfg.image_size, self.cfg.in_channels
        if x.ndim != 4 or tuple(x.shape[1:]) != (s, s, c) or x.dtype != torch.uint8:
            what = "RGB-D (in_channels=4: frames of an object env with depth on)" if c == 4 else "RGB (in_channels=3)"
            raise ValueError(f"frames must be (B, {s}, {s}, {c}) uint8, {what}; got {tuple(x.shape)} {x.dtype}")
        return x.to(self.device).permute(0, 3, 1, 2).float().div_(255.0)

    def encode_masks(self, frames: np.ndarray | torch.Tensor, init_slots: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """frames (B, S, S, 3) uint8 -> slots (B, K, D), attention masks (B, K, F, F)."""
        return self._encode(self.prepare(frames), init_slots)

    def encode(self, frames: np.ndarray | torch.Tensor, init_slots: torch.Tensor | None = None) -> torch.Tensor:
        """frames (B, S, S, 3) uint8, init_slots (B, K, D) | None (learned init) -> slots (B, K, D)."""
        return self.encode_masks(frames, init_slots)[0]

    def encode_first(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The first frame of an episode: encode from the learned init, then again from that result."""
        return self.encode_first_masks(frames)[0]

    def encode_first_masks(self, frames: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`encode_first` that also returns the second pass's attention masks (B, K, F, F)."""
        x = self.prepare(frames)
        return self._encode(x, self._encode(x, None)[0], first=True)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, S, S) prepared frames -> (B, F, F, C): the map slot attention attends over (CNN,
        position embedding, MLP)."""
        return self.enc_mlp(self.enc_pos(self.cnn(x).permute(0, 2, 3, 1)))

    def feature_parameters(self) -> list[nn.Parameter]:
        """The parameters :meth:`features` uses (CNN, position embedding, feature MLP)."""
        return [p for m in (self.cnn, self.enc_pos, self.enc_mlp) for p in m.parameters()]

    def _encode(self, x: torch.Tensor, init_slots: torch.Tensor | None, first: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``first``: the second pass of an episode's first frame (``iters`` rounds, not the
        tracking rounds, though it starts from slots)."""
        h = self.features(x)
        b, r = h.shape[0], h.shape[1]
        iters, prior = self.cfg.iters, None
        if init_slots is not None:
            init_slots = init_slots.to(self.device)
            iters = self.cfg.iters if first else self.cfg.tracking_iters
            if not first and self.cfg.carry_prior > 0:
                prior = self.tracking_prior(init_slots, r)
        slots, attn = self.slot_attention(h.reshape(b, r * r, -1), init_slots, iters, prior)
        return slots, attn.reshape(b, -1, r, r)

    @torch.no_grad()
    def tracking_prior(self, prev_slots: torch.Tensor, res: int) -> torch.Tensor:
        """(B, K, res²): ``carry_prior`` · log of the previous slots' decoder masks at the attention's
        resolution (area-resampled when the decoder's differs); the masks are floored at 1e-4, so the
        prior is bounded below by ``carry_prior`` · log 1e-4."""
        masks = self.decode(prev_slots)[2]  # (B, K, R, R), a softmax over slots
        if masks.shape[-1] != res:
            masks = F.interpolate(masks, size=(res, res), mode="area")
        return self.cfg.carry_prior * torch.log(masks.clamp_min(1e-4)).flatten(2)

    # ------------------------------------------------------------------ decode
    def decode(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """slots (B, K, D) -> recon (B, C, R, R), per-slot images (B, K, C, R, R), masks (B, K, R, R)
        (C = ``in_channels``)."""
        b, k, _ = slots.shape
        g = self.cfg.broadcast_res
        z = self.dec_in(slots.reshape(b * k, -1))[:, None, None, :].expand(-1, g, g, -1)  # (BK, g, g, C)
        c = self.cfg.in_channels
        out = self.decoder(self.dec_pos(z).permute(0, 3, 1, 2))  # (BK, C + 1, R, R)
        out = out.reshape(b, k, c + 1, *out.shape[-2:])
        rgb, masks = out[:, :, :c], torch.softmax(out[:, :, c], dim=1)
        recon = (rgb * masks[:, :, None]).sum(1)
        return recon, rgb, masks

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, S, S) in [0, 1] -> the reconstruction target (B, C, R, R) (area downsampling)."""
        r = self.cfg.decoder_res
        return x if x.shape[-1] == r else F.interpolate(x, size=(r, r), mode="area")

    def loss(self, frames: np.ndarray | torch.Tensor, init_slots: torch.Tensor | None = None, *,
             first: bool = False, prev_frames: np.ndarray | torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reconstruction MSE of a batch of frames; returns (loss, slots (B, K, D)).

        ``first``: encode as at an episode reset (:meth:`encode_first`, no ``init_slots``).
        ``prev_frames``: the same episodes' previous frames; with ``motion_weight`` > 0 the pixels that
        changed since them weigh more (:func:`fg_weighted_mse`).
        """
        x = self.prepare(frames)
        if first:
            init_slots = self._encode(x, None)[0]
        slots, _ = self._encode(x, init_slots, first=first)
        recon, _, _ = self.decode(slots)
        t = self.target(x)
        prev = None
        if prev_frames is not None and self.cfg.motion_weight:
            prev = self.target(self.prepare(prev_frames))
        return fg_weighted_mse(recon, t, self.cfg.fg_weight, prev, self.cfg.motion_weight,
                               self.cfg.fg_window, self.cfg.fg_threshold), slots


def foreground_mask(target: torch.Tensor, window: int = 9, threshold: float = 0.15) -> torch.Tensor:
    """(B, C, H, W) in [0, 1] -> (B, 1, H, W) bool: the pixels the reconstruction loss weighs as
    foreground, those whose colour differs from the mean of their ``window`` x ``window``
    neighbourhood (odd; cut at the border) by more than ``threshold`` (summed over channels; the
    loss uses 0.15). Inside an object much larger than the window the neighbourhood is the object
    itself, so its interior is not foreground."""
    if window < 1 or window % 2 == 0:
        raise ValueError(f"foreground_mask: window={window} must be a positive odd number")
    bg = F.avg_pool2d(target, window, stride=1, padding=window // 2, count_include_pad=False)
    return (target - bg).abs().sum(1, keepdim=True) > threshold


def fg_weighted_mse(recon: torch.Tensor, target: torch.Tensor, fg_weight: float,
                    prev: torch.Tensor | None = None, motion_weight: float = 0.0, fg_window: int = 9,
                    fg_threshold: float = 0.15) -> torch.Tensor:
    """Reconstruction MSE over (B, C, H, W) images (RGB, or RGB-D: depth counts as a channel). The cubes are ~0.5 % of the pixels each: with plain
    MSE an autoencoder settles on the smooth table first (uniform masks). Pixels that differ from the
    mean of their ``fg_window`` x ``fg_window`` neighbourhood by more than ``fg_threshold``
    (:func:`foreground_mask`) get ``fg_weight`` more weight; no labels are used (0 = plain MSE).

    ``prev``: the previous frames' targets (same shape); pixels whose colour changed since then (the
    same 0.15 threshold on the summed channel difference) get ``motion_weight`` more, on top."""
    moving = prev is not None and bool(motion_weight)
    if not fg_weight and not moving:
        return F.mse_loss(recon, target)
    w = torch.ones_like(target[:, :1])
    if fg_weight:
        w = w + fg_weight * foreground_mask(target, fg_window, fg_threshold).float()
    if moving:
        w = w + motion_weight * ((target - prev).abs().sum(1, keepdim=True) > 0.15).float()
    return ((recon - target) ** 2 * w).mean() / w.mean()


class SlotPredictor(nn.Module):
    """Next slots from slots and an action, for the encoder's ``predict_weight`` and ``latent_weight``
    training losses.

    The action's embedding is added to every slot; one pre-norm transformer layer lets the slots see
    each other (the arm pushes a cube); a linear map gives each slot's change, zero-initialised so
    that training starts from predicting no change. (B, K, D), (B,) long -> (B, K, D)."""

    def __init__(self, slot_dim: int, n_actions: int) -> None:
        super().__init__()
        heads = 4 if slot_dim % 4 == 0 else 1
        self.action = nn.Embedding(n_actions, slot_dim)
        self.mix = nn.TransformerEncoderLayer(slot_dim, heads, 2 * slot_dim, dropout=0.0, batch_first=True,
                                              norm_first=True)
        self.delta = nn.Linear(slot_dim, slot_dim)
        nn.init.zeros_(self.delta.weight)
        nn.init.zeros_(self.delta.bias)

    def forward(self, slots: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        if actions.shape != slots.shape[:1]:
            raise ValueError(f"actions must be (B,) = ({slots.shape[0]},), got {tuple(actions.shape)}")
        h = self.mix(slots + self.action(actions.to(slots.device).long())[:, None, :])
        return slots + self.delta(h)


def next_frame_loss(model: SlotAutoencoder, predictor: SlotPredictor, slots: torch.Tensor,
                    actions: np.ndarray | torch.Tensor, next_frames: np.ndarray | torch.Tensor,
                    frames: np.ndarray | torch.Tensor | None = None) -> torch.Tensor:
    """The action-conditioned next-frame loss: ``predictor``'s next slots from ``slots`` (B, K, D)
    and ``actions`` (B,), decoded by ``model`` and compared with ``next_frames`` as the
    reconstruction is (:func:`fg_weighted_mse`; with ``motion_weight`` the pixels that changed since
    ``frames`` weigh more)."""
    recon = model.decode(predictor(slots, torch.as_tensor(np.asarray(actions), device=slots.device)))[0]
    t = model.target(model.prepare(next_frames))
    prev = None
    if frames is not None and model.cfg.motion_weight:
        prev = model.target(model.prepare(frames))
    return fg_weighted_mse(recon, t, model.cfg.fg_weight, prev, model.cfg.motion_weight, model.cfg.fg_window,
                           model.cfg.fg_threshold)


def slot_prediction_loss(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over episodes and slots of 1 − cos(predicted slot, target slot), (B, K, D) each; the
    target is detached (no gradient reaches it), so the loss cannot be lowered by moving it."""
    return (1.0 - F.cosine_similarity(predicted, target.detach(), dim=-1)).mean()


class SlotTracker:
    """Stateful slots for B environments: ``reset`` at episode start, ``step`` on every new frame.

    Runs without gradients in eval mode; slot k of an env keeps following the same object because
    each frame's slot attention starts from that env's previous slots.
    """

    def __init__(self, model: SlotAutoencoder) -> None:
        self.model = model.eval()
        self.slots: torch.Tensor | None = None  # (B, K, D)

    @torch.no_grad()
    def reset(self, frames: np.ndarray | torch.Tensor, env_ids: np.ndarray | list[int] | None = None
              ) -> torch.Tensor:
        """frames (B, S, S, 3) for all envs, or (len(env_ids), S, S, 3) for the envs that restarted."""
        new = self.model.encode_first(frames)
        if env_ids is None:
            self.slots = new
        else:
            if self.slots is None:
                raise RuntimeError("SlotTracker.reset(env_ids=...) needs a full reset first")
            self.slots[torch.as_tensor(np.asarray(env_ids), dtype=torch.long, device=self.slots.device)] = new
        return self.slots.clone()

    @torch.no_grad()
    def step(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """frames (B, S, S, 3) -> slots (B, K, D), initialised from the previous slots."""
        if self.slots is None:
            raise RuntimeError("SlotTracker.step before reset")
        if len(frames) != len(self.slots):
            raise ValueError(f"SlotTracker holds {len(self.slots)} envs, got {len(frames)} frames")
        self.slots = self.model.encode(frames, self.slots)
        return self.slots.clone()


# ---------------------------------------------------------------------- files
def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_encoder(model: SlotAutoencoder, out_dir: str | Path, *, command: str = "", seed: int | None = None,
                 data_hash: str | None = None, metrics: dict | None = None, extra: dict | None = None) -> Path:
    """Write ``encoder.pt`` and ``manifest.json`` into ``out_dir``; returns the manifest path.
    ``extra``: more provenance keys (e.g. ``init_from``)."""
    from edge.vla.manifest import git_revision

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = dataclasses.asdict(model.cfg)
    weights = out / "encoder.pt"
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    atomic.write_torch(weights, {"config": config, "state_dict": state})
    manifest = {"file": weights.name, "sha256": sha256_file(weights), "config": config, "command": command,
                "seed": seed, "data_hash": data_hash, "metrics": metrics or {}, "git": git_revision(),
                "torch": torch.__version__, **(extra or {})}
    return atomic.write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")


def load_verified(path: str | Path, what: str, kind: str | None = None) -> tuple[dict, dict]:
    """(manifest, weights blob) of an encoder directory or its ``manifest.json``: the weights file it
    names must exist and match its sha256, and its ``kind`` must be ``kind`` when given
    (FileNotFoundError / ValueError naming the file and ``what`` it should be otherwise)."""
    path = Path(path)
    manifest_path = path / "manifest.json" if path.is_dir() else path
    if not manifest_path.is_file():
        raise FileNotFoundError(f"no {what} manifest at {manifest_path}")
    manifest = json.loads(manifest_path.read_text())
    if not isinstance(manifest, dict):
        raise ValueError(f"{manifest_path} is not a {what} manifest (not a JSON object)")
    if kind is not None and manifest.get("kind") != kind:
        raise ValueError(f"{manifest_path} is not a {what} (kind {manifest.get('kind')!r}, want {kind!r})")
    if kind is None and manifest.get("kind") is not None:  # another model's (a pixel encoder, a world model)
        raise ValueError(f"{manifest_path} is not a {what} (it is a {manifest['kind']!r})")
    if not {"file", "sha256", "config"} <= set(manifest):
        raise ValueError(f"{manifest_path} is not a {what} manifest (it lacks file / sha256 / config): "
                         "make one with `edge train slot-encoder`")
    weights = manifest_path.parent / manifest["file"]
    if not weights.is_file():
        raise FileNotFoundError(f"{what} weights {weights} named by {manifest_path} are missing")
    digest = sha256_file(weights)
    if digest != manifest["sha256"]:
        raise ValueError(f"{what} weights {weights} have sha256 {digest}, but {manifest_path} records "
                         f"{manifest['sha256']}: the file was changed or replaced")
    return manifest, torch.load(weights, map_location="cpu", weights_only=True)


def load_encoder(path: str | Path, device: str = "cpu", carry_iters: int | None = None,
                 carry_prior: float | None = None) -> tuple[SlotAutoencoder, dict]:
    """Load from a directory or its ``manifest.json``; the weights' sha256 must match the manifest.
    ``carry_iters`` / ``carry_prior``: override the tracking rounds / the tracking prior (inference
    settings; the weights do not change)."""
    manifest, blob = load_verified(path, "slot-encoder")
    extra = {} if carry_iters is None else {"carry_iters": carry_iters}
    if carry_prior is not None:
        extra["carry_prior"] = carry_prior
    model = SlotAutoencoder(SlotEncoderConfig(**{**blob["config"], "device": device, **extra}))
    model.load_state_dict(blob["state_dict"])
    return model.eval(), manifest
