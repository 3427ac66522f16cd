"""The flow-matching action expert: one velocity evaluation (1 NFE) for a noisy chunk.

A small transformer over the H action tokens of the chunk (bidirectional self-attention), conditioned
on the per-query prefix features and the flow time through adaptive layer norm with zero-initialised
gates (DiT-style), so a fresh expert predicts zero velocity and each block starts as the identity.

Shapes: x (B, H, Da) normalised actions at flow time t (B,) in [0, 1] (0 = noise, 1 = clean);
features (B, D) from the prefix encoder; output velocity (B, H, Da) = d x / d t.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of t (B,) in [0, 1] -> (B, dim); periods from 1/1000 to 1 of the flow."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32, device=t.device)
                      * (-math.log(1000.0) / max(half - 1, 1))) * 1000.0
    args = t.float()[:, None] * freqs[None, :]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = F.pad(emb, (0, 1))
    return emb


class AdaLNBlock(nn.Module):
    """Pre-norm transformer block whose norms are shifted/scaled and outputs gated by ``cond``."""

    def __init__(self, d: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d_model={d} must be divisible by expert_heads={heads}")
        self.heads, self.d_head = heads, d // heads
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        hidden = int(d * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, d))
        self.modulation = nn.Linear(d, 6 * d)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.d_head).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, heads, n, d_head)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d_head)), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, d))

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """x (B, H, d), cond (B, d) -> (B, H, d)."""
        shift1, scale1, gate1, shift2, scale2, gate2 = self.modulation(cond)[:, None, :].chunk(6, dim=-1)
        x = x + gate1 * self._attention(self.norm1(x) * (1.0 + scale1) + shift1)
        return x + gate2 * self.mlp(self.norm2(x) * (1.0 + scale2) + shift2)


class ActionExpert(nn.Module):
    """velocity(x (B, H, Da), t (B,), features (B, d)) -> (B, H, Da)."""

    def __init__(self, action_dim: int, chunk_len: int, d: int, layers: int, heads: int,
                 mlp_ratio: float) -> None:
        super().__init__()
        self.d = d
        self.inp = nn.Linear(action_dim, d)
        self.pos = nn.Parameter(torch.randn(chunk_len, d) * 0.02)
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(AdaLNBlock(d, heads, mlp_ratio) for _ in range(layers))
        self.norm_out = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.mod_out = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, action_dim)
        for layer in (self.mod_out, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        dtype = features.dtype
        cond = F.silu(features + self.time_mlp(time_embedding(t, self.d).to(dtype)))  # (B, d)
        h = self.inp(x.to(dtype)) + self.pos  # (B, H, d)
        for block in self.blocks:
            h = block(h, cond)
        shift, scale = self.mod_out(cond)[:, None, :].chunk(2, dim=-1)
        return self.out(self.norm_out(h) * (1.0 + scale) + shift)
