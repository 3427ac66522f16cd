"""world_models/scripted.py: ObjectPlay's settings, determinism and what it reads."""

import numpy as np
import pytest

from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
from world_models.scripted import ObjectPlay


def test_object_play_is_deterministic_and_moves_cubes():
    env = ObjectTaskEnv(ObjectTaskConfig(task="push3"))
    try:
        runs = []
        for _ in range(2):
            env.reset(seed=7)
            play, acts = ObjectPlay(np.random.default_rng(7), eps=0.0, segment=30.0), []
            start = {o.name: env.env.backend.object_pose7(o.name)[:2].copy() for o in env.env.scene.objects}
            for _ in range(60):
                acts.append(play.action(env))
                env.simulate(acts[-1])
            moved = max(float(np.linalg.norm(env.env.backend.object_pose7(n)[:2] - p)) for n, p in start.items())
            runs.append((acts, moved))
        assert runs[0][0] == runs[1][0] and all(0 <= a < 8 for a in runs[0][0])
        assert runs[0][1] > 0.01  # with no random actions it pushes some cube more than 1 cm in 60 steps
    finally:
        env.close()


@pytest.mark.parametrize("eps,segment,said", [(1.5, 20.0, "eps"), (-0.1, 20.0, "eps"), (0.2, 0.5, "segment"),
                                              (0.2, float("nan"), "segment"), (0.2, float("inf"), "segment")])
def test_object_play_rejects_bad_settings(eps, segment, said):
    with pytest.raises(ValueError, match=said):
        ObjectPlay(np.random.default_rng(0), eps, segment)
