"""Categorical supports for reward and value (MuZero): the invertible transform and two-hot codes.

A scalar x is squashed by h(x) = sign(x)(√(|x|+1) − 1) + εx, then spread over the two nearest
atoms of a uniform support in h-space. ``decode`` inverts both steps, so ``decode(encode(x)) == x``
inside the support's range (values beyond it are an error, not a clip: :func:`two_hot` raises).
"""

from __future__ import annotations

import numpy as np
import torch

EPS = 1e-3


def h(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1) - 1) + EPS * x


def h_inv(y: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
    """The inverse of :func:`h`, on a torch tensor or a numpy array (in its own dtype)."""
    xp = np if isinstance(y, np.ndarray) else torch
    return xp.sign(y) * (((xp.sqrt(1 + 4 * EPS * (xp.abs(y) + 1 + EPS)) - 1) / (2 * EPS)) ** 2 - 1)


class Support:
    """``n`` atoms spaced uniformly over [-lim, lim] in h-space."""

    def __init__(self, lim: float = 5.0, n: int = 41) -> None:
        if n < 3 or lim <= 0:
            raise ValueError(f"support needs n >= 3 atoms and lim > 0, got n={n}, lim={lim}")
        self.lim, self.n = float(lim), int(n)
        self.atoms = torch.linspace(-lim, lim, n)
        self._atoms64 = self.atoms.numpy().astype(np.float64)  # decode_np's, converted once
        self.max_scalar = float(h_inv(torch.tensor(lim)))

    def two_hot(self, x: torch.Tensor) -> torch.Tensor:
        """(...,) scalars -> (..., n) probabilities."""
        y = h(x)
        if torch.any(y.abs() > self.lim + 1e-5):
            raise ValueError(f"value {float(x.abs().max()):.3g} exceeds the support's range ±{self.max_scalar:.3g}; "
                             "widen world_model.support_lim")
        pos = (y.clamp(-self.lim, self.lim) + self.lim) / (2 * self.lim) * (self.n - 1)
        lo = pos.floor().long().clamp(0, self.n - 2)
        w_hi = pos - lo
        out = torch.zeros(*x.shape, self.n, dtype=torch.float32, device=x.device)
        out.scatter_(-1, lo.unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
        out.scatter_add_(-1, (lo + 1).unsqueeze(-1), w_hi.unsqueeze(-1))
        return out

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., n) logits -> (...,) scalar expectation."""
        p = torch.softmax(logits, -1)
        return h_inv((p * self.atoms.to(logits.device)).sum(-1))

    def decode_np(self, logits: np.ndarray) -> np.ndarray:
        """:meth:`decode` in float64 numpy (the ONNX Runtime search: no torch op per node). The
        inverse transform amplifies float32 rounding, so float32 :meth:`decode` differs from this
        one by up to ~3e-4 absolute on the shipped models' supports; this is the more accurate."""
        x = np.asarray(logits, np.float64)
        e = np.exp(x - x.max(-1, keepdims=True))
        return h_inv((e / e.sum(-1, keepdims=True)) @ self._atoms64)
