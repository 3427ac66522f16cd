"""sim.backends.mujoco_backend: one compiled world per number of objects."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")

from sim.backends.base import SEG_ROBOT
from sim.backends.mujoco_backend import MAX_OBJECTS, MuJoCoBackend, cluster_vertices
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


def test_vertex_clustering_simplifies_within_a_cell():
    # a finely tessellated unit-ish sphere: 40 x 80 latitude/longitude grid
    th, ph = np.meshgrid(np.linspace(0.05, np.pi - 0.05, 40), np.linspace(0, 2 * np.pi, 80, endpoint=False),
                         indexing="ij")
    v = 0.05 * np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1).reshape(-1, 3)
    idx = np.arange(40 * 80).reshape(40, 80)
    a, b, c, d = idx[:-1], np.roll(idx, -1, 1)[:-1], idx[1:], np.roll(idx, -1, 1)[1:]
    f = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([b, d, c], -1).reshape(-1, 3)])
    same_v, same_f = cluster_vertices(v, f, 1e-6)  # cells finer than the mesh: nothing merges
    assert len(same_f) == len(f) and len(same_v) == len(v)
    nv, nf = cluster_vertices(v, f, 0.01)
    assert 0 < len(nf) < len(f) / 4 and len(nv) < len(v) / 4
    assert nf.min() >= 0 and nf.max() == len(nv) - 1  # every vertex used, indices in range
    assert np.all((nf[:, 0] != nf[:, 1]) & (nf[:, 1] != nf[:, 2]) & (nf[:, 0] != nf[:, 2]))  # no slivers
    assert len(np.unique(np.sort(nf, axis=1), axis=0)) == len(nf)  # no repeats
    # each new vertex is the mean of input vertices in its cell: within a cell diagonal of one of them
    dist = np.linalg.norm(nv[:, None] - v[None], axis=-1).min(axis=1)
    assert dist.max() <= 0.01 * np.sqrt(3)


def test_simplified_render_meshes_keep_the_physics_and_nearly_the_pixels():
    scene = make_scene()
    runs = {}
    for cell in (0.0, 0.01):
        b = MuJoCoBackend(render_mesh_cell_m=cell)
        try:
            b.build(scene)
            b.step(20)
            runs[cell] = (b.data.qpos.copy(), b.render("front", 64, 64), b.render_segmentation("front", 64, 64),
                          b.model.ngeom)
        finally:
            b.close()
    (q0, img0, seg0, n0), (q1, img1, seg1, n1) = runs[0.0], runs[0.01]
    np.testing.assert_array_equal(q0, q1)  # render-only geoms: not one bit of the physics moves
    assert n1 > n0  # the copies exist ...
    diff = np.abs(img0.astype(int) - img1)
    assert diff.max() > 0 and diff.mean() < 1.0  # ... and are drawn instead, almost where the originals were
    robot0, robot1 = seg0 == SEG_ROBOT, seg1 == SEG_ROBOT
    assert robot1.sum() > 0 and (robot0 != robot1).mean() < 0.01  # still labelled robot in segmentation
    with pytest.raises(ValueError, match="one or the other"):
        MuJoCoBackend(visual_meshes=True, render_mesh_cell_m=0.01)


def test_too_many_objects_is_a_clear_error():
    b = MuJoCoBackend()
    scene = make_scene()
    many = scene.__class__(**{**scene.__dict__, "objects": scene.objects * (MAX_OBJECTS // 2 + 1)})
    with pytest.raises(ValueError, match="supports"):
        b.build(many)


def test_render_depth_matches_the_pybullet_backend():
    from sim.backends.base import SEG_BACKGROUND
    from sim.backends.pybullet_backend import PyBulletBackend

    depths, segs = [], []
    for cls in (MuJoCoBackend, PyBulletBackend):
        b = cls()
        try:
            b.build(make_scene())
            depths.append(b.render_depth("front", 96, 96))
            segs.append(b.render_segmentation("front", 96, 96))
        finally:
            b.close()
    dm, dp = depths
    assert dm.shape == (96, 96) and dm.dtype == np.float32
    both = (segs[0] == segs[1]) & (segs[0] != SEG_BACKGROUND)
    assert both.mean() > 0.6
    assert np.median(np.abs(dm - dp)[both]) < 0.01  # the same metres where both see the same thing
    assert dm[48, 48] - 0.003 <= 1.0568 <= dm[47, 48] + 0.003  # the optical axis meets the table 1.057 m away


def test_an_env_never_closed_exits_without_gl_errors():
    """Renderers left open (an env never closed, or used again after close) are closed at exit before the
    GL display goes: the interpreter exits 0 with nothing on stderr (before: an EGL traceback each)."""
    import os
    import subprocess
    import sys

    code = ("import gymnasium as gym, sim\n"
            "env = gym.make('edge/Stack-MuJoCo-v0', image_size=32)\n"
            "env.reset(seed=0); env.close(); env.reset(seed=1)\n"  # used again after close
            "other = gym.make('edge/Stack-MuJoCo-v0', image_size=32); other.reset(seed=0)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert res.returncode == 0 and "Error" not in res.stderr and "Traceback" not in res.stderr, res.stderr
