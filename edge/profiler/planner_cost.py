"""What a world-model planner's decision costs on a target device: the arithmetic.

A decision of ``edge run --policy comet`` (:class:`world_models.policy.WorldModelPolicy`) is the
frame's encoder pass (``--obs slots``: one slot-attention tracking pass started from the previous
frame's slots, an episode's first frame encoded twice from the learned start; ``pixels``: the
window's frames through the model's own CNN), then the tree search: one model pass for the root, one
more when the search starts from after a queued move (async: ``planner_ahead`` in the episode
records) and one per simulation (:class:`world_models.planner.Planner`: each pass gives a node's prior
and value and its children's states and rewards), and between the passes the tree's bookkeeping in
Python (selection, backup, the supports' decoding).

:mod:`world_models.device_cost` counts the networks as the VLA's are counted
(:mod:`edge.profiler.flops`) into a :class:`~edge.profiler.device_model.CostProfile` (``encoder`` =
the frame's encoder pass, ``step`` = one search pass, ``locator`` = the extra work of an episode's
first frame) and times decisions on this host. On a device::

    t(decision) = t(encoder) + passes * t(step) + simulations * tree_s

``tree_s``, the bookkeeping per simulation, runs on the robot computer's CPU and is **not projected**:
it is the time measured on this host; a CPU core slower than this host's (a Jetson's Arm cores)
makes every projection here an underestimate by that share. Energy counts the networks' time only
(at the device's rated power, as the VLA's projection does), not the tree's.

    cost = world_models.device_cost.count_world_model("world_models/checkpoints/comet_reach3")
    decision_time_s(cost, get_device("orin-nano"), simulations=16, tree_s=1e-4)
"""

from __future__ import annotations

from typing import Any

from edge.profiler.device_model import CostProfile, DeviceSpec, part_time_s


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
    :func:`edge.profiler.device_model.project_run` (``steps`` = the search passes) plus ``tree_*``
    and ``ms_per_decision``. ``energy_j``: the networks' time at the device's rated power (the
    tree's CPU time is not in it)."""
    enc = part_time_s(profile.encoder, device) * decisions
    steps = part_time_s(profile.step, device) * passes
    loc = part_time_s(profile.locator, device) * episodes if profile.locator is not None else 0.0
    networks = enc + steps + loc
    total = networks + tree_s

    def per(x: float) -> float | None:
        return None if not executed else 1e3 * x / executed

    return {"device": device.name, "encoder_s": enc, "steps_s": steps, "locator_s": loc, "tree_s": tree_s,
            "total_s": total, "energy_j": networks * device.power_w, "ms_per_action": per(total),
            "mj_per_action": None if not executed else 1e3 * networks * device.power_w / executed,
            "encoder_ms_per_action": per(enc), "steps_ms_per_action": per(steps), "locator_ms_per_action": per(loc),
            "tree_ms_per_action": per(tree_s),
            "ms_per_decision": None if not decisions else 1e3 * total / decisions}


__all__ = ["decision_time_s", "project_planner_run", "search_passes"]
