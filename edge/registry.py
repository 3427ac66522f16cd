"""Lazy registries: ``name -> "module:factory"``. Nothing is imported until a name is resolved, so a
light command stays light, and a CLI's choices are a table's keys. A value that is not a registered
name but looks like ``pkg.module:factory`` is imported as given: that is how a user's own policy,
scheduler or backend plugs in. The tables live next to what they build (:data:`edge.backends.BACKEND_FACTORIES`,
:mod:`edge.runtime.registry` for policies and schedulers).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from edge.errors import EdgeError


class Registry:
    """One table of named factories of a kind (e.g. ``"scheduler"``)."""

    def __init__(self, kind: str, table: dict[str, str]) -> None:
        self.kind = kind
        self.table = dict(table)

    def names(self) -> tuple[str, ...]:
        return tuple(self.table)

    def register(self, name: str, target: str) -> None:
        if ":" not in target:
            raise EdgeError(f"{self.kind} {name!r}: target {target!r} must read 'module:factory'")
        self.table[name] = target

    def resolve(self, name: str) -> Callable[..., Any]:
        """The factory for ``name`` (a registered name or ``module:factory``); a clear error naming
        the kind, the value and the choices otherwise."""
        target = self.table.get(name)
        if target is None:
            if ":" not in name:
                raise EdgeError(f"unknown {self.kind} {name!r}: choose one of {', '.join(self.table)} "
                                f"or give your own as 'pkg.module:factory'")
            target = name
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            raise EdgeError(f"{self.kind} {name!r}: cannot import module {module_name!r} ({err})") from None
        factory = getattr(module, attr, None)
        if not callable(factory):
            raise EdgeError(f"{self.kind} {name!r}: module {module_name!r} has no callable {attr!r}")
        return factory
