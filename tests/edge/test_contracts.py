import dataclasses

import numpy as np
import pytest

from edge.clock import RealClock, VirtualClock
from edge.contracts import (
    ActionChunk,
    ChunkPolicy,
    Clock,
    DenoisingPolicy,
    ObservationSource,
    QueryPlan,
    RefiningScheduler,
    RobotDriver,
    Scheduler,
)
from edge.schedulers import DenoisingVarianceScheduler, fixed
from tests.fakes import (
    BlackBoxRampPolicy,
    FakeDriver,
    FakeObserver,
    joint_spec,
    ramp_for,
)


def test_implementations_satisfy_the_protocols_structurally():
    spec = joint_spec()
    assert isinstance(ramp_for(spec), DenoisingPolicy)
    black_box = BlackBoxRampPolicy(np.zeros(8), np.zeros(8))
    assert isinstance(black_box, ChunkPolicy) and not isinstance(black_box, DenoisingPolicy)
    assert isinstance(FakeDriver(VirtualClock(), spec), RobotDriver)
    assert isinstance(FakeObserver(), ObservationSource)
    assert isinstance(VirtualClock(), Clock) and isinstance(RealClock(), Clock)
    assert isinstance(fixed(2, 2), Scheduler) and not isinstance(fixed(2, 2), RefiningScheduler)
    assert isinstance(DenoisingVarianceScheduler(), RefiningScheduler)


def test_records_are_frozen():
    chunk = ActionChunk(np.zeros((4, 2), np.float32), 0.05, 1.0, 3)
    assert chunk.horizon == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        chunk.execute = 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        QueryPlan(None, 4, 2, 2).num_steps = 1
