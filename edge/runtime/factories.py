"""The built-in factories the registries point at (see :mod:`edge.runtime.registry`)."""

from __future__ import annotations

from typing import Any


def fixed_scheduler(cfg: Any, policy: Any = None):
    from edge.schedulers import FixedScheduler

    return FixedScheduler(cfg.num_steps, cfg.execute)


def dvac_scheduler(cfg: Any, policy: Any = None):
    from edge.schedulers import SchedulerConfig, make_scheduler

    # --execute is dvac's longest prefix (it adapts C below it), never silently ignored
    return make_scheduler(SchedulerConfig(kind="dvac", num_steps=cfg.num_steps, execute=cfg.execute,
                                          max_execute=cfg.execute, min_execute=min(2, cfg.execute)))


def vla_policy(cfg: Any, robot: Any):
    from edge.backends import BackendConfig
    from edge.errors import EdgeError
    from edge.vla.policy import load_policy

    try:
        return load_policy(cfg.checkpoint, BackendConfig(name=cfg.backend, threads=1), robot=robot,
                           verify=getattr(cfg, "verify", True))
    except EdgeError:
        raise
    except Exception as err:  # onnxruntime's own error types derive from Exception
        if not type(err).__module__.startswith("onnxruntime"):
            raise
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise EdgeError(f"--checkpoint {cfg.checkpoint}: onnxruntime cannot load the model "
                        f"({type(err).__name__}: {detail}); the ONNX file is truncated or corrupt: "
                        "re-export it with `edge export --checkpoint CKPT --out DIR`") from None


#: the session settings the scripted expert runs with (``edge run --policy expert`` applies them):
#: one action per query (H = 1, K = 1, C = 1: NFE counts 1 per action), each executed before the
#: next query (sync), computed inline on the loop's thread (it reads the simulator the loop steps)
#: and charged no latency (so every tick executes one action, as the expert's own loop did)
EXPERT_SETTINGS = {"num_steps": 1, "execute": 1, "execution": "sync", "inference": "inline",
                   "latency": "constant", "latency_ms": 0.0}


def expert_policy(cfg: Any, robot: Any = None):
    """The scripted expert (:class:`sim.expert_policy.ExpertPolicy`) for ``cfg.task``, camera side
    ``cfg.image_size`` (0 = 96). It acts from the simulator's state, which ``build_runtime`` hands
    it (``attach_env``), so it runs inline only; K and C must be 1 (see :data:`EXPERT_SETTINGS`)."""
    from edge.errors import EdgeError
    from sim.expert_policy import DEFAULT_IMAGE_SIZE, ExpertPolicy

    inference = getattr(cfg, "inference", "inline")
    if inference in ("thread", "process") or (inference == "auto" and getattr(cfg, "clock", "virtual") == "real"):
        raise EdgeError(f"--policy expert reads the simulator's state, which the control loop steps: it "
                        f"runs inline on the loop's thread, not in an inference {inference!r} worker; "
                        "use --inference inline")
    for key, flag in (("num_steps", "--num-steps"), ("execute", "--execute")):
        value = getattr(cfg, key, 1)
        if value != 1:
            raise EdgeError(f"{flag} {value}: --policy expert makes one action per query (chunk length "
                            f"1, one evaluation): {key} must be 1")
    size = int(getattr(cfg, "image_size", 0) or DEFAULT_IMAGE_SIZE)
    rate = float(getattr(robot, "control_rate_hz", 20.0)) if robot is not None else 20.0
    try:
        return ExpertPolicy(cfg.task, image_size=size, control_rate_hz=rate)
    except ValueError as err:
        raise EdgeError(f"--policy expert: {err}") from None
