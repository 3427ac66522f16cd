"""A tiny checkpoint and one small profile run (two fixed arms, two short episodes each), shared
by the profiler tests: plumbing and arithmetic, not policy quality."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
    from edge.training.vla.synthetic import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("profiler"), steps=10)


@pytest.fixture(scope="session")
def profiled(tiny_ckpt, tmp_path_factory):
    """(output dir, result of edge.profiler.profile.profile) for arms fixed:2x4 and fixed:1x8."""
    from edge.profiler.profile import Arm, ProfileConfig, parse_scheduler, profile

    out = tmp_path_factory.mktemp("profile")
    pc = ProfileConfig(checkpoint=str(tiny_ckpt), episodes=2, max_steps=14, video_episodes=1,
                       execution="async", latency="constant", latency_ms=60.0)
    arms = [Arm(s, "torch", parse_scheduler(s)) for s in ("fixed:2x4", "fixed:1x8")]
    res = profile(pc, arms, out, ["orin-nano", "x86-cpu"], progress=False)
    return out, res
