"""The adapter's deterministic decision as one torch module, exported to ONNX for the runtime's
backends: features (B, D) + context (B, X) -> noise w (B, H, Da), controls c (B, 2), K (B,), C (B,),
difficulty u (B,). The difficulty's running statistics and the prior's gate are frozen into it.

    python -c "from adapters.eqrl.export import export_onnx; export_onnx('runs/eqrl_stack', 'out/')"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from adapters.eqrl.checkpoint import ONNX_FILE, load_agent


class DecisionModule(nn.Module):
    """EqrlAgent.act(deterministic=True) in torch ops only (same numbers, exportable)."""

    def __init__(self, agent: Any, gate: float) -> None:
        super().__init__()
        self.agent, cfg, ctl = agent, agent.cfg, agent.controls
        self.gate, self.cfg = float(gate), cfg

        def f32(v):
            return torch.as_tensor(np.asarray(v, np.float64), dtype=torch.float64)

        self.register_buffer("c_def", f32(ctl.c_def))
        self.register_buffer("c_easy", f32(ctl.c_easy))
        self.register_buffer("c_hard", f32(ctl.c_hard))
        self.register_buffer("mask", f32(ctl.mask))
        self.uses_prior, self.mode = ctl.uses_prior, cfg.mode
        adapt = [cfg.mode != "chunk_only", cfg.mode != "steps_only"] if ctl.uses_prior else [False, False]
        self.register_buffer("adapt", torch.tensor(adapt))

    def forward(self, features: torch.Tensor, context: torch.Tensor, noise_eps: torch.Tensor):
        """``noise_eps`` (B, L): standard-normal draws the noise is sampled with (zeros = its mode)."""
        a, cfg = self.agent, self.cfg
        s = a.state(features, context)
        w, c_l, _, _ = a.actor(s, True, noise_eps)
        w_mode, _, _, _ = a.actor(s, True)
        B = s.shape[0]
        c_def = self.c_def.expand(B, 2)
        std = a.difficulty_signal(s, w_mode).double()
        mean, sd = a.u_stats[0].double(), a.u_stats[1].double().clamp_min(1e-8)
        u = torch.tanh(cfg.difficulty_scale * (std - mean) / sd)
        u = torch.where(u.abs() < cfg.difficulty_deadband, torch.zeros_like(u), u)
        c_l = c_l.double()
        if self.mode == "residual_only":
            c = c_l
        elif self.mode == "noise_only":
            c = c_def
        else:
            if self.uses_prior:
                target = self.c_easy + 0.5 * (u[:, None] + 1.0) * (self.c_hard - self.c_easy)
                prior = c_def + self.gate * cfg.prior_strength * (target - c_def)
            else:
                prior = c_def
            c = (prior + cfg.residual_scale * (c_l - 0.5)).clamp(0.0, 1.0)
            c = self.mask[None] * c + (1.0 - self.mask[None]) * prior  # no residual where the mode learns none
            if self.uses_prior:
                c = torch.where(self.adapt[None], c, c_def)
        c = c.clamp(0.0, 1.0)
        k = torch.round(cfg.k_min + c[:, 0] * (cfg.k_max - cfg.k_min)).to(torch.int64)
        ch = torch.round(cfg.c_min + c[:, 1] * (cfg.c_max - cfg.c_min)).to(torch.int64)
        return w.reshape(B, a.H, a.Da), c.float(), k, ch, u.float()


def export_onnx(adapter_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write ``eqrl_decision.onnx`` (beside the adapter by default); returns its path."""
    from edge.runtime.query_env import CONTEXT_DIM

    agent, gate, _ = load_agent(adapter_dir)
    mod = DecisionModule(agent, gate).eval()
    out = Path(out_dir or (Path(adapter_dir) if Path(adapter_dir).is_dir() else Path(adapter_dir).parent))
    out.mkdir(parents=True, exist_ok=True)
    D = agent.enc.proj.in_features
    args = (torch.zeros(1, D), torch.zeros(1, CONTEXT_DIM), torch.zeros(1, agent.H * agent.Da))
    path = out / ONNX_FILE
    import warnings

    with warnings.catch_warnings():  # the trace's notes on its constants (the ONNX decision equals torch's: tested)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(mod, args, str(path), input_names=["features", "context", "noise_eps"],
                          output_names=["noise", "controls", "num_steps", "execute", "difficulty"],
                          dynamic_axes={"features": {0: "B"}, "context": {0: "B"}, "noise_eps": {0: "B"}},
                          opset_version=17,
                          dynamo=False)
    return path
