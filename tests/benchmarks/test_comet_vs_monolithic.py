"""benchmarks/comet_vs_monolithic.py: run commands, resumption, and the report's arithmetic on known curves."""

import json
import time
import types
from pathlib import Path

import numpy as np

from tests.benchmarks._load import load_benchmark

cvm = load_benchmark("comet_vs_monolithic")


def _args(tmp_path, **kw):
    argv = ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--tasks", "reach3", "--seeds", "0", "1",
            "--env-steps", "300", "--eval-every", "100", "--report", "--no-diagnostics"]
    ap_args = cvm.argparse.Namespace(**{**vars(_parse(argv)), **kw})
    return ap_args


def _parse(argv):
    import argparse

    ap = argparse.ArgumentParser()
    for a, d in (("--runs", None), ("--out", None), ("--encoder", "enc"), ("--pixel-encoder", "penc"),
                 ("--monolithic", "pixels")):
        ap.add_argument(a, default=d)
    ap.add_argument("--tasks", nargs="+")
    ap.add_argument("--methods", nargs="+", default=["comet", "pixels"])
    ap.add_argument("--seeds", nargs="+", type=int)
    for a in ("--env-steps", "--eval-every"):
        ap.add_argument(a, type=int)
    ap.add_argument("--eval-episodes", type=int, default=4)
    ap.add_argument("--simulations", type=int, default=4)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--no-diagnostics", action="store_true")
    return ap.parse_args(argv)


def _write_run(d: Path, successes, final_steps=300):
    d.mkdir(parents=True)
    rows = [{"env_steps": 100 * i, "success": s, "root_value_abs_err": 0.1, "wall_s": 1.0} for i, s in enumerate(successes)]
    (d / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "metrics.json").write_text(json.dumps({"env_steps": final_steps}))


def test_run_commands_pick_obs_and_resume(tmp_path):
    args = _args(tmp_path)
    out = tmp_path / "r"
    out.mkdir()
    cmd = cvm.run_args("comet", "reach3", 1, args, out)
    assert cmd[1:3] == ["train", "world-model"] and "--encoder" in cmd and "--resume" not in cmd
    assert cvm.run_args("pixels", "reach3", 1, args, out)[-4:] == ["--kind", "pixels", "--obs", "pixels"]
    assert cvm.run_args("pixels_ae", "reach3", 1, args, out)[-6:] == ["--kind", "pixels", "--obs", "pixels",
                                                                      "--encoder", "penc"]
    tracked = cvm.argparse.Namespace(**{**vars(args), "encoder_carry_iters": 1})
    assert "encoder_carry_iters=1" in cvm.run_args("comet", "reach3", 1, tracked, out)
    own = cvm.argparse.Namespace(**{**vars(args), "encoder_carry_iters": 0})  # named too: the preset says 1
    assert "encoder_carry_iters=0" in cvm.run_args("comet", "reach3", 1, own, out)
    assert "encoder_carry_iters=1" not in cvm.run_args("pixels", "reach3", 1, tracked, out)  # slot methods only
    orc = cvm.run_args("flat_slots@oracle", "reach3", 1, args, out)
    assert "flat_slots" in orc and "oracle" in orc and "model.num_slots=5" in orc and "--encoder" not in orc
    (out / "train_state.pt").write_bytes(b"")
    assert cvm.run_args("comet", "reach3", 1, args, out)[-1] == "--resume"
    assert cvm.run_dir(args, "reach3", "flat_slots@oracle", 2).name == "reach3_flat_slots_at_oracle_s2"


def test_report_known_curves(tmp_path, monkeypatch):
    args = _args(tmp_path)
    monkeypatch.setattr(cvm, "random_policy_score", lambda task, n: 0.0)
    runs = Path(args.runs)
    _write_run(runs / "reach3_pixels_s0", [0.0, 0.1, 0.3, 0.5])
    _write_run(runs / "reach3_pixels_s1", [0.0, 0.1, 0.3, 0.5])
    _write_run(runs / "reach3_comet_s0", [0.0, 0.4, 0.5, 0.6])
    _write_run(runs / "reach3_comet_s1", [0.0, 0.4, 0.5, 0.6], final_steps=200)  # unfinished
    res = cvm.report(args)["tasks"]["reach3"]
    px, co = res["methods"]["pixels"], res["methods"]["comet"]
    assert res["level_80pct_of_monolithic_final"] == 0.4
    assert px["steps_to_level"] == 300 and co["steps_to_level"] == 100
    assert res["comet_over_monolithic_steps"] == 100 / 300
    assert px["complete"] and not co["complete"]
    # AUC over the first half of the budget (steps 0..100 of 300 -> the first two points)
    assert np.isclose(co["auc_first_half"], (0.0 + 0.4) / 2)
    assert (Path(args.out) / "comet_vs_monolithic.json").is_file()
    table = (Path(args.out) / "table.md").read_text().splitlines()
    assert "level = 0.8 × monolithic (pixels) final = 0.40; comet/monolithic steps = 0.33" in table[0]
    row = {ln.split(" | ")[0].strip("| "): ln for ln in table[3:]}
    assert row["comet"].startswith("| comet | 2 | 0.60 [0.60, 0.60] | 0.200 | 100 | 0.33 / 0.33 / 0.33 (1.00, 0.00) |")
    assert "| pixels | 2 | 0.50 [0.50, 0.50] | 0.050 | 300 | – |" in row["pixels"]


def test_another_monolithic_reference_sets_the_level(tmp_path, monkeypatch):
    args = _args(tmp_path, methods=["comet", "pixels", "pixels_ae"], monolithic="pixels_ae")
    monkeypatch.setattr(cvm, "random_policy_score", lambda task, n: 0.0)
    runs = Path(args.runs)
    for s in (0, 1):
        _write_run(runs / f"reach3_pixels_s{s}", [0.0, 0.1, 0.1, 0.1])
        _write_run(runs / f"reach3_pixels_ae_s{s}", [0.0, 0.1, 0.3, 0.5])
        _write_run(runs / f"reach3_comet_s{s}", [0.0, 0.4, 0.5, 0.6])
    res = cvm.report(args)["tasks"]["reach3"]
    assert res["monolithic"] == "pixels_ae" and res["level_80pct_of_monolithic_final"] == 0.4
    assert res["methods"]["pixels"]["steps_to_level"] is None and res["comet_over_monolithic_steps"] == 100 / 300
    assert "steps_ratio_bootstrap" in res["methods"]["pixels"] and "steps_ratio_bootstrap" not in res["methods"]["pixels_ae"]


def test_an_unfinished_seed_is_listed_not_averaged(tmp_path, monkeypatch):
    args = _args(tmp_path, methods=["pixels"])
    monkeypatch.setattr(cvm, "random_policy_score", lambda task, n: 0.0)
    runs = Path(args.runs)
    _write_run(runs / "reach3_pixels_s0", [0.0, 0.1, 0.3, 0.5])
    _write_run(runs / "reach3_pixels_s1", [0.0, 0.3], final_steps=100)
    px = cvm.report(args)["tasks"]["reach3"]["methods"]["pixels"]
    assert px["seeds"] == [0] and px["env_steps"] == [0, 100, 200, 300] and px["final_mean"] == 0.5
    assert px["unfinished_seeds"] == {"1": {"env_steps": 100, "success": 0.3}}


def test_a_stopped_benchmark_stops_its_training_runs(tmp_path, monkeypatch):
    import signal
    import sys

    import pytest

    started = []

    def fake_args(m, t, s, args, out):
        started.append(out)
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    real_sleep = cvm.time.sleep

    def interrupt(dt):  # the launcher's first wait is interrupted (Ctrl-C); later sleeps are real
        if not getattr(interrupt, "done", False):
            interrupt.done = True
            raise KeyboardInterrupt
        real_sleep(dt)

    old = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cvm, "run_args", fake_args)
    # only the launcher's clock: patching time.sleep itself would reach every thread in pytest
    monkeypatch.setattr(cvm, "time", types.SimpleNamespace(sleep=interrupt, time=time.time))
    procs = []
    real_popen = cvm.subprocess.Popen
    monkeypatch.setattr(cvm.subprocess, "Popen", lambda *a, **k: procs.append(real_popen(*a, **k)) or procs[-1])
    args = _args(tmp_path, jobs=2, methods=["comet"])
    stopped, saved = cvm.run_dir(args, "reach3", "comet", 0), cvm.run_dir(args, "reach3", "comet", 1)
    for d in (stopped, saved):  # seed 0 was killed before its first checkpoint, seed 1 after it
        d.mkdir(parents=True)
        (d / "curve.jsonl").write_text('{"env_steps": 0}\n')
    (saved / "train_state.pt").write_bytes(b"")
    try:
        with pytest.raises(KeyboardInterrupt):
            cvm.launch(args)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert len(started) == 2 and len(procs) == 2
    # no state to resume: its curve is dropped, the run starts over; a checkpointed run keeps it (its resume rewrites it)
    assert not (stopped / "curve.jsonl").exists() and (saved / "curve.jsonl").is_file()
    assert all(p.poll() is not None for p in procs)  # terminated, not orphaned


def test_ratio_bootstrap_known_answers():
    rng = np.random.default_rng(0)
    x = np.array([0, 100, 200, 300])
    mono = (x, np.array([[0.0, 0.1, 0.3, 0.5], [0.0, 0.1, 0.3, 0.5]]))
    fast = cvm.ratio_bootstrap((x, np.array([[0.0, 0.4, 0.5, 0.6]] * 2)), mono, rng, n=50)
    assert fast["p2.5_50_97.5"] == [100 / 300] * 3 and fast["share_le_1_3"] == 1.0 and fast["share_le_1_4"] == 0.0
    never = cvm.ratio_bootstrap((x, np.zeros((2, 4))), mono, rng, n=50)
    assert never["p2.5_50_97.5"] == [None] * 3 and never["share_le_1_3"] == 0.0
    # one seed fast, one never: the resamples split
    mixed = cvm.ratio_bootstrap((x, np.array([[0.0, 0.9, 0.9, 0.9], [0.0] * 4])), mono, rng, n=400)
    assert 0.5 < mixed["share_le_1_3"] < 1.0  # both-fast and one-each resamples reach 0.45 by step 100
    # a monolithic model at its level from step 0 leaves no ratio
    flat = cvm.ratio_bootstrap((x, np.ones((2, 4))), (x, np.full((2, 4), 0.5)), rng, n=10)
    assert flat == {"resamples": 10, "undefined": 10}


def test_runs_of_another_encoder_setting_are_refused_not_mixed(tmp_path, monkeypatch):
    import pytest

    args = cvm.argparse.Namespace(**{**vars(_args(tmp_path)), "encoder_carry_iters": 1})
    monkeypatch.setattr(cvm, "random_policy_score", lambda task, n: 0.0)
    runs = Path(args.runs)
    _write_run(runs / "reach3_pixels_s0", [0.0, 0.1, 0.3, 0.5])
    _write_run(runs / "reach3_comet_s0", [0.0, 0.4, 0.5, 0.6])
    (runs / "reach3_comet_s0" / "manifest.json").write_text(json.dumps(
        {"config": {"encoder": args.encoder, "encoder_carry_iters": 0}}))
    with pytest.raises(cvm.RunMismatch, match="reach3_comet_s0 was trained with .*--encoder-carry-iters 0"):
        cvm.report(args)
    args.encoder_carry_iters = 0  # the same setting: reported
    assert "comet" in cvm.report(args)["tasks"]["reach3"]["methods"]


def test_a_run_with_another_setting_is_refused_unless_asked_for(tmp_path):
    import pytest

    import yaml

    cfg = yaml.safe_load((cvm.ROOT / "configs" / "train" / "wm_default.yaml").read_text())  # what a run records
    cfg["eval_every"], cfg["planner"]["num_simulations"] = 500, 64  # set by this script's command line
    cvm.check_set_overrides(tmp_path, cfg, [])
    cfg["env"]["approach"] = "behind"
    with pytest.raises(cvm.RunMismatch, match=r"env.approach='behind', not 'cube' \(the preset's; pass --set env.approach"):
        cvm.check_set_overrides(tmp_path, cfg, [])
    cvm.check_set_overrides(tmp_path, cfg, ["env.approach=behind"])
    with pytest.raises(cvm.RunMismatch, match="replay_ratio=0.25, not 1.0"):
        cvm.check_set_overrides(tmp_path, cfg, ["env.approach=behind", "replay_ratio=1.0"])
    del cfg["env"]["approach"]  # a run saved before the key existed counts at its default
    cvm.check_set_overrides(tmp_path, cfg, [])


def test_a_bad_set_is_refused_before_any_run_starts(tmp_path, capsys):
    import pytest

    for bad, said in (("model.widht=64", "widht"), ("planner.num_simulations=zero", "num_simulations"),
                      ("model.num_slots=7", "push3 / oracle: --set model.num_slots=7: --obs oracle gives one slot"),
                      ("seed.x=1", "seed is a setting, not a section")):
        with pytest.raises(SystemExit) as e:
            cvm.main(["--tasks", "push3", "--methods", "oracle", "--seeds", "0", "--set", bad,
                      "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
        assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_failed_runs_end_the_benchmark_without_a_report(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setattr(cvm, "check_run_settings", lambda args, ap: None)  # runs that fail while training
    monkeypatch.setattr(cvm, "run_args", lambda m, t, s, args, out: [sys.executable, "-c", "import sys; sys.exit(3)"])
    real_sleep = cvm.time.sleep
    monkeypatch.setattr(cvm, "time", types.SimpleNamespace(sleep=lambda dt: real_sleep(min(dt, 0.2)), time=time.time))
    out = tmp_path / "out"
    assert cvm.main(["--tasks", "push3", "--methods", "oracle", "--seeds", "0", "1", "--env-steps", "12",
                     "--eval-every", "6", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "2 run(s) failed: push3_oracle_s0, push3_oracle_s1" in err and "No report written" in err
    assert not out.exists()  # an earlier report there would stay as it was


def test_a_curve_read_while_its_run_appends_skips_the_half_written_point(tmp_path):
    cvm = load_benchmark("comet_vs_monolithic")
    (tmp_path / "curve.jsonl").write_text('{"env_steps": 0, "success": 0.0}\n{"env_steps": 6000, "succ')
    assert cvm.read_curve(tmp_path) == [{"env_steps": 0, "success": 0.0}]
    assert cvm.read_curve(tmp_path / "none") == []


def test_a_report_names_the_runs_it_lacks_and_refuses_a_runs_folder_without_any(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setattr(cvm, "random_policy_score", lambda task, n: 0.0)
    runs = tmp_path / "runs"
    runs.mkdir()
    argv = ["--tasks", "reach3", "--methods", "comet", "pixels", "--seeds", "0", "1", "--env-steps", "300",
            "--report", "--no-diagnostics", "--runs", str(runs), "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as e:  # a --runs folder with none of the runs: a typo, not an empty report
        cvm.main(argv)
    assert e.value.code == 2 and f"--runs {runs}: no run of reach3" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    (tmp_path / "a_file").write_text("{}")
    with pytest.raises(SystemExit) as e:
        cvm.main([*argv[:-4], "--runs", str(tmp_path / "a_file"), "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "exists and is not a directory" in capsys.readouterr().err
    _write_run(runs / "reach3_pixels_s0", [0.0, 0.1, 0.3, 0.5])
    _write_run(runs / "reach3_pixels_s1", [0.0, 0.2, 0.3, 0.4])
    _write_run(runs / "reach3_comet_s0", [0.0, 0.4, 0.5, 0.6])
    res = cvm.report(cvm.argparse.Namespace(**{**vars(_args(tmp_path)), "encoder_carry_iters": 0}))
    assert res["tasks"]["reach3"]["missing_runs"] == ["reach3_comet_s1"]
    assert res["tasks"]["reach3"]["methods"]["comet"]["seeds"] == [0]
    assert "no curve yet for reach3_comet_s1; reach3 / comet is reported over the other seeds" in capsys.readouterr().err
