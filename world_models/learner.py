"""The world model's training step (UniZero-style, teacher-forced over replayed windows).

A window holds ``context + unroll + 1 + td_steps`` blocks; the EMA target network runs on all of
them (n-step value targets; pixels: next-latent targets) and the learner on all but the last (whose
next state is outside the window), so every position a bootstrap value is read from is trained.
Blocks without a target (padding, a bootstrap state outside the window) are masked. Per block t:

* next state: MSE between the prediction from block t and the stored state t+1 (pixels: the target
  encoder's latent of frame t+1), where an action was taken at t;
* reward: cross-entropy to the two-hot code of r_t;
* policy: cross-entropy to the search's action weights, minus a fixed entropy bonus;
* value: cross-entropy to the two-hot n-step target.

L = w_obs·L_obs + w_rew·L_rew + w_val·L_val + w_pol·(L_pol − β·H(π)) (COMET's discrete weights
2 / 1 / 0.5 / 1, β = 5e-3 fixed) [+ relevance_l1 · mean relevance p over slots and both heads, per
acted step: an optional prior, not in COMET; 0 by default].
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from edge.config import ConfigError
from world_models.replay import nstep_targets
from world_models.token_model import TokenWorldModel


@dataclass(frozen=True)
class LearnerConfig:
    lr: float = 3e-4
    weight_decay: float = 1e-2
    grad_clip: float = 20.0
    ema: float = 0.05  # target ← (1−θ)·target + θ·online, per update
    batch: int = 32
    unroll: int = 5
    td_steps: int = 5
    w_obs: float = 2.0
    w_rew: float = 1.0
    w_val: float = 0.5
    w_pol: float = 1.0
    entropy: float = 5e-3
    # L1 prior on the object-causal heads' relevance p (mean over slots, both heads): pushes the
    # relevance of slots the policy and value do not need toward 0 (COMET trains p only through
    # those losses; 0 = as COMET)
    relevance_l1: float = 0.0

    def __post_init__(self) -> None:
        for key, (lo, hi) in {"lr": (1e-6, 1e-1), "batch": (1, 4096), "unroll": (1, 64), "td_steps": (1, 64),
                              "ema": (0.0, 1.0), "relevance_l1": (0.0, 10.0)}.items():
            v = getattr(self, key)
            if not lo <= v <= hi:
                raise ConfigError(f"{key}={v!r} is out of range; allowed [{lo}, {hi}]")


def dynamics_losses(out: dict, z_next: torch.Tensor, acted: torch.Tensor, rewards: torch.Tensor, support) -> tuple:
    """The next-state loss (squared error over the slots, averaged) and the reward loss (cross-entropy
    to the two-hot reward) of a forward pass ``out``, each averaged over the acted steps.
    ``z_next`` (B, L, N, D) are the states the blocks predict, ``acted`` and ``rewards`` (B, L)."""
    err = ((out["next_z"] - z_next) ** 2).mean((-1, -2))  # (B, L)
    w_a = acted.float()
    n_a = w_a.sum().clamp_min(1.0)
    l_obs = (err * w_a).sum() / n_a
    r_tgt = support.two_hot(rewards)
    l_rew = (-(r_tgt * torch.log_softmax(out["reward_logits"], -1)).sum(-1) * w_a).sum() / n_a
    return l_obs, l_rew


class Learner:
    def __init__(self, model: TokenWorldModel, cfg: LearnerConfig, gamma: float, context: int) -> None:
        self.model, self.cfg, self.gamma, self.context = model, cfg, gamma, context
        self.target = copy.deepcopy(model).requires_grad_(False)
        self.opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.updates = 0

    @property
    def window(self) -> int:
        return self.context + self.cfg.unroll + 1 + self.cfg.td_steps

    def _z(self, model: TokenWorldModel, states: torch.Tensor) -> torch.Tensor:
        b, L = states.shape[:2]
        if model.cfg.kind == "pixels":
            # a pretrained, frozen encoder: no graph through the CNN
            with torch.set_grad_enabled(torch.is_grad_enabled() and not model.encoder.weight_frozen):
                return model.encode_frames(states.reshape(b * L, *states.shape[2:])).view(b, L, 1, -1)
        return states.float().view(b, L, model.cfg.tokens, model.cfg.state_dim)

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        c, m = self.cfg, self.model
        sup = m.support
        # The learner trains on the whole window (every position the target network's bootstrap
        # values come from is trained); blocks without a target are masked.
        n_in = self.window - 1
        st = torch.as_tensor(batch["states"])
        acts = torch.as_tensor(batch["actions"])
        valid = torch.as_tensor(batch["valid"])
        with torch.no_grad():
            z_tgt = self._z(self.target, st)
            t_out = self.target(z_tgt, acts, valid)
            v_tgt = sup.decode(t_out["value_logits"]).numpy()
        vt, has_v = nstep_targets(batch["rewards"], v_tgt, batch["valid"], batch["acted"], batch["terminal"],
                                  self.gamma, c.td_steps)
        z = self._z(m, st[:, :n_in])
        out = m(z, acts[:, :n_in], valid[:, :n_in])
        acted = torch.as_tensor(batch["acted"][:, :n_in])
        has_v = torch.as_tensor(has_v[:, :n_in])
        # next state: the learner's prediction from block t vs the (target) state of block t+1
        l_obs, l_rew = dynamics_losses(out, z_tgt[:, 1:n_in + 1], acted, torch.as_tensor(batch["rewards"][:, :n_in]),
                                       sup)
        w_a = acted.float()
        n_a = w_a.sum().clamp_min(1.0)
        logp = torch.log_softmax(out["policy_logits"], -1)
        pi_t = torch.as_tensor(batch["policies"][:, :n_in])
        l_pol = (-(pi_t * logp).sum(-1) * w_a).sum() / n_a
        ent = (-(logp.exp() * logp).sum(-1) * w_a).sum() / n_a
        # A bootstrapped target can leave the support (its own value is bounded by it, the rewards
        # added are not): clamp it, and count how often in the stats (``value_clipped``).
        vt_in = torch.as_tensor(vt[:, :n_in])
        n_clip = int((vt_in.abs() > sup.max_scalar).sum())
        v_code = sup.two_hot(vt_in.clamp(-sup.max_scalar, sup.max_scalar))
        w_v = has_v.float()
        l_val = (-(v_code * torch.log_softmax(out["value_logits"], -1)).sum(-1) * w_v).sum() / w_v.sum().clamp_min(1)
        loss = c.w_obs * l_obs + c.w_rew * l_rew + c.w_val * l_val + c.w_pol * (l_pol - c.entropy * ent)
        if c.relevance_l1 and "relevance" in out:  # (B, L, N, 2), per acted step (both heads)
            loss = loss + c.relevance_l1 * (out["relevance"].mean((2, 3)) * w_a).sum() / n_a
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(m.parameters(), c.grad_clip)
        self.opt.step()
        with torch.no_grad():
            for p_t, p in zip(self.target.parameters(), m.parameters()):
                p_t.mul_(1 - c.ema).add_(p, alpha=c.ema)
        self.updates += 1
        stats = {k: float(v.detach()) for k, v in (("loss", loss), ("obs", l_obs), ("reward", l_rew), ("value", l_val),
                                                   ("policy", l_pol), ("entropy", ent), ("grad_norm", gnorm))}
        stats["value_clipped"] = n_clip
        if "relevance" in out:
            rel = out["relevance"].detach()  # (B, L, N, 2)
            w = w_a[..., None, None]
            stats["relevance"] = ((rel * w).sum((0, 1)) / n_a).tolist()  # (N, 2) per slot: policy, value
        return stats

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "target": self.target.state_dict(), "opt": self.opt.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, sd: dict) -> None:
        self.model.load_state_dict(sd["model"])
        self.target.load_state_dict(sd["target"])
        self.opt.load_state_dict(sd["opt"])
        self.updates = int(sd["updates"])
