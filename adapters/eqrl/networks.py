"""EQRL's networks (torch). Shapes: B batch, N ensemble members, D VLA feature width, X context
width (``edge.runtime.query_env.CONTEXT_DIM``), L = H * Da latent noise entries.

* :class:`Encoder` — features (B, D) + context (B, X) -> state (B, S): a linear projection and
  LayerNorm of the VLA features (their scale is the VLA's, not ours), concatenated with the context.
* :class:`Actor` — state -> tanh-Gaussian noise w in [-m, m]^L and sigmoid-Gaussian schedule
  controls c in (0, 1)^2 (K, C), with their joint log-probability.
* :class:`Ensemble` — N independent MLPs evaluated as one batched matmul: (B, in) -> (N, B).
"""

from __future__ import annotations

import math

import torch
from torch import nn

LOG_STD_SCHED = (-3.0, 0.0)  # clamp of the schedule heads' log sigma (as the reference code)
LOG_STD_NOISE = (-5.0, 1.0)


class Encoder(nn.Module):
    def __init__(self, feature_dim: int, context_dim: int, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(feature_dim, width)
        self.norm = nn.LayerNorm(width)
        self.out_dim = width + context_dim

    def forward(self, features: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.norm(self.proj(features)), context], dim=-1)


def mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.LayerNorm(h), nn.Tanh(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))


class Actor(nn.Module):
    """Noise head (L means, L log-stds) and two schedule heads (mean, log-std each)."""

    def __init__(self, state_dim: int, latent_dim: int, hidden: int, magnitude: float,
                 init_std: float, c_init: tuple[float, float]) -> None:
        super().__init__()
        self.L, self.m = latent_dim, float(magnitude)
        self.trunk = nn.Sequential(nn.Linear(state_dim, hidden), nn.LayerNorm(hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.noise = nn.Linear(hidden, 2 * latent_dim)
        self.sched = nn.Linear(hidden, 4)
        with torch.no_grad():
            self.noise.weight.mul_(0.01)
            self.noise.bias.zero_()
            # m * tanh(x) ~ m * x near 0: std(x) = init_std / m gives w ~ N(0, init_std^2) at the start
            self.noise.bias[latent_dim:] = math.log(init_std / self.m)
            self.sched.weight.zero_()  # the schedule starts at c_init for every state
            logit = [math.log(c / (1 - c)) for c in (min(max(v, 1e-3), 1 - 1e-3) for v in c_init)]
            self.sched.bias.copy_(torch.tensor([logit[0], logit[1], -1.0, -1.0]))

    def forward(self, state: torch.Tensor, deterministic: bool = False,
                noise_eps: torch.Tensor | None = None):
        """-> w (B, L), c (B, 2), log-prob of w (B,), log-prob of c (B, 2).

        ``deterministic``: the schedule at its mode; the noise too unless ``noise_eps`` (B, L)
        standard-normal draws are given, then ``w = m tanh(mu + sigma * noise_eps)`` (how the
        deployed adapter samples its noise reproducibly)."""
        h = self.trunk(state)
        mu, log_std = self.noise(h).split(self.L, dim=-1)
        log_std = log_std.clamp(*LOG_STD_NOISE)
        s = self.sched(h)
        smu, slog = s[:, :2], s[:, 2:].clamp(*LOG_STD_SCHED)
        if noise_eps is not None:
            x = mu + log_std.exp() * noise_eps
        elif deterministic:
            x = mu
        else:
            x = mu + log_std.exp() * torch.randn_like(mu)
        z = smu if deterministic else smu + slog.exp() * torch.randn_like(smu)
        w = self.m * torch.tanh(x)
        c = torch.sigmoid(z)
        logp_w = (_normal_logp(x, mu, log_std)
                  - torch.log(self.m * (1 - torch.tanh(x) ** 2) + 1e-6)).sum(-1)
        logp_c = _normal_logp(z, smu, slog) - torch.log(c * (1 - c) + 1e-6)
        return w, c, logp_w, logp_c


def _normal_logp(x: torch.Tensor, mu: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    return -0.5 * ((x - mu) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)


class Ensemble(nn.Module):
    """N two-hidden-layer MLPs with scalar output, batched: (B, in) -> (N, B)."""

    def __init__(self, n: int, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.n = n
        dims = [in_dim, hidden, hidden, 1]
        self.w = nn.ParameterList()
        self.b = nn.ParameterList()
        for a, b in zip(dims[:-1], dims[1:]):
            bound = 1 / math.sqrt(a)
            self.w.append(nn.Parameter(torch.empty(n, a, b).uniform_(-bound, bound)))
            self.b.append(nn.Parameter(torch.empty(n, 1, b).uniform_(-bound, bound)))
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.unsqueeze(0).expand(self.n, *x.shape)  # (N, B, in)
        for i, (w, b) in enumerate(zip(self.w, self.b)):
            h = torch.baddbmm(b, h, w)
            if i == 0:
                h = torch.tanh(self.norm(h))
            elif i < len(self.w) - 1:
                h = torch.relu(h)
        return h.squeeze(-1)
