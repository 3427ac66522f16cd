"""edge report --rerun: a rerun recording of a run directory (optional rerun-sdk), and the one-line
error when the package is missing or too old."""

import sys
import types
from collections import Counter

import pytest

from edge.cli import main


def test_report_writes_a_rerun_recording(profiled, tmp_path, capsys):
    pytest.importorskip("rerun")
    from rerun.chunk import RrdReader

    from edge.telemetry import read_run

    out, _ = profiled
    run_dir = out / "runs" / "fixed_2x4__torch"
    rc = main(["report", str(run_dir), "--out", str(tmp_path), "--no-video", "--rerun", "--max-episodes", "1"])
    assert rc == 0, capsys.readouterr().err
    rrd = tmp_path / "run.rrd"
    assert rrd.is_file() and rrd.stat().st_size > 0 and str(rrd) in capsys.readouterr().out

    rows: Counter = Counter()  # temporal rows per entity
    paths = set()
    for chunk in RrdReader(rrd).stream().to_chunks():
        paths.add(chunk.entity_path)
        if not chunk.is_static:
            assert {"slot", "t_s"} <= set(chunk.timeline_names), chunk.entity_path
            rows[chunk.entity_path] += chunk.num_rows
    run = read_run(run_dir)
    ticks = [t for t in run.tick_records() if t.ep == 0]
    queries = [q for q in run.query_records() if q.ep == 0]
    for name in ("queue_depth", "gripper", "tcp_z_m"):
        assert rows[f"/plots/{name}/ep0"] == len(ticks), name
    assert rows["/plots/latency_ms/ep0"] == len(queries) > 0
    assert 0 < rows["/plots/K/ep0"] == rows["/plots/C/ep0"] <= len(ticks)
    assert rows["/robot/joints/panda_joint1"] == rows["/robot/joints/panda_finger_joint1"] == len(ticks)
    assert rows["/tcp/position"] == len(ticks) and rows["/tcp/path"] == 1 and rows["/episodes"] == 1
    assert rows["/camera/front"] == len(ticks) // 2  # episode0.gif: a frame every 2nd tick
    assert any(p.startswith("/robot/panda/visual_geometries/") for p in paths)  # the URDF's meshes
    assert not any("/ep1" in p for p in paths)  # --max-episodes 1


@pytest.mark.parametrize("fake, message", [
    (None, "error: --rerun needs the rerun-sdk package: pip install rerun-sdk"),
    (types.SimpleNamespace(__version__="0.20.1"), "error: --rerun needs rerun-sdk>=0.41 (installed: 0.20.1)"),
])
def test_rerun_without_the_package_is_a_one_line_error(fake, message, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "rerun", fake)  # None: `import rerun` raises ImportError
    (tmp_path / "ticks.jsonl").write_text("")  # a run directory (its records are not read before the check)
    assert main(["report", str(tmp_path), "--rerun"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "report").exists()  # checked before any work
