"""Edge robotics runtime: the on-robot loop, contracts, safety, telemetry, backends and reference VLA."""

__version__ = "0.1.0"
