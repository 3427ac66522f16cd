"""Deprecated location: the session moved to :mod:`edge.runtime.session` (kept for old imports)."""

from edge.runtime.session import (  # noqa: F401
    DEFAULT_CHECKPOINT,
    Runtime,
    SessionConfig,
    SessionResult,
    build_runtime,
    policy_loader,
    run_session,
)
