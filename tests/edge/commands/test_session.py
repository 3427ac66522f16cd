"""The composed runtime session (what `edge run`, the VLA grid and the latency benchmark use),
with a tiny barely-trained checkpoint: plumbing, records and errors — not policy quality."""

import json

import pytest

from edge.cli import main
from edge.commands._session import SessionConfig, run_session
from edge.config import ConfigError


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    from edge.vla.synthetic import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("session"), steps=10)


def test_session_writes_complete_run_records(tiny_ckpt, tmp_path):
    cfg = SessionConfig(checkpoint=str(tiny_ckpt), backend="torch", episodes=2, max_steps=12, num_steps=2,
                        execute=4, latency="constant", latency_ms=60.0)
    res = run_session(cfg, tmp_path / "run", progress=False)
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"ticks.jsonl", "queries.jsonl", "episodes.jsonl", "summary.json", "episode0.gif"} <= files
    assert len(res.episodes) == 2 and all(0 <= e["max_stage"] <= 4 for e in res.episodes)
    s = res.summary
    assert s["ticks"] == 24 and s["mean_K"] == 2.0
    assert s["dropped_late"] > 0  # 60 ms latency at 20 Hz: the first action of each chunk is stale
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["session"]["latency_ms"] == 60.0


def test_session_config_is_validated():
    with pytest.raises(ConfigError, match="num_steps"):
        SessionConfig(num_steps=0)
    with pytest.raises(ConfigError, match="seam"):
        SessionConfig(seam="blend")


def test_edge_run_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    code = main(["run", "--policy", "vla", "--checkpoint", str(tmp_path / "nope"), "--out", str(tmp_path / "r")])
    assert code == 2
    assert "not found" in capsys.readouterr().err


def test_edge_run_expert(tmp_path, capsys):
    assert main(["run", "--policy", "expert", "--episodes", "1", "--image-size", "32", "--seed", "0",
                 "--out", str(tmp_path / "r")]) == 0
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["policy"] == "expert" and len(rep["episodes"]) == 1
