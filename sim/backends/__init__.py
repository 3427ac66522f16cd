"""Physics backends: one small interface (:class:`sim.backends.base.PhysicsBackend`), two engines."""
