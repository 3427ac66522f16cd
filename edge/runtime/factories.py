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
