"""edge report on a tiny run: figures, self-contained HTML, markdown, the annotated video."""

import json
import shutil

from edge.cli import main
from edge.profiler.report import build_report, episode_series


def test_report_of_a_run_directory(profiled, tmp_path, capsys):
    out, _ = profiled
    run_dir = out / "runs" / "fixed_2x4__torch"
    assert (run_dir / "episode0.gif").is_file()
    assert main(["report", str(run_dir), "--out", str(tmp_path / "rep")]) == 0, capsys.readouterr().err
    rep = tmp_path / "rep"
    names = {p.name for p in rep.iterdir()}
    assert {"report.html", "report.md", "latency_hist.png", "timeline_ep0.png", "timeline_ep1.png"} <= names
    video = [p for p in rep.iterdir() if p.stem == "episode0_annotated"]
    assert video and video[0].stat().st_size <= 2_000_000
    html = (rep / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "<img alt='' src='timeline" not in html
    md = (rep / "report.md").read_text()
    assert "![" in md and "timeline_ep0.png" in md and "| scheduler | fixed |" in md
    start = [line for line in md.splitlines() if line.startswith("| worker_start_s |")]
    assert len(start) == 1 and "[" in start[0]  # the one start's seconds, from the run's event


def test_episode_series_reads_the_typed_records(profiled):
    out, _ = profiled
    from edge.telemetry import read_run

    run = read_run(out / "runs" / "fixed_1x8__torch")
    s = episode_series(run.tick_records(), run.query_records(), 0, run.episodes[0])
    assert len(s["t_s"]) == run.episodes[0]["ticks"] and s["t_s"][0] == 0.0
    assert set(s["K"]) == {1} and set(s["C"]) == {8} and len(s["tcp_z_m"]) == len(s["t_s"])
    assert all(z is not None for z in s["tcp_z_m"])


def test_a_legacy_run_directory_is_reported(profiled, tmp_path):
    """Rewrite a run in the version-1 keys (no schema_version): the report still reads it."""
    from edge.records import LEGACY_KEYS

    out, _ = profiled
    src, old = out / "runs" / "fixed_1x8__torch", tmp_path / "old"
    shutil.copytree(src, old)
    meta = json.loads((old / "meta.json").read_text())
    del meta["schema_version"]
    (old / "meta.json").write_text(json.dumps(meta))
    for stream in ("ticks", "queries"):
        back = {v: k for k, v in LEGACY_KEYS[stream].items()}
        lines = [json.loads(x) for x in (old / f"{stream}.jsonl").read_text().splitlines()]
        (old / f"{stream}.jsonl").write_text("".join(json.dumps({back.get(k, k): v for k, v in r.items()}) + "\n"
                                                     for r in lines))
    assert '"ovh"' in (old / "ticks.jsonl").read_text()
    new = build_report(src, tmp_path / "a", video=False, max_episodes=1)
    legacy = build_report(old, tmp_path / "b", video=False, max_episodes=1)
    assert new["summary"] == legacy["summary"] and len(legacy["pngs"]) == len(new["pngs"])


def test_phases_come_from_the_measured_gripper():
    from edge.profiler.plots import gripper_phases

    t = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35]
    g = [0.0, 0.0, 0.3, 0.35, 0.05, 0.0, 0.3, 0.3]  # grasp, release, re-grasp
    assert gripper_phases(t, g) == [(0.0, 0.1, "approach"), (0.1, 0.2, "holding"), (0.2, 0.3, "released"),
                                    (0.3, 0.35, "holding")]
    assert gripper_phases(t, [None] * len(t)) == [(0.0, 0.35, "approach")]
    assert gripper_phases([], []) == []


def test_what_ran_shows_the_planners_settings_for_a_comet_run():
    from edge.profiler.report import session_rows

    vla = {"policy": "vla", "task": "stack", "scheduler": "fixed", "num_steps": 10, "checkpoint": "ck",
           "plan_backend": "onnxruntime"}
    assert dict(session_rows(vla))["checkpoint"] == "ck" and "plan_backend" not in dict(session_rows(vla))
    comet = {"policy": "comet", "task": "push", "world_model": "", "plan_simulations": 0, "plan_backend": "onnxruntime",
             "checkpoint": "ck", "num_steps": 1}
    rows = dict(session_rows(comet))
    assert rows["plan_backend"] == "onnxruntime" and "shipped" in rows["world_model"]
    assert "model's own" in str(rows["plan_simulations"]) and "checkpoint" not in rows and "num_steps" not in rows
    assert dict(session_rows(comet, {"kind": "world_model", "simulations": 16}))["plan_simulations"] == \
        "16 (the model's own)"  # the number, from the run's policy description
    old = {k: v for k, v in comet.items() if k != "plan_backend"}  # recorded before the key: torch ran
    assert dict(session_rows({**old, "world_model": "runs/wm", "plan_simulations": 8}))["plan_backend"] == "torch"
    assert dict(session_rows({**old, "world_model": "runs/wm", "plan_simulations": 8}))["world_model"] == "runs/wm"
    assert "lookahead" in dict(session_rows({**comet, "execution": "async"}))["execution"]
    assert dict(session_rows({**comet, "execution": "sync"}))["execution"] == "sync"
    assert rows["plan_workspace_mask"] == "off (recorded before the option)"
    assert dict(session_rows({**comet, "plan_workspace_mask": True}))["plan_workspace_mask"] == "on"
    assert dict(session_rows({**comet, "plan_workspace_mask": False}))["plan_workspace_mask"] == "off"


def test_what_ran_names_the_adapter_only_where_it_ran_and_its_k_and_c_per_query():
    from edge.profiler.report import session_rows

    base = {"policy": "vla", "task": "stack", "num_steps": 10, "execute": 8, "adapter": "stack"}
    eqrl = dict(session_rows({**base, "scheduler": "eqrl"}))
    assert eqrl["adapter"] == "stack" and eqrl["num_steps"] == eqrl["execute"] == "per query (the adapter)"
    fixed = dict(session_rows({**base, "scheduler": "fixed"}))
    assert "adapter" not in fixed and (fixed["num_steps"], fixed["execute"]) == (10, 8)


def test_a_report_replaces_its_own_run_earlier_report_and_refuses_other_files(profiled, tmp_path, capsys):
    out, _ = profiled
    run_dir = next(p for p in (out / "runs").iterdir() if p.is_dir())
    rep = tmp_path / "rep"
    assert main(["report", str(run_dir), "--out", str(rep), "--no-video"]) == 0
    assert (rep / "timeline_ep1.png").is_file()
    assert main(["report", str(run_dir), "--out", str(rep), "--no-video", "--max-episodes", "1"]) == 0
    assert not (rep / "timeline_ep1.png").exists()  # the earlier report's files do not stay behind
    marker = json.loads((rep / ".edge-report.json").read_text())
    assert marker["run_dir"] == str(run_dir.resolve()) and "timeline_ep0.png" in marker["files"]
    capsys.readouterr()
    other = next(p for p in (out / "runs").iterdir() if p.is_dir() and p != run_dir)
    assert main(["report", str(other), "--out", str(rep), "--no-video"]) == 2  # another run's report
    assert f"a report of another run ({run_dir.resolve()})" in capsys.readouterr().err
    assert main(["report", str(run_dir), "--out", str(out), "--no-video"]) == 2  # a profile's folder
    assert "holds other files" in capsys.readouterr().err and not (out / ".edge-report.json").exists()
    (rep / ".edge-report.json").unlink()  # this run's report made before the marker existed: redone in place
    assert main(["report", str(run_dir), "--out", str(rep), "--no-video"]) == 0
    assert (rep / ".edge-report.json").is_file()


def test_an_episode_a_kill_cut_short_is_marked_interrupted(profiled, tmp_path):
    out, _ = profiled
    run = tmp_path / "killed"
    shutil.copytree(out / "runs" / "fixed_1x8__torch", run)
    lines = (run / "episodes.jsonl").read_text().splitlines()
    (run / "episodes.jsonl").write_text(lines[0] + "\n")  # the run was killed inside its second episode
    res = build_report(run, tmp_path / "rep", video=False)
    assert res["interrupted_episodes"] == [1] and res["summary"]["episodes"] == 1
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Episode 1 did not end" in md and "episode 1 (interrupted: no episode record)" in md
    assert (tmp_path / "rep" / "timeline_ep1.png").is_file()
    from edge.profiler.plots import timeline_title
    from edge.profiler.report import episode_series
    from edge.telemetry import read_run

    data = read_run(run)
    ticks, queries, first = data.tick_records(), data.query_records(), json.loads(lines[0])
    titles = [timeline_title({**episode_series(ticks, queries, ep, rec), "interrupted": rec is None})
              for ep, rec in ((0, first), (1, None))]
    assert titles[0].startswith("episode 0 (seed ") and titles[0].endswith(("— success", "— failure"))
    assert titles[1].startswith("episode 1") and titles[1].endswith("— interrupted (no episode record)")
    whole = build_report(out / "runs" / "fixed_1x8__torch", tmp_path / "rep2", video=False)
    assert whole["interrupted_episodes"] == [] and "did not end" not in (tmp_path / "rep2" / "report.md").read_text()
