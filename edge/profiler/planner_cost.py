"""What a world-model planner's decision costs, on this host and projected on a target device.

A decision of ``edge run --policy comet`` (:class:`world_models.policy.WorldModelPolicy`) is the
frame's encoder pass (``--obs slots``: one slot-attention tracking pass started from the previous
frame's slots, an episode's first frame encoded twice from the learned start; ``pixels``: the
window's frames through the model's own CNN), then the tree search: one model pass for the root, one
more when the search starts from after a queued move (async: ``planner_ahead`` in the episode
records) and one per simulation (:class:`world_models.planner.Planner`: each pass gives a node's prior
and value and its children's states and rewards), and between the passes the tree's bookkeeping in
Python (selection, backup, the supports' decoding).

The networks are counted as the VLA's are (:mod:`edge.profiler.flops`) into a
:class:`~edge.profiler.device_model.CostProfile`: ``encoder`` = the frame's encoder pass, ``step`` =
one search pass (batch 1, the model's window), ``locator`` = the extra work of an episode's first
frame (slots). On a device::

    t(decision) = t(encoder) + passes * t(step) + simulations * tree_s

``tree_s``, the bookkeeping per simulation, runs on the robot computer's CPU and is **not projected**:
it is the time measured on this host (:func:`measure_decisions`); a CPU core slower than this host's
(a Jetson's Arm cores) makes every projection here an underestimate by that share.

    cost = count_world_model("world_models/checkpoints/comet_reach3")
    decision_time_s(cost, get_device("orin-nano"), simulations=16, tree_s=1e-4)
"""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from edge.profiler.device_model import CostProfile, DeviceSpec, PartCost, part_time_s


def _minus(a: PartCost, b: PartCost) -> PartCost:
    """a - b, field by field (the extra work of one call over another)."""
    return PartCost(**{f.name: getattr(a, f.name) - getattr(b, f.name) for f in fields(PartCost)})


def count_world_model(path: str | Path, verify: bool = True) -> CostProfile:
    """A world-model checkpoint's work per decision part, batch 1 (the counts do not depend on the
    inputs' values): ``encoder`` the frame's encoder pass, ``step`` one search pass, ``locator`` the
    first frame's extra encoder work (None for pixel models). ``parameters``: the model's and its
    slot encoder's."""
    import torch

    from edge.profiler.flops import count
    from world_models.onnx_search import example_window
    from world_models.policy import load_world_model, model_encoder

    cfg, model, manifest = load_world_model(path, verify=verify)
    enc = model_encoder(path, cfg, manifest, verify)
    window = cfg.planner.context + 1
    s = cfg.env.image_size
    params = sum(p.numel() for p in model.parameters())
    locator = None
    with torch.no_grad():
        if enc is not None:
            enc = enc.eval()
            frame = np.zeros((1, s, s, enc.cfg.in_channels), np.uint8)
            prev = enc.encode_first(frame)
            encoder = count(lambda: enc.encode(frame, init_slots=prev))
            locator = _minus(count(lambda: enc.encode_first(frame)), encoder)
            params += sum(p.numel() for p in enc.parameters())
        else:
            frames = torch.zeros((window, s, s, 3), dtype=torch.uint8)
            encoder = count(lambda: model.encode_frames(frames))
        x = {k: torch.from_numpy(v) for k, v in example_window(model, window, batch=1).items()}
        step = count(lambda: model(x["z"], x["actions"], x["valid"], heads="last", branch=True))
    return CostProfile(encoder, step, locator, params, source=str(path))


def search_passes(decisions: int, simulations: int, ahead: int = 0) -> int:
    """Model passes of ``decisions`` searches of ``simulations`` each, ``ahead`` of them started from
    after a queued move: a root pass per decision, one per simulation, one per advanced root."""
    return int(decisions) * (int(simulations) + 1) + int(ahead)


def decision_time_s(profile: CostProfile, device: DeviceSpec, simulations: int, ahead: bool = False,
                    tree_s: float = 0.0, first_of_episode: bool = False) -> float:
    """One decision on ``device``: the encoder pass, the search's passes (projected) and
    ``simulations`` x ``tree_s`` of bookkeeping (as given: measured, not projected)."""
    t = part_time_s(profile.encoder, device) + search_passes(1, simulations, int(ahead)) * part_time_s(profile.step, device)
    if first_of_episode and profile.locator is not None:
        t += part_time_s(profile.locator, device)
    return t + simulations * tree_s


def project_planner_run(profile: CostProfile, device: DeviceSpec, decisions: int, passes: int, episodes: int,
                        executed: int, tree_s: float = 0.0) -> dict[str, Any]:
    """A planner run's cost on ``device`` from its counts: ``decisions`` encoder passes, ``passes``
    search passes, ``episodes`` first frames and ``tree_s`` seconds of bookkeeping in all (measured
    on this host, not projected); totals and per executed action, the keys of
    :func:`edge.profiler.device_model.project_run` (``steps`` = the search passes) plus ``tree_*``."""
    enc = part_time_s(profile.encoder, device) * decisions
    steps = part_time_s(profile.step, device) * passes
    loc = part_time_s(profile.locator, device) * episodes if profile.locator is not None else 0.0
    total = enc + steps + loc + tree_s

    def per(x: float) -> float | None:
        return None if not executed else 1e3 * x / executed

    return {"device": device.name, "encoder_s": enc, "steps_s": steps, "locator_s": loc, "tree_s": tree_s,
            "total_s": total, "energy_j": total * device.power_w, "ms_per_action": per(total),
            "mj_per_action": None if not executed else 1e3 * total * device.power_w / executed,
            "encoder_ms_per_action": per(enc), "steps_ms_per_action": per(steps), "locator_ms_per_action": per(loc),
            "tree_ms_per_action": per(tree_s),
            "ms_per_decision": None if not decisions else 1e3 * total / decisions}


def measure_decisions(path: str | Path, frames: np.ndarray, simulations: int, backend: str = "onnxruntime",
                      threads: int = 1, seed: int = 0, lookahead: bool = False) -> dict[str, Any]:
    """Time every decision of a :class:`~world_models.policy.WorldModelPolicy` over ``frames``
    (E, T, S, S, C), split into the encoder (everything before the search), each search pass
    (timed around the pass) and the tree's bookkeeping (the search's time outside its passes).
    ``lookahead``: each search after the first of an episode starts from after the previous move
    (one extra pass), as async does once a decision takes a tick. Returns per-decision lists (ms)
    and the passes counted."""
    import torch

    from world_models.policy import WorldModelPolicy

    torch.set_num_threads(threads)
    pol = WorldModelPolicy(path, simulations=simulations, seed=seed, backend=backend, ort_threads=threads)
    planner = pol.planner
    inner = planner._expand
    pass_ms: list[float] = []

    def timed(*a: Any) -> Any:
        t0 = time.perf_counter()
        out = inner(*a)
        pass_ms.append((time.perf_counter() - t0) * 1e3)
        return out

    planner._expand = timed
    rows: dict[str, list[float]] = {"decision_ms": [], "encoder_ms": [], "search_ms": [], "passes_ms": [],
                                    "tree_ms": [], "passes": []}
    try:
        for ep in range(frames.shape[0]):
            pol.reset()
            prev = None
            for t in range(frames.shape[1]):
                n0 = len(pass_ms)
                obs = {"front": frames[ep, t]}
                if prev is None or not lookahead:
                    a = pol.encode(obs) if prev is None else pol._decide(obs, _push(pol, prev))
                else:
                    a = pol._decide(obs, _push(pol, prev), after=prev)
                mine = pass_ms[n0:]
                d, srch = pol.decision_ms[-1], pol.search_ms[-1]
                rows["decision_ms"].append(d)
                rows["search_ms"].append(srch)
                rows["encoder_ms"].append(d - srch)
                rows["passes_ms"].append(sum(mine))
                rows["tree_ms"].append(srch - sum(mine))
                rows["passes"].append(len(mine))
                prev = a
    finally:
        planner._expand = inner
    return {"simulations": simulations, "backend": backend, "threads": threads, "lookahead": lookahead,
            "pass_ms": pass_ms, **rows}


def _push(pol: Any, move: int) -> Any:
    """The history update of a decision after ``move`` ran (what ``encode`` does with the last move)."""
    return lambda state: pol.hist.push(0, int(move), state)


__all__ = ["count_world_model", "decision_time_s", "measure_decisions", "project_planner_run", "search_passes"]
