"""``edge report RUN_DIR``: one run directory -> report.html (self-contained), report.md, PNGs and,
if the run saved frames (``episode<i>.gif``), an annotated video.

Everything comes from the run's records (:func:`edge.telemetry.read_run`, typed through
:mod:`edge.records`), so a killed run is reported as far as it got:

* ``timeline_ep<N>.png`` per episode: K and C per query, inference latency, queue depth with
  starved ticks, safety interventions by kind, TCP height (``ee_pos_m`` z) and gripper;
* ``latency_hist.png``: latency charged per query and host compute time;
* the run summary (:func:`edge.telemetry.summarize`, recomputed from the lines) and a per-episode
  table;
* ``episode<i>_annotated.mp4`` (imageio-ffmpeg installed) or ``.gif``: the saved frames with the
  episode time and the K / C of the chunk being executed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from edge.errors import EdgeError
from edge.profiler.document import Document
from edge.records import QueryRecord, TickRecord
from edge.telemetry import RunData, read_run, summarize

SUMMARY_KEYS = ("episodes", "successes", "ticks", "executed_actions", "queries", "mean_K", "mean_C",
                "nfe_total", "nfe_per_action", "latency_p50_ms", "latency_p99_ms", "compute_p50_ms",
                "tick_overhead_p50_ms", "tick_overhead_p99_ms", "lateness_p99_ms", "overruns",
                "starved_ticks", "dropped_late", "expired_chunks", "interventions_total", "worker_start_s")
TIMING_KEYS = ("lateness_p99_ms", "overruns")  # not measured on a virtual clock
SESSION_KEYS = ("task", "sim", "scheduler", "adapter", "num_steps", "execute", "backend", "seam", "clock",
                "execution", "latency", "latency_ms", "noise_temperature", "seed", "checkpoint")
# a world-model planner's run (policy comet): its own settings instead of the VLA's
PLANNER_SESSION_KEYS = ("policy", "task", "sim", "world_model", "plan_simulations", "plan_deadline_ms", "plan_backend",
                        "plan_workspace_mask", "clock", "execution", "latency", "latency_ms", "seed")


def session_rows(session: dict[str, Any], policy: dict[str, Any] | None = None) -> list[list[Any]]:
    """The "What ran" rows of a run's ``meta.json`` session (the planner's keys for a comet run; an
    empty world_model is the shipped one, plan_simulations 0 the model's own, whose number the
    run's ``policy`` description gives)."""
    if session.get("policy") == "comet":
        shipped = "comet_reach3" if session.get("task") == "reach" else "comet_push3"
        own = (policy or {}).get("simulations")
        shown = {"world_model": session.get("world_model") or f"(the shipped {shipped})",
                 "plan_simulations": session.get("plan_simulations") or (
                     f"{own} (the model's own)" if own else "0 (the model's own)"),
                 "plan_backend": session.get("plan_backend") or "torch",
                 "plan_workspace_mask": "on" if session.get("plan_workspace_mask") else
                 ("off" if "plan_workspace_mask" in session else "off (recorded before the option)")}
        if session.get("execution") == "async":
            shown["execution"] = "async (lookahead: a decision every tick, searched from after the queued move)"
        return [[k, shown.get(k, session.get(k))] for k in PLANNER_SESSION_KEYS if k in session or k in shown]
    rows = [[k, session.get(k)] for k in SESSION_KEYS if k in session]
    kind = str(session.get("scheduler"))
    if kind == "eqrl":  # the adapter picks K and C per query: the fixed ones were not used
        rows = [[k, "per query (the adapter)" if k in ("num_steps", "execute") else v] for k, v in rows]
    elif ":" not in kind:  # only an eqrl scheduler (or a factory's) reads the adapter
        rows = [r for r in rows if r[0] != "adapter"]
    return rows


def episode_series(ticks: list[TickRecord], queries: list[QueryRecord], ep: int,
                   episode: dict[str, Any] | None = None) -> dict[str, Any]:
    """The timeline of one episode: lists over its ticks and queries, times from its first tick."""
    ts = [t for t in ticks if t.ep == ep]
    qs = [q for q in queries if q.ep == ep]
    t0 = ts[0].t_s if ts else (qs[0].t_obs_s if qs else 0.0)
    ivs: dict[str, list[float]] = defaultdict(list)
    for t in ts:
        for kind, _detail in t.interventions or ():
            ivs[kind].append(t.t_s - t0)
    return {
        "ep": ep, "seed": (episode or {}).get("seed"), "success": (episode or {}).get("success"),
        "t_s": [t.t_s - t0 for t in ts], "queue_depth": [t.queue_depth for t in ts],
        "starved": [t.starved for t in ts], "gripper": [t.gripper for t in ts],
        "tcp_z_m": [None if t.ee_pos_m is None else t.ee_pos_m[2] for t in ts],
        "query_t_s": [q.t_obs_s - t0 for q in qs], "K": [q.K for q in qs], "C": [q.C for q in qs],
        "latency_ms": [1e3 * q.latency_s for q in qs], "compute_ms": [1e3 * q.compute_s for q in qs],
        "interventions": dict(ivs), "intervention_kinds": sorted(ivs),
        "kind": [t.kind for t in ts], "query_id": [t.query_id for t in ts],
    }


def episode_rows(run: RunData) -> list[list[Any]]:
    rows = []
    for e in run.episode_records():
        rows.append([e.ep, e.seed, e.success, e.steps, e.queries, e.nfe, e.executed,
                     e.nfe / e.executed if e.executed else None, e.starved, e.overruns, e.stop_reason])
    return rows


def build_report(run_dir: str | Path, out_dir: str | Path | None = None, max_episodes: int = 10,
                 video: bool = True, video_max_bytes: int = 2_000_000) -> dict[str, Any]:
    """Write the report of ``run_dir`` into ``out_dir`` (default: ``run_dir/report``); returns the
    paths written and the summary it shows."""
    from edge.profiler import plots

    run_dir = Path(run_dir)
    try:
        run = read_run(run_dir)
    except FileNotFoundError as err:
        raise EdgeError(f"{err}; give a run directory written by edge run / edge profile") from None
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    for name in previous_report_files(out, run_dir):  # a report made before: none of its files stays stale
        (out / name).unlink(missing_ok=True)
    add_report_files(out, run_dir, [])  # first: an interrupted report is still this run's to redo
    ticks, queries = run.tick_records(), run.query_records()
    episodes = run.episodes
    summary = summarize(run)
    session = run.meta.get("session") or {}
    title = f"Run report: {run_dir.name}"
    doc = Document(title)
    arm = run.meta.get("arm") if isinstance(run.meta.get("arm"), dict) else None
    what = (f"a run on a real arm ({arm.get('kind')}, {arm.get('duration_s')} s)" if arm else
            f"{summary['episodes']} episodes")
    doc.p(f"Run directory `{run_dir}`; schema version {run.schema_version}; "
          f"{what}, {summary['ticks']} ticks, {summary['queries']} queries.")
    if session:
        doc.h("What ran")
        rows = session_rows(session, run.meta.get("policy"))
        if arm:  # the simulator's settings did not apply; where the arm and its cameras were instead
            rows = [r for r in rows if r[0] not in ("sim", "latency", "latency_ms")]
            rows += [["arm", f"{arm.get('kind')} on {arm.get('port')}"], ["instruction", arm.get("instruction")],
                     ["cameras", ", ".join(f"{k}={v}" for k, v in (arm.get("cameras") or {}).items())]]
        doc.table(["setting", "value"], rows)
    doc.h("Summary")
    virtual = session.get("clock") == "virtual"
    doc.table(["statistic", "value"],
              [[k, "n/a (virtual clock)" if virtual and summary.get(k) is None and k in TIMING_KEYS
                else summary.get(k)] for k in SUMMARY_KEYS])
    if summary.get("interventions"):
        doc.table(["safety intervention", "ticks"], sorted(summary["interventions"].items()))
    doc.h("Episodes")
    doc.table(["ep", "seed", "success", "steps", "queries", "NFE", "executed", "NFE/action", "starved",
               "overruns", "stop"], episode_rows(run))
    written: dict[str, Any] = {"out_dir": out, "pngs": [], "videos": []}

    lat = [1e3 * q.latency_s for q in queries]
    comp = [1e3 * q.compute_s for q in queries]
    if queries:
        p = plots.latency_histogram(lat, comp, out / "latency_hist.png")
        written["pngs"].append(p)
        doc.h("Inference latency")
        doc.img(p, "latency charged per query (virtual clock: from the latency model or the measured "
                   "compute) and the host's compute time; dashed p50, dotted p99")

    ep_ids = sorted({t.ep for t in ticks} | {e.get("ep", 0) for e in episodes})
    by_ep = {e.get("ep"): e for e in episodes}
    doc.h("Timelines")
    if len(ep_ids) > max_episodes:
        doc.p(f"First {max_episodes} of {len(ep_ids)} episodes (--max-episodes).")
    # episodes without a record (finished_only() is the run itself where runs have no episodes: an arm, HIL)
    cut = [] if run.finished_only() is run else [ep for ep in ep_ids if ep not in by_ep]
    if cut:
        doc.p(f"Episode{'s' if len(cut) > 1 else ''} {', '.join(map(str, cut))} did not end (no episode record: "
              "the run stopped there, was killed, or is still running); the summary and the episode table "
              "leave them out; the latency histogram and their timelines (within --max-episodes) show what "
              "was recorded.")
    for ep in ep_ids[:max_episodes]:
        series = episode_series(ticks, queries, ep, by_ep.get(ep))
        if not series["t_s"]:
            continue
        series["interrupted"] = ep in cut
        p = plots.episode_timeline(series, out / f"timeline_ep{ep}.png")
        written["pngs"].append(p)
        doc.img(p, f"episode {ep}{' (interrupted: no episode record)' if ep in cut else ''}: starved ticks in "
                   "red on the queue-depth axis; safety interventions per kind (wait_first_plan = holding "
                   "until the first chunk arrives)")
    written["interrupted_episodes"] = cut

    if video:
        gifs = sorted(run_dir.glob("episode*.gif"), key=lambda p: int(p.stem.removeprefix("episode") or 0))
        ep_order = [e.get("ep") for e in episodes]
        for gif in gifs:
            i = int(gif.stem.removeprefix("episode") or 0)
            if i >= len(ep_order) and i >= len(ep_ids):
                continue
            ep = ep_order[i] if i < len(ep_order) else ep_ids[i]
            series = episode_series(ticks, queries, ep, by_ep.get(ep))
            period = run.meta.get("period_s") or 0.05
            path = annotate_frames(gif, series, {q.query_id: q for q in queries}, out, period,
                                   max_bytes=video_max_bytes)
            if path is not None:
                written["videos"].append(path)
                doc.h(f"Video: episode {ep}", 3)
                doc.video(path, f"saved front-camera frames of episode {ep} with the episode time and the "
                                "K / C of the chunk being executed")
    md, html_path = doc.write(out)
    written.update(md=md, html=html_path, summary=summary)
    add_report_files(out, run_dir, [Path(p).name for p in (md, html_path, *written["pngs"], *written["videos"])])
    return written


#: written last into a run report's folder: which run it reports and the files it wrote
REPORT_MARKER = ".edge-report.json"


def add_report_files(out: Path, run_dir: Path, names: list[str]) -> None:
    """Record in ``out``'s marker that the report of ``run_dir`` wrote ``names`` there."""
    try:
        marker = json.loads((Path(out) / REPORT_MARKER).read_text())
    except (OSError, ValueError):
        marker = {}
    run = str(Path(run_dir).resolve())
    files = set(marker.get("files", [])) if isinstance(marker, dict) and marker.get("run_dir") == run else set()
    (Path(out) / REPORT_MARKER).write_text(json.dumps({"run_dir": run, "files": sorted(files | set(names))}) + "\n")


def previous_report_files(out: Path, run_dir: Path) -> list[str]:
    """The files a report of ``run_dir`` wrote into ``out`` before (from its marker); [] if none.
    EdgeError if ``out`` holds anything else: a report never mixes into another run's or report's files
    (a run's own ``report`` folder from before the marker is its own)."""
    out, run_dir = Path(out), Path(run_dir)
    if not out.is_dir() or not any(out.iterdir()):
        return []
    try:
        marker = json.loads((out / REPORT_MARKER).read_text())
    except (OSError, ValueError):
        marker = None
    if isinstance(marker, dict) and marker.get("run_dir") == str(run_dir.resolve()):
        return [str(f) for f in marker.get("files", []) if "/" not in str(f)]
    if out.resolve() == (run_dir / "report").resolve():
        return []
    legacy = out / "report.md"  # this run's report made before the marker existed
    if marker is None and legacy.is_file() and legacy.read_text().startswith(f"# Run report: {run_dir.name}\n"):
        return []
    shown = ", ".join(sorted(x.name for x in out.iterdir())[:4])
    whose = (f"a report of another run ({marker.get('run_dir')})" if isinstance(marker, dict)
             else f"other files ({shown})")
    raise EdgeError(f"--out {out}: holds {whose}; a report goes into a new or empty directory, or over "
                    "its own run's earlier report: choose another --out")


def annotate_frames(gif: Path, series: dict[str, Any], queries: dict[int, QueryRecord], out: Path,
                    period_s: float, max_bytes: int = 2_000_000, scale: int = 2) -> Path | None:
    """The run's saved frames (every 2nd tick, as :meth:`edge.runtime.session.Runtime.run_episode`
    saves them) with a band: episode time, K and C of the executing chunk, starved / hold marks.
    MP4 when imageio-ffmpeg is installed, else a GIF; frames are dropped (every 2nd, 4th ...) until
    the file is at most ``max_bytes``. None if the GIF cannot be read."""
    import imageio.v2 as imageio
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    try:
        frames = imageio.mimread(gif, memtest=False)
    except (OSError, ValueError):
        return None
    if not frames:
        return None
    try:
        font = ImageFont.load_default(size=12)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    n_ticks = len(series["t_s"])
    last_q: int | None = None
    qid_at: list[int | None] = []
    for qid in series["query_id"]:
        last_q = qid if qid is not None else last_q
        qid_at.append(last_q)
    annotated = []
    for j, frame in enumerate(frames):
        tick = min(2 * j + 1, n_ticks - 1) if n_ticks else 0  # saved after ticks 2, 4, ... (1-based)
        img = Image.fromarray(np.asarray(frame)[..., :3]).convert("RGB")
        img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
        band = 30
        canvas = Image.new("RGB", (img.width, img.height + band), (20, 20, 20))
        canvas.paste(img, (0, band))
        draw = ImageDraw.Draw(canvas)
        t = series["t_s"][tick] if n_ticks else (2 * j + 1) * period_s
        q = queries.get(qid_at[tick]) if n_ticks and qid_at[tick] is not None else None
        kc = f"K={q.K} C={q.C}" if q is not None else "no chunk yet"
        draw.text((4, 2), f"t={t:5.2f} s   {kc}", fill=(255, 255, 255), font=font)
        state = "starved" if n_ticks and series["starved"][tick] else (series["kind"][tick] if n_ticks else "")
        draw.text((4, 16), f"ep {series['ep']}  tick {tick}  {state}", fill=(200, 200, 200), font=font)
        annotated.append(np.asarray(canvas))
    stem = out / f"{gif.stem}_annotated"
    mp4 = _ffmpeg_available()
    stride = 1
    while True:
        sel = annotated[::stride]
        fps = max(1.0, 10.0 / stride)
        if mp4:
            path = stem.with_suffix(".mp4")
            imageio.mimsave(path, sel, fps=fps, macro_block_size=1)
        else:
            path = stem.with_suffix(".gif")
            imageio.mimsave(path, sel, duration=1.0 / fps, loop=0)
        if path.stat().st_size <= max_bytes or stride >= 8:
            break
        stride *= 2
    if path.stat().st_size > max_bytes:
        path.unlink()
        return None
    return path


def _ffmpeg_available() -> bool:
    """imageio writes MP4 through the imageio-ffmpeg plugin (an ffmpeg binary alone is not enough)."""
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return False
    return True
