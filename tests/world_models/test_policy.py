"""`edge run --policy comet`: the planner in the runtime loop (frames in, timed moves out)."""

import json
from dataclasses import replace

import pytest

from edge.cli import main
from world_models.token_model import WorldModelConfig
from world_models.train import Trainer, tiny


@pytest.fixture(scope="module")
def slot_world_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("wm")
    enc = d / "slots"
    assert main(["train", "slot-encoder", "--out", str(enc), "--preset", "tiny", "--frames", "48",
                 "--eval-frames", "24", "--steps", "2"]) == 0
    base = tiny()
    cfg = tiny(obs="slots", encoder=str(enc), env_steps=8, eval_every=8, checkpoint_every=8,
               env=replace(base.env, task="push3"),  # runs --task push
               model=WorldModelConfig(**{**base.model.__dict__, "num_slots": 4, "slot_dim": 16}))
    Trainer(cfg, d / "comet", progress=False).run()
    return d / "comet"


@pytest.fixture(scope="module")
def reach_world_model(slot_world_model):
    """A tiny reach3 model over the same encoder (reach3 is tiny()'s own task)."""
    base = tiny()
    cfg = tiny(obs="slots", encoder=str(slot_world_model.parent / "slots"), env_steps=8, eval_every=8,
               checkpoint_every=8, model=WorldModelConfig(**{**base.model.__dict__, "num_slots": 4, "slot_dim": 16}))
    Trainer(cfg, slot_world_model.parent / "comet_reach", progress=False).run()
    return slot_world_model.parent / "comet_reach"


def test_edge_run_comet_reach_runs_a_reach3_model_on_the_reach_task(reach_world_model, tmp_path):
    out = tmp_path / "run"
    # longer than the sim task's own 60 ticks: the env runs as long as the loop
    assert main(["run", "--policy", "comet", "--world-model", str(reach_world_model), "--task", "reach",
                 "--episodes", "2", "--out", str(out), "--plan-simulations", "2", "--set", "max_steps=64"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["session"]["task"] == "reach" and meta["session"]["execution"] == "async"
    for ep in [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]:
        assert ep["ticks"] == 64 or ep["success"], ep["ticks"]
        assert ep["planner_decisions"] >= ep["ticks"] - 1  # a decision every tick
    from world_models.policy import WorldModelPolicy

    pol = WorldModelPolicy(reach_world_model, simulations=2)
    assert pol.spec.task == "reach" and pol.spec.env["hold_s"] == 0.0  # reach3 judges every step, no hold


def test_plan_threads_set_torchs_threads_and_the_search_sessions(reach_world_model):
    """edge run's planner runs torch on policy.comet.plan_threads intra-op threads (default 1, as the
    VLA's backend.threads): a thread per core made a decision on a loaded 2-core machine ~5x slower."""
    import torch

    from edge.runtime.config import RuntimeConfig, apply_settings
    from world_models.policy import WorldModelPolicy, comet_policy

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        WorldModelPolicy(reach_world_model, simulations=2)  # no torch_threads: leaves torch's setting
        assert torch.get_num_threads() == 2
        cfg = RuntimeConfig.of(policy="comet", task="reach", world_model=str(reach_world_model), execution="sync",
                               execute=1, plan_simulations=2, plan_workspace_mask=False)
        pol = comet_policy(cfg)
        assert torch.get_num_threads() == 1 and pol.planner.expand.threads == 1
        torch.set_num_threads(2)
        comet_policy(apply_settings(cfg, [("policy.comet.plan_threads", 0)]))  # 0: torch's own count stays
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_comet_in_a_worker_process_keeps_the_planners_counts(reach_world_model, tmp_path):
    """On the real clock the planner decides in a worker process by default (sync); its per-episode
    counts reach the episode records (they were left out before: the parent's copy never decides)."""
    out = tmp_path / "proc"
    assert main(["run", "--policy", "comet", "--world-model", str(reach_world_model), "--task", "reach",
                 "--clock", "real", "--episodes", "2", "--out", str(out), "--plan-simulations", "2",
                 "--set", "max_steps=12"]) == 0
    session = json.loads((out / "meta.json").read_text())["session"]
    assert session["inference"] == "process" and session["execution"] == "sync"

    def started(run):
        return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
                if e["kind"] == "worker_started"]

    assert [e["torch_threads"] for e in started(out)] == [1]  # the planner's plan_threads, recorded
    eps = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    assert len(eps) == 2 and sum(e["planner_decisions"] for e in eps) >= len(queries) > 0
    for ep in eps:  # counted per episode (reset between them), one decision per query at most one ahead
        assert 0 < ep["planner_decisions"] <= sum(q["ep"] == ep["ep"] for q in queries) + 1
        assert "planner_pred_mse" in ep and ep["planner_ahead"] == 0  # sync: every search from the frame
    # a thread when asked, and a resumed run keeps the worker it was started with
    thread = tmp_path / "thread"
    base = ["run", "--policy", "comet", "--world-model", str(reach_world_model), "--task", "reach", "--clock", "real",
            "--plan-simulations", "2", "--set", "max_steps=6", "--out", str(thread)]
    assert main([*base, "--inference", "thread", "--episodes", "1"]) == 0
    assert main([*base, "--episodes", "2", "--resume"]) == 0
    meta = json.loads((thread / "meta.json").read_text())
    assert meta["session"]["inference"] == "thread" and meta["resumed"][0]["session"]["inference"] == "thread"
    assert [e["torch_threads"] for e in started(thread)] == [1, 1]  # the start's and the resume's worker thread
    # a run started before this default (auto: a thread there) resumes as it was started
    before = [*base[:-1], str(tmp_path / "before")]
    assert main([*before, "--episodes", "1", "--set", "worker.mode=auto"]) == 0
    assert main([*before, "--episodes", "2", "--resume"]) == 0
    meta = json.loads((tmp_path / "before" / "meta.json").read_text())
    assert meta["session"]["inference"] == "auto" and meta["resumed"][0]["session"]["inference"] == "auto"


def test_a_world_model_runs_only_the_task_it_learned(slot_world_model, reach_world_model, tmp_path, capsys):
    for model, task, other in ((slot_world_model, "reach", "push"), (reach_world_model, "push", "reach")):
        rc = main(["run", "--policy", "comet", "--world-model", str(model), "--task", task, "--episodes", "1",
                   "--out", str(tmp_path / task), "--plan-simulations", "2"])
        err = capsys.readouterr().err
        assert rc == 2 and "--world-model" in err and f"runs --task {other}" in err, err
        assert not (tmp_path / task / "episodes.jsonl").exists()


def test_edge_run_policy_comet_plans_through_the_loop(slot_world_model, tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
               "--episodes", "1", "--out", str(out), "--plan-simulations", "3", "--set", "max_steps=12",
               "--query-mode", "sync"])
    assert rc == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["session"]["execution"] == "sync" and meta["session"]["policy"] == "comet"
    assert meta["policy"]["frame"].startswith("centre")
    assert meta["policy"]["kind"] == "world_model" and meta["policy"]["simulations"] == 3
    assert meta["policy"]["plan_backend"] == "onnxruntime"  # edge run's default
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    assert len(queries) >= 2 and all(q["K"] == 1 and q["C"] == 1 for q in queries)
    assert all(q["latency_s"] > 0 for q in queries)  # the decision time is the charged latency
    ticks = [json.loads(x) for x in (out / "ticks.jsonl").read_text().splitlines()]
    moves = [t["sent"] for t in ticks if t["kind"] == "act"]
    assert moves and all(abs((m[0] ** 2 + m[1] ** 2) ** 0.5 - 0.02) < 1e-6 and m[4] == 1.0 for m in moves)
    assert meta["policy"]["checkpoint"] == str(slot_world_model)
    text = (out / "summary.txt").read_text()  # what planned, not a VLA's denoising settings
    assert f"world_model, comet over slots, 3 {meta['policy']['search']} simulations per decision, deadline 40 ms" in text
    assert str(slot_world_model) in text and "fixed, one decision per query, 1 action per chunk" in text
    assert "noise T=" not in text and "K=1" not in text


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_plan_backend_decides_what_runs_the_search(backend, slot_world_model, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    rc = main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
               "--episodes", "1", "--out", str(out), "--plan-simulations", "3", "--plan-backend", backend,
               "--set", "max_steps=8"])
    assert rc == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["policy"]["plan_backend"] == backend and meta["session"]["plan_backend"] == backend
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    assert queries and all(q["backend"] == backend for q in queries)
    exports = list((tmp_path / "cache" / "onnx").glob("wm-*")) if (tmp_path / "cache" / "onnx").is_dir() else []
    if backend == "torch":
        assert not exports
    else:
        (export,) = exports  # exported once, into the edge cache
        assert json.loads((export / "metadata.json").read_text())["parity_max_abs"] <= 1e-4


def test_set_executed_records_another_move(slot_world_model):
    import numpy as np

    from edge.errors import EdgeError
    from world_models.policy import WorldModelPolicy

    pol = WorldModelPolicy(slot_world_model, simulations=2)
    with pytest.raises(EdgeError, match="before the first decision"):
        pol.set_executed(0)
    frame = {"front": np.zeros((*pol.spec.image_hw, 3), np.uint8)}
    a = pol.encode(frame)
    pol.set_executed((a + 1) % 8)
    with pytest.raises(EdgeError, match=r"set_executed\(8\)"):
        pol.set_executed(8)
    pol.encode(frame)
    assert pol.hist.actions[0, -2] == (a + 1) % 8  # the history holds the move set, not the decision
    assert len(pol.search_ms) == len(pol.decision_ms) == 2 and min(pol.search_ms) > 0
    with pytest.raises(EdgeError, match="--plan-backend 'gpu'"):
        WorldModelPolicy(slot_world_model, backend="gpu")
    with pytest.raises(EdgeError, match="--plan-backend 'gpu'"):  # checked before anything is loaded
        WorldModelPolicy(slot_world_model.parent / "missing", backend="gpu")


def test_edge_run_comet_async_moves_every_tick_searching_from_after_the_queued_move(slot_world_model, tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
               "--episodes", "1", "--out", str(out), "--plan-simulations", "3", "--set", "max_steps=16",
               "--latency", "constant", "--latency-ms", "20"])  # charged as a decision under the period
    assert rc == 0  # async is the planner's default on the virtual clock
    meta = json.loads((out / "meta.json").read_text())
    assert meta["session"]["execution"] == "async" and meta["policy"]["lookahead"] is True
    assert meta["session"]["execute"] == 3
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    ticks = [json.loads(x) for x in (out / "ticks.jsonl").read_text().splitlines()]
    (ep,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    # a decision per tick (its time charged, under the 50 ms period): after the first, every tick moves
    assert len(queries) >= 15 and ep["starved"] <= 1 and ep["executed"] >= 15
    extra = ep.get("extra") or ep
    # the episode's last decision may still be in flight when it ends (not merged, no query record)
    assert extra["planner_decisions"] in (len(queries), len(queries) + 1)
    assert extra["planner_ahead"] == extra["planner_decisions"] - 1  # all but the first: from after a move
    assert extra["planner_context_resets"] == 0 and extra["planner_pred_n"] >= 13
    assert extra["planner_pred_mse"] > 0 and extra["planner_still_mse"] > 0
    # each decision's move runs on the tick after the frame it searched from (its first action, the
    # move queued for the frame's own tick, had run by the time it arrived)
    start = {q["query_id"]: q["start_slot"] for q in queries}
    acted = [t for t in ticks if t["raw_action"] is not None]
    assert len(acted) >= 15 and all(t["slot"] == start[t["query_id"]] + 1 for t in acted[1:])


def test_comet_resume_keeps_the_runs_mode_and_refuses_runs_that_saw_another_frame(slot_world_model, tmp_path,
                                                                                   capsys):
    out = tmp_path / "run"
    base = ["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
            "--plan-simulations", "2", "--set", "max_steps=6", "--out", str(out)]
    assert main([*base, "--episodes", "1", "--query-mode", "sync"]) == 0
    assert main([*base, "--episodes", "2", "--resume"]) == 0  # no --query-mode: the run's own (sync)
    eps = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(eps) == 2 and all(e["planner_ahead"] == 0 for e in eps)
    meta = json.loads((out / "meta.json").read_text())
    meta["policy"].pop("frame")  # as recorded before the planner cut the camera frame to its trained view
    (out / "meta.json").write_text(json.dumps(meta))
    assert main([*base, "--episodes", "3", "--resume"]) == 2
    assert "camera frame was not recorded" in capsys.readouterr().err


def test_comet_defaults_to_sync_where_async_cannot_run(slot_world_model, tmp_path, capsys):
    out = tmp_path / "run"
    base = ["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
            "--episodes", "1", "--plan-simulations", "2", "--set", "max_steps=4"]
    assert main([*base, "--out", str(out), "--inference", "thread"]) == 0
    assert json.loads((out / "meta.json").read_text())["session"]["execution"] == "sync"
    # a weighted seam cannot join the planner's moves in either mode (sync: the queue is empty)
    assert main([*base, "--out", str(tmp_path / "w"), "--seam", "weighted"]) == 2
    assert "--seam weighted" in capsys.readouterr().err and not (tmp_path / "w").exists()


def test_encode_query_history_follows_what_the_loop_executed(slot_world_model):
    import numpy as np

    from world_models.policy import WorldModelPolicy

    pol = WorldModelPolicy(slot_world_model, simulations=2, lookahead=True)
    assert pol.chunk_len == 3 and pol.spec.execution == "async"
    moves = [pol.sample(a, None, 1)[-1] for a in range(8)]
    assert [pol.move_index(m) for m in moves] == list(range(8))
    assert pol.move_index(np.zeros(5)) == -1 and pol.move_index(np.zeros(3)) == -1
    turned = np.array([0.012, 0.003, 0.0, 0.0, 1.0], np.float32)  # shortened and turned by the safety layer
    assert pol.command_move(turned) == (0, False) and pol.command_move(moves[6]) == (6, True)
    assert pol.command_move(np.array([0, 0, 0.01, 0, 1.0])) == (-1, False)  # no xy motion: a hold
    rng = np.random.default_rng(0)
    frames = [{"front": rng.integers(0, 255, (*pol.spec.image_hw, 3), dtype=np.uint8)} for _ in range(7)]
    pol.reset()
    a0, after = pol.encode_query(frames[0], np.zeros((0, 5), np.float32), None, 1)  # the episode's first
    assert after is None
    chunk = pol.sample((a0, after), None, 1)
    assert chunk.shape == (3, 5) and [pol.move_index(c) for c in chunk] == [a0] * 3
    a1, after = pol.encode_query(frames[1], moves[3][None], (moves[5],), 1)  # one move ran; move 3 queued
    assert after == 3 and pol.hist.actions[0, -2] == 5
    assert [pol.move_index(c) for c in pol.sample((a1, after), None, 1)] == [3, a1, a1]
    st = pol.episode_stats()
    assert st["planner_ahead"] == 1 and st["planner_pred_n"] == 1 and st["planner_pred_mse"] > 0
    _, after = pol.encode_query(frames[2], moves[3][None], (moves[3],), 0)  # no delay: from the frame
    assert after is None and pol.episode_stats()["planner_ahead"] == 1
    depth = int(pol.hist.valid[0].sum())
    pol.encode_query(frames[3], None, (None,), 1)  # a hold: the same step, a later frame
    assert int(pol.hist.valid[0].sum()) == depth and pol.episode_stats()["planner_held"] == 1
    pol.encode_query(frames[4], None, (turned,), 1)  # a changed move: the nearest, counted
    assert pol.hist.actions[0, -2] == 0 and pol.episode_stats()["planner_modified"] == 1
    pol.encode_query(frames[5], None, (moves[1], moves[2]), 1)  # two moves, one frame: restart the context
    assert int(pol.hist.valid[0].sum()) == 1
    pol.encode_query(frames[6], np.ones((1, 5), np.float32), None, 1)  # unknown history; not a planner move
    st = pol.episode_stats(reset=True)
    assert st["planner_context_resets"] == 2 and st["planner_foreign_queued"] == 1
    assert st["planner_decisions"] == 7 and pol.episode_stats()["planner_decisions"] == 0


def test_comet_async_late_decisions_still_move_and_threads_are_refused(slot_world_model, tmp_path, capsys):
    out = tmp_path / "late"  # each decision charged 70 ms: over one 50 ms period, under two
    assert main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
                 "--episodes", "1", "--out", str(out), "--plan-simulations", "2", "--query-mode", "async",
                 "--latency", "constant", "--latency-ms", "70", "--set", "max_steps=16"]) == 0
    (ep,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    # a decision every other tick (one at a time), each still delivering its move: the arm moves on
    # every other tick, as in sync; without the chunk's third action every chunk would expire
    assert len(queries) >= 7 and not any(q["expired"] for q in queries) and ep["executed"] >= 7
    assert ep["planner_ahead"] == ep["planner_decisions"] - 1
    for extra, said in ((["--inference", "thread"], "--inference inline"), (["--clock", "real"], "--inference inline"),
                        (["--seam", "weighted"], "--seam weighted")):
        rc = main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
                   "--episodes", "1", "--out", str(tmp_path / "t"), "--query-mode", "async", *extra])
        assert rc == 2 and said in capsys.readouterr().err


def test_the_runtime_camera_gives_the_model_the_frames_it_was_trained_on(slot_world_model):
    import numpy as np

    import sim
    from edge.errors import EdgeError
    from world_models.object_env import ObjectTaskEnv
    from world_models.policy import WorldModelPolicy

    pol = WorldModelPolicy(slot_world_model, simulations=2)
    assert pol.spec.image_hw == (pol.render_side,) * 2 and pol.render_side > pol.view_side  # crop > 1
    env = sim.make_env("push", image_size=pol.spec.image_hw[0], **pol.spec.env)  # as the session builds it
    oe = ObjectTaskEnv(pol.cfg.env)  # as the model was trained
    try:
        for seed in (3, 11):
            obs, _ = env.reset(seed=seed)
            train, _ = oe.reset(seed=seed)
            np.testing.assert_array_equal(pol.view({"front": obs["front"]}), train["frame"])
            np.testing.assert_array_equal(pol.view({"front": train["frame"]}), train["frame"])  # already the view
        for a in (0, 3, 3, 7, 4, 1):  # the same moves move the arm the same way in both
            env.step(pol.sample(a, None, 1)[0])
            oe.step(a)
            np.testing.assert_array_equal(env.unwrapped.tcp_pose()[0], oe.env.tcp_pose()[0])
    finally:
        env.close()
        oe.close()
    with pytest.raises(EdgeError, match="centre"):
        pol.view({"front": np.zeros((50, 50, 3), np.uint8)})


def test_lookahead_searches_from_the_models_prediction_after_the_move(slot_world_model):
    import numpy as np
    import torch

    from world_models.policy import WorldModelPolicy

    pol = WorldModelPolicy(slot_world_model, simulations=2)
    pol.encode({"front": np.full((*pol.spec.image_hw, 3), 90, np.uint8)})
    planner, hist = pol.planner, pol.hist
    root = planner.root(hist.states, hist.actions, hist.valid)
    ahead = planner.advance(root, np.array([4]))
    # the same as appending the model's predicted next state for move 4 to the window and a new root
    z = planner.to_z(hist.states)
    pred = root.embedding["child_z"][:, 4]
    a = torch.as_tensor(hist.actions).clone()
    a[:, -1] = 4
    z2 = torch.cat([z[:, 1:], pred.unsqueeze(1)], 1)
    a2 = torch.cat([a[:, 1:], torch.zeros_like(a[:, :1])], 1)
    v2 = torch.cat([torch.as_tensor(hist.valid)[:, 1:], torch.ones(1, 1, dtype=torch.bool)], 1)
    prior, value, _ = planner._expand(z2, a2, v2)
    np.testing.assert_allclose(ahead.prior_logits, prior, atol=1e-6)
    np.testing.assert_allclose(ahead.value, value, atol=1e-6)
    out = planner.plan(hist, np.random.default_rng(0), explore=False, after=np.array([4]))
    assert planner.last_root is not None and out.action.shape == (1,)
    np.testing.assert_allclose(planner.last_root.prior_logits, root.prior_logits)  # the real root kept


@pytest.mark.parametrize("argv, needle", [
    (["--plan-backend", "onnxruntime"], "--policy comet"),
    (["--policy", "comet", "--task", "stack"], "--task push"),
    (["--world-model", "x"], "--policy comet"),
    (["--policy", "comet", "--task", "push", "--world-model", "/nonexistent/wm"], "no world model"),
])
def test_bad_comet_flags_exit_2(argv, needle, tmp_path, capsys):
    rc = main(["run", *argv, "--out", str(tmp_path / "r"), "--episodes", "1"])
    assert rc == 2
    assert needle in capsys.readouterr().err


def test_slot_diagnostics_assign_slots_to_entities(slot_world_model):
    from world_models import diagnostics as dg
    from world_models.policy import load_world_model
    from world_models.train import load_encoder

    cfg, model, _ = load_world_model(slot_world_model)
    enc = load_encoder(cfg.encoder)
    ro = dg._rollouts(cfg, model, enc, 1, 950_000_000)
    owners = ro[0]["owners"]
    assert len(owners) == len(ro[0]["states"]) and all(len(o) == cfg.model.num_slots for o in owners)
    assert all(x in (None, "robot", "target", "distractor") for o in owners for x in o)
    rel = dg.relevance_by_entity(cfg, model, enc, rollouts=ro)
    assert rel["goal"] is None  # the goal square is part of the table in the segmentation


def test_encoder_tracking_rounds_reach_training_and_the_runtime(slot_world_model, tmp_path):
    from world_models.policy import WorldModelPolicy

    enc = str(slot_world_model.parent / "slots")
    base = tiny()
    cfg = tiny(obs="slots", encoder=enc, encoder_carry_iters=1, env_steps=8, eval_every=8, checkpoint_every=8,
               model=WorldModelConfig(**{**base.model.__dict__, "num_slots": 4, "slot_dim": 16}))
    trainer = Trainer(cfg, tmp_path / "wm", progress=False)
    assert trainer.encoder.cfg.tracking_iters == 1 and trainer.encoder.cfg.iters == 2  # tiny: 2 rounds
    trainer.run()
    policy = WorldModelPolicy(tmp_path / "wm")
    assert policy.observer.encoder.cfg.tracking_iters == 1
    assert Trainer(tiny(obs="slots", encoder=enc, model=cfg.model), tmp_path / "wm0",
                   progress=False).encoder.cfg.tracking_iters == 2  # 0: the encoder's own
    with pytest.raises(Exception, match="encoder_carry_iters=11"):
        tiny(encoder_carry_iters=11)


def test_a_world_model_refuses_another_slot_encoder_than_it_was_trained_with(tmp_path):
    import json
    import shutil

    from edge.errors import EdgeError
    from world_models.policy import SHIPPED, WorldModelPolicy

    wm = tmp_path / "wm"
    shutil.copytree(SHIPPED, wm)
    WorldModelPolicy(wm)  # as shipped: its encoder matches
    m = json.loads((wm / "manifest.json").read_text())
    m["files"]["encoder"] = "0" * 64
    (wm / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(EdgeError, match="not the slot encoder"):
        WorldModelPolicy(wm)
    WorldModelPolicy(wm, verify=False)  # the caller may opt out, as for the weights


def test_workspace_mask_keeps_the_search_off_moves_the_box_would_cut(slot_world_model):
    """Moves 0..7 point at k·45°; at the box's walls the ones cut to under half their length are not
    searched (zero root visits, never chosen); diagonals along a wall keep 1.41 of 2 cm and stay."""
    import numpy as np

    from edge.errors import EdgeError
    from edge.training.vla.synthetic import PROPRIO_LAYOUT
    from world_models.policy import WorldModelPolicy

    box = ((0.25, -0.35, 0.0), (0.80, 0.35, 0.45))
    pol = WorldModelPolicy(slot_world_model, simulations=8, lookahead=True, workspace=box)
    assert pol.describe()["workspace_mask"] == [[0.25, -0.35], [0.8, 0.35]]
    ix = PROPRIO_LAYOUT.index("tcp_x_m")

    def obs(x, y):
        p = np.zeros(len(PROPRIO_LAYOUT), np.float32)
        p[ix : ix + 2] = x, y
        return {"front": np.full((*pol.spec.image_hw, 3), 90, np.uint8), "proprio": p}

    assert pol._invalid_moves(obs(0.5, 0.0)) is None  # in the middle: nothing masked
    assert np.flatnonzero(pol._invalid_moves(obs(0.5, 0.349))).tolist() == [2]  # +y wall
    assert np.flatnonzero(pol._invalid_moves(obs(0.799, 0.349))).tolist() == [0, 1, 2]  # corner
    assert pol._invalid_moves(obs(0.5, 0.335)) is None  # +y keeps 1.5 of its 2 cm
    assert np.flatnonzero(pol._invalid_moves(obs(0.5, 0.335), (0.0, 0.02))).tolist() == [2]  # not after a queued +y
    pol.reset()
    pol.encode_query(obs(0.5, 0.335), None, None, 0)
    foreign = np.array([[0.0, 0.015, 0.0, 0.0, 1.0]], np.float32)  # queued, not one of the planner's moves
    pol.encode_query(obs(0.5, 0.335), foreign, (foreign[0],), 1)
    assert pol.last_search.visit_counts[0, 2] == 0 and pol.episode_stats()["planner_foreign_queued"] == 1
    pol.reset()
    pol.episode_stats(reset=True)
    for _ in range(3):
        a, _ = pol.encode_query(obs(0.799, 0.349), None, None, 0)
        assert a not in (0, 1, 2) and pol.last_search.visit_counts[0, :3].sum() == 0
    ws, pol.workspace = pol.workspace, None  # the same search unmasked visits them
    pol.encode_query(obs(0.799, 0.349), None, None, 0)
    assert pol.last_search.visit_counts[0, :3].sum() > 0
    pol.workspace = ws
    st = pol.episode_stats()
    assert st["planner_masked"] == 3 and st["planner_masked_moves"] == 9
    with pytest.raises(EdgeError, match="proprio"):
        pol.encode_query({"front": obs(0.5, 0.0)["front"]}, None, None, 0)
    with pytest.raises(EdgeError, match="workspace"):
        WorldModelPolicy(slot_world_model, simulations=2, workspace=((0.0, 0.0), (0.01, 1.0)))
    assert "planner_masked" not in WorldModelPolicy(slot_world_model, simulations=2).episode_stats()


def test_edge_run_comet_workspace_mask_is_recorded(slot_world_model, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
                 "--episodes", "1", "--out", str(out), "--plan-simulations", "3", "--set", "max_steps=12",
                 "--latency", "constant", "--latency-ms", "20", "--plan-workspace-mask", "on"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["session"]["plan_workspace_mask"] is True
    assert meta["policy"]["workspace_mask"] == [[0.25, -0.35], [0.8, 0.35]]  # the panda spec's box
    (ep,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert isinstance(ep["planner_masked"], int) and ep["planner_masked_moves"] >= ep["planner_masked"]
    # the default is on, and a run resumes as it was started: one recorded before the mask existed, off
    base = ["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
            "--plan-simulations", "2", "--set", "max_steps=4", "--latency", "constant", "--latency-ms", "20"]
    assert main([*base, "--episodes", "1", "--out", str(tmp_path / "d")]) == 0
    assert json.loads((tmp_path / "d" / "meta.json").read_text())["config"]["policy"]["comet"]["workspace_mask"] is True
    assert main([*base, "--episodes", "1", "--plan-workspace-mask", "off", "--out", str(tmp_path / "old")]) == 0
    meta = json.loads((tmp_path / "old" / "meta.json").read_text())
    del meta["config"]["policy"]["comet"]["workspace_mask"], meta["session"]["plan_workspace_mask"]
    (tmp_path / "old" / "meta.json").write_text(json.dumps(meta))
    assert main([*base, "--episodes", "2", "--out", str(tmp_path / "old"), "--resume"]) == 0
    eps = [json.loads(x) for x in (tmp_path / "old" / "episodes.jsonl").read_text().splitlines()]
    assert len(eps) == 2 and not any("planner_masked" in e for e in eps)
    capsys.readouterr()
    assert main(["run", "--policy", "expert", "--episodes", "1", "--plan-workspace-mask", "on",
                 "--out", str(tmp_path / "x")]) == 2
    assert "--plan-workspace-mask configures --policy comet" in capsys.readouterr().err


def test_workspace_mask_in_the_loop_keeps_moves_off_the_walls(slot_world_model, tmp_path):
    """The loop's own observations (proprio from the simulated arm) drive the mask: in a 6 cm box
    around the push start, decisions are masked and no executed move points into a wall it is at."""
    from dataclasses import replace

    import numpy as np

    from edge.robot_spec import load_robot_spec
    from edge.runtime.config import RuntimeConfig
    from edge.runtime.session import run_session
    from world_models.policy import comet_policy, wall_cut

    spec = replace(load_robot_spec("panda"), workspace_min_m=(0.30, -0.03, 0.0), workspace_max_m=(0.36, 0.03, 0.45))
    cfg = RuntimeConfig.of(policy="comet", task="push", world_model=str(slot_world_model), plan_simulations=3,
                           execution="async", num_steps=1, execute=3, latency="constant", latency_ms=20.0,
                           episodes=1, max_steps=16, plan_workspace_mask=True,
                           **{"scheduler.fixed.next_query_in_steps": 1})
    res = run_session(cfg, tmp_path / "run", policy=comet_policy(cfg, spec), robot=spec, progress=False)
    (ep,) = res.episodes
    assert ep["planner_masked"] >= 3 and ep["planner_masked_moves"] >= ep["planner_masked"]
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["robot"]["workspace_m"] == [[0.30, -0.03, 0.0], [0.36, 0.03, 0.45]]
    ticks = [json.loads(x) for x in (tmp_path / "run" / "ticks.jsonl").read_text().splitlines()]
    lo, hi = np.array([0.30, -0.03]), np.array([0.36, 0.03])
    acted = [t for t in ticks if t["kind"] == "act"]
    into = [wall_cut(np.clip(t["ee_pos_m"][:2], lo, hi), np.array([t["raw_action"][:2]]), lo, hi)[0] for t in acted]
    assert len(acted) >= 12 and sum(into) <= 2  # judged a tick after the frame the move was decided on


def test_the_planner_reads_the_tcp_where_the_sim_puts_it():
    """The mask reads tcp_x_m / tcp_y_m by the runtime's proprio layout; the sim's is the same."""
    sim_env = pytest.importorskip("sim.env")
    from edge.training.vla.synthetic import PROPRIO_LAYOUT

    assert tuple(sim_env.PROPRIO_LAYOUT) == tuple(PROPRIO_LAYOUT)


def test_a_decision_deadline_cuts_the_search_and_is_counted(tmp_path, monkeypatch):
    import numpy as np

    from edge.errors import EdgeError
    from world_models.policy import SHIPPED_BY_TASK, WorldModelPolicy

    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    frames = np.random.default_rng(0).integers(0, 255, (4, 64, 64, 3), dtype=np.uint8)
    reach = SHIPPED_BY_TASK["reach"]

    def decide(pol):
        prev, moves = None, []
        for f in frames:
            cmd = None if prev is None else pol.sample(prev, None, 1)[-1]
            prev, _ = pol.encode_query({"front": f}, None, None if cmd is None else (cmd,))
            moves.append(prev)
        return {**pol.episode_stats(reset=True), "moves": moves}

    free = decide(WorldModelPolicy(reach, simulations=8))
    assert free["planner_decisions"] == 4 and free["planner_simulations"] == 32 and free["planner_cut"] == 0
    # a deadline already past when the search starts: one simulation each (the first always runs)
    cut = WorldModelPolicy(reach, simulations=8, deadline_ms=1e-6)
    assert cut.describe()["deadline_ms"] == 1e-6
    st = decide(cut)
    assert st["planner_simulations"] == 4 and st["planner_cut"] == 4 and cut.last_search.simulations == 1
    roomy = decide(WorldModelPolicy(reach, simulations=8, deadline_ms=60000))  # never reached: the same searches
    assert roomy["planner_simulations"] == 32 and roomy["planner_cut"] == 0 and roomy["moves"] == free["moves"]
    for bad in (-1.0, float("nan")):
        with pytest.raises(EdgeError, match="--plan-deadline-ms"):
            WorldModelPolicy(reach, simulations=8, deadline_ms=bad)


def test_a_deadline_counts_from_the_request_when_its_time_is_known(tmp_path, monkeypatch):
    import time

    import numpy as np

    from world_models.policy import SHIPPED_BY_TASK, WorldModelPolicy

    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    f = np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    pol = WorldModelPolicy(SHIPPED_BY_TASK["reach"], simulations=8, deadline_ms=60000)
    pol.encode_query({"front": f}, None, None, 0)  # no request time: the deadline counts from the call
    assert pol.last_search.simulations == 8 and pol.wait_ms == []
    assert "planner_wait_ms" not in pol.episode_stats(reset=True)
    pol.reset()
    pol.encode_query({"front": f}, None, None, 0, t_request_s=time.monotonic())  # asked just now: room
    assert pol.last_search.simulations == 8 and 0 <= pol.wait_ms[-1] < 1000
    pol.reset()
    pol.encode_query({"front": f}, None, None, 0, t_request_s=time.monotonic() - 61.0)  # 61 s in a queue
    assert pol.last_search.simulations == 1 and pol.wait_ms[-1] >= 61000  # past the deadline: one simulation
    st = pol.episode_stats()
    assert st["planner_cut"] == 1 and st["planner_wait_ms_max"] >= 61000
    assert st["planner_wait_ms"] == pytest.approx(sum(pol.wait_ms) / 2)


def test_plan_deadline_flag_is_checked_and_recorded(tmp_path, capsys):
    assert main(["run", "--plan-deadline-ms", "20", "--out", str(tmp_path / "a")]) == 2
    assert "--plan-deadline-ms configures --policy comet" in capsys.readouterr().err
    assert main(["run", "--policy", "comet", "--task", "reach", "--plan-deadline-ms", "-5",
                 "--out", str(tmp_path / "b")]) == 2
    assert "--plan-deadline-ms -5: must be in 0..60000" in capsys.readouterr().err
    out = tmp_path / "c"
    assert main(["run", "--policy", "comet", "--task", "reach", "--plan-deadline-ms", "25", "--episodes", "1",
                 "--set", "max_steps=4", "--out", str(out)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["session"]["plan_deadline_ms"] == 25.0 and meta["policy"]["deadline_ms"] == 25.0
    (ep,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert ep["planner_simulations"] <= 16 * ep["planner_decisions"] and "planner_cut" in ep
    assert main(["run", "--policy", "comet", "--task", "reach", "--plan-deadline-ms", "30", "--episodes", "2",
                 "--set", "max_steps=4", "--out", str(out), "--resume"]) == 2  # another deadline: not mixed
    assert "plan_deadline_ms" in capsys.readouterr().err
    assert main(["run", "--policy", "comet", "--task", "reach", "--episodes", "2", "--set", "max_steps=4",
                 "--out", str(out), "--resume"]) == 0  # no flag: as the run was started
    assert json.loads((out / "meta.json").read_text())["resumed"][-1]["session"]["plan_deadline_ms"] == 25.0


def test_a_deadline_reaches_a_planner_in_a_worker_process(tmp_path):
    out = tmp_path / "p"  # a deadline no search meets: every decision runs its one simulation
    assert main(["run", "--policy", "comet", "--task", "reach", "--clock", "real", "--query-mode", "sync",
                 "--inference", "process", "--plan-deadline-ms", "0.000001", "--episodes", "1",
                 "--set", "max_steps=6", "--out", str(out)]) == 0
    (ep,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert ep["planner_decisions"] >= 2
    assert ep["planner_simulations"] == ep["planner_decisions"] == ep["planner_cut"]
    assert 0 <= ep["planner_wait_ms"] <= ep["planner_wait_ms_max"] < 1000  # the handover, counted in the deadline


def test_edge_run_comet_decides_under_a_40_ms_deadline_by_default(tmp_path):
    from edge.commands.run import PLANNER_DEADLINE_MS

    assert PLANNER_DEADLINE_MS == 40.0
    for extra, want in (([], 40.0), (["--plan-deadline-ms", "0"], 0.0)):
        out = tmp_path / f"d{want:g}"
        assert main(["run", "--policy", "comet", "--task", "reach", "--episodes", "1", "--set", "max_steps=3",
                     *extra, "--out", str(out)]) == 0
        meta = json.loads((out / "meta.json").read_text())
        assert meta["session"]["plan_deadline_ms"] == want and meta["policy"]["deadline_ms"] == (want or None)
        # resumed without the flag: the run's own deadline, not the default
        assert main(["run", "--policy", "comet", "--task", "reach", "--episodes", "2", "--set", "max_steps=3",
                     "--out", str(out), "--resume"]) == 0
        assert json.loads((out / "meta.json").read_text())["resumed"][-1]["session"]["plan_deadline_ms"] == want


@pytest.mark.parametrize("extra, needle", [
    (["--world-model", "{vla}"], "not a world model"),  # a VLA checkpoint
    (["--world-model", "{corrupt}"], "cannot be read as a world model"),
    (["--world-model", "/no/such/wm"], "--world-model /no/such/wm: no world model at /no/such/wm"),
    (["--plan-simulations", "1000000"], "--plan-simulations 1000000: must be in 1..1000"),
    (["--scheduler", "eqrl"], "--scheduler eqrl: --policy comet decides every move itself"),
    (["--config", "{default_yaml}"], "--policy comet, but --config {default_yaml} sets policy.name=vla"),
])
def test_a_bad_planner_setup_is_a_clear_error(extra, needle, tmp_path, capsys):
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "model.pt").write_bytes(b"")
    from edge.digest import sha256_file

    (corrupt / "manifest.json").write_text(json.dumps({"files": {"model.pt": sha256_file(corrupt / "model.pt")}}))
    from edge.resources import config_dir
    from edge.runtime.config import DEFAULT_CHECKPOINT

    fill = {"{corrupt}": str(corrupt), "{default_yaml}": str(config_dir("run") / "default.yaml"),
            "{vla}": str(DEFAULT_CHECKPOINT)}
    extra = [fill.get(x, x) for x in extra]
    for k, v in fill.items():
        needle = needle.replace(k, v)
    assert main(["run", "--policy", "comet", "--task", "reach", *extra, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert "--world-model" in err or "--world-model" not in extra


def test_the_planner_is_selected_by_its_flag_not_by_a_setting(tmp_path, capsys):
    assert main(["run", "--task", "reach", "--set", "policy.name=comet", "--out", str(tmp_path / "r")]) == 2
    assert "policy.name=comet from --set: select the world-model planner with --policy comet" in capsys.readouterr().err
    assert main(["run", "--policy", "comet", "--task", "reach", "--set", "task=push", "--out", str(tmp_path / "s")]) == 2
    assert "--task reach, but --set sets scene.task=push" in capsys.readouterr().err


def test_only_flags_given_on_the_command_line_are_protected_from_a_config():
    import argparse

    from edge.commands.run import _check_config_keeps_flags
    from edge.errors import EdgeError
    from edge.runtime.config import RuntimeConfig, load_runtime_config

    flags = RuntimeConfig.of(policy="vla")  # `--policy auto` resolved to the VLA: not asked for
    args = argparse.Namespace(config=None, set=["policy.name=expert"], given=set(),
                              asked={"policy": "auto", "task": "stack"})
    _check_config_keeps_flags(args, flags, load_runtime_config(flags, None, args.set))  # fine
    args.given, args.asked["policy"] = {"policy"}, "vla"  # `--policy vla` given: the setting would undo it
    with pytest.raises(EdgeError, match="--policy vla, but --set sets policy.name=expert"):
        _check_config_keeps_flags(args, flags, load_runtime_config(flags, None, args.set))
    args.set = ["policy.name=vla", "task=stack"]  # the same values: nothing undone
    _check_config_keeps_flags(args, flags, load_runtime_config(flags, None, args.set))


def test_a_real_clock_planner_run_from_before_the_request_deadline_does_not_resume(tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["run", "--policy", "comet", "--task", "reach", "--clock", "real", "--query-mode", "sync",
            "--episodes", "1", "--set", "max_steps=3", "--out", str(out)]
    assert main(argv) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["policy"]["deadline_counts"].startswith("from the request")
    del meta["policy"]["deadline_counts"]  # as a run written before c6e426c
    (out / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main([*argv[:-4], "--episodes", "2", "--set", "max_steps=3", "--out", str(out), "--resume"]) == 2
    assert "deadline counted from the worker's start" in capsys.readouterr().err


def test_edge_run_comet_drives_the_bridge_arm_and_disarms(reach_world_model, tmp_path, capsys):
    """`edge run --arm bridge --policy comet`: the planner decides in a worker process from the camera's
    frames and its moves reach the emulated MCU over the serial protocol; at the end the arm is disarmed
    under control — the driver closes before the worker process stops, whose shutdown outlasted the MCU's
    200 ms watchdog (the MCU e-stopped the arm after every run before)."""
    from firmware_bridge.wire_constants import Mode
    from tests.arm_rig import panda_mcu, settled_mode, video

    cam = video(tmp_path / "cam.avi", 300)
    out = tmp_path / "run"
    with panda_mcu() as rig:
        code = main(["run", "--arm", "bridge", "--policy", "comet", "--task", "reach", "--world-model",
                     str(reach_world_model), "--plan-simulations", "2", "--port", rig.path, "--camera", f"front={cam}",
                     "--duration", "1.5", "--yes", "--no-progress", "--out", str(out)])
        mode = settled_mode(rig)
        with rig.lock:
            applied, log = rig.mcu.counters.commands_applied, [t for _, t in rig.mcu.events]
    assert code == 0, capsys.readouterr()
    assert mode is Mode.DISARMED and not any("WATCHDOG" in t for t in log), log
    meta = json.loads((out / "meta.json").read_text())
    session = meta["session"]
    assert session["policy"].startswith("comet") and session["inference"] == "process"
    assert session["execution"] == "sync" and meta["arm"]["cameras"] == {"front": str(cam)}
    res = json.loads((out / "arm_result.json").read_text())
    assert res["stop"] == "duration" and "close_error" not in res and res["driver_state"] == "disconnected"
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    ticks = [json.loads(x) for x in (out / "ticks.jsonl").read_text().splitlines()]
    assert len(queries) >= 5 and all(q["K"] == 1 and q["C"] == 1 for q in queries)  # one move per decision
    assert sum(t["kind"] == "act" for t in ticks) >= 5 and applied >= 5  # its moves reached the MCU
    kinds = [json.loads(x)["kind"] for x in (out / "events.jsonl").read_text().splitlines()]
    assert "driver_disarmed" in kinds and "driver_fault" not in kinds and "driver_safe_stop" not in kinds
