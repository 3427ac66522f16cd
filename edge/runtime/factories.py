"""The built-in factories the registries point at (see :mod:`edge.runtime.registry`)."""

from __future__ import annotations

from typing import Any


def fixed_scheduler(cfg: Any, policy: Any = None):
    """``scheduler.kind: fixed`` from its section (``scheduler.fixed``)."""
    from edge.schedulers import make_scheduler

    return make_scheduler(cfg.scheduler.fixed)


def dvac_scheduler(cfg: Any, policy: Any = None):
    """``scheduler.kind: dvac`` from its section (``scheduler.dvac``; ``--execute`` is its longest prefix)."""
    from edge.schedulers import make_scheduler

    return make_scheduler(cfg.scheduler.dvac)


def vla_policy(cfg: Any, robot: Any):
    from edge.errors import EdgeError
    from edge.vla_policy import load_policy

    try:
        return load_policy(cfg.policy.checkpoint, cfg.backend, robot=robot, verify=cfg.policy.verify)
    except EdgeError:
        raise
    except Exception as err:  # onnxruntime's own error types derive from Exception
        if not type(err).__module__.startswith("onnxruntime"):
            raise
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EdgeError(f"--checkpoint {cfg.policy.checkpoint}: onnxruntime cannot load the model "
                        f"({type(err).__name__}: {detail}); the ONNX file is truncated or corrupt: "
                        "re-export it with `edge export --checkpoint CKPT --out DIR`") from None


#: the session settings the scripted expert runs with (``edge run --policy expert`` applies them):
#: one action per query (H = 1, K = 1, C = 1: NFE counts 1 per action), each executed before the
#: next query (sync), computed inline on the loop's thread (it reads the simulator the loop steps)
#: and charged no latency (so every tick executes one action, as the expert's own loop did)
EXPERT_SETTINGS = {"num_steps": 1, "execute": 1, "execution": "sync", "inference": "inline",
                   "latency": "constant", "latency_ms": 0.0}  # short names (edge.runtime.config.SHORTCUTS)


def expert_policy(cfg: Any, robot: Any = None):
    """The scripted expert (:class:`sim.expert_policy.ExpertPolicy`) for ``cfg.task``, camera side
    ``cfg.image_size`` (0 = 96). It acts from the simulator's state, which ``build_runtime`` hands
    it (``attach_env``), so it runs inline only; K and C must be 1 (see :data:`EXPERT_SETTINGS`)."""
    from edge.errors import EdgeError
    from sim.expert_policy import DEFAULT_IMAGE_SIZE, ExpertPolicy

    inference = cfg.worker.mode
    if inference in ("thread", "process") or (inference == "auto" and cfg.clock.kind == "real"):
        raise EdgeError(f"--policy expert reads the simulator's state, which the control loop steps: it "
                        f"runs inline on the loop's thread, not in an inference {inference!r} worker; "
                        "use --inference inline")
    for key, flag in (("num_steps", "--num-steps"), ("execute", "--execute")):
        value = getattr(cfg.scheduler.fixed, key)
        if value != 1:
            raise EdgeError(f"{flag} {value}: --policy expert makes one action per query (chunk length "
                            f"1, one evaluation): {key} must be 1")
    size = int(cfg.scene.image_size or DEFAULT_IMAGE_SIZE)
    rate = float(getattr(robot, "control_rate_hz", 20.0)) if robot is not None else 20.0
    try:
        return ExpertPolicy(cfg.scene.task, image_size=size, control_rate_hz=rate)
    except ValueError as err:
        raise EdgeError(f"--policy expert: {err}") from None
