"""`edge data record` into an existing dataset: the physics step is compared resolved, so a recording
made when MuJoCo's step was stored as 0.002 resumes, and a different step is refused by name."""

import contextlib
import io
import json

from edge.cli import main


def _record(out, episodes):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(["data", "record", "--task", "stack", "--episodes", str(episodes), "--image-size", "16",
                     "--out", str(out)])


def test_the_stored_physics_step_is_resolved_and_compared(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["data", "record", "--task", "stack", "--episodes", "1", "--image-size", "16", "--out", str(out),
                 "--no-progress"]) == 0
    assert "record stack" not in capsys.readouterr().err  # --no-progress: no bar
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["env_config"]["physics_dt_s"] == 0.002  # MuJoCo's default, not 0 ("the engine's")
    meta["env_config"]["physics_dt_s"] = 0.0025
    meta_path.write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["data", "record", "--task", "stack", "--episodes", "2", "--image-size", "16", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "env_config.physics_dt_s=0.0025" in err and "physics step" in err
    meta["env_config"]["physics_dt_s"] = 0.002
    meta_path.write_text(json.dumps(meta))
    assert _record(out, 2) == 0
    assert len(list((out / "episodes").glob("*.npz"))) == 2


def test_a_recording_made_before_a_setting_existed_resumes_at_its_default(tmp_path, capsys):
    out = tmp_path / "ds"
    assert _record(out, 1) == 0
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text())
    for key in ("depth", "lazy_images"):  # recorded before these settings were added
        del meta["env_config"][key]
    meta_path.write_text(json.dumps(meta))
    assert _record(out, 2) == 0
    assert len(list((out / "episodes").glob("*.npz"))) == 2
    meta["env_config"]["render_images"] = False  # a recorded setting that differs is still refused
    meta_path.write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["data", "record", "--task", "stack", "--episodes", "3", "--image-size", "16", "--out", str(out)]) == 2
    assert "env_config.render_images=False" in capsys.readouterr().err
