"""Lazy registries: ``name -> "module:factory"``. Nothing is imported until a name is resolved, so a
light command stays light, and the CLI's choices are the tables' keys.

A value that is not a registered name but looks like ``pkg.module:factory`` is imported as given,
which is how a user's own policy or scheduler plugs in::

    edge run --scheduler mypkg.sched:make     # make(cfg, policy) -> a Scheduler

Factory signatures:

* scheduler: ``factory(cfg: RuntimeConfig, policy) -> Scheduler`` (its own settings: ``cfg.scheduler.options``)
* policy:    ``factory(cfg: RuntimeConfig, robot) -> ChunkPolicy`` (its own settings: ``cfg.policy.options``)
"""

from __future__ import annotations

from edge.registry import Registry

__all__ = ["POLICIES", "SCHEDULERS", "Registry"]


SCHEDULERS = Registry("scheduler", {
    "fixed": "edge.runtime.factories:fixed_scheduler",
    "dvac": "edge.runtime.factories:dvac_scheduler",
    "eqrl": "adapters.eqrl.deploy:eqrl_scheduler",
})
POLICIES = Registry("policy", {
    "vla": "edge.runtime.factories:vla_policy",
    "comet": "world_models.policy:comet_policy",
    "expert": "edge.runtime.factories:expert_policy",
})
