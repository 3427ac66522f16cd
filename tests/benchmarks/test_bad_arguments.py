"""Every benchmark script ends a bad argument with one line naming the flag and the value, exit status 2,
before it measures anything (no traceback, no hang, nothing clipped)."""

import json
from pathlib import Path

import pytest

from tests.benchmarks._load import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "/nonexistent/edge-bench"

CASES = [
    ("comet_vs_monolithic", ["--jobs", "0"], "argument --jobs: 0: must be a whole number >= 1"),
    ("comet_vs_monolithic", ["--eval-episodes", "0"], "argument --eval-episodes: 0: must be"),
    ("comet_vs_monolithic", ["--tasks", "push9"], "argument --tasks: invalid choice: 'push9'"),
    ("comet_vs_monolithic", ["--set", "width"], "--set 'width': give KEY=VALUE"),
    ("comet_vs_monolithic", ["--report", "--runs", NOWHERE], f"--runs {NOWHERE}: no such directory"),
    ("latency_robustness", ["--latencies-ms", "12.5"], "argument --latencies-ms: 12.5: not a whole number"),
    ("latency_robustness", ["--workers", "0"], "argument --workers: 0: must be"),
    ("latency_robustness", ["--seams", "rtc:x"], "--seams rtc:x"),
    ("latency_robustness", ["--noise-temperature", "5"], "--noise-temperature 5.0"),
    ("latency_robustness", ["--checkpoint", NOWHERE], f"--checkpoint {NOWHERE}: no VLA checkpoint there"),
    ("latency_robustness", ["--latencies-ms", "0,20000"], "--latencies-ms 20000: clock.latency_ms=20000.0 is out of range"),
    ("latency_robustness", ["--execute", "40"], "--execute 40: at most the checkpoint's chunk"),
    ("loop_timing", ["--slack-margin-ms", "2", "5000"], "--slack-margin-ms 5000.0: slack_margin_s=5.0 is out of range"),
    ("loop_timing", ["--timer-slack-ns", "20000000"], "--timer-slack-ns 20000000: timer_slack_ns=20000000 is out"),
    ("loop_timing", ["--slack-receive-margin-ms", "2000"], "--slack-receive-margin-ms 2000.0"),
    ("expert_runtime_agreement", ["--cells", "stak2"], "--cells stak2: unknown cell 'stak2'"),
    ("expert_runtime_agreement", ["--episodes", "0"], "argument --episodes: 0: must be"),
    ("campaign_speed", ["--k", "0"], "--k 0 / --c 8"),
    ("campaign_speed", ["--query-env-render-mesh-cell-m", "0.01"], "measured only with --query-env-queries"),
    ("vla_grasp_diagnosis", ["--execute", "0"], "argument --execute: 0: must be a whole number >= 1"),
    ("vla_grasp_diagnosis", ["--aux-data", NOWHERE], f"--aux-data {NOWHERE}: no such directory"),
    ("device_calibration", ["--reps", "1"], "argument --reps: 1: must be a whole number >= 2"),
    ("link_throughput", ["--rate-hz", "0"], "argument --rate-hz: 0: must be a number > 0"),
    ("link_throughput", ["--joints", "0"], "argument --joints: 0: must be"),
    ("loop_timing", ["--rates", "0"], "argument --rates: 0: must be a number > 0"),
    ("loop_timing", ["--priority", "0"], "argument --priority: 0: must be a whole number in [1, 99]"),
    ("timer_floor", ["--rate", "0"], "argument --rate: 0: must be a number > 0"),
    ("timer_floor", ["--seconds", "0.001"], "under 10 ticks per case"),
    ("vla_latency", ["--k-max", "1"], "argument --k-max: 1: must be a whole number in [2, 100]"),
    ("vla_latency", ["--ratio-threads", "1,x"], "argument --ratio-threads: x: not a whole number"),
    ("vla_vision_probe", ["--data", NOWHERE], f"argument --data: {NOWHERE}: no such directory"),
    ("wm_lookahead", ["--world-model", "configs"], "--world-model configs:"),
    ("wm_workspace_mask", ["--world-model", "configs"], "--world-model configs:"),
    ("vla_grasp_diagnosis", ["--checkpoint", "configs"], "--checkpoint configs:"),
    ("vla_vision_probe", ["--holdout", "0"], "argument --holdout: 0: must be a number in (0, 1]"),
    ("eqrl_eval", ["--arms", "fixed:2y8"], "--arms: 'fixed:2y8': write fixed:KxC"),
    ("eqrl_eval", ["--noise-temperature", "5"], "--noise-temperature 5.0"),
    ("eqrl_eval", ["--shard", "0"], "argument --shard: 0: must be"),
    ("vla_grid", ["--sim", "bullet"], "argument --sim: invalid choice: 'bullet'"),
    ("vla_grid", ["--backend", "tensorrtx"], "--backend tensorrtx"),
    ("codec_fuzz", ["--frames", "0"], "argument --frames: 0: must be"),
    ("render_meshes", ["--cell", "0.1"], "--cell 0.1"),
    ("render_meshes", ["--cell", "0"], "argument --cell: 0: must be a number > 0"),
    ("bridge_deploy", ["--work", NOWHERE, "--policy", "comet", "--plan-simulations", "20000"], "--plan-simulations 20000"),
    ("sim_speed", ["--sims", "bullet"], "--sims 'bullet'"),
    ("wm_motion_gap", ["--simulations", "-1"], "--simulations -1: must be >= 0"),
    ("wm_motion_gap", ["--world-model", NOWHERE], f"--world-model {NOWHERE}"),
    ("wm_contact_ceiling", ["--near-cm", "0"], "--near-cm 0.0: need a finite distance > 0"),
    ("wm_feature_probe", ["--play-segment", "0.5"], "--play-segment 0.5: need a finite number of steps >= 1"),
    ("edge_run_revisions", ["--before", "HEAD", "--", "--policy", "comet", "--episodes=5"], "--episodes after `--`"),
    ("edge_run_revisions", ["--before", "HEAD", "--", "--policy", "comet", "--task", "rech"],
     "the `edge run` arguments after `--`: edge run says: argument --task: invalid choice: 'rech'"),
    ("bridge_deploy", ["--work", NOWHERE, "--driver", "gripper_speed_m_s=abc"],
     "--driver 'gripper_speed_m_s=abc': 'abc' is not a number"),
    ("bridge_deploy", ["--work", NOWHERE, "--driver", "gripper_sped_m_s=1"], "--driver gripper_sped_m_s=1:"),
    ("bridge_deploy", ["--work", NOWHERE, "--num-steps", "0"], "--num-steps 0 / --execute 8"),
    ("bridge_deploy", ["--work", NOWHERE, "--execute", "40"], "--execute 40: at most the checkpoint's chunk"),
    ("bridge_deploy", ["--work", NOWHERE, "--policy", "comet", "--num-steps", "4"], "--num-steps: for --policy vla only"),
    ("bridge_deploy", ["--work", NOWHERE, "--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    # negative episode seeds are refused when parsed (they were tracebacks from the envs, some after a run)
    ("object_task_scripted", ["--seed0", "-1"], "argument --seed0: -1: must be a whole number >= 0"),
    ("object_task_scripted", ["--select-seed0", "-1"], "argument --select-seed0: -1: must be a whole number >= 0"),
    ("wm_plan_latency", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("planner_device_cost", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("slot_carry_iters", ["--encoders", NOWHERE, "--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("slot_pool_judgements", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("wm_lookahead", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("wm_workspace_mask", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("wm_runtime_reach", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    ("wm_sim_search", ["--seed0", "-1"], "argument --seed0: -1: must be a whole number >= 0"),
    ("wm_value_probe", ["--seed0", "-1"], "argument --seed0: -1: must be a whole number >= 0"),
    ("wm_thread_cost", ["--seed", "-1"], "argument --seed: -1: must be a whole number >= 0"),
    # an existing path that is not a slot encoder
    ("slot_carry_iters", ["--encoders", "docs"], "--encoders docs: no slot encoder could be loaded from it"),
    # above edge run's limit (it was a traceback, in wm_runtime_reach after two arms had played)
    ("wm_runtime_reach", ["--sync-ticks", "200000"], "argument --sync-ticks: 200000: must be a whole number in [1, 100000]"),
    ("wm_lookahead", ["--max-steps", "200000"], "argument --max-steps: 200000: must be a whole number in [0, 100000]"),
    ("wm_workspace_mask", ["--max-steps", "-1"], "argument --max-steps: -1: must be a whole number in [0, 100000]"),
    ("wm_real_clock", ["--max-steps", "200000"], "argument --max-steps: 200000: must be a whole number in [0, 100000]"),
    ("worker_startup", ["--task", "rech", "--repeats", "1"],
     "--policy comet / --task rech: edge run says: argument --task: invalid choice: 'rech'"),
    ("worker_startup", ["--max-steps", "200000"], "argument --max-steps: 200000: must be a whole number in [1, 100000]"),
    # a CPU named for the pinned arm that this process cannot use (the arm was dropped silently)
    ("wm_thread_cost", ["--loop-cpu", "4096", "--runs-dir", f"{NOWHERE}/runs"], "--loop-cpu 4096: not one of this process's CPUs"),
    ("arm_tracking", ["--min-move-m", "0"], "argument --min-move-m: 0: must be a number > 0"),
    ("arm_tracking", ["--min-move-m", "nan"], "argument --min-move-m: nan: must be finite"),
    ("mujoco_rollout_speed", ["--threads", "1", "0"], "argument --threads: 0: must be a whole number >= 1"),
    ("wm_steps_ratio", ["--results", NOWHERE, "--floor", "0"], f"--results / --floor-from {NOWHERE}: no such file"),
    ("wm_steps_ratio", ["--results", NOWHERE, "--floor", "0", "--resamples", "0"], "--resamples=0 must be at least 1"),
    # found by a sweep of every script with bad inputs (stop 68): tracebacks, exit 1, or work started first
    ("eqrl_eval", ["--adapter", NOWHERE], f"--adapter {NOWHERE}: no EQRL adapter at {NOWHERE}"),
    ("eqrl_eval", ["--arms", "fixed:2x8,eqrl:stack_efficent"], "did you mean stack_efficient?"),
    ("vla_grid", ["--out", "README.md"], "--out README.md: not a results file of this script (not readable JSON"),
    ("latency_robustness", ["--out", "README.md"], "--out README.md: not a results file of this script"),
    ("vla_latency", ["--checkpoint", "configs"], "--checkpoint: no VLA checkpoint at configs"),
    ("device_calibration", ["--checkpoint", "configs"], "--checkpoint: no VLA checkpoint at configs"),
    ("bridge_deploy", ["--work", NOWHERE, "--mcu", "bogus=1"], "--mcu 'bogus=1': give KEY=VALUE"),
    ("bridge_deploy", ["--work", "README.md"], "--work README.md: exists and is not a directory"),
    ("comet_vs_monolithic", ["--runs", "README.md", "--tasks", "reach3"], "--runs README.md: exists and is not a directory"),
    ("wm_final_eval", ["--runs", NOWHERE], f"--runs {NOWHERE}: no such directory"),
    ("wm_final_eval", ["--seeds", "-1"], "argument --seeds: -1: must be a whole number >= 0"),
    ("wm_final_eval", ["--task", "bogus"], "argument --task: invalid choice: 'bogus'"),
    ("wm_contact_ceiling", ["--agents", f"a={NOWHERE}"], f"--agents 'a={NOWHERE}': {NOWHERE} does not exist"),
    ("wm_steps_ratio", ["--results", "README.md", "--floor-from", "README.md"],
     "--floor-from README.md: not an object_task_scripted.py result (not readable JSON"),
]


@pytest.mark.parametrize("script, argv, said", CASES, ids=[f"{c[0]}:{' '.join(c[1])}" for c in CASES])
def test_a_bad_argument_ends_in_one_line_naming_it(script, argv, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out.json"
    with pytest.raises(SystemExit) as exit_:
        load_benchmark(script).main(["--out", str(out), *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert said in err and "Traceback" not in err
    assert not out.exists()  # nothing measured, nothing written


def test_gpu_check_names_the_flag_with_its_own_setup_exit_code(capsys):
    gpu_check = load_benchmark("gpu_check")
    for argv, said in ((["--parity-k", "1,x"], "--parity-k '1,x'"), (["--parity-k", ""], "--parity-k ''"),
                       (["--budget-s", "0"], "--budget-s 0.0"), (["--device", "gpu"], "--device gpu"),
                       (["--checkpoint", NOWHERE], f"--checkpoint: no VLA checkpoint at {NOWHERE}"),
                       (["--data", NOWHERE], f"--data {NOWHERE}: no such directory")):
        cpu = [] if "--device" in argv else ["--device", "cpu"]
        assert gpu_check.main([*argv, *cpu]) == gpu_check.EXIT_SETUP
        assert said in capsys.readouterr().err


def test_wm_pairs_names_a_file_that_is_not_a_search_output(tmp_path, capsys):
    f = tmp_path / "other.json"
    f.write_text(json.dumps({"methods": {}}))
    assert load_benchmark("wm_pairs").main(["--a", f"{f}:x", "--b", f"{f}:x"]) == 2
    assert "is not a wm_sim_search.py output" in capsys.readouterr().err


def test_bridge_deploy_leaves_its_work_directory_alone_when_the_policy_does_not_load(tmp_path, capsys):
    work = tmp_path / "w"  # a rerun with the right --world-model must not find "other settings" there
    with pytest.raises(SystemExit) as exit_:
        load_benchmark("bridge_deploy").main(["--work", str(work), "--policy", "comet", "--world-model", NOWHERE,
                                              "--out", str(tmp_path / "o.json")])
    assert exit_.value.code == 2 and NOWHERE in capsys.readouterr().err and not work.exists()


OUT_SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if 'add_argument("--out"' in p.read_text())


@pytest.mark.parametrize("script", OUT_SCRIPTS)
def test_an_out_that_cannot_be_written_is_refused_before_anything_runs(script, tmp_path, monkeypatch, capsys):
    """A results file's --out is checked when parsed (a directory given for it was found only when the
    results were written, after the whole run); comet_vs_monolithic's --out is a directory."""
    monkeypatch.chdir(ROOT)
    bad, said = tmp_path, "is a directory; give a file path"
    if script == "comet_vs_monolithic":
        bad, said = tmp_path / "f", "exists and is not a directory"
        bad.write_text("")
    main = getattr(load_benchmark(script), "main", None)
    if main is None:  # a script without main(argv)
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, f"benchmarks/{script}.py", "--out", str(bad)], capture_output=True,
                              text=True)
        code, err = proc.returncode, proc.stderr
    else:
        try:
            code = main(["--out", str(bad)])
        except SystemExit as exit_:
            code = exit_.code
        err = capsys.readouterr().err
    if script == "gpu_check":  # its own exit codes: 3 for a bad argument (2 is "no GPU")
        assert code == load_benchmark("gpu_check").EXIT_SETUP and f"--out {bad}: {said}" in err, err
        return
    assert code == 2 and f"argument --out: {bad}: {said}" in err and "Traceback" not in err, err


def test_eqrl_eval_refuses_ray_it_cannot_import_and_an_out_that_is_not_its_json(tmp_path, capsys):
    import importlib.util

    eqrl_eval = load_benchmark("eqrl_eval")
    if importlib.util.find_spec("ray") is None:
        with pytest.raises(SystemExit) as exit_:
            eqrl_eval.main(["--ray", "--out", str(tmp_path / "o.json")])
        assert exit_.value.code == 2 and "--ray local:" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("not json")
    with pytest.raises(SystemExit) as exit_:
        eqrl_eval.main(["--out", str(tmp_path / "notes.txt")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "not a readable JSON" in err and "Traceback" not in err


def test_vla_vision_probe_names_a_camera_the_dataset_was_not_recorded_with(tmp_path, capsys):
    from edge.training.vla.synthetic import write_synthetic_demos

    data = write_synthetic_demos(tmp_path / "d", episodes=1, steps=5)  # the front camera only
    with pytest.raises(SystemExit) as exit_:
        load_benchmark("vla_vision_probe").main(["--data", str(data), "--camera", "wrist",
                                                 "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--camera wrist:" in err and "front only" in err and "Traceback" not in err


def test_result_files_that_are_not_one_are_named_not_a_traceback(tmp_path, capsys, monkeypatch):
    """Inputs a script reads after parsing: not JSON, JSON of another shape, a cut run record."""
    monkeypatch.chdir(ROOT)
    (tmp_path / "list.json").write_text("[1, 2]")
    for merge, said in (("README.md", "--merge README.md: not a wm_sim_search.py output (not readable JSON"),
                        (str(tmp_path / "list.json"), "its JSON is a list, not an object")):
        with pytest.raises(SystemExit) as e:
            load_benchmark("wm_sim_search").main(["--merge", merge, "--out", str(tmp_path / "o.json")])
        assert e.value.code == 2 and said in capsys.readouterr().err
    run = tmp_path / "run"
    run.mkdir()
    tick = {"ep": 0, "slot": 0, "ee_pos_m": [0.4, 0.0, 0.2], "kind": "act", "sent": [0.01, 0.0, 0.0, 0.0, 0.0]}
    (run / "ticks.jsonl").write_text("garbage\n" + json.dumps(tick) + "\n")
    with pytest.raises(SystemExit) as e:
        load_benchmark("arm_tracking").main(["--runs", f"x={run}", "--out", str(tmp_path / "a.json")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"{run}/ticks.jsonl:1: corrupt record" in err and "Traceback" not in err
    (run / "ticks.jsonl").write_text(json.dumps(tick) + "\n" + '{"ep": 0, "slo')  # a kill's cut last line: skipped
    assert load_benchmark("arm_tracking").main(["--runs", f"x={run}", "--out", str(tmp_path / "a.json")]) == 0
    for script, argv in (("fg_window_coverage", ["--data", "README.md"]),
                         ("slot_owners", ["--encoder", "world_models/checkpoints/slots_push3_v2", "--data", "README.md"])):
        assert load_benchmark(script).main([*argv, "--out", str(tmp_path / "f.json")]) == 2, script
        assert "--data README.md: not a frames file" in capsys.readouterr().err
