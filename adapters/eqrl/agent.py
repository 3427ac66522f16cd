"""The EQRL learner: query-level macro-action SAC over (noise w, schedule controls c).

One transition = one query: state s (VLA features + runtime context), the adapter's action
(w, c = final [c_K, c_C] after prior and residual), the executed chunk A (latent units, padded
after the executed length), the discounted chunk return R = gamma^(T-1) r_T (sparse task reward),
the ticks T that ran, the next state s' and done.

* Q^A_j(s, A) (N members) — TD target ``R + (1 - d) gamma^T [min_j Qbar^W_j(s', a') - alpha log pi(a'|s')]``,
  a' ~ pi(s'). (The bootstrap goes through the target Q^W, which needs no VLA rollout at s'; the
  reference code rolls the VLA out at s' — a cost this CPU build avoids.)
* Q^W_j(s, [w, c]) — distilled from Q^A through the frozen VLA ("noise aliasing"):
  ``Q^W_j(s, [w, c]) <- Q^A_j(s, pad(VLA(s, w, K(c)), C(c)))`` on four cases: the actor's noise with
  its schedule, with the hard anchor, with the easy anchor, and Gaussian noise with the default.
* actor — ``alpha log pi - min_j Q^W_j(s, [w, c])`` (+ the difficulty-alignment hinge); alpha tuned to
  an entropy target. Difficulty u = tanh(z-scored std_j Q^W_j(s, [w_mean, c_def])), with running
  statistics that are frozen into the deployed adapter.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from adapters.eqrl import schedule as S
from adapters.eqrl.config import EqrlConfig
from adapters.eqrl.networks import Actor, Encoder, Ensemble


class Controls:
    """The mode's mapping from the actor's schedule output to final controls (numpy and torch)."""

    def __init__(self, cfg: EqrlConfig) -> None:
        self.cfg = cfg
        self.c_def = np.array([S.to_unit(cfg.k_default, cfg.k_min, cfg.k_max),
                               S.to_unit(cfg.c_default, cfg.c_min, cfg.c_max)], np.float64)
        self.c_easy = np.array([S.to_unit(cfg.k_easy, cfg.k_min, cfg.k_max),
                                S.to_unit(cfg.c_easy, cfg.c_min, cfg.c_max)], np.float64)
        self.c_hard = np.array([S.to_unit(cfg.k_hard, cfg.k_min, cfg.k_max),
                                S.to_unit(cfg.c_hard, cfg.c_min, cfg.c_max)], np.float64)
        mode = cfg.mode
        # which schedule dimensions the actor's own output moves (the rest sit at the default/prior)
        self.learned = {"full": (1, 1), "noise_only": (0, 0), "steps_only": (1, 0), "chunk_only": (0, 1),
                        "prior_only": (0, 0), "residual_only": (1, 1)}[mode]
        self.uses_prior = mode in ("full", "prior_only", "steps_only", "chunk_only")
        self.mask = np.array(self.learned, np.float64)

    def final(self, c_learned: np.ndarray, u: np.ndarray, gate: float) -> np.ndarray:
        """(B, 2) actor controls + (B,) difficulty -> (B, 2) final controls."""
        B = c_learned.shape[0]
        pri = (S.prior(u, self.c_def, self.c_easy, self.c_hard, gate, self.cfg.prior_strength)
               if self.uses_prior else np.repeat(self.c_def[None], B, 0))
        if self.cfg.mode == "residual_only":
            out = np.asarray(c_learned, np.float64)
        else:
            out = S.combine(pri, c_learned, self.cfg.residual_scale)
            out = np.where(self.mask[None] > 0, out, pri)  # no residual where the mode learns none (prior_only)
        if self.uses_prior:  # dimensions the mode does not adapt stay at the default
            adapt = np.array([self.cfg.mode != "chunk_only", self.cfg.mode != "steps_only"])
            out = np.where(adapt[None], out, self.c_def[None])
        elif self.cfg.mode == "noise_only":
            out = np.repeat(self.c_def[None], B, 0)
        return out

    def final_torch(self, c_learned: torch.Tensor, c_prior: torch.Tensor) -> torch.Tensor:
        """Differentiable version for the actor loss (the prior enters as a constant)."""
        m = torch.as_tensor(self.mask, dtype=c_learned.dtype)
        if self.cfg.mode == "residual_only":
            c = c_learned
        else:
            c = (c_prior + self.cfg.residual_scale * (c_learned - 0.5)).clamp(0.0, 1.0)
        return m * c + (1 - m) * c_prior

    def ints(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.cfg
        return S.to_int(c[:, 0], cfg.k_min, cfg.k_max), S.to_int(c[:, 1], cfg.c_min, cfg.c_max)


class EqrlAgent(nn.Module):
    def __init__(self, cfg: EqrlConfig, feature_dim: int, context_dim: int, chunk_len: int,
                 action_dim: int) -> None:
        super().__init__()
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.H, self.Da = chunk_len, action_dim
        L = chunk_len * action_dim
        self.controls = Controls(cfg)
        self.enc = Encoder(feature_dim, context_dim, cfg.feature_proj)
        sd = self.enc.out_dim
        self.actor = Actor(sd, L, cfg.hidden, cfg.noise_magnitude, cfg.noise_init_std,
                           tuple(self.controls.c_def))
        self.qa = Ensemble(cfg.n_critics, sd + L, cfg.hidden)
        self.qw = Ensemble(cfg.n_critics, sd + L + 2, cfg.hidden)
        self.qw_target = copy.deepcopy(self.qw).requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(float(np.log(cfg.init_alpha))))
        n_sched = int(sum(self.controls.learned))
        self.target_entropy = cfg.target_entropy_per_dim * (L + n_sched)
        self.register_buffer("u_stats", torch.tensor([0.0, 1.0, 0.0]))  # mean, std, count (frozen at export)
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))
        critic_params = list(self.qa.parameters()) + list(self.qw.parameters()) + list(self.enc.parameters())
        self.opt_critic = torch.optim.Adam(critic_params, lr=cfg.lr)
        self.opt_actor = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr)
        self.opt_alpha = torch.optim.Adam([self.log_alpha], lr=cfg.lr)

    # ------------------------------------------------------------------ acting
    def state(self, features: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return self.enc(features, context)

    @torch.no_grad()
    def difficulty(self, s: torch.Tensor, w: torch.Tensor, update: bool = False) -> np.ndarray:
        """(B,) u in (-1, 1): the z-scored difficulty signal (see ``EqrlConfig.difficulty``)."""
        std = self.difficulty_signal(s, w).numpy().astype(np.float64)
        if update:
            self._update_u_stats(std)
        mean, sd, _ = self.u_stats.tolist()
        return S.difficulty_u(std, mean, sd, self.cfg.difficulty_scale, self.cfg.difficulty_deadband)

    def difficulty_signal(self, s: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """(B,) raw signal, larger = harder: the Q^W ensemble's std at the default schedule, or the
        hard-minus-easy value gap (torch ops only, shared with the exported decision)."""
        B = s.shape[0]
        ctl = self.controls
        if self.cfg.difficulty == "gap":
            hard = torch.as_tensor(ctl.c_hard, dtype=s.dtype).expand(B, 2)
            easy = torch.as_tensor(ctl.c_easy, dtype=s.dtype).expand(B, 2)
            return (self.qw(torch.cat([s, w, hard], -1)).min(0).values
                    - self.qw(torch.cat([s, w, easy], -1)).min(0).values)
        c = torch.as_tensor(ctl.c_def, dtype=s.dtype).expand(B, 2)
        return self.qw(torch.cat([s, w, c], -1)).std(0)

    def _update_u_stats(self, std: np.ndarray) -> None:
        mean, sd, n = self.u_stats.tolist()
        for x in std:  # Welford-style running mean / std with a long memory
            n = min(n + 1, 10_000)
            d = x - mean
            mean += d / n
            var = sd * sd + (d * (x - mean) - sd * sd) / n
            sd = float(np.sqrt(max(var, 1e-12)))
        self.u_stats.copy_(torch.tensor([mean, sd, n]))

    @torch.no_grad()
    def act(self, features: np.ndarray, context: np.ndarray, gate: float, deterministic: bool = False,
            update_stats: bool = False, noise_eps: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """(B, D), (B, X) -> noise w (B, H, Da), controls c (B, 2), K (B,), C (B,), u (B,).
        ``deterministic`` takes the schedule's mode (and the noise's, unless ``noise_eps`` (B, L)
        gives the standard-normal draws to sample it with)."""
        f = torch.as_tensor(np.asarray(features, np.float32))
        x = torch.as_tensor(np.asarray(context, np.float32))
        s = self.state(f, x)
        eps = None if noise_eps is None else torch.as_tensor(np.asarray(noise_eps, np.float32)).reshape(s.shape[0], -1)
        w, c_learned, _, _ = self.actor(s, deterministic, eps)
        w_mean, _, _, _ = self.actor(s, True)
        u = self.difficulty(s, w_mean, update=update_stats)
        c = self.controls.final(c_learned.numpy().astype(np.float64), u, gate)
        k, ch = self.controls.ints(c)
        return {"w": w.numpy().reshape(-1, self.H, self.Da), "c": c.astype(np.float32),
                "c_learned": c_learned.numpy(), "K": k, "C": ch, "u": u.astype(np.float32)}

    # ------------------------------------------------------------------ learning
    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    def _prior_t(self, s: torch.Tensor, w: torch.Tensor, gate: float) -> torch.Tensor:
        ctl = self.controls
        if not ctl.uses_prior:
            return torch.as_tensor(ctl.c_def, dtype=torch.float32).expand(s.shape[0], 2)
        u = self.difficulty(s.detach(), w.detach())
        p = S.prior(u, ctl.c_def, ctl.c_easy, ctl.c_hard, gate, self.cfg.prior_strength)
        return torch.as_tensor(p, dtype=torch.float32)

    def _policy(self, s: torch.Tensor, gate: float):
        w, c_l, lp_w, lp_c = self.actor(s)
        c = self.controls.final_torch(c_l, self._prior_t(s, w, gate))
        m = torch.as_tensor(self.controls.mask, dtype=torch.float32)
        # log pi(w) - log p0(w): the noise stays near the VLA's own N(0, T^2) unless Q says otherwise
        T = max(self.cfg.noise_temperature, 1e-3)
        logp0 = (-0.5 * (w / T) ** 2 - np.log(T * np.sqrt(2 * np.pi))).sum(-1)
        logp = lp_w - logp0 + (lp_c * m).sum(-1)
        return w, c, logp

    @torch.no_grad()
    def td_target(self, t: dict[str, torch.Tensor], gate: float) -> torch.Tensor:
        """(B,) macro-action target: R + (1 - d) gamma^T [min_j Qbar^W_j(s', a') - alpha log pi(a'|s')]."""
        s2 = self.state(t["features2"], t["context2"])
        w2, c2, logp2 = self._policy(s2, gate)
        q2 = self.qw_target(torch.cat([s2, w2, c2], -1)).min(0).values
        disc = torch.as_tensor(self.cfg.gamma, dtype=torch.float32) ** t["ticks"]
        return t["reward"] + (1 - t["done"]) * disc * (q2 - self.alpha * logp2)

    def update(self, batch: dict[str, np.ndarray], gate: float, vla: Any, rng: np.random.Generator) -> dict[str, float]:
        """One SAC update. ``vla(features (B, D), noise (B, H, Da), K (B,)) -> latent chunk (B, H, Da)``."""
        cfg = self.cfg
        t = {k: torch.as_tensor(v) for k, v in batch.items()}
        s = self.state(t["features"], t["context"])
        y = self.td_target(t, gate)
        qa = self.qa(torch.cat([s, t["chunk"].flatten(1)], -1))
        loss_qa = ((qa - y[None]) ** 2).mean()
        # Q^W distilled from Q^A through the frozen VLA on four cases
        n = min(cfg.distill_batch, s.shape[0])
        sd = s[:n]
        with torch.no_grad():
            wa, ca, _ = self._policy(sd.detach(), gate)
            ctl = self.controls
            cases = [(wa, ca), (wa, torch.as_tensor(ctl.c_hard, dtype=torch.float32).expand(n, 2)),
                     (wa, torch.as_tensor(ctl.c_easy, dtype=torch.float32).expand(n, 2)),
                     (torch.as_tensor(rng.standard_normal(wa.shape) * cfg.noise_temperature,
                                      dtype=torch.float32),
                      torch.as_tensor(ctl.c_def, dtype=torch.float32).expand(n, 2))]
            feats = batch["features"][:n]
            targets = []
            for w_, c_ in cases:
                ks, cs = ctl.ints(c_.numpy().astype(np.float64))
                chunk = vla(feats, w_.numpy().reshape(n, self.H, self.Da), ks)
                for i in range(n):
                    chunk[i] = S.pad_chunk(chunk[i], int(cs[i]))
                targets.append(self.qa(torch.cat([sd.detach(), torch.as_tensor(chunk).flatten(1)], -1)))
        loss_qw = sum(((self.qw(torch.cat([sd, w_, c_], -1)) - tq) ** 2).mean()
                      for (w_, c_), tq in zip(cases, targets)) / len(cases)
        self.opt_critic.zero_grad()
        (loss_qa + loss_qw).backward()
        self.opt_critic.step()
        self.updates += 1
        out = {"loss_qa": float(loss_qa.detach()), "loss_qw": float(loss_qw.detach()), "q": float(qa.detach().mean())}
        if int(self.updates) > cfg.actor_delay_updates and int(self.updates) % cfg.actor_every == 0:
            out.update(self._actor_step(s.detach(), gate))
        with torch.no_grad():
            for p, pt in zip(self.qw.parameters(), self.qw_target.parameters()):
                pt.mul_(1 - cfg.tau).add_(cfg.tau * p)
        return out

    def _actor_step(self, sa: torch.Tensor, gate: float) -> dict[str, float]:
        cfg, ctl = self.cfg, self.controls
        w, c, logp = self._policy(sa, gate)
        qw = self.qw(torch.cat([sa, w, c], -1)).min(0).values
        loss_actor = (self.alpha.detach() * logp - qw).mean()
        if self.controls.uses_prior and cfg.difficulty_weight > 0 and gate > 0:
            u = torch.as_tensor(self.difficulty(sa, w.detach()), dtype=torch.float32)
            a = torch.as_tensor(S.allocation(c.detach().numpy(), ctl.c_easy, ctl.c_hard), dtype=torch.float32)
            # differentiable allocation of the actor's controls
            span = torch.as_tensor(ctl.c_hard - ctl.c_easy, dtype=torch.float32)
            act = span.abs() > 1e-9
            if bool(act.any()):
                ce = torch.as_tensor(ctl.c_easy, dtype=torch.float32)
                a = (2 * (c[:, act] - ce[act]) / span[act] - 1).clamp(-1, 1).mean(1)
                hinge = u.abs() * torch.relu(cfg.difficulty_margin - u * a) ** 2
                loss_actor = loss_actor + cfg.difficulty_weight * gate * hinge.mean()
        self.opt_actor.zero_grad()
        loss_actor.backward()
        self.opt_actor.step()
        if cfg.auto_alpha:
            loss_alpha = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.opt_alpha.zero_grad()
            loss_alpha.backward()
            self.opt_alpha.step()
        return {"loss_actor": float(loss_actor.detach()), "alpha": float(self.alpha.detach()),
                "kl": float(logp.detach().mean())}
