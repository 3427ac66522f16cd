"""One query's sampling as pure functions: the K-step flow integration from the initial noise, with
real-time-chunking (RTC) guidance toward the actions already queued — the sampler-side half of RTC
(the queue-side half, the seam, is :mod:`edge.action_queue`).

:func:`run_query` ``(policy, plan, features, noise, guidance)`` -> :class:`Sampled` is what every
execution mode runs (inline, thread, process: :mod:`edge.inference_worker`); it holds no state and
touches no clock, so a query computes the same chunk wherever it runs.

* :class:`Guidance` — the RTC target: the previous chunk's actions for the slots from the
  observation on (physical units), how many of them run while the query computes (``frozen``:
  weight 1) and how many after those are softly guided (``soft``: an exponential ramp; -1 = all).
* a policy with ``denoise_step`` is integrated here (guided if asked, a per-step trace if asked); its
  latent may be normalised (``to_latent`` / ``to_actions`` map the target in and the result out);
  a black-box policy's own ``sample`` runs instead (no guidance, no trace).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.contracts import (
    ActionChunk,
    DenoiseTrace,
    Observation,
    QueryContext,
    QueryPlan,
)
from edge.errors import EdgeError


class InferenceError(EdgeError):
    """A query failed (policy or scheduler raised, or returned something malformed)."""


@dataclass(frozen=True)
class QueryRequest:
    obs: Observation
    query_id: int
    epoch: int
    context: QueryContext
    t_submit_s: float
    prefix: np.ndarray | None = None  # (m, Da) previous chunk's actions for slots obs.. (RTC target)
    frozen_steps: int = 0  # leading prefix actions that will run during this query
    frozen_until_slot: int | None = None  # queue-side freeze for the rtc seam
    # for a policy with ``encode_query``: what the arm was commanded at each slot from the previous
    # query's observation up to this one's (the safety layer's command, or None where nothing ran:
    # a hold, a stop, a skipped tick); None when unknown (the episode's first query, plans discarded
    # since, or older than the loop's record of the last 64 ticks)
    executed: tuple[np.ndarray | None, ...] | None = None
    # for a policy with ``encode_query``: the executable queued actions from the observation's slot
    # on (the one for that slot runs while the query computes; already popped or not), any seam
    queued: np.ndarray | None = None


@dataclass(frozen=True)
class QueryResult:
    chunk: ActionChunk
    plan: QueryPlan
    request: QueryRequest
    t_ready_s: float
    latency_s: float  # t_ready_s - obs.t_s
    compute_s: float  # wall time spent in encode + steps
    nfe: int  # denoiser evaluations
    guided: bool  # RTC guidance was applied
    backend: str
    # when the loop thread took the answer off the worker process's pipe (None: in memory at t_ready_s)
    t_received_s: float | None = None


@dataclass(frozen=True)
class QuerySettings:
    """What a query needs besides the policy, the scheduler and the request (from ``WorkerConfig``)."""

    seed: int  # initial noise per query: seed, epoch, query id
    noise_temperature: float  # scale of that noise when the plan leaves it to the worker
    rtc_guidance: bool
    rtc_soft_steps: int
    period_s: float  # the chunk's action period
    # the request's ``t_submit_s`` is wall time (``time.monotonic``, the real clock's): a policy whose
    # ``encode_query`` has a decision deadline counts it from the request, not from when it starts
    wall_clock: bool = False


def compute_query(policy: Any, scheduler: Any, req: QueryRequest,
                  settings: QuerySettings) -> tuple[QueryPlan, ActionChunk, int, bool]:
    """encode once -> the scheduler's plan -> K steps (:func:`run_query`, guided if the request
    carries queued actions) -> optional ``refine`` of the plan from the per-step trace -> the
    chunk, stamped with the observation time. Returns (plan, chunk, NFE, guided)."""
    H, Da = policy.chunk_len, policy.action_dim
    # a policy that tracks what the arm did (a planner's history) reads the queued actions from the
    # observation's slot on and the actions executed since its previous observation
    encode_query = getattr(policy, "encode_query", None)
    if encode_query is not None:
        # the request's wall time only where there is one (a policy written before it keeps working)
        timing = {"t_request_s": req.t_submit_s} if settings.wall_clock else {}
        features = encode_query(req.obs, req.queued, req.executed, req.context.delay_steps, **timing)
    else:
        features = policy.encode(req.obs)
    plan = scheduler.plan(features, req.context)
    check_plan(plan, H, Da, scheduler)
    noise = plan.noise
    if noise is None:
        rng = np.random.default_rng((settings.seed, req.epoch, req.query_id))
        noise = (rng.standard_normal((H, Da)) * settings.noise_temperature).astype(np.float32)
    guidance = None
    if settings.rtc_guidance and req.prefix is not None and len(req.prefix):
        guidance = Guidance(req.prefix, req.frozen_steps, settings.rtc_soft_steps)
    refine = getattr(scheduler, "refine", None)
    out = run_query(policy, plan, features, noise, guidance, trace=refine is not None)
    if refine is not None and out.trace is not None:
        plan = refine(plan, DenoiseTrace(out.trace))
        check_plan(plan, H, Da, scheduler)
    if out.actions.shape != (H, Da):
        raise InferenceError(f"policy returned actions of shape {out.actions.shape}, expected ({H}, {Da})")
    chunk = ActionChunk(out.actions, settings.period_s, req.obs.t_s, plan.execute, req.query_id, req.epoch)
    return plan, chunk, plan.num_steps, out.guided


def check_plan(plan: QueryPlan, H: int, Da: int, scheduler: Any) -> None:
    name = getattr(scheduler, "name", type(scheduler).__name__)
    if not isinstance(plan.num_steps, (int, np.integer)) or plan.num_steps < 1:
        raise InferenceError(f"scheduler {name!r} planned num_steps={plan.num_steps!r}; need an int >= 1")
    if not 1 <= plan.execute <= H:
        raise InferenceError(f"scheduler {name!r} planned execute={plan.execute}; need 1..{H}")
    if plan.next_query_in_steps < 1:
        raise InferenceError(
            f"scheduler {name!r} planned next_query_in_steps={plan.next_query_in_steps}; need >= 1"
        )
    if plan.noise is not None and np.shape(plan.noise) != (H, Da):
        raise InferenceError(
            f"scheduler {name!r} planned noise of shape {np.shape(plan.noise)}, expected ({H}, {Da})"
        )




@dataclass(frozen=True)
class Guidance:
    """RTC guidance of one query (see the module doc)."""

    target: np.ndarray  # (m, Da) queued actions for slots obs.., physical units
    frozen: int = 0  # leading target actions that run during the query (weight 1)
    soft: int = -1  # softly guided actions after the frozen ones (-1 = the whole target)

    def window(self, horizon: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(target (n, Da), weights (H,)) over the guided overlap, or None when nothing is guided."""
        n = len(self.target) if self.soft < 0 else min(len(self.target), self.frozen + self.soft)
        if n <= 0:
            return None
        return self.target[:n], rtc_weights(horizon, self.frozen, n)


@dataclass(frozen=True)
class Sampled:
    actions: np.ndarray  # (H, Da) float32, physical units
    guided: bool  # RTC guidance was applied
    trace: np.ndarray | None  # (K, H, Da) clean-action estimates after each step, if asked


def run_query(policy: Any, plan: QueryPlan, features: Any, noise: np.ndarray, guidance: Guidance | None = None,
              trace: bool = False) -> Sampled:
    """Integrate ``plan.num_steps`` denoising steps from ``noise`` (H, Da, the policy's latent) into
    a chunk (see the module doc)."""
    if not hasattr(policy, "denoise_step"):
        return Sampled(np.asarray(policy.sample(features, noise, plan.num_steps), np.float32), False, None)
    H = policy.chunk_len
    window = guidance.window(H) if guidance is not None and len(guidance.target) else None
    target = weights = None
    if window is not None:
        target, weights = window
        to_latent = getattr(policy, "to_latent", None)
        if to_latent is not None:
            target = np.asarray(to_latent(target), np.float32)
    steps: list[np.ndarray] | None = [] if trace else None
    x = guided_sample(policy.denoise_step, features, noise, plan.num_steps, target, weights, steps)
    to_actions = getattr(policy, "to_actions", None)
    actions = np.asarray(to_actions(x) if to_actions is not None else x, np.float32)
    return Sampled(actions, target is not None, np.stack(steps) if steps else None)


def rtc_weights(horizon: int, frozen: int, overlap: int) -> np.ndarray:
    """Guidance weights (H,): 1 on the ``frozen`` actions that run during inference, an exponential
    ramp down to 0 over the rest of the ``overlap`` with the previous chunk, 0 after it."""
    w = np.zeros(horizon, dtype=np.float64)
    overlap = min(overlap, horizon)
    frozen = min(frozen, overlap)
    w[:frozen] = 1.0
    span = overlap - frozen
    if span > 0:
        i = np.arange(span)
        c = (span - i) / (span + 1.0)  # (0, 1): 1 near the frozen part, -> 0 at the end
        w[frozen:overlap] = c * np.expm1(c) / np.expm1(1.0)
    return w


def guided_sample(
    denoise_step: Callable[[Any, np.ndarray, float, float], np.ndarray],
    features: Any,
    noise: np.ndarray,
    num_steps: int,
    target: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    trace: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Euler integration of a flow-matching policy from noise (tau=0) to actions (tau=1), with
    training-free prefix inpainting toward ``target``.

    ``noise`` (H, Da); ``target`` (m, Da) with m <= H: the previous chunk's actions for the same
    slots; ``weights`` (H,) from :func:`rtc_weights`. After every step the first m rows are pulled
    toward where the target would be on the straight noise->target path at the new ``tau``:
    ``x[i] <- (1 - w_i) x[i] + w_i (tau * target[i] + (1 - tau) * noise[i])``, so the frozen actions
    come out exactly equal to the target and the ramp joins the two chunks smoothly. No gradients
    are needed (cheap on an edge GPU). If ``trace`` is a list, the clean-action estimate after each
    step is appended to it (for post-sampling schedulers).
    """
    x = np.array(noise, dtype=np.float32)
    m = 0 if target is None else min(len(target), x.shape[0])
    if m and weights is None:
        raise ValueError("guided_sample: weights are required with a target")
    dtau = 1.0 / num_steps
    for k in range(num_steps):
        tau = k * dtau
        x_next = np.asarray(denoise_step(features, x, tau, dtau), dtype=np.float32)
        if trace is not None:
            # clean estimate from the step's velocity: x1 = x + (1 - tau) * v, v = (x_next - x) / dtau
            trace.append(x + (1.0 - tau) * (x_next - x) / dtau)
        x = x_next
        if m:
            tau_n = (k + 1) * dtau
            w = weights[:m, None].astype(np.float32)
            on_path = tau_n * target[:m] + (1.0 - tau_n) * noise[:m]
            x[:m] = (1.0 - w) * x[:m] + w * on_path
    return x
