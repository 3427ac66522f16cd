"""edge profile: summary.json recomputed from the run records, --runs re-reading, arm specs."""

import json
from pathlib import Path
from collections import Counter

import pytest

from edge.cli import main
from edge.errors import EdgeError
from edge.profiler.profile import Arm, ProfileConfig, make_arm, parse_scheduler, session_config
from edge.stats import mcnemar_exact, percentiles, wilson
from edge.telemetry import read_jsonl


def recompute(run_dir):
    """The profile's per-arm numbers straight from the JSON lines (independent of arm_stats)."""
    ticks = read_jsonl(run_dir / "ticks.jsonl")
    queries = read_jsonl(run_dir / "queries.jsonl")
    eps = read_jsonl(run_dir / "episodes.jsonl")
    acts = [t for t in ticks if t["kind"] == "act"]
    per_chunk = Counter(t["query_id"] for t in acts)
    per_action = [1e3 * q["compute_s"] / per_chunk[q["query_id"]] for q in queries if per_chunk[q["query_id"]]]
    return {
        "episodes": len(eps), "successes": sum(e["success"] for e in eps),
        "nfe_per_action": sum(q["nfe"] for q in queries) / len(acts),
        "queries_per_episode": len(queries) / len(eps),
        "compute_ms_per_action_mean": 1e3 * sum(q["compute_s"] for q in queries) / len(acts),
        "compute_ms_per_action_p50": percentiles(per_action, (50.0,))[0],
        "compute_ms_per_action_p99": percentiles(per_action, (99.0,))[0],
        "interventions_total": sum(1 for t in ticks for k, _ in t["interventions"] or () if k != "wait_first_plan"),
        "overruns": None,  # virtual clock: not measured
        "starved_ticks": sum(t["starved"] for t in ticks),
        "K_counts": {str(k): v for k, v in sorted(Counter(q["K"] for q in queries).items())},
        "outcomes": {e["seed"]: e["success"] for e in eps},
        "queries": len(queries), "nfe": sum(q["nfe"] for q in queries), "executed": len(acts),
    }


def test_summary_numbers_equal_those_recomputed_from_the_records(profiled):
    out, res = profiled
    summary = json.loads(res["summary"].read_text())
    arms = {a["label"]: a for a in summary["arms"]}
    assert list(arms) == ["fixed:2x4", "fixed:1x8"] and summary["reference"] == "fixed:2x4 / torch"
    ref = None
    for label, a in arms.items():
        (run_dir,) = [out / "runs" / p.split("/runs/")[-1] for p in a["runs"]]
        r = recompute(run_dir)
        ref = ref or r
        for key in ("episodes", "successes", "queries_per_episode", "interventions_total", "overruns",
                    "starved_ticks", "K_counts"):
            assert a[key] == r[key], (label, key)
        for key in ("nfe_per_action", "compute_ms_per_action_mean", "compute_ms_per_action_p50",
                    "compute_ms_per_action_p99"):
            assert a[key] == pytest.approx(r[key]), (label, key)
        assert a["ci95"] == pytest.approx(list(wilson(r["successes"], r["episodes"])))
        assert a["relative_nfe_per_action"] == pytest.approx(r["nfe_per_action"] / ref["nfe_per_action"])
        only_ref = sum(ref["outcomes"][s] and not r["outcomes"][s] for s in r["outcomes"])
        only_arm = sum(r["outcomes"][s] and not ref["outcomes"][s] for s in r["outcomes"])
        assert a["paired_vs_reference"]["mcnemar_p"] == mcnemar_exact(only_ref, only_arm)
        seeds = sorted(r["outcomes"])
        d = [float(r["outcomes"][s]) - float(ref["outcomes"][s]) for s in seeds]
        assert a["paired_vs_reference"]["arm_minus_reference"] == pytest.approx(sum(d) / len(d), abs=1e-4)
        lo, hi = a["paired_vs_reference"]["arm_minus_reference_ci95"]
        assert min(d) <= lo <= sum(d) / len(d) <= hi <= max(d)
        events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
        assert a["worker_start_s"] == [e["start_s"] for e in events if e["kind"] == "worker_started"] != []
        # projections follow from the counts and the cost profile
        from edge.profiler.device_model import CostProfile, get_device, project_run

        prof = CostProfile.from_json(summary["cost_profile"])
        p = project_run(prof, get_device("orin-nano"), r["queries"], r["nfe"], r["episodes"], r["executed"])
        assert a["projected"]["orin-nano"]["ms_per_action"] == pytest.approx(p["ms_per_action"])
        assert a["host_breakdown"]["total_ms"] == pytest.approx(r["compute_ms_per_action_mean"])
    assert arms["fixed:1x8"]["nfe_per_action"] < arms["fixed:2x4"]["nfe_per_action"]
    for name in ("success_vs_nfe", "kc_hist", "latency_by_backend", "cost_breakdown", "device_projection"):
        assert res["pngs"][name].stat().st_size > 5000
    html = res["html"].read_text()
    assert "data:image/png;base64," in html and "src='success_vs_nfe.png'" not in html
    assert "success_vs_nfe.png" in res["md"].read_text()


def test_runs_are_re_read(profiled, tmp_path, capsys):
    out, res = profiled
    first = json.loads(res["summary"].read_text())
    code = main(["profile", "--runs", str(out / "runs"), "--out", str(tmp_path / "again"), "--no-calibrate",
                 "--reference", "fixed:2x4", "--device", "orin-nano,x86-cpu"])
    assert code == 0, capsys.readouterr().err
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    a = {x["name"]: x for x in first["arms"]}
    b = {x["name"]: x for x in again["arms"]}
    assert set(a) == set(b) and again["reference"] == first["reference"]
    for name in a:
        for key in ("successes", "nfe_per_action", "compute_ms_per_action_p99", "queries", "interventions",
                    "per_episode", "relative_nfe_per_action", "paired_vs_reference", "projected"):
            assert b[name][key] == a[name][key], (name, key)
        assert b[name]["host_breakdown"] is None  # --no-calibrate: no part timings
    # a run directory that is already full is refused, not appended to
    with pytest.raises(EdgeError, match="already holds files"):
        from edge.profiler.profile import run_arms

        run_arms(ProfileConfig(episodes=1), [Arm("fixed:2x4", "torch", parse_scheduler("fixed:2x4"))],
                 out / "runs")


def test_scheduler_specs():
    assert parse_scheduler("fixed:10x8") == {"scheduler": "fixed", "num_steps": 10, "execute": 8}
    assert parse_scheduler("fixed") == {"scheduler": "fixed", "num_steps": 10, "execute": 8}
    assert parse_scheduler("dvac:4") == {"scheduler": "dvac", "num_steps": 4}
    assert parse_scheduler("eqrl") == {"scheduler": "eqrl", "adapter": ""}
    assert [make_arm(s, "torch").label for s in ("fixed", "dvac", "eqrl", "eqrl:d")] == [
        "fixed:10x8", "dvac:3", "eqrl", "eqrl:d"]
    with pytest.raises(EdgeError, match="--backends 'onnx': not a backend"):  # named before any arm runs
        make_arm("fixed", "onnx")
    assert make_arm("fixed", "my_pkg.mod:factory").backend == "my_pkg.mod:factory"
    cfg = session_config(ProfileConfig(episodes=3), Arm("eqrl:runs/ad", "onnxruntime",
                                                        parse_scheduler("eqrl:runs/ad")), 7, 3)
    assert (cfg.scheduler.kind, cfg.scheduler.eqrl.adapter, cfg.run.seed, cfg.run.episodes,
            cfg.backend.name) == ("eqrl", "runs/ad", 7, 3, "onnxruntime")
    for bad in ("fixed:10", "dvac:x", "random"):
        with pytest.raises(EdgeError, match="scheduler"):
            parse_scheduler(bad)


def test_re_read_arms_name_the_policy_and_the_planners_backend():
    from edge.profiler.profile import arm_of_session

    vla = {"policy": "vla", "scheduler": "fixed", "num_steps": 1, "execute": 1, "backend": "onnxruntime"}
    comet = {**vla, "policy": "comet", "plan_simulations": 0, "plan_backend": "onnxruntime"}
    assert arm_of_session(vla).name == "fixed:1x1 / onnxruntime"
    assert arm_of_session(comet).name == "comet / onnxruntime"  # not the VLA's fixed:1x1 and backend
    assert arm_of_session({**comet, "plan_simulations": 64, "plan_backend": "torch"}).name == "comet:64 / torch"
    old = {k: v for k, v in comet.items() if k != "plan_backend"}  # recorded before the planner had backends
    assert arm_of_session(old).name == "comet / torch"
    assert arm_of_session({**vla, "policy": "expert"}).label == "expert"
    ahead = {**comet, "execution": "async", "execute": 2, "plan_simulations": 8}
    assert arm_of_session(ahead).name == "comet-ahead:8 / onnxruntime"
    assert arm_of_session({**comet, "execution": "sync"}).name == "comet / onnxruntime"
    assert arm_of_session({**ahead, "plan_workspace_mask": True}).name == "comet-ahead+mask:8 / onnxruntime"
    masked = parse_scheduler("comet-ahead+mask:8")
    assert masked["plan_workspace_mask"] is True and masked["execution"] == "async"
    assert parse_scheduler("comet:8")["plan_workspace_mask"] is False and parse_scheduler("comet+mask")["execute"] == 1


def test_comet_ahead_arms_run_async_with_a_decision_every_tick(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    spec = parse_scheduler("comet-ahead:3")
    assert spec["execution"] == "async" and spec["execute"] == 3 and spec["scheduler.fixed.next_query_in_steps"] == 1
    with pytest.raises(EdgeError, match="comet-ahead:N"):
        parse_scheduler("comet-ahead:x")
    out = tmp_path / "p"  # the global --query-mode (sync by default) does not apply to comet arms
    assert main(["profile", "--schedulers", "comet:3,comet-ahead:3", "--backends", "onnxruntime", "--task", "push",
                 "--latency", "constant", "--latency-ms", "20", "--episodes", "1", "--max-steps", "8", "--no-calibrate",
                 "--out", str(out)]) == 0
    sync, ahead = json.loads((out / "summary.json").read_text())["arms"]
    assert (sync["name"], ahead["name"]) == ("comet:3 / onnxruntime", "comet-ahead:3 / onnxruntime")
    for a, mode in ((sync, "sync"), (ahead, "async")):
        meta = json.loads((Path(a["runs"][0]) / "meta.json").read_text())
        assert meta["session"]["execution"] == mode and meta["policy"]["lookahead"] is (mode == "async")
    # a decision's time charged (20 ms): sync holds on every other tick, the lookahead arm moves on all but the first
    assert sync["queries"] == 4 and ahead["queries"] >= 7
    costs = json.loads((out / "summary.json").read_text())["planner_cost"]  # searched after the queued move: counted
    assert costs["comet:3 / onnxruntime"]["ahead"] == 0 and costs["comet-ahead:3 / onnxruntime"]["ahead"] >= 6
    assert costs["comet-ahead:3 / onnxruntime"]["lookahead"] is True
    execution = json.loads((out / "summary.json").read_text())["config"]["execution"]  # not the first arm's alone
    assert execution == "per arm: comet:3 / onnxruntime sync, comet-ahead:3 / onnxruntime async"
    assert f"execution {execution}" in (out / "report.md").read_text()


def test_bad_cli_input_is_a_clear_error(tmp_path, capsys):
    assert main(["profile", "--device", "orin-mega", "--out", str(tmp_path / "x")]) == 2
    assert "orin-mega" in capsys.readouterr().err
    assert main(["profile", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "y")]) == 2
    assert "not found" in capsys.readouterr().err


def test_comet_arms_run_paired_on_both_planner_backends(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    assert parse_scheduler("comet:3") == {"policy": "comet", "scheduler": "fixed", "num_steps": 1, "execute": 1,
                                          "execution": "sync", "plan_simulations": 3, "plan_workspace_mask": False}
    arm = make_arm("comet:3", "onnxruntime")
    assert arm.name == "comet:3 / onnxruntime" and arm.session["plan_backend"] == "onnxruntime"
    with pytest.raises(EdgeError, match="torch or onnxruntime"):
        make_arm("comet", "tensorrt")
    with pytest.raises(EdgeError, match="comet:N"):
        parse_scheduler("comet:x")
    out = tmp_path / "p"
    assert main(["profile", "--schedulers", "comet:3", "--backends", "torch,onnxruntime", "--task", "push",
                 "--episodes", "1", "--max-steps", "6", "--no-calibrate", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    torch_arm, ort_arm = summary["arms"]
    assert (torch_arm["name"], ort_arm["name"]) == ("comet:3 / torch", "comet:3 / onnxruntime")
    for a, backend in ((torch_arm, "torch"), (ort_arm, "onnxruntime")):
        (run,) = a["runs"]
        meta = json.loads((Path(run) / "meta.json").read_text())
        assert meta["session"]["policy"] == "comet" and meta["session"]["plan_backend"] == backend
        assert a["queries"] == 6  # no charged latency: a decision every tick, the same ticks for both
    assert summary["device_table"] == []  # the VLA's device table: no VLA arm
    for a in (torch_arm, ort_arm):  # the planner's own work projected (no tree: --no-calibrate)
        assert a["projected"]["orin-nano"]["ms_per_decision"] > 0 and a["projected"]["orin-nano"]["tree_s"] == 0
        assert a["host_breakdown"] is None
    assert any("not the search tree's bookkeeping (--no-calibrate" in n for n in summary["notes"])
    assert summary["planner_cost"]["comet:3 / onnxruntime"]["simulations"] == 3
    assert summary["grid"] is None  # the shipped K x C grid is the stack task's: no context for push
    again = tmp_path / "q"  # re-read: the same arms by name, whatever --task says
    assert main(["profile", "--runs", str(out / "runs"), "--schedulers", "comet:3", "--backends", "onnxruntime",
                 "--no-calibrate", "--out", str(again)]) == 0
    (arm,) = json.loads((again / "summary.json").read_text())["arms"]
    assert arm["name"] == "comet:3 / onnxruntime" and arm["queries"] == 6
    # runs the records cannot cost: a note naming why, no projection, no crash
    run = Path(ort_arm["runs"][0])
    eps = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    (run / "episodes.jsonl").write_text("".join(json.dumps({k: v for k, v in e.items() if k != "planner_decisions"})
                                                + "\n" for e in eps))
    meta = json.loads((Path(torch_arm["runs"][0]) / "meta.json").read_text())
    meta["policy"]["model_sha256"] = "0" * 64  # another model than the one on this machine
    (Path(torch_arm["runs"][0]) / "meta.json").write_text(json.dumps(meta))
    old = tmp_path / "old"
    assert main(["profile", "--runs", str(out / "runs"), "--no-calibrate", "--out", str(old)]) == 0
    summary = json.loads((old / "summary.json").read_text())
    assert all(a["projected"] == {} for a in summary["arms"]) and summary["planner_cost"] == {}
    notes = " ".join(summary["notes"])
    assert "No device projection for comet:3 / onnxruntime: its episodes were recorded before" in notes
    assert "No device projection for comet:3 / torch: its runs recorded model sha256" in notes


def test_mixed_vla_and_planner_arms_keep_the_vla_arms_projection(profiled, tmp_path, monkeypatch):
    from edge.profiler.profile import profile

    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    vla_out, _ = profiled
    pc = ProfileConfig(task="push", episodes=1, max_steps=4)
    profile(pc, [make_arm("comet:2", "torch")], tmp_path / "c", ["orin-nano"], calibrate=False, progress=False)
    both = tmp_path / "both"  # re-read together: each arm projected from its own network's work
    profile(ProfileConfig(), None, both, ["orin-nano"], runs=[vla_out / "runs", tmp_path / "c" / "runs"],
            calibrate=True, progress=False)
    summary = json.loads((both / "summary.json").read_text())
    arms = {a["name"]: a for a in summary["arms"]}
    assert arms["fixed:2x4 / torch"]["projected"]["orin-nano"]["ms_per_action"] > 0
    assert summary["device_table"] and summary["cost_profile"]  # the VLA's, as before
    planner = arms["comet:2 / torch"]
    nano = planner["projected"]["orin-nano"]
    assert nano["ms_per_action"] > 0 and nano["tree_s"] > 0  # the tree, as timed on this host
    pc_ = summary["planner_cost"]["comet:2 / torch"]
    assert pc_["simulations"] == 2 and pc_["decisions"] >= planner["queries"] and pc_["ahead"] == 0  # sync
    assert pc_["host_parts_ms"]["tree_per_simulation"] > 0 and pc_["period_ms"] == pytest.approx(50.0)
    hb = planner["host_breakdown"]
    assert hb["tree_ms"] > 0 and hb["steps_ms"] > 0 and hb["total_ms"] > 0
    report = (both / "report.md").read_text()
    projected = report.split("## Projected on-device cost")[1].split("\n## ")[0]
    assert "fixed:2x4 / torch" in projected and "comet:2 / torch" in projected
    assert "## Planner decisions on the devices" in report and "search pass" in report


def test_comet_arms_need_an_object_task_and_a_planner_latency_before_anything_runs(tmp_path, capsys):
    # a VLA arm listed first would run before the comet arm's own checks: refused up front, nothing written
    for extra, said in ((["--task", "stack"], "comet arms plan the object tasks"),
                        (["--task", "push", "--latency", "device"], "--latency device: charges the VLA")):
        out = tmp_path / "x"
        assert main(["profile", "--schedulers", "fixed:1x1,comet", *extra, "--out", str(out)]) == 2
        assert said in capsys.readouterr().err and not out.exists()
    with pytest.raises(EdgeError, match="at most 1000 "):
        parse_scheduler("comet:20000")
    assert main(["profile", "--world-model", "wm", "--out", str(tmp_path / "w")]) == 2
    assert "--world-model configures comet arms" in capsys.readouterr().err
    assert main(["profile", "--schedulers", "comet", "--task", "push", "--world-model", str(tmp_path / "none"),
                 "--episodes", "1", "--out", str(tmp_path / "w2")]) == 2
    err = capsys.readouterr().err
    assert "no world model" in err  # the runtime's own refusal, passed through
    assert "add --latency measured" in err  # comet arms charged no decision time by default: said
    assert main(["profile", "--schedulers", "comet", "--task", "push", "--world-model", str(tmp_path / "none"),
                 "--latency", "measured", "--episodes", "1", "--out", str(tmp_path / "w3")]) == 2
    assert "add --latency measured" not in capsys.readouterr().err
    from edge.profiler.profile import latency_text

    assert latency_text({"latency": "constant", "latency_ms": 0.0}) == "latency constant 0.0 ms (none charged)"
    assert latency_text({"latency": "constant", "latency_ms": 100.0}) == "latency constant 100.0 ms"
    assert latency_text({"latency": "measured", "latency_ms": 0.0}).startswith("latency measured (")
    assert main(["run", "--policy", "comet", "--task", "push", "--latency", "per_step",
                 "--out", str(tmp_path / "r")]) == 2
    assert "--latency per_step" in capsys.readouterr().err


def test_planner_arms_take_a_decision_deadline(tmp_path, monkeypatch):
    from edge.profiler.profile import arm_of_session

    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    spec = parse_scheduler("comet-ahead+mask:32@40")
    assert spec["plan_deadline_ms"] == 40.0 and spec["plan_simulations"] == 32 and spec["execution"] == "async"
    assert "plan_deadline_ms" not in parse_scheduler("comet:8")
    assert arm_of_session({**spec, "policy": "comet"}).label == "comet-ahead+mask:32@40"
    exact = {**spec, "policy": "comet", "plan_deadline_ms": 40.00001}  # labels never merge two deadlines
    assert arm_of_session(exact).label == "comet-ahead+mask:32@40.00001"
    assert parse_scheduler("comet@12.5")["plan_deadline_ms"] == 12.5
    assert parse_scheduler("eqrl:runs/adapter@v2") == {"scheduler": "eqrl", "adapter": "runs/adapter@v2"}
    for bad, said in (("fixed:2x8@40", "fixed:KxC"), ("comet:4@x", "comet:N@MS"), ("comet:4@", "comet:N@MS"),
                      ("comet:4@0", "comet:N@MS"), ("comet-ahead+mask:4@nan", "comet-ahead:N@MS")):
        with pytest.raises(EdgeError, match=said):
            parse_scheduler(bad)
    out = tmp_path / "p"  # a deadline no search meets: one simulation per decision, counted as run
    assert main(["profile", "--schedulers", "comet:3@0.001", "--backends", "onnxruntime", "--task", "reach",
                 "--episodes", "1", "--max-steps", "5", "--no-calibrate", "--device", "orin-nano",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    (arm,) = summary["arms"]
    pc = summary["planner_cost"][arm["name"]]
    assert arm["label"] == "comet:3@0.001" and pc["simulations"] == 3
    assert pc["simulations_run"] == pc["decisions"] and pc["passes"] == 2 * pc["decisions"] + pc["ahead"]


def test_runs_of_one_arm_pool_only_distinct_seeds_and_equal_settings(profiled, tmp_path, capsys):
    """Two copies of one run would count each seed twice (and pair it once): refused; so is a run of
    the same label with another setting. The header says when the arms' seeds differ."""
    import shutil

    out, _ = profiled
    run = next(p for p in (out / "runs").iterdir() if p.name.startswith("fixed_2x4"))
    twin = tmp_path / "twin"
    shutil.copytree(run, twin)
    assert main(["profile", "--runs", str(run), str(twin), "--out", str(tmp_path / "p1"), "--no-calibrate"]) == 2
    err = capsys.readouterr().err
    assert "has episode seed" in err and "each seed once" in err and not (tmp_path / "p1" / "summary.json").exists()
    meta = json.loads((twin / "meta.json").read_text())
    meta["session"]["noise_temperature"] = meta["config"]["worker"]["noise_temperature"] = 1.0
    (twin / "meta.json").write_text(json.dumps(meta))
    assert main(["profile", "--runs", str(run), str(twin), "--out", str(tmp_path / "p2"), "--no-calibrate"]) == 2
    assert "differ in noise_temperature (0.5 vs 1.0)" in capsys.readouterr().err
    # a run recorded by an older version (flat session, settings added since missing) on other seeds, with
    # the same model at another path, pools with a new one
    legacy = tmp_path / "legacy"
    shutil.copytree(run, legacy)
    meta = json.loads((legacy / "meta.json").read_text())
    del meta["config"]
    for key in ("plan_deadline_ms", "plan_workspace_mask", "plan_backend", "adapter_noise"):
        meta["session"].pop(key, None)
    meta["session"]["checkpoint"] = "/elsewhere/stack"
    (legacy / "meta.json").write_text(json.dumps(meta))
    eps = [json.loads(x) for x in (legacy / "episodes.jsonl").read_text().splitlines()]
    (legacy / "episodes.jsonl").write_text("".join(json.dumps({**e, "seed": e["seed"] + 100}) + "\n" for e in eps))
    assert main(["profile", "--runs", str(run), str(legacy), "--out", str(tmp_path / "p4"), "--no-calibrate"]) == 0
    assert json.loads((tmp_path / "p4" / "summary.json").read_text())["arms"][0]["episodes"] == 4
    # arms whose seeds differ: said in the report's header
    other = next(p for p in (out / "runs").iterdir() if p.name.startswith("fixed_1x8"))
    shifted = tmp_path / "shifted"
    shutil.copytree(other, shifted)
    lines = (shifted / "episodes.jsonl").read_text().splitlines()
    (shifted / "episodes.jsonl").write_text("".join(json.dumps({**json.loads(x), "seed": json.loads(x)["seed"] + 7})
                                                    + "\n" for x in lines[:1]))
    assert main(["profile", "--runs", str(run), str(shifted), "--out", str(tmp_path / "p3"), "--no-calibrate"]) == 0
    md = (tmp_path / "p3" / "report.md").read_text()
    assert "episodes per arm: fixed:2x4 / torch 2, fixed:1x8 / torch 1 (the arms' seeds differ" in md
