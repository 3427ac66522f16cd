"""``edge report RUN_DIR --rerun``: one run directory as a rerun recording (``run.rrd``).

Open it with ``rerun run.rrd``. Written headless (a file sink: no viewer, no network), with the
optional ``rerun-sdk`` package (``pip install rerun-sdk``; the ``viz`` extra). Two timelines, both the run's
own clock and continuous over its episodes: ``slot`` (control tick n) and ``t_s``. Per episode N:

* ``plots/<quantity>/epN``: K and C of the chunk being executed, query latency (one point per
  query, where its chunk was merged), queue depth, starved ticks (1), gripper, TCP height;
* ``robot``: the Panda URDF (meshes from ``pybullet_data``) posed per tick from ``q_rad`` and the
  gripper, one entity per joint under ``robot/joints``;
* ``tcp/position`` (a point per tick) and ``tcp/path`` (the episode's whole TCP path, logged at its
  first tick), in the robot's base frame;
* ``camera/front``: the saved frames ``episodeN.gif`` (frame j after tick 2j + 1, as the annotated
  video places them);
* ``episodes``: one text line per episode (seed, outcome, instruction).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from edge.errors import EdgeError
from edge.records import QueryRecord, TickRecord
from edge.telemetry import read_run

RERUN_MIN = (0, 41)
MISSING = "--rerun needs the rerun-sdk package: pip install rerun-sdk (in a checkout: pip install -c constraints.txt -e '.[viz]')"
ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
FINGER_MAX_M = 0.04  # each finger's travel: opening 0.08 m at gripper 0 (open)
BASE_FRAME = "panda_link0"
# (view title, plotted quantities); each quantity is an entity plots/<name>/ep<N>
PLOTS = (("K and C of the executing chunk", ("K", "C")), ("query latency (ms)", ("latency_ms",)),
         ("queue depth and starved ticks", ("queue_depth", "starved")), ("gripper (0 open, 1 closed)", ("gripper",)),
         ("TCP height (m)", ("tcp_z_m",)))
POINT_SERIES = ("latency_ms", "starved")  # drawn as points, not lines


def import_rerun() -> Any:
    """The ``rerun`` module, or an :class:`EdgeError` saying how to install it."""
    try:
        import rerun as rr
    except ImportError:
        raise EdgeError(MISSING) from None
    version = str(getattr(rr, "__version__", "0"))
    if tuple(int(v) for v in re.findall(r"\d+", version)[:2]) < RERUN_MIN:
        raise EdgeError(f"--rerun needs rerun-sdk>={'.'.join(map(str, RERUN_MIN))} (installed: {version}): "
                        "pip install -U rerun-sdk")
    return rr


def panda_urdf() -> Path | None:
    """The Panda URDF that ships in ``pybullet_data`` (as :func:`sim.robot_model.urdf_path`), or None."""
    try:
        import pybullet_data
    except ImportError:
        return None
    path = Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"
    return path if path.is_file() else None


def write_rerun(run_dir: str | Path, out_path: str | Path, max_episodes: int = 10) -> Path:
    """Write the first ``max_episodes`` episodes of ``run_dir`` to the rerun recording ``out_path``."""
    import tempfile

    rr = import_rerun()
    run_dir, out_path = Path(run_dir), Path(out_path)
    try:
        run = read_run(run_dir)
    except FileNotFoundError as err:
        raise EdgeError(f"{err}; give a run directory written by edge run / edge profile") from None
    ticks, queries = run.tick_records(), run.query_records()
    episodes = {e.get("ep"): e for e in run.episodes}
    ep_ids = sorted({t.ep for t in ticks})[:max_episodes]
    urdf = panda_urdf() if any(t.q_rad is not None and len(t.q_rad) == len(ARM_JOINTS) for t in ticks) else None
    gifs = {ep: run_dir / f"episode{ep}.gif" for ep in ep_ids if (run_dir / f"episode{ep}.gif").is_file()}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with rr.RecordingStream("edge_report") as rec, tempfile.TemporaryDirectory() as tmp:
        rec.save(out_path, default_blueprint=_blueprint(camera=bool(gifs)))
        rec.send_recording_name(run_dir.name)
        tree = _log_robot(rr, rec, urdf, Path(tmp)) if urdf is not None else None
        if tree is not None:  # the TCP is measured in the base frame (= the URDF's root link)
            for path in ("tcp/position", "tcp/path"):
                rec.log(path, rr.CoordinateFrame(BASE_FRAME), static=True)
        for ep in ep_ids:
            ts = [t for t in ticks if t.ep == ep]
            _log_episode(rr, rec, ep, ts, [q for q in queries if q.ep == ep], episodes.get(ep) or {}, tree)
            if ep in gifs:
                _log_frames(rr, rec, gifs[ep], ts)
    return out_path


def _blueprint(camera: bool) -> Any:
    import rerun.blueprint as rrb

    left = [rrb.Spatial3DView(name="robot and TCP", origin="/",
                              contents=["+ /robot/**", "- /robot/panda/collision_geometries/**", "+ /tcp/**"])]
    if camera:
        left.append(rrb.Spatial2DView(name="front camera", origin="/camera"))
    left.append(rrb.TextLogView(name="episodes", origin="/episodes"))
    plots = [rrb.TimeSeriesView(name=title, origin="/plots", contents=[f"+ /plots/{n}/**" for n in names])
             for title, names in PLOTS]
    return rrb.Blueprint(rrb.Horizontal(rrb.Vertical(*left), rrb.Vertical(*plots)), collapse_panels=True)


def _log_robot(rr: Any, rec: Any, urdf: Path, tmp: Path) -> Any:
    """Log the URDF's meshes and fixed transforms once; returns the tree (for the joint transforms).
    Its meshes are ``package://meshes/...`` relative to the URDF: a copy with absolute paths lets
    rerun find them without a ROS package path."""
    local = tmp / urdf.name
    local.write_text(urdf.read_text().replace("package://", f"{urdf.parent.as_posix()}/"))
    tree = rr.urdf.UrdfTree.from_file_path(local, entity_path_prefix="robot")
    tree.log_urdf_to_recording(rec)
    return tree


def _index(rr: Any, slots: list[int], times: list[float]) -> list[Any]:
    return [rr.TimeColumn("slot", sequence=slots), rr.TimeColumn("t_s", duration=times)]


def _log_episode(rr: Any, rec: Any, ep: int, ts: list[TickRecord], qs: list[QueryRecord],
                 episode: dict[str, Any], tree: Any) -> None:
    """One episode's plots, TCP, text line and joint transforms (``ts`` is not empty)."""

    def plot(name: str, rows: list[tuple[int, float, float]]) -> None:
        """rows: (slot, t_s, value)."""
        path = f"plots/{name}/ep{ep}"
        style = rr.SeriesPoints if name in POINT_SERIES else rr.SeriesLines
        rec.log(path, style(names=f"{name} ep{ep}"), static=True)
        if rows:
            slots, times, values = zip(*rows)
            rec.send_columns(path, indexes=_index(rr, list(slots), list(times)),
                             columns=rr.Scalars.columns(scalars=[float(v) for v in values]))

    by_id = {q.query_id: q for q in qs}
    running, last = [], None
    for t in ts:  # the chunk being executed: the last one an action came from
        last = t.query_id if t.query_id is not None else last
        running.append((t, by_id.get(last)))
    plot("K", [(t.slot, t.t_s, q.K) for t, q in running if q is not None])
    plot("C", [(t.slot, t.t_s, q.C) for t, q in running if q is not None])
    plot("latency_ms", [(q.merge_slot, q.t_merged_s, 1e3 * q.latency_s) for q in qs])
    plot("queue_depth", [(t.slot, t.t_s, t.queue_depth) for t in ts])
    plot("starved", [(t.slot, t.t_s, 1) for t in ts if t.starved])
    plot("gripper", [(t.slot, t.t_s, t.gripper) for t in ts if t.gripper is not None])
    plot("tcp_z_m", [(t.slot, t.t_s, t.ee_pos_m[2]) for t in ts if t.ee_pos_m is not None])

    tcp = [t for t in ts if t.ee_pos_m is not None]
    if tcp:
        rec.send_columns("tcp/position", indexes=_index(rr, [t.slot for t in tcp], [t.t_s for t in tcp]),
                         columns=rr.Points3D.columns(positions=[list(t.ee_pos_m) for t in tcp],
                                                     radii=[0.01] * len(tcp)))
    rec.set_time("slot", sequence=ts[0].slot)
    rec.set_time("t_s", duration=ts[0].t_s)
    if tcp:
        rec.log("tcp/path", rr.LineStrips3D([[list(t.ee_pos_m) for t in tcp]], radii=0.003))
    outcome = {True: "success", False: "failure"}.get(episode.get("success"), "unfinished")
    text = f"episode {ep}: seed {episode.get('seed')}, {outcome}, {len(ts)} ticks"
    rec.log("episodes", rr.TextLog(f"{text}; {episode['instruction']}" if episode.get("instruction") else text))
    if tree is not None:
        _log_joints(rr, rec, tree, ts)


def _log_joints(rr: Any, rec: Any, tree: Any, ts: list[TickRecord]) -> None:
    """Per tick: the 7 arm joints from ``q_rad`` and the two fingers from the gripper (0 = open)."""
    arm = [t for t in ts if t.q_rad is not None and len(t.q_rad) == len(ARM_JOINTS)]
    grip = [t for t in ts if t.gripper is not None]
    for rows, names, value in ((arm, ARM_JOINTS, lambda t, i: float(t.q_rad[i])),
                               (grip, FINGER_JOINTS, lambda t, i: (1.0 - float(t.gripper)) * FINGER_MAX_M)):
        for i, name in enumerate(names):
            joint = tree.get_joint_by_name(name)
            if joint is None or not rows:
                continue
            cols = joint.compute_transform_columns([value(t, i) for t in rows], clamp=False)
            rec.send_columns(f"robot/joints/{name}", indexes=_index(rr, [t.slot for t in rows],
                                                                    [t.t_s for t in rows]), columns=cols)


def _log_frames(rr: Any, rec: Any, gif: Path, ts: list[TickRecord]) -> None:
    """Frame j of the episode's GIF was saved after tick 2j + 1 (see ``annotate_frames``)."""
    import imageio.v2 as imageio
    import numpy as np

    try:
        frames = imageio.mimread(gif, memtest=False)
    except (OSError, ValueError):
        return
    for j, frame in enumerate(frames):
        if 2 * j + 1 >= len(ts):
            break
        tick = ts[2 * j + 1]
        rec.set_time("slot", sequence=tick.slot)
        rec.set_time("t_s", duration=tick.t_s)
        rec.log("camera/front", rr.Image(np.asarray(frame)[..., :3]).compress(jpeg_quality=90))
