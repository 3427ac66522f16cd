"""A world-model planner's decision, counted and timed: the inputs of :mod:`edge.profiler.planner_cost`.

* :func:`count_world_model` counts a checkpoint's network work per decision part, batch 1, with
  :mod:`edge.profiler.flops` (the counts do not depend on the inputs' values): ``encoder`` the
  frame's encoder pass, ``step`` one search pass, ``locator`` the first frame's extra encoder work.
* :func:`measure_decisions` times every decision of a :class:`~world_models.policy.WorldModelPolicy`
  on this host, split into the encoder, the search's passes and the tree's bookkeeping, and counts
  the passes.

What counts as the encoder: ``--obs slots``, the slot encoder's tracking pass on the frame
(started from the previous frame's slots); an episode's first frame runs the full rounds twice from
the learned start instead (its extra work is ``locator``). ``--obs pixels``: the model's own CNN
over the window's frames at the search's root, and over the two frames of the policy's
one-step-prediction check that every decision after the first makes (the slot models' check reads
stored slots: no network).
"""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from edge.profiler.device_model import CostProfile, PartCost


def _minus(a: PartCost, b: PartCost) -> PartCost:
    """a - b, field by field (the extra work of one call over another)."""
    return PartCost(**{f.name: getattr(a, f.name) - getattr(b, f.name) for f in fields(PartCost)})


def count_world_model(path: str | Path, verify: bool = True) -> CostProfile:
    """A world-model checkpoint's work per decision part, batch 1: ``encoder`` the frame's encoder
    pass, ``step`` one search pass, ``locator`` the first frame's extra encoder work (None for
    pixel models). ``parameters``: the model's and its slot encoder's."""
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
        else:  # the root's window, then the prediction check's two frames
            frames = torch.zeros((window, s, s, 3), dtype=torch.uint8)
            encoder = count(lambda: (model.encode_frames(frames), model.encode_frames(frames[:2])))
        x = {k: torch.from_numpy(v) for k, v in example_window(model, window, batch=1).items()}
        step = count(lambda: model(x["z"], x["actions"], x["valid"], heads="last", branch=True))
    return CostProfile(encoder, step, locator, params, source=str(path))


def measure_decisions(path: str | Path, frames: np.ndarray, simulations: int, backend: str = "onnxruntime",
                      threads: int = 1, seed: int = 0, lookahead: bool = False, verify: bool = True) -> dict[str, Any]:
    """Time every decision of a :class:`~world_models.policy.WorldModelPolicy` over ``frames``
    (E, T, S, S, C), each made as the runtime loop makes it (``encode_query``: the previous
    decision's move reported as executed): per decision the encoder (everything before the search,
    the prediction check included, and a pixel model's encoding of the window at the search's root),
    the search's passes (each timed around the pass) and the tree's bookkeeping (the rest of the
    search). ``lookahead``: a policy built for async, each search after an episode's first starting
    from after the previous move (one extra pass), as once a decision takes a tick. Returns
    per-decision lists (ms), every pass's time and the passes counted per decision."""
    import torch

    from world_models.policy import WorldModelPolicy

    torch.set_num_threads(threads)
    pol = WorldModelPolicy(path, simulations=simulations, seed=seed, backend=backend, ort_threads=threads,
                           verify=verify, lookahead=lookahead)
    planner = pol.planner
    inner_expand, inner_to_z, inner_plan = planner._expand, planner.to_z, planner.plan
    pass_ms: list[float] = []
    root_encode_ms: list[float] = []  # to_z inside the search (a pixel model's window encoding)
    searching = [False]

    def expand(*a: Any) -> Any:
        t0 = time.perf_counter()
        out = inner_expand(*a)
        pass_ms.append((time.perf_counter() - t0) * 1e3)
        return out

    def to_z(*a: Any) -> Any:
        t0 = time.perf_counter()
        out = inner_to_z(*a)
        if searching[0]:
            root_encode_ms.append((time.perf_counter() - t0) * 1e3)
        return out

    def plan(*a: Any, **kw: Any) -> Any:
        searching[0] = True
        try:
            return inner_plan(*a, **kw)
        finally:
            searching[0] = False

    planner._expand, planner.to_z, planner.plan = expand, to_z, plan
    rows: dict[str, list[float]] = {"decision_ms": [], "encoder_ms": [], "search_ms": [], "passes_ms": [],
                                    "tree_ms": [], "passes": []}
    try:
        for ep in range(frames.shape[0]):
            pol.reset()
            prev = None
            for t in range(frames.shape[1]):
                n0, r0 = len(pass_ms), len(root_encode_ms)
                obs = {"front": frames[ep, t]}
                if prev is None:  # the episode's first frame
                    a, _ = pol.encode_query(obs, None, None)
                else:  # the loop's query: the previous move ran, and with lookahead it is what runs first
                    cmd = pol.sample(prev, None, 1)[-1]
                    a, _ = pol.encode_query(obs, cmd[None] if lookahead else None, (cmd,), delay_steps=1)
                mine, root_enc = pass_ms[n0:], sum(root_encode_ms[r0:])
                d, srch = pol.decision_ms[-1], pol.search_ms[-1]
                rows["decision_ms"].append(d)
                rows["search_ms"].append(srch - root_enc)
                rows["encoder_ms"].append(d - srch + root_enc)
                rows["passes_ms"].append(sum(mine))
                rows["tree_ms"].append(srch - root_enc - sum(mine))
                rows["passes"].append(len(mine))
                prev = a
    finally:
        planner._expand, planner.to_z, planner.plan = inner_expand, inner_to_z, inner_plan
    return {"simulations": simulations, "backend": backend, "threads": threads, "lookahead": lookahead,
            "pass_ms": pass_ms, **rows}


__all__ = ["count_world_model", "measure_decisions"]
