"""EnvConfig.lazy_images: camera images rendered on first read, identical to the eager ones, and
never read from a later step."""

import numpy as np
import pytest

import sim
from sim.env import LazyObservation


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_lazy_images_equal_the_eager_ones_and_render_only_when_read(engine):
    kw = {"task": "stack", "sim": engine, "image_size": 32, "wrist_camera": True}
    eager, lazy = sim.make_env(**kw), sim.make_env(**kw, lazy_images=True)
    try:
        oe, _ = eager.reset(seed=3)
        ol, _ = lazy.reset(seed=3)
        assert isinstance(ol, LazyObservation) and list(ol) == list(oe)
        assert "front" in ol and "wrist" in ol and ol.rendered() == ()  # `in` renders nothing
        np.testing.assert_array_equal(ol["proprio"], oe["proprio"])
        assert ol.rendered() == ()
        a = np.zeros(eager.action_space.shape, np.float32)
        a[0] = 0.01
        for _ in range(3):
            oe = eager.step(a)[0]
            ol = lazy.step(a)[0]
        np.testing.assert_array_equal(ol["front"], oe["front"])
        assert ol.rendered() == ("front",)
        assert ol["front"] is ol["front"]  # rendered once
        np.testing.assert_array_equal(ol["wrist"], oe["wrist"])
        lazy.step(a)
        assert ol["front"] is not None  # already rendered: still readable after the step
        stale = lazy.step(a)[0]
        lazy.step(a)
        with pytest.raises(RuntimeError, match="'front' read after the env stepped on"):
            stale["front"]  # noqa: B018 - another step's picture would be wrong, not stale-but-close
        fresh = lazy.step(a)[0]
        lazy.reset(seed=5)
        with pytest.raises(RuntimeError, match="'wrist' read after the env stepped on"):
            fresh["wrist"]  # noqa: B018
    finally:
        eager.close()
        lazy.close()


def test_realism_keeps_images_eager():
    from sim.realism import RealismConfig

    env = sim.make_env("stack", image_size=32, lazy_images=True, realism=RealismConfig(image_noise_std=2.0))
    try:
        obs, _ = env.reset(seed=1)
        assert isinstance(obs, dict)  # its image effects draw per step: rendered every step
    finally:
        env.close()
