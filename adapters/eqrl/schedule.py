"""The pure arithmetic of EQRL's schedule and budget (numpy; no learning here).

Controls live in the unit interval: ``c_K, c_C in [0, 1]`` map to integers by
``K = round(K_min + c_K (K_max - K_min))`` (likewise C). The difficulty prior moves the default
control toward the easy anchor (few steps, long chunk) when ``u < 0`` and toward the hard anchor
when ``u > 0``; a learned residual corrects it:

    c_prior = c_def + g * s_p * (c_easy + (u + 1) / 2 * (c_hard - c_easy) - c_def)
    c       = clip(c_prior + lambda_r * (c_learned - 0.5), 0, 1)

The episode NFE budget (amortised NFE rho = sum K / sum C_executed per episode, band
``[rho_lo, rho_hi]``) gives the episode-end penalty of :func:`budget_penalty`, spread over the
episode's queries.
"""

from __future__ import annotations

import numpy as np


def to_int(c: np.ndarray | float, lo: int, hi: int) -> np.ndarray:
    """Unit control(s) -> integer(s) in [lo, hi] (round half to even, like numpy)."""
    c = np.clip(np.asarray(c, np.float64), 0.0, 1.0)
    return np.rint(lo + c * (hi - lo)).astype(np.int64)


def to_unit(v: np.ndarray | float, lo: int, hi: int) -> np.ndarray:
    """Integer(s) in [lo, hi] -> the unit control that maps back to them (0.5 when lo == hi)."""
    v = np.asarray(v, np.float64)
    if hi == lo:
        return np.full_like(v, 0.5)
    return (v - lo) / (hi - lo)


def difficulty_u(std: np.ndarray, mean: float, scale_std: float, scale: float, deadband: float) -> np.ndarray:
    """Ensemble disagreement -> u in (-1, 1), > 0 = hard: tanh(scale * z), z against running stats;
    |u| under the dead-band is 0."""
    z = (np.asarray(std, np.float64) - mean) / max(scale_std, 1e-8)
    u = np.tanh(scale * z)
    return np.where(np.abs(u) < deadband, 0.0, u)


def prior(u: np.ndarray, c_def: np.ndarray, c_easy: np.ndarray, c_hard: np.ndarray,
          gate: float, strength: float) -> np.ndarray:
    """(B,) difficulty -> (B, 2) prior controls [c_K, c_C]."""
    u = np.asarray(u, np.float64)[:, None]
    target = c_easy[None] + 0.5 * (u + 1.0) * (c_hard - c_easy)[None]
    return c_def[None] + gate * strength * (target - c_def[None])


def combine(c_prior: np.ndarray, c_learned: np.ndarray, residual_scale: float) -> np.ndarray:
    """Prior + learned residual around it, clipped to the unit box."""
    return np.clip(c_prior + residual_scale * (np.asarray(c_learned) - 0.5), 0.0, 1.0)


def allocation(c: np.ndarray, c_easy: np.ndarray, c_hard: np.ndarray) -> np.ndarray:
    """How far a control sits from easy (-1) to hard (+1), averaged over the dimensions where the
    anchors differ (0 when they never do)."""
    span = c_hard - c_easy
    active = np.abs(span) > 1e-9
    if not active.any():
        return np.zeros(np.shape(c)[0])
    a = np.clip(2.0 * (c[:, active] - c_easy[active]) / span[active] - 1.0, -1.0, 1.0)
    return a.mean(axis=1)


def gate(queries: int, start: int, ramp: int) -> float:
    """Monotone ramp in [0, 1]: 0 before ``start`` collected queries, 1 after ``start + ramp``."""
    return float(np.clip((queries - start) / max(1, ramp), 0.0, 1.0))


def nfe_per_action(ks: list[int] | np.ndarray, executed: list[int] | np.ndarray) -> float:
    """Amortised NFE as executed: sum of K over sum of executed actions (inf if none executed)."""
    total = float(np.sum(executed))
    return float(np.sum(ks)) / total if total > 0 else float("inf")


def budget_penalty(sum_k: float, sum_c: float, success: bool, lo: float, hi: float,
                   debt: float, scale: float) -> float:
    """Episode-end penalty P (>= -0.06): NFE above the band (beyond ``debt``) costs, fully after a
    success and 0.15x after a failure (a failed episode is not asked to save compute); below the
    band costs 0.15x after a success; a success inside the band earns up to 0.06 for sitting low."""
    over = max(0.0, sum_k - hi * sum_c - debt)
    under = max(0.0, lo * sum_c - sum_k)
    p = (over * (1.0 if success else 0.15) + 0.15 * under * float(success)) / scale
    rho = sum_k / sum_c if sum_c > 0 else float("inf")
    if success and lo <= rho <= hi and hi > lo:
        p -= 0.06 * (hi - rho) / (hi - lo)
    return p


def pad_chunk(chunk: np.ndarray, executed: int) -> np.ndarray:
    """(..., H, Da) chunk -> the same with positions >= ``executed`` replaced by the last executed
    action, so the critic's input encodes how much of it ran."""
    out = np.array(chunk, np.float32, copy=True)
    e = int(max(1, min(executed, out.shape[-2])))
    out[..., e:, :] = out[..., e - 1 : e, :]
    return out
