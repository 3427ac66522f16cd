"""sim.backends.mujoco_backend: one compiled world per number of objects."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")

from sim.backends.mujoco_backend import MAX_OBJECTS, MuJoCoBackend
from sim.scene import BoxObject
from tests.sim.backends.test_pybullet_backend import make_scene


def _with_objects(n: int):
    scene = make_scene()
    extra = tuple(BoxObject(f"c{i}", (0.02, 0.02, 0.02), (0.2, 0.7, 0.2, 1.0), 0.1, 0.8,
                            (0.35 + 0.08 * i, -0.25, 0.02), 0.0, color_name="green") for i in range(n - 2))
    return scene.__class__(**{**scene.__dict__, "objects": scene.objects[:n] + extra})


def test_world_holds_exactly_the_scenes_objects_and_switches_back_and_forth():
    b = MuJoCoBackend()
    try:
        for n in (2, 4, 1, 2):
            scene = _with_objects(n)
            b.build(scene)
            assert b.model.nv == 9 + 6 * n  # arm + fingers + one free joint per object, no parked bodies
            b.step(50)
            for o in scene.objects:  # objects settle where the scene put them
                np.testing.assert_allclose(b.object_pose(o.name)[0][:2], o.pos_m[:2], atol=5e-3)
            img = b.render("front", 32, 32)  # renderers follow the model switch
            assert img.shape == (32, 32, 3) and img.std() > 0
        assert sorted(b._models) == [1, 2, 4]  # each count compiled once
        assert sorted(k[0] for k in b._renderers) == [1, 2, 4]  # one renderer per world, reused
    finally:
        b.close()


def test_too_many_objects_is_a_clear_error():
    b = MuJoCoBackend()
    scene = make_scene()
    many = scene.__class__(**{**scene.__dict__, "objects": scene.objects * (MAX_OBJECTS // 2 + 1)})
    with pytest.raises(ValueError, match="supports"):
        b.build(many)
