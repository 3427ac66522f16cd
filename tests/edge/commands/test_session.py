"""The composed runtime session (what `edge run`, the VLA grid and the latency benchmark use),
with a tiny barely-trained checkpoint: plumbing, records and errors — not policy quality."""

import json

import pytest

from edge.cli import main
from edge.config import ConfigError
from edge.errors import EdgeError
from edge.runtime.config import RuntimeConfig, apply_settings
from edge.runtime.session import run_session


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    from edge.training.vla.synthetic import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory.mktemp("session"), steps=10)


def test_session_writes_complete_run_records(tiny_ckpt, tmp_path):
    cfg = RuntimeConfig.of(checkpoint=str(tiny_ckpt), backend="torch", episodes=2, max_steps=12, num_steps=2,
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
    # what actually ran: policy kind, checkpoint + sha256, backend, scheduler, package versions
    from edge.vla.verify import sha256_file

    pol = meta["policy"]
    assert pol["kind"] == "vla" and pol["model_sha256"] == sha256_file(tiny_ckpt / "model.pt")
    assert pol["backend_name"] == "torch[cpu]" and pol["backend"]["name"] == "torch"
    assert meta["scheduler"]["name"] == "fixed" and meta["scheduler"]["num_steps"] == 2
    assert "numpy" in meta["machine"]["packages"]
    q = json.loads((tmp_path / "run" / "queries.jsonl").read_text().splitlines()[0])
    assert q["backend"] == "torch[cpu]"  # not "<...TorchBackend object at 0x...>"
    assert "policy_clipped" in res.episodes[0] and s["policy_outputs"] == sum(
        e["policy_outputs"] for e in res.episodes)


def test_session_config_is_validated():
    with pytest.raises(ConfigError, match="num_steps"):
        RuntimeConfig.of(num_steps=0)
    with pytest.raises(ConfigError, match="seam"):
        RuntimeConfig.of(seam="blend")


def test_edge_run_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    code = main(["run", "--policy", "vla", "--checkpoint", str(tmp_path / "nope"), "--out", str(tmp_path / "r")])
    assert code == 2
    assert "not found" in capsys.readouterr().err


def test_edge_run_expert_writes_the_run_directory_layout(tmp_path, capsys):
    """--policy expert runs through the runtime (run_session): the VLA's run-directory layout."""
    assert main(["run", "--policy", "expert", "--episodes", "1", "--image-size", "16", "--seed", "0",
                 "--out", str(tmp_path / "r")]) == 0
    assert f"edge report {tmp_path / 'r'}" in capsys.readouterr().out  # how to look at the run
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"meta.json", "ticks.jsonl", "queries.jsonl", "episodes.jsonl", "events.jsonl", "summary.json",
            "summary.txt", "episode0.gif"} <= files
    ep = json.loads((tmp_path / "r" / "episodes.jsonl").read_text())
    assert {"ep", "seed", "success", "steps", "instruction", "wall_s", "max_stage", "ticks", "queries",
            "nfe", "executed", "stop_reason"} <= set(ep)
    assert ep["ep"] == 0 and ep["seed"] == 0
    assert ep["stop_reason"] == ("success" if ep["success"] else "time_limit")  # where the env ended it
    # the simulated arm's own clamps, counted per episode (the expert stays inside the sim's box)
    assert (ep["sim_workspace_clips"], ep["sim_action_box_clips"]) == (0, 0)
    # one expert action per tick: a query each, NFE 1 each, nothing starved or dropped
    assert ep["ticks"] == ep["steps"] == ep["queries"] == ep["nfe"] == ep["executed"] and ep["starved"] == 0
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["policy"]["kind"] == "expert" and meta["policy"]["image_hw"] == [16, 16]
    session = meta["session"]
    assert session["policy"] == "expert" and session["image_size"] == 16
    assert (session["execution"], session["num_steps"], session["execute"]) == ("sync", 1, 1)
    assert (session["inference"], session["latency"], session["latency_ms"]) == ("inline", "constant", 0.0)
    queries = [json.loads(x) for x in (tmp_path / "r" / "queries.jsonl").read_text().splitlines()]
    assert len(queries) == ep["queries"] and all(q["K"] == 1 and q["C"] == 1 for q in queries)
    ticks = (tmp_path / "r" / "ticks.jsonl").read_text().splitlines()
    assert len(ticks) == ep["ticks"]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["episodes"] == 1 and summary["success_ci95"] is not None
    assert "95 % Wilson CI" in (tmp_path / "r" / "summary.txt").read_text()


def test_edge_run_expert_resumes(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert main(["run", "--policy", "expert", "--episodes", "1", "--image-size", "16", "--seed", "5",
                 "--out", out]) == 0
    assert main(["run", "--policy", "expert", "--episodes", "2", "--image-size", "16", "--seed", "5",
                 "--out", out, "--resume"]) == 0
    eps = [json.loads(x) for x in (tmp_path / "r" / "episodes.jsonl").read_text().splitlines()]
    assert [(e["ep"], e["seed"]) for e in eps] == [(0, 5), (1, 6)]
    # each start and resume records how long its inference worker took to be ready (inline: at once)
    started = [e for e in map(json.loads, (tmp_path / "r" / "events.jsonl").read_text().splitlines())
               if e["kind"] == "worker_started"]
    assert [e["mode"] for e in started] == ["inline", "inline"] and all(0 <= e["start_s"] < 0.1 for e in started)
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["worker_start_s"] == [e["start_s"] for e in started]
    assert main(["run", "--policy", "expert", "--episodes", "3", "--image-size", "32", "--seed", "5",
                 "--out", out, "--resume"]) == 2
    assert "image_size=16" in capsys.readouterr().err
    # resumed with another policy: the policy is named, not a setting the user never gave
    assert main(["run", "--policy", "vla", "--episodes", "3", "--out", out, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "is an expert run (--policy expert)" in err and "image" not in err


def test_a_run_that_fell_back_to_the_expert_resumes_with_the_same_command(tmp_path, monkeypatch):
    import edge.commands.run as run_cmd

    monkeypatch.setattr(run_cmd, "DEFAULT_CHECKPOINT", tmp_path / "no-vla")  # --policy auto: the expert acts
    out = str(tmp_path / "r")
    assert main(["run", "--episodes", "1", "--image-size", "16", "--out", out]) == 0
    assert main(["run", "--episodes", "2", "--image-size", "16", "--out", out, "--resume"]) == 0
    assert len((tmp_path / "r" / "episodes.jsonl").read_text().splitlines()) == 2


def test_a_run_started_with_a_setting_now_refused_still_resumes(tmp_path, capsys):
    """A run recorded before edge run refused settings it does not read (here the expert's seam, which
    sync never reads) resumes as it was started: a resumed run's settings are checked against its own."""
    out = tmp_path / "r"
    base = ["run", "--policy", "expert", "--image-size", "16", "--seed", "5", "--set", "max_steps=3", "--out", str(out)]
    assert main([*base, "--episodes", "1"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    meta["config"]["queue"]["seam"] = meta["session"]["seam"] = "weighted"  # as an earlier version recorded it
    (out / "meta.json").write_text(json.dumps(meta))
    assert main([*base, "--episodes", "2", "--seam", "weighted"]) == 2  # a new run: refused
    assert "--seam weighted" in capsys.readouterr().err
    assert main([*base, "--episodes", "2", "--seam", "weighted", "--resume"]) == 0
    eps = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["seed"] for e in eps] == [5, 6]
    # what a resume asks beyond how the run was started is checked (resume_state lets this key differ)
    assert main([*base, "--episodes", "3", "--seam", "weighted", "--resume", "--set", "adapter_noise=mean"]) == 2
    assert "scheduler.eqrl.noise=mean (from --set)" in capsys.readouterr().err


def test_a_config_files_setting_the_run_does_not_read_gets_a_note(tmp_path, capsys):
    """configs/run/dvac.yaml's weighted seam in a sync run: the file sets many things, so a note, not a
    refusal (the same setting from a flag or --set is refused: tests/test_bad_inputs.py)."""
    from pathlib import Path

    preset = Path(__file__).resolve().parents[3] / "configs" / "run" / "dvac.yaml"
    assert main(["run", "--config", str(preset), "--query-mode", "sync", "--episodes", "1",
                 "--set", "max_steps=3", "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert f"note: queue.seam=weighted (from --config {preset}) is not read by this run" in err


def test_a_run_of_another_policy_resumes_whatever_the_planners_settings(tmp_path, capsys):
    """The planner's settings (policy.comet.*) do not decide whether an expert or VLA run resumes: one
    recorded before the workspace mask existed (or the planner's backend) still continues."""
    out = tmp_path / "r"
    argv = ["run", "--policy", "expert", "--episodes", "1", "--image-size", "16", "--set", "max_steps=4",
            "--out", str(out)]
    assert main(argv) == 0
    meta = json.loads((out / "meta.json").read_text())
    comet = meta["config"]["policy"]["comet"]
    del comet["workspace_mask"], comet["plan_backend"], meta["session"]["plan_workspace_mask"]
    (out / "meta.json").write_text(json.dumps(meta))
    assert main([*argv[:4], "2", *argv[5:], "--resume"]) == 0, capsys.readouterr().err
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2


def test_a_run_from_another_physics_step_does_not_resume(tmp_path, capsys):
    """PyBullet's default step changed (2 ms -> 1/300 s); a run directory records its step, and one
    written before it was recorded counts as 2 ms."""
    out = tmp_path / "r"
    argv = ["run", "--policy", "expert", "--sim", "pybullet", "--episodes", "1", "--image-size", "16",
            "--set", "max_steps=5", "--out", str(out)]
    assert main(argv) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["physics_step_s"] == pytest.approx(1 / 300)
    del meta["physics_step_s"]  # as written before the step was recorded: 2 ms
    (out / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main([*argv[:6], "2", *argv[7:], "--resume"]) == 2
    assert "2 ms physics step" in capsys.readouterr().err
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 1


def test_a_run_recorded_in_an_older_record_schema_does_not_resume(tmp_path, capsys):
    """A resume appends lines in the current schema: a v1 run's file would hold two (the reader takes one)."""
    out = tmp_path / "r"
    argv = ["run", "--policy", "expert", "--episodes", "1", "--image-size", "16", "--set", "max_steps=5",
            "--out", str(out)]
    assert main(argv) == 0
    meta = json.loads((out / "meta.json").read_text())
    del meta["schema_version"]  # as recorded before records were versioned: v1
    (out / "meta.json").write_text(json.dumps(meta))
    ticks = (out / "ticks.jsonl").read_text()
    capsys.readouterr()
    assert main([*argv[:4], "2", *argv[5:], "--resume"]) == 2
    err = capsys.readouterr().err
    assert "recorded in record schema v1 (this edge writes v2)" in err and "another --out" in err
    assert (out / "ticks.jsonl").read_text() == ticks and "schema_version" not in (out / "meta.json").read_text()
    (out / "meta.json").write_text(json.dumps({**meta, "schema_version": 3}))  # a newer edge's run
    assert main([*argv[:4], "2", *argv[5:], "--resume"]) == 2
    assert "recorded in record schema v3" in capsys.readouterr().err


def test_a_run_with_another_workspace_box_does_not_resume(tmp_path, capsys):
    """A run directory records the robot's workspace box (the safety layer clips at it); a panda run
    written before the simulated arm's clips were counted ran with the box of before e95f17e (y ±0.40,
    z up to 0.65) and does not resume; one written after (the clips counted, the box not recorded yet)
    does."""
    out = tmp_path / "r"
    argv = ["run", "--policy", "expert", "--episodes", "1", "--image-size", "16", "--set", "max_steps=5",
            "--out", str(out)]
    assert main(argv) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["robot"] == {"name": "panda", "workspace_m": [[0.25, -0.35, 0.0], [0.8, 0.35, 0.45]]}
    del meta["robot"]  # as written before the box was recorded
    (out / "meta.json").write_text(json.dumps(meta))
    ep = json.loads((out / "episodes.jsonl").read_text())
    old = {k: v for k, v in ep.items() if not k.startswith("sim_")}  # and before the clips were counted
    (out / "episodes.jsonl").write_text(json.dumps(old) + "\n")
    capsys.readouterr()
    assert main([*argv[:4], "2", *argv[5:], "--resume"]) == 2
    assert "workspace box [[0.25, -0.4, 0.0], [0.8, 0.4, 0.65]]" in capsys.readouterr().err
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 1
    (out / "episodes.jsonl").write_text(json.dumps(ep) + "\n")  # the clips counted: the new box, resumes
    assert main([*argv[:4], "2", *argv[5:], "--resume"]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("argv, needle", [
    (["--execute", "8"], "--execute 8"),
    (["--num-steps", "10"], "--num-steps 10"),
    (["--query-mode", "async"], "--query-mode sync"),
    (["--inference", "thread"], "inline"),
    (["--scheduler", "dvac"], "--scheduler dvac"),
    (["--image-size", "8"], "--image-size=8"),
    (["--latency", "measured", "--latency-ms", "5"], "--latency constant"),
])
def test_edge_run_expert_refuses_what_it_cannot_do(argv, needle, tmp_path, capsys):
    rc = main(["run", "--policy", "expert", "--episodes", "1", *argv, "--out", str(tmp_path / "r")])
    assert rc == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_edge_run_expert_takes_k_and_c_of_one_and_a_latency(tmp_path, capsys):
    """K = C = 1 may be given; an explicit latency is charged: the arm holds while it waits."""
    assert main(["run", "--policy", "expert", "--episodes", "1", "--image-size", "16", "--execute", "1",
                 "--num-steps", "1", "--latency-ms", "60", "--set", "max_steps=10",
                 "--out", str(tmp_path / "r")]) == 0
    ep = json.loads((tmp_path / "r" / "episodes.jsonl").read_text())
    assert ep["ticks"] == 10 and 0 < ep["executed"] < 10  # 60 ms > one 50 ms period: a hold per query
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert (meta["session"]["latency"], meta["session"]["latency_ms"]) == ("constant", 60.0)


def test_default_run_directory_never_reuses_an_existing_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("time.strftime", lambda fmt: "20250101-000000")
    (tmp_path / "runs" / "20250101-000000").mkdir(parents=True)
    (tmp_path / "runs" / "20250101-000000" / "meta.json").write_text("{}")
    assert main(["run", "--policy", "expert", "--episodes", "1", "--image-size", "16"]) == 0
    assert (tmp_path / "runs" / "20250101-000000-2" / "episodes.jsonl").is_file()
    assert (tmp_path / "runs" / "20250101-000000" / "meta.json").read_text() == "{}"


def test_resume_continues_episode_indices_and_seeds(tiny_ckpt, tmp_path):
    cfg = RuntimeConfig.of(checkpoint=str(tiny_ckpt), backend="torch", episodes=1, max_steps=6, num_steps=1,
                        execute=4, video_episodes=0, latency="constant", latency_ms=120.0)  # a query: 3 ticks
    run_session(cfg, tmp_path / "run", progress=False)
    # a killed second episode: its lines without an episode record are dropped on resume
    with open(tmp_path / "run" / "ticks.jsonl", "a") as f:
        f.write('{"ep":1,"slot":99}\n{"ep":1,"sl')
    with open(tmp_path / "run" / "events.jsonl", "a") as f:  # its fault, and a line the kill cut short
        f.write('{"kind":"fault","t":9.0,"ep":1,"detail":"watchdog_stop: test"}\n{"kind":"ep')
    with open(tmp_path / "run" / "episodes.jsonl", "a") as f:
        f.write('{"ep":1,"ti')
    res = run_session(apply_settings(cfg, [("episodes", 3)]), tmp_path / "run",
                      progress=False, resume=True)
    # the torn lines are gone (the resumed run's first lines were glued to them); the fault is kept, marked
    from edge.telemetry import read_run

    run = read_run(tmp_path / "run")
    assert [f["detail"] for f in res.summary["faults"] if f.get("interrupted")] == ["watchdog_stop: test"]
    assert len(run.events) == len((tmp_path / "run" / "events.jsonl").read_text().splitlines())
    assert [e["ep"] for e in res.episodes] == [1, 2] and [e["seed"] for e in res.episodes] == [100001, 100002]
    eps = [json.loads(x) for x in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert [e["ep"] for e in eps] == [0, 1, 2]
    assert res.summary["episodes"] == 3 and res.summary["ticks"] == 18
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["session"]["episodes"] == 1 and meta["resumed"][0]["episodes_before"] == 1
    with pytest.raises(EdgeError, match="num_steps=1.*num_steps=2"):
        run_session(apply_settings(cfg, [("episodes", 4), ("num_steps", 2)]), tmp_path / "run",
                    progress=False, resume=True)
    # the resumed episodes are the uninterrupted run's: the query counters the VLA's noise is keyed on go on
    run_session(apply_settings(cfg, [("episodes", 3)]), tmp_path / "whole", progress=False)

    def ticks(run):
        return [(t["ep"], t["raw_action"], t["ee_pos_m"]) for t in map(json.loads, (run / "ticks.jsonl").read_text()
                                                                        .splitlines())]

    def keys(run):
        return [(q["ep"], q["query_id"], q["epoch"], q["delay_steps_est"])
                for q in map(json.loads, (run / "queries.jsonl").read_text().splitlines())]

    assert ticks(tmp_path / "run") == ticks(tmp_path / "whole") and keys(tmp_path / "run") == keys(tmp_path / "whole")
    assert len({k[1] for k in keys(tmp_path / "run")}) == len(keys(tmp_path / "run"))  # no noise key used twice
    assert [k[3] for k in keys(tmp_path / "run") if k[0] == 1][0] == 3  # the latency window went on too
    # a run written before the nested config (meta.json: only the flat session) still resumes
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["config"]["scheduler"]["fixed"]["num_steps"] == 1
    meta.pop("config")
    (tmp_path / "run" / "meta.json").write_text(json.dumps(meta))
    res = run_session(apply_settings(cfg, [("episodes", 4)]), tmp_path / "run", progress=False, resume=True)
    assert [e["seed"] for e in res.episodes] == [100003]
    # the library call, as the CLI, never appends a second run to a recorded one
    with pytest.raises(EdgeError, match="already holds a run .*meta.json.*runs never mix"):
        run_session(cfg, tmp_path / "run", progress=False)
    assert len((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()) == 4


def test_instruction_is_embedded_before_the_loop_starts(tiny_ckpt, tmp_path):
    """An instruction the checkpoint has not cached loads its encoder before tick 0, not in query 1."""
    from edge.runtime.session import build_runtime

    rt = build_runtime(RuntimeConfig.of(checkpoint=str(tiny_ckpt), backend="torch", max_steps=2,
                                     num_steps=1, execute=4), None)
    policy = rt.loop.worker.policy
    policy.language._table.clear()  # every instruction is new now
    seen = []
    real_start = rt.loop.start
    rt.loop.start = lambda: (seen.append(policy.language.misses), real_start())[1]
    rt.run_episode(100000)
    rt.close()
    assert seen == [1]  # embedded once, before the loop started


def test_the_first_camera_frame_is_rendered_before_tick_0(tiny_ckpt):
    """A renderer's first frame (its context: about 80 ms) is not charged to tick 0; tick 0 reads the
    same picture, rendered once."""
    from edge.runtime.session import build_runtime

    rt = build_runtime(RuntimeConfig.of(checkpoint=str(tiny_ckpt), backend="torch", max_steps=2,
                                     num_steps=1, execute=4), None)
    backend = rt.env.unwrapped.backend
    renders, seen = [], {}
    real_render, real_step = backend.render, rt.loop.step
    backend.render = lambda *a, **k: (renders.append(a[0]), real_render(*a, **k))[1]

    def step():
        before = len(renders)
        obs = rt.driver.obs
        rec = real_step()
        seen.setdefault("tick0", (before, len(renders) - before, obs))
        return rec

    rt.loop.step = step
    rt.run_episode(100000)
    rt.close()
    before, during, obs = seen["tick0"]
    assert before == 1 and during == 0  # rendered before the loop's first tick, not inside it
    assert "front" in obs._values  # and the tick read that picture


def test_on_the_real_clock_the_simulated_world_does_not_wait_for_a_late_tick(tmp_path, monkeypatch, capsys):
    """A tick that overruns makes the loop skip deadlines; the simulated arm steps through them
    holding its target (as a real arm's controller does), so simulated time keeps pace with the
    deadlines: every episode's physics steps = its ticks + the periods it skipped."""
    import time

    from drivers.sim_arm import SimArmDriver

    real_read = SimArmDriver.read_state
    calls = {"n": 0}

    def slow_read(self):
        calls["n"] += 1
        if calls["n"] % 7 == 0:
            time.sleep(0.13)  # this tick runs past two more deadlines at 20 Hz
        return real_read(self)

    monkeypatch.setattr(SimArmDriver, "read_state", slow_read)
    out = tmp_path / "r"
    assert main(["run", "--policy", "expert", "--episodes", "2", "--image-size", "16", "--clock", "real",
                 "--set", "max_steps=30", "--out", str(out)]) == 0
    eps = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    ticks = [json.loads(x) for x in (out / "ticks.jsonl").read_text().splitlines()]
    for e in eps:
        skipped = sum(t["overrun_ticks"] for t in ticks if t["ep"] == e["ep"])
        assert skipped >= 2 * 3 and skipped == e["overruns"]
        # the expert cannot stack in 30 periods: every episode runs its 30 simulated periods, one per
        # tick and one per skipped deadline (none stepped past the episode's end)
        assert not e["success"] and e["steps"] == 30
        assert e["sim_elapsed_periods"] == 30 - e["ticks"] <= skipped
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sim_elapsed_periods"] == sum(e["sim_elapsed_periods"] for e in eps)
    # a real-clock run recorded before the sim stepped through skipped deadlines does not resume
    lines = (out / "episodes.jsonl").read_text().splitlines()
    old = []
    for x in lines:
        e = json.loads(x)
        del e["sim_elapsed_periods"]
        old.append(json.dumps(e))
    (out / "episodes.jsonl").write_text("\n".join(old) + "\n")
    monkeypatch.setattr(SimArmDriver, "read_state", real_read)
    assert main(["run", "--policy", "expert", "--episodes", "3", "--image-size", "16", "--clock", "real",
                 "--set", "max_steps=30", "--out", str(out), "--resume"]) == 2
    assert "world waited for a late tick" in capsys.readouterr().err


def test_the_progress_bar_names_the_policy_that_decides():
    from edge.runtime.session import progress_label

    assert progress_label(RuntimeConfig.of(num_steps=10, execute=8)) == "fixed K=10 C=8"
    comet = apply_settings(RuntimeConfig.of(), [("policy.name", "comet"), ("policy.comet.plan_simulations", 32),
                                                ("policy.comet.plan_deadline_ms", 40.0)])
    assert progress_label(comet) == "comet, 32 simulations, deadline 40 ms"
    assert progress_label(apply_settings(RuntimeConfig.of(), [("policy.name", "comet")])) == "comet, the model's simulations"
    assert progress_label(apply_settings(RuntimeConfig.of(), [("policy.name", "expert")])) == "expert"


def test_an_adapter_setting_no_scheduler_read_does_not_block_a_resume(tiny_ckpt, tmp_path):
    """Runs recorded with an adapter named but a fixed scheduler (allowed before edge run refused it)
    resume without it: only an eqrl or a factory's scheduler reads scheduler.eqrl.*."""
    base = dict(checkpoint=str(tiny_ckpt), backend="torch", max_steps=6, num_steps=2, execute=4)
    first = apply_settings(RuntimeConfig.of(episodes=1, **base), [("scheduler.eqrl.adapter", "stack")])
    run_session(first, tmp_path / "run", progress=False)
    res = run_session(RuntimeConfig.of(episodes=2, **base), tmp_path / "run", progress=False, resume=True)
    assert len(res.episodes) == 1 and len((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()) == 2
    with pytest.raises(EdgeError, match="execute"):  # a setting the scheduler reads must still match
        run_session(RuntimeConfig.of(episodes=3, **{**base, "execute": 2}), tmp_path / "run", progress=False,
                    resume=True)


def test_settings_are_judged_after_config_and_a_resume_finishes_its_own_episodes(tmp_path, capsys):
    """--device with the device latency set by --set is accepted (the check reads the final settings);
    a bare --resume finishes the episodes the run was started with (not the default 3)."""
    out = tmp_path / "r"
    base = ["run", "--policy", "expert", "--image-size", "16", "--set", "max_steps=4", "--out", str(out)]
    assert main([*base, "--episodes", "4", "--device", "orin-nx", "--latency", "device", "--no-progress"]) == 0
    lines = (out / "episodes.jsonl").read_text().splitlines()
    (out / "episodes.jsonl").write_text("\n".join(lines[:2]) + "\n")  # as if it had been stopped after two
    assert main([*base, "--device", "orin-nx", "--set", "latency=device", "--resume", "--no-progress"]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 4
    capsys.readouterr()
    assert main([*base, "--episodes", "4", "--device", "orin-nx", "--resume"]) == 2  # measured latency: refused
    assert "--device orin-nx: the target whose time --latency device charges" in capsys.readouterr().err


def test_a_config_that_overrides_a_flag_says_so(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("run:\n  episodes: 2\n")
    assert main(["run", "--policy", "expert", "--image-size", "16", "--set", "max_steps=3", "--episodes", "1",
                 "--seed", "7", "--config", str(cfg), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"note: --config {cfg} / --set (applied on top of the flags) overrides --episodes 1 -> run.episodes=2" in err
    assert "--seed" not in err  # what the file leaves alone is not named
