"""A small convolutional image trunk trained from scratch, conditioned on the instruction (FiLM).

Input ``(B, H_img, W_img, 3)`` uint8 (camera layout, so exported graphs take frames as they come);
output ``(B, d_out)``: spatial-softmax keypoints (where things are, sub-pixel) concatenated with
global average-pooled features (what is there), projected to ``d_out``.

Why FiLM: in ``stack`` the instruction names the colours of the blocks, so the trunk must know
*which* block to localise. Modulating every stage with the instruction embedding lets the keypoints
follow the named block instead of averaging over all of them. GroupNorm instead of BatchNorm keeps
train/eval identical (EMA weights, batch 1 at inference).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def _groups(channels: int) -> int:
    for g in (8, 4, 2):
        if channels % g == 0:
            return g
    return 1


class FiLMStage(nn.Module):
    """Strided conv (halves resolution) + residual conv whose output is modulated by ``cond``."""

    def __init__(self, c_in: int, c_out: int, cond_dim: int) -> None:
        super().__init__()
        self.down = nn.Conv2d(c_in, c_out, 3, stride=2, padding=1)
        self.norm1 = nn.GroupNorm(_groups(c_out), c_out)
        self.conv = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.norm2 = nn.GroupNorm(_groups(c_out), c_out)
        self.film = nn.Linear(cond_dim, 2 * c_out)
        nn.init.zeros_(self.film.weight)  # start as an unconditioned residual stage
        nn.init.zeros_(self.film.bias)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """x (B, C_in, h, w), cond (B, cond_dim) -> (B, C_out, h/2, w/2)."""
        h = F.silu(self.norm1(self.down(x)))
        r = self.norm2(self.conv(h))
        gamma, beta = self.film(cond).chunk(2, dim=-1)
        r = r * (1.0 + gamma[:, :, None, None]) + beta[:, :, None, None]
        return F.silu(h + r)


class SpatialSoftmax(nn.Module):
    """(B, C, h, w) -> (B, 2K) expected image coordinates in [-1, 1] of K learned heat maps."""

    def __init__(self, channels: int, keypoints: int, hw: tuple[int, int]) -> None:
        super().__init__()
        self.proj = nn.Conv2d(channels, keypoints, 1)
        self.log_temperature = nn.Parameter(torch.zeros(()))
        h, w = hw
        ys = torch.linspace(-1.0, 1.0, h)
        xs = torch.linspace(-1.0, 1.0, w)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        # (h*w, 2): (x, y) of each pixel; a buffer so export sees a constant
        self.register_buffer("coords", torch.stack([grid_x, grid_y], -1).reshape(h * w, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.proj(x).flatten(2) / torch.exp(self.log_temperature)  # (B, K, h*w)
        attn = torch.softmax(logits, dim=-1)
        return (attn @ self.coords).flatten(1)  # (B, 2K)


class ConvTrunk(nn.Module):
    """uint8 image (B, H_img, W_img, 3) + cond (B, cond_dim) -> (B, d_out).

    ``channels[0]`` is a cheap strided 4x4 stem (halves the resolution; most of a CNN's cost sits
    at full resolution), each further entry a FiLM stage that halves it again: 96 -> 48 -> 24 -> 12.
    """

    def __init__(self, image_hw: tuple[int, int], channels: tuple[int, ...], keypoints: int,
                 cond_dim: int, d_out: int) -> None:
        super().__init__()
        h, w = image_hw
        self.stem = nn.Sequential(nn.Conv2d(3, channels[0], 4, stride=2, padding=1),
                                  nn.GroupNorm(_groups(channels[0]), channels[0]), nn.SiLU())
        stages, c_in = [], channels[0]
        h, w = h // 2, w // 2
        for c in channels[1:]:
            stages.append(FiLMStage(c_in, c, cond_dim))
            c_in, h, w = c, (h + 1) // 2, (w + 1) // 2
        self.stages = nn.ModuleList(stages)
        self.keypoints = SpatialSoftmax(c_in, keypoints, (h, w))
        self.out = nn.Sequential(nn.Linear(2 * keypoints + c_in, d_out), nn.SiLU(),
                                 nn.Linear(d_out, d_out))

    def forward(self, image_u8: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        x = image_u8.permute(0, 3, 1, 2).to(cond.dtype) * (2.0 / 255.0) - 1.0  # (B, 3, H, W) in [-1, 1]
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x, cond)
        feats = torch.cat([self.keypoints(x), x.mean(dim=(2, 3))], dim=-1)
        return self.out(feats)


class SceneLocator(nn.Module):
    """Where the task's objects are, from one front frame: uint8 (B, H, W, 3) + instruction embedding
    (B, L) -> (B, 6) metres (the moved object's xyz, then its base's), world frame.

    Its own instruction projection and trunk (not the policy's), trained on thousands of drawn scenes
    (:mod:`sim.scenes`) and frozen: the VLA runs it once per episode, at the first query, and keeps
    the base's position as memory (``VLAConfig.scene_memory``). ``mean``/``std`` de-normalise the head.
    """

    def __init__(self, image_hw: tuple[int, int], channels: tuple[int, ...], lang_dim: int,
                 keypoints: int = 32, d_cond: int = 64, d_out: int = 128) -> None:
        super().__init__()
        self.lang_proj = nn.Sequential(nn.Linear(lang_dim, d_cond), nn.SiLU())
        self.trunk = ConvTrunk(image_hw, channels, keypoints, d_cond, d_out)
        self.head = nn.Linear(d_out, 6)
        self.register_buffer("mean", torch.zeros(6))
        self.register_buffer("std", torch.ones(6))

    def normalised(self, image_u8: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
        """The head's raw output (B, 6): (metres - mean) / std, what its training loss sees."""
        return self.head(self.trunk(image_u8, self.lang_proj(lang.to(self.head.weight.dtype))))

    def forward(self, image_u8: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
        return self.normalised(image_u8, lang).float() * self.std + self.mean
