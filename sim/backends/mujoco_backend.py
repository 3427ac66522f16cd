"""MuJoCo backend: the Panda URDF from pybullet_data compiled through ``mujoco.MjSpec``.

Compiling the meshes costs ~0.5 s, so the world is compiled once per number of objects, with
that many object *slots* (free boxes) and two goal-patch slots; ``build(scene)`` then writes
sizes, masses, inertias, frictions, colours, camera and light poses into the compiled model in
place (microseconds). Unused goal slots are parked far outside the workspace with alpha 0.

Rendering: offscreen ``mujoco.Renderer`` (set ``MUJOCO_GL=egl`` or ``osmesa`` for headless use)
with shadows and reflections off, one renderer per image size.
"""

from __future__ import annotations

import atexit
import os
import re
import weakref

import numpy as np

from sim.backends.base import SEG_BACKGROUND, SEG_OBJECT0, SEG_ROBOT, SEG_TABLE
from sim.robot_model import (
    ARM_JOINTS,
    FINGER_JOINTS,
    GRIPPER_MAX_WIDTH_M,
    load_joints,
    urdf_path,
)
from sim.scene import Scene, look_at

# MuJoCo picks its GL backend when it is first imported: headless EGL unless the user chose.
os.environ.setdefault("MUJOCO_GL", "egl")

MAX_OBJECTS = 6
N_GOAL_SLOTS = 2
PARK_Z_M = -5.0
TABLE_HALF_M = (0.6, 0.6, 0.1)  # thick, so a cube pressed down cannot tunnel through
TABLE_CENTER_XY_M = (0.5, 0.0)
ARM_KP = (4500.0, 4500.0, 3500.0, 3500.0, 2000.0, 2000.0, 2000.0)
ARM_KV = (150.0, 150.0, 120.0, 120.0, 70.0, 70.0, 70.0)  # ~tau 0.03 s; 3x this lagged 20 Hz IK targets by 3 cm
FINGER_KP = 800.0
FINGER_FORCE_N = 30.0
FINGER_FRICTION = (1.5, 0.01, 0.001)


def _quat_from_yaw(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


def _as_slice(idx: np.ndarray):
    """``slice(a, b)`` selecting the same elements as the index array ``idx`` if they are
    consecutive ascending addresses, else ``idx`` itself."""
    a = int(idx[0])
    if np.array_equal(idx, np.arange(a, a + len(idx))):
        return slice(a, a + len(idx))
    return idx


def _mat_to_quat(R: np.ndarray) -> np.ndarray:
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, R.reshape(-1).astype(np.float64))
    return q


def _robot_spec():
    import mujoco

    path = urdf_path()
    text = path.read_text().replace("package://", "")
    compiler = (f'<mujoco><compiler meshdir="{path.parent}" balanceinertia="true" '
                'discardvisual="false" fusestatic="false" strippath="false"/></mujoco>')
    text = re.sub(r"(<robot [^>]*>)", r"\1" + compiler, text, count=1)
    return mujoco.MjSpec.from_string(text)


RENDER_GROUP, HIDDEN_GROUP = 3, 4  # simplified render-only robot meshes; the collision meshes they stand for


def cluster_vertices(verts: np.ndarray, faces: np.ndarray, cell_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Simplify a triangle mesh by vertex clustering: vertices in the same ``cell_m`` grid cell
    become their mean; triangles that collapse (two corners in one cell) or repeat are dropped.
    Every output vertex lies within one cell diagonal of the input vertices it replaces.
    Returns (vertices (n, 3) float64, faces (m, 3) int64)."""
    keys = np.floor(np.asarray(verts, np.float64) / cell_m).astype(np.int64)
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    n = int(inv.max()) + 1
    centres = np.zeros((n, 3))
    np.add.at(centres, inv, verts)
    centres /= np.bincount(inv, minlength=n)[:, None]
    f = inv[np.asarray(faces, np.int64)]
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])]
    _, first = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
    f = f[np.sort(first)]  # one triangle per vertex triple, in the input's order and winding
    used = np.unique(f)
    remap = np.full(n, -1, np.int64)
    remap[used] = np.arange(len(used))
    return centres[used], remap[f]


_RENDER_MESHES: dict[float, list] = {}  # cell -> [(body, pos, quat, verts, faces)] (robot only)
ROBOT_RGBA = [0.86, 0.86, 0.9, 1.0]  # the robot's drawn geoms (and their simplified copies)


def _split_robot_geoms(spec) -> None:
    """The URDF's collision geoms collide with the world and objects but not with each other; its
    visual geoms with nothing."""
    for geom in spec.geoms:
        geom.contype, geom.conaffinity = (1, 0) if geom.contype else (0, 0)


def _add_render_meshes(spec, cell_m: float) -> None:
    """Render-only copies of the robot's collision meshes, simplified on a ``cell_m`` grid, in
    RENDER_GROUP (no contacts, no mass: the bodies' URDF inertias stand); the collision meshes move to
    HIDDEN_GROUP. The copies take the compiled meshes' frames, so they sit where the originals do."""
    import mujoco

    mesh = mujoco.mjtGeom.mjGEOM_MESH
    if cell_m not in _RENDER_MESHES:
        robot = _robot_spec()
        _split_robot_geoms(robot)  # as _compile: the collision meshes are the geoms with contype
        m = _compile_quietly(robot)
        parts = []
        for g in range(m.ngeom):
            if m.geom_type[g] != mesh or not m.geom_contype[g]:
                continue
            i = m.geom_dataid[g]
            v = m.mesh_vert[m.mesh_vertadr[i]: m.mesh_vertadr[i] + m.mesh_vertnum[i]]
            f = m.mesh_face[m.mesh_faceadr[i]: m.mesh_faceadr[i] + m.mesh_facenum[i]]
            verts, faces = cluster_vertices(v, f, cell_m)
            if len(faces):  # a part smaller than a cell disappears rather than failing to compile
                parts.append((m.body(m.geom_bodyid[g]).name, m.geom_pos[g].tolist(), m.geom_quat[g].tolist(),
                              verts, faces))
        _RENDER_MESHES[cell_m] = parts
    for geom in spec.geoms:
        if geom.type == mesh and geom.contype:
            geom.group = HIDDEN_GROUP
    for k, (body, pos, quat, verts, faces) in enumerate(_RENDER_MESHES[cell_m]):
        spec.add_mesh(name=f"render_mesh{k}", uservert=verts.ravel().tolist(), userface=faces.ravel().tolist())
        g = spec.body(body).add_geom(name=f"render_geom{k}", type=mesh, meshname=f"render_mesh{k}",
                                     pos=pos, quat=quat, group=RENDER_GROUP, rgba=ROBOT_RGBA)
        g.contype, g.conaffinity, g.mass, g.density = 0, 0, 0.0, 0.0


def _compile_quietly(spec):
    import warnings

    with warnings.catch_warnings():  # the URDF's visual .obj files lack some texture coordinates
        warnings.simplefilter("ignore", UserWarning)
        return spec.compile()


class MuJoCoBackend:
    """PhysicsBackend on MuJoCo (see :mod:`sim.backends.base`)."""

    name = "mujoco"

    def __init__(self, physics_dt_s: float = 0.002, visual_meshes: bool = False,
                 render_mesh_cell_m: float = 0.0) -> None:
        """``visual_meshes=False`` renders the convex collision hulls (~5x faster on a CPU
        rasteriser than the 56k-triangle visual meshes); True renders the detailed meshes.
        ``render_mesh_cell_m`` > 0 draws the robot with those collision meshes simplified
        (:func:`cluster_vertices` on a grid of that size), in render-only geoms: the physics is
        the same, the pixels differ where the robot's outline moves by less than a cell."""
        import mujoco

        if render_mesh_cell_m and visual_meshes:
            raise ValueError("render_mesh_cell_m simplifies the collision meshes that are drawn when "
                             "visual_meshes is False; use one or the other")
        self._mj = mujoco
        self.physics_dt_s = float(physics_dt_s)
        self.render_mesh_cell_m = float(render_mesh_cell_m)
        self._vopt = mujoco.MjvOption()
        if not visual_meshes:
            self._vopt.geomgroup[:] = 0
            self._vopt.geomgroup[0] = 1  # URDF collision geoms (group 0) + table/objects
            if render_mesh_cell_m:
                self._vopt.geomgroup[RENDER_GROUP] = 1  # their simplified copies; the originals hidden
        self._models: dict[int, object] = {}  # compiled worlds by number of object slots
        self._renderers: dict[tuple[int, int, int, bool], object] = {}  # (slots, h, w, seg)
        w = mujoco.mjtWarning
        self._bad_warnings = np.array([int(w.mjWARN_BADQACC), int(w.mjWARN_BADQVEL), int(w.mjWARN_BADQPOS)])
        self.n_slots = -1  # no world until build(scene) compiles one for the scene's objects
        self.model = self.data = None
        self._names: dict[str, int] = {}
        self.scene: Scene | None = None

    # ------------------------------------------------------------------ model
    def _load(self, n_slots: int) -> None:
        """Switch to the world compiled with ``n_slots`` object slots (compiled once per count).

        Each free body costs every physics substep even when parked (stack: 45 DOFs with six
        slots, 21 with two; ~15 % of a control step), so the world holds exactly the scene's
        objects."""
        mujoco = self._mj
        if n_slots not in self._models:
            self._models[n_slots] = self._compile(n_slots)
        self.n_slots = n_slots  # renderers are bound to one model: kept per slot count (_renderer)
        self.model = m = self._models[n_slots]
        self.data = mujoco.MjData(m)
        self._arm_qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in ARM_JOINTS])
        self._arm_dadr = np.array([m.jnt_dofadr[m.joint(n).id] for n in ARM_JOINTS])
        self._fing_qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in FINGER_JOINTS])
        self._fing_dadr = np.array([m.jnt_dofadr[m.joint(n).id] for n in FINGER_JOINTS])
        self._slot_body = [m.body(f"obj{i}").id for i in range(n_slots)]
        self._slot_geom = [m.geom(f"obj{i}_geom").id for i in range(n_slots)]
        self._slot_qadr = [int(m.jnt_qposadr[m.body_jntadr[b]]) for b in self._slot_body]
        self._slot_dadr = [int(m.jnt_dofadr[m.body_jntadr[b]]) for b in self._slot_body]
        # Per-step reads: the same elements as the index arrays above, as slices where the
        # addresses are consecutive (one copy instead of a gather plus a copy), and numpy views
        # of this MjData's buffers (each attribute access of the bindings builds a new view).
        self._qpos, self._qvel, self._ctrl = self.data.qpos, self.data.qvel, self.data.ctrl
        self._warning_counts = self.data.warning.number  # one count per mjtWarning
        self._arm_q = _as_slice(self._arm_qadr)
        self._arm_d = _as_slice(self._arm_dadr)
        self._fing_q = _as_slice(self._fing_qadr)
        self._warn_ids = [int(i) for i in self._bad_warnings]
        self._goal_geom = [m.geom(f"goal{i}").id for i in range(N_GOAL_SLOTS)]
        self._finger_bodies = {m.body("panda_leftfinger").id, m.body("panda_rightfinger").id}
        robot_bodies = {m.body(f"panda_link{i}").id for i in range(9)}
        robot_bodies |= {m.body("panda_hand").id} | self._finger_bodies
        self._seg_lut = np.full(m.ngeom + 1, SEG_BACKGROUND, dtype=np.int32)
        for g in range(m.ngeom):
            if m.geom_bodyid[g] in robot_bodies:
                self._seg_lut[g] = SEG_ROBOT
        self._seg_lut[m.geom("table").id] = SEG_TABLE
        for g in self._goal_geom:
            self._seg_lut[g] = SEG_TABLE

    def _compile(self, n_slots: int):
        mujoco = self._mj
        spec = _robot_spec()
        spec.option.timestep = self.physics_dt_s
        # Semi-implicit Euler: implicitfast diverged (NaN, cubes ejected) in ~5% of stacking
        # episodes with these URDF inertias; Euler had none in the same seeds.
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        spec.option.impratio = 10.0
        spec.visual.quality.shadowsize = 0
        spec.visual.quality.offsamples = 0  # no MSAA: 96x96 images do not need it
        spec.visual.global_.offwidth = 640
        spec.visual.global_.offheight = 640
        joints = load_joints()
        for body in spec.bodies:
            if body.name.startswith("panda_"):
                body.gravcomp = 1.0
                # Note: the URDF's placeholder inertias (0.1 kg m^2 per link) are kept on purpose:
                # "realistic" small inertias made cube contacts markedly less stable (stack expert
                # 97.5% -> 82.5% over 40 seeds) under the stiff joint servos.
        _split_robot_geoms(spec)
        for geom in spec.geoms:
            if geom.contype:
                geom.rgba = ROBOT_RGBA  # hulls double as the fast render model
        for fname in ("panda_leftfinger", "panda_rightfinger"):
            for geom in spec.body(fname).geoms:
                if geom.contype:
                    geom.friction = FINGER_FRICTION
                    geom.condim = 4
        for jname, kp, kv in zip(ARM_JOINTS, ARM_KP, ARM_KV):
            j = spec.joint(jname)
            j.armature = 0.1
            j.damping = [1.0, 0.0, 0.0]
            act = spec.add_actuator(name=f"act_{jname}", target=jname,
                                    trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.gainprm[0] = kp
            act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
            act.biasprm[:3] = [0.0, -kp, -kv]
            effort = joints[jname].effort
            act.forcelimited = True
            act.forcerange = [-effort, effort]
        for jname in FINGER_JOINTS:
            j = spec.joint(jname)
            j.armature = 0.01
            j.damping = [10.0, 0.0, 0.0]
            act = spec.add_actuator(name=f"act_{jname}", target=jname,
                                    trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.gainprm[0] = FINGER_KP
            act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
            act.biasprm[:3] = [0.0, -FINGER_KP, -40.0]
            act.forcelimited = True
            act.forcerange = [-FINGER_FORCE_N, FINGER_FORCE_N]
        if self.render_mesh_cell_m:
            _add_render_meshes(spec, self.render_mesh_cell_m)
        world = spec.worldbody
        table = world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX,
                               size=list(TABLE_HALF_M),
                               pos=[TABLE_CENTER_XY_M[0], TABLE_CENTER_XY_M[1], -TABLE_HALF_M[2]])
        table.contype, table.conaffinity = 1, 1
        for i in range(N_GOAL_SLOTS):
            g = world.add_geom(name=f"goal{i}", type=mujoco.mjtGeom.mjGEOM_BOX,
                               size=[0.05, 0.05, 0.0005], pos=[0.0, 0.0, PARK_Z_M])
            g.contype, g.conaffinity = 0, 0
        for i in range(n_slots):
            b = world.add_body(name=f"obj{i}", pos=[2.0 + i, 0.0, 0.5])
            b.add_freejoint(name=f"obj{i}_free")
            g = b.add_geom(name=f"obj{i}_geom", type=mujoco.mjtGeom.mjGEOM_BOX,
                           size=[0.02, 0.02, 0.02], mass=0.1)
            g.condim = 4
            g.contype, g.conaffinity = 1, 1
        world.add_camera(name="front", pos=[1.2, 0.0, 0.6], fovy=45.0)
        hand = spec.body("panda_hand")
        hand.add_camera(name="wrist", pos=[0.08, 0.0, 0.02], fovy=75.0,
                        quat=list(_mat_to_quat(np.array(
                            [[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]))))
        for i in range(2):
            world.add_light(name=f"light{i}", pos=[0.5, 0.0, 2.0], dir=[0.0, 0.0, -1.0],
                            castshadow=False)
        return _compile_quietly(spec)

    # ------------------------------------------------------------------ build
    def build(self, scene: Scene) -> None:
        if len(scene.objects) > MAX_OBJECTS or len(scene.goals) > N_GOAL_SLOTS:
            raise ValueError(f"scene has {len(scene.objects)} objects / {len(scene.goals)} goals; "
                             f"the MuJoCo backend supports {MAX_OBJECTS} / {N_GOAL_SLOTS}")
        if len(scene.objects) != self.n_slots:
            self._load(len(scene.objects))
        mj, m, d = self._mj, self.model, self.data
        self.scene = scene
        self._names = {obj.name: i for i, obj in enumerate(scene.objects)}
        mj.mj_resetData(m, d)
        for i, o in enumerate(scene.objects):
            g, b = self._slot_geom[i], self._slot_body[i]
            qa, da = self._slot_qadr[i], self._slot_dadr[i]
            hx, hy, hz = o.half_size_m
            m.geom_size[g] = (hx, hy, hz)
            m.geom_rbound[g] = float(np.linalg.norm(o.half_size_m))
            m.geom_aabb[g] = (0.0, 0.0, 0.0, hx, hy, hz)  # collision uses it; keep in sync
            m.geom_rgba[g] = o.rgba
            m.geom_friction[g] = (o.friction, 0.01, 0.001)
            m.body_mass[b] = o.mass_kg
            m.body_inertia[b] = (o.mass_kg / 3.0) * np.array(
                [hy**2 + hz**2, hx**2 + hz**2, hx**2 + hy**2])
            d.qpos[qa:qa + 3] = o.pos_m
            d.qpos[qa + 3:qa + 7] = _quat_from_yaw(o.yaw_rad)
            d.qvel[da:da + 6] = 0.0
            self._seg_lut[g] = SEG_OBJECT0 + i
        for i, g in enumerate(self._goal_geom):
            if i < len(scene.goals):
                gp = scene.goals[i]
                m.geom_size[g] = (gp.half_size_m[0], gp.half_size_m[1], 0.0005)
                m.geom_pos[g] = (gp.center_m[0], gp.center_m[1], 0.0006)
                m.geom_rgba[g] = gp.rgba
            else:
                m.geom_pos[g] = (0.0, 0.0, PARK_Z_M)
                m.geom_rgba[g] = (0, 0, 0, 0)
        m.geom_rgba[m.geom("table").id] = scene.table_rgba
        for cam in scene.cameras:
            if cam.name == "wrist":
                m.cam_fovy[m.camera("wrist").id] = cam.fovy_deg
                continue
            cid = m.camera(cam.name).id
            R = look_at(np.array(cam.pos_m), np.array(cam.target_m), np.array(cam.up))
            m.cam_pos[cid] = cam.pos_m
            m.cam_quat[cid] = _mat_to_quat(R)
            m.cam_fovy[cid] = cam.fovy_deg
        for i in range(2):
            lid = m.light(f"light{i}").id
            if i < len(scene.lights):
                lt = scene.lights[i]
                m.light_pos[lid] = lt.pos_m
                direction = np.array([0.5, 0.0, 0.0]) - np.array(lt.pos_m)
                m.light_dir[lid] = direction / np.linalg.norm(direction)
                m.light_diffuse[lid] = (lt.diffuse,) * 3
                m.light_active[lid] = 1
            else:
                m.light_active[lid] = 0
        self.reset_robot(np.array(scene.q_home_rad), GRIPPER_MAX_WIDTH_M)

    def reset_robot(self, q_rad: np.ndarray, gripper_width_m: float) -> None:
        d = self.data
        d.qpos[self._arm_qadr] = q_rad
        d.qvel[self._arm_dadr] = 0.0
        d.qpos[self._fing_qadr] = gripper_width_m / 2
        d.qvel[self._fing_dadr] = 0.0
        d.ctrl[:7] = q_rad
        d.ctrl[7:9] = gripper_width_m / 2
        self._mj.mj_forward(self.model, d)

    # ------------------------------------------------------------------ control
    def set_arm_targets(self, q_target_rad: np.ndarray) -> None:
        self._ctrl[:7] = q_target_rad

    def set_gripper_target(self, width_m: float) -> None:
        # np.clip returns a value inside the bounds unchanged, so it is only called outside them
        w = width_m if 0.0 <= width_m <= GRIPPER_MAX_WIDTH_M else np.clip(width_m, 0.0, GRIPPER_MAX_WIDTH_M)
        self._ctrl[7:9] = float(w) / 2

    def step(self, n_substeps: int) -> None:
        self._mj.mj_step(self.model, self.data, nstep=int(n_substeps))

    def get_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The world's full integration state (positions, velocities, controls, actuator state,
        solver warm start, time) as one float64 vector, and the warning counters (which
        :attr:`diverged` reads), for :meth:`set_state`."""
        spec = self._mj.mjtState.mjSTATE_INTEGRATION
        out = np.empty(self._mj.mj_stateSize(self.model, spec))
        self._mj.mj_getState(self.model, self.data, out, spec)
        return out, self._warning_counts.copy()

    def set_state(self, state: tuple[np.ndarray, np.ndarray]) -> None:
        """Return to a :meth:`get_state` of the current world (same scene): the next :meth:`step`
        continues exactly as it would have from there."""
        vec, warnings = state
        mj, spec = self._mj, self._mj.mjtState.mjSTATE_INTEGRATION
        size = mj.mj_stateSize(self.model, spec)
        if np.shape(vec) != (size,):
            raise ValueError(f"state has shape {np.shape(vec)}; this world's state has shape ({size},)")
        vec = np.asarray(vec, np.float64)
        mj.mj_setState(self.model, self.data, vec, spec)
        mj.mj_forward(self.model, self.data)  # positions, contacts: consistent with the state
        # some MuJoCo versions write the warm start in mj_forward: put the saved one back
        mj.mj_setState(self.model, self.data, vec, spec)
        self._warning_counts[:] = warnings

    @property
    def diverged(self) -> bool:
        """True once MuJoCo flagged NaN/huge values this episode (it then silently resets the
        state, so the env must end the episode and say so)."""
        counts = self._warning_counts
        return any(counts[i] for i in self._warn_ids)

    # ------------------------------------------------------------------ state
    def arm_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self._qpos[self._arm_q].copy(), self._qvel[self._arm_d].copy()

    def gripper_width(self) -> float:
        return float(self._qpos[self._fing_q].sum())

    def _slot(self, name: str) -> int:
        try:
            return self._names[name]
        except KeyError:
            raise KeyError(f"no object {name!r}; objects: {list(self._names)}") from None

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        qa = self._slot_qadr[self._slot(name)]
        qpos = self._qpos
        return qpos[qa:qa + 3].copy(), qpos[qa + 3:qa + 7].copy()

    def object_pose7(self, name: str) -> np.ndarray:
        """:meth:`object_pose` as one (7,) array, xyz + wxyz (a free joint's qpos, copied)."""
        qa = self._slot_qadr[self._slot(name)]
        return self._qpos[qa:qa + 7].copy()

    def object_velocity(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        da = self._slot_dadr[self._slot(name)]
        qvel = self._qvel
        # Free-joint qvel: linear velocity in world frame, angular in the body frame.
        return qvel[da:da + 3].copy(), qvel[da + 3:da + 6].copy()

    def fingers_touch(self, name: str) -> bool:
        g = self._slot_geom[self._slot(name)]
        d = self.data
        n = d.ncon
        if n == 0:
            return False
        # the contacts' geom pairs as arrays (not one MjContact object per contact)
        g1, g2 = d.contact.geom1[:n], d.contact.geom2[:n]
        other = np.concatenate([g2[g1 == g], g1[g2 == g]])
        return any(b in self._finger_bodies for b in self.model.geom_bodyid[other].tolist())

    # ------------------------------------------------------------------ rendering
    def _renderer(self, height: int, width: int, seg: bool | str):
        """A cached renderer; ``seg``: False (colour), True (segmentation) or "depth"."""
        key = (self.n_slots, height, width, seg)
        r = self._renderers.get(key)
        if r is None:
            r = self._mj.Renderer(self.model, height=height, width=width)
            _close_at_exit(self)
            if seg == "depth":
                r.enable_depth_rendering()
            elif seg:
                r.enable_segmentation_rendering()
            self._renderers[key] = r
        return r

    def _update(self, r, camera: str) -> None:
        r.update_scene(self.data, camera=camera, scene_option=self._vopt)
        r.scene.flags[self._mj.mjtRndFlag.mjRND_SHADOW] = False
        r.scene.flags[self._mj.mjtRndFlag.mjRND_REFLECTION] = False
        r.scene.flags[self._mj.mjtRndFlag.mjRND_SKYBOX] = False

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        r = self._renderer(height, width, False)
        self._update(r, camera)
        return r.render()

    def render_segmentation(self, camera: str, height: int, width: int) -> np.ndarray:
        r = self._renderer(height, width, True)
        self._update(r, camera)
        seg = r.render()
        ids = np.where(seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM), seg[..., 0], -1)
        return self._seg_lut[ids]  # -1 indexes the last entry (background)

    def render_depth(self, camera: str, height: int, width: int) -> np.ndarray:
        r = self._renderer(height, width, "depth")
        self._update(r, camera)
        return np.asarray(r.render(), dtype=np.float32)

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
        _OPEN.discard(self)


# Backends with renderers not yet closed. An env never closed would leave its renderers to their __del__
# at interpreter exit, after the GL display's own exit hook has torn the display down (an EGL error
# printed per renderer): one exit hook, registered after the first GL context (and so after the display's
# hook, so it runs before it), closes them first. Collected backends leave the set on their own.
_OPEN: weakref.WeakSet = weakref.WeakSet()
_EXIT_HOOK: list[bool] = []


def _close_at_exit(backend: MuJoCoBackend) -> None:
    _OPEN.add(backend)
    if not _EXIT_HOOK:
        atexit.register(_close_open_backends)
        _EXIT_HOOK.append(True)


def _close_open_backends() -> None:
    for b in list(_OPEN):
        b.close()
