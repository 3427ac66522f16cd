"""The run summary: success with its Wilson interval, what ran, honest timing labels."""

from pathlib import Path

import pytest

from edge.telemetry import RunData, format_summary, summarize


def _run(clock: str) -> RunData:
    ticks = []
    for ep, slots in ((0, range(0, 5)), (1, range(6, 10))):
        for n in slots:
            ticks.append({"ep": ep, "slot": n, "t_s": 0.05 * n, "lateness_s": 0.001, "tick_overhead_s": 0.0005,
                          "overrun_ticks": 0, "kind": "act", "interventions": None})
    ticks[5].update(lateness_s=0.12, overrun_ticks=2)  # the first tick after the env reset
    ticks[2].update(overrun_ticks=1)
    meta = {"period_s": 0.05, "session": {"clock": clock, "scheduler": "fixed", "num_steps": 10,
                                          "execute": 8, "seam": "replace", "noise_temperature": 0.5},
            "policy": {"kind": "vla", "backend_name": "onnxruntime[CPUExecutionProvider]",
                       "checkpoint": "ck/stack", "model_sha256": "ab" * 32}}
    queries = [{"K": 10, "C": 8, "nfe": 10, "latency_s": 0.01, "compute_s": 0.01, "dropped_late": 1}]
    episodes = [{"ep": 0, "success": True, "policy_outputs": 32, "policy_clipped": 5, "policy_clip_max": 0.001,
                 "sim_workspace_clips": 7, "sim_action_box_clips": 0},
                {"ep": 1, "success": False, "policy_outputs": 16, "policy_clipped": 1, "policy_clip_max": 0.004,
                 "sim_workspace_clips": 4, "sim_action_box_clips": 2}]
    return RunData(Path("."), meta, ticks=ticks, queries=queries, episodes=episodes)


def test_summary_says_what_ran_and_how_sure_the_success_rate_is():
    s = summarize(_run("virtual"))
    assert s["success_rate"] == 0.5 and s["success_ci95"] == pytest.approx([0.0945, 0.9055], abs=1e-3)
    assert s["policy_clipped"] == 6 and s["policy_outputs"] == 48 and s["policy_clip_max"] == 0.004
    assert (s["sim_workspace_clips"], s["sim_action_box_clips"]) == (11, 2)
    text = format_summary(s)
    assert "sim controller clips" in text and "11 TCP targets into the sim's workspace box, 2 commands" in text
    assert "1/2 = 50.0% (95 % Wilson CI 9.5% – 90.5%)" in text
    assert "onnxruntime[CPUExecutionProvider], ck/stack (model.pt sha256 abababababab)" in text
    assert "fixed K=10 C=8, seam replace, noise T=0.5" in text
    assert "policy output clipped        6 of 48 gripper outputs" in text
    assert "stale actions dropped" in text and "dropped_late" not in text


def test_virtual_clock_timing_is_not_reported_as_zero():
    s = summarize(_run("virtual"))
    assert s["lateness_p99_ms"] is None and s["jitter_p99_ms"] is None and s["overruns"] is None
    text = format_summary(s)
    assert text.count("n/a (virtual clock)") == 3 and "0.000 / 0.000" not in text


def test_env_reset_between_episodes_is_not_an_overrun():
    s = summarize(_run("real"))
    assert s["overruns"] == 1 and s["reset_overruns"] == 2
    assert s["lateness_p99_ms"] == pytest.approx(1.0)  # the 120 ms wake after the reset is left out
    assert "+2 at episode starts" in format_summary(s)
    assert s["sim_elapsed_periods"] is None  # no driver reported stepping through skipped periods
    run = _run("real")
    for e, k in zip(run.episodes, (1, 2)):
        e["sim_elapsed_periods"] = k
    s = summarize(run)
    assert s["sim_elapsed_periods"] == 3
    assert "the simulated arm stepped through 3 of the 3 skipped deadlines, episode starts included" in format_summary(s)
    s = summarize(_run("virtual"))  # on the virtual clock nothing is skipped, nothing reported
    assert s["sim_elapsed_periods"] is None and "stepped through" not in format_summary(s)


def test_summary_without_a_loop_lists_outcome_and_extras():
    run = RunData(Path("."), {"policy": {"kind": "expert", "name": "sim.experts (stack)"}},
                  episodes=[{"ep": 0, "success": True}])
    s = summarize(run)
    s["note"] = "x"
    text = format_summary(s)
    assert "success  1/1" in text and "expert, sim.experts (stack)" in text and "note" in text
    assert "ticks" not in text


def test_an_eqrl_run_names_the_adapter_as_the_noise_source():
    from edge.telemetry import _scheduler_brief

    meta = {"scheduler": {"name": "eqrl", "seam": "replace", "noise_temperature": 0.5},
            "session": {"adapter_noise": "sample"}}
    assert _scheduler_brief(meta) == "eqrl, seam replace, noise from the adapter"
    meta["session"]["adapter_noise"] = "mean"
    assert _scheduler_brief(meta).endswith("noise from the adapter (its mode)")


def test_an_expert_run_names_no_noise_temperature():
    from edge.telemetry import _scheduler_brief

    meta = {"scheduler": {"name": "fixed", "num_steps": 1, "execute": 1, "seam": "replace", "noise_temperature": 0.5},
            "policy": {"kind": "expert"}}
    assert _scheduler_brief(meta) == "fixed K=1 C=1, seam replace"  # the expert draws no noise
    meta["policy"]["kind"] = "vla"
    assert _scheduler_brief(meta) == "fixed K=1 C=1, seam replace, noise T=0.5"


def test_a_run_whose_arm_barely_moved_is_flagged():
    run = _run("real")
    assert "warning" not in format_summary(summarize(run))  # every tick acted
    for t in run.ticks:
        t["kind"] = "hold"
    run.queries[0]["latency_s"] = 0.4
    text = format_summary(summarize(run))
    assert "the arm acted on 0 of 9 ticks" in text and "inference p50 400.0 ms against a 50 ms period" in text
    s = summarize(run)
    s["faults"] = [{"kind": "joint_limit", "t": 0.1, "detail": "j3"}]  # a fault stopped it: not blamed on speed
    text = format_summary(s)
    assert "the arm acted on 0 of 9 ticks: the safety layer stopped it" in text and "too slow" not in text


def test_a_run_on_a_real_arm_says_how_it_ended_not_zero_episodes():
    run = _run("real")
    run.episodes = []
    s = summarize(run)
    s.update(arm="bridge", stop="CameraStale")
    text = format_summary(s)
    assert text.splitlines()[0].split() == ["run", "on", "the", "bridge", "arm,", "ended", "by", "CameraStale"]
    assert "episodes" not in text and "\narm " not in text and "\nstop " not in text


def test_summary_says_how_much_the_planners_searches_ran():
    run = _run("virtual")
    assert summarize(run)["planner"] is None and "planner searches" not in format_summary(summarize(run))
    run.episodes[0].update(planner_decisions=10, planner_simulations=120, planner_cut=3)
    run.episodes[1].update(planner_decisions=6, planner_simulations=40, planner_cut=5)
    s = summarize(run)
    assert s["planner"] == {"decisions": 16, "simulations_per_decision": 10.0, "cut_by_deadline": 8}
    assert "10.0 simulations per decision; 8 of 16 decisions cut by a deadline" in format_summary(s)
    del run.episodes[1]["planner_simulations"]  # recorded before the count existed
    s = summarize(run)
    assert s["planner"]["simulations_per_decision"] is None and "simulations not recorded" in format_summary(s)


def test_an_interrupted_episode_counts_toward_no_statistic():
    """A run stopped or killed inside an episode has its ticks and queries but no episode record: the
    summary (and edge profile's arm, which reads the same lines) leaves them out and says how many."""
    from edge.profiler.episodes import arm_stats

    whole = _run("virtual")
    run = _run("virtual")
    run.ticks += [{"ep": 2, "slot": n, "t_s": 0.05 * n, "kind": "act", "interventions": [["clip", 1]]}
                  for n in range(11, 14)]
    run.queries += [{"ep": 2, "K": 2, "C": 8, "nfe": 2, "latency_s": 0.5, "compute_s": 0.5}]
    s, ref = summarize(run), summarize(whole)
    assert s["ticks"] == ref["ticks"] == 9 and s["queries"] == ref["queries"] and s["ticks_unfinished"] == 3
    assert s["interventions"] == ref["interventions"] and "ticks_unfinished" not in ref
    assert "ticks_unfinished" in format_summary(s)
    assert run.finished_only().ticks == whole.ticks and run.unfinished_ticks() == 3
    for r in (run, whole):  # the profile's per-arm numbers come from the same finished episodes
        for q in r.queries:
            q.setdefault("ep", 0)
    assert arm_stats([run])["queries"] == arm_stats([whole])["queries"]
