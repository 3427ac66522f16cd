"""Training code that may use the simulator (demonstrations, rollouts, DAgger, the VLA trainer).

The on-robot core (``edge/`` outside this package and the app layer) never imports it; the layering
test (``tests/test_layering.py``) checks that. The model, policy, export and checkpoint format the
robot runs live in :mod:`edge.vla`.
"""
