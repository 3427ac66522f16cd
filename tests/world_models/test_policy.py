"""`edge run --policy comet`: the planner in the runtime loop (frames in, timed moves out)."""

import json

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
               model=WorldModelConfig(**{**base.model.__dict__, "num_slots": 4, "slot_dim": 16}))
    Trainer(cfg, d / "comet", progress=False).run()
    return d / "comet"


def test_edge_run_policy_comet_plans_through_the_loop(slot_world_model, tmp_path):
    out = tmp_path / "run"
    rc = main(["run", "--policy", "comet", "--world-model", str(slot_world_model), "--task", "push",
               "--episodes", "1", "--out", str(out), "--plan-simulations", "3", "--set", "max_steps=12"])
    assert rc == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["session"]["execution"] == "sync" and meta["session"]["policy"] == "comet"
    assert meta["policy"]["kind"] == "world_model" and meta["policy"]["simulations"] == 3
    assert meta["policy"]["plan_backend"] == "onnxruntime"  # edge run's default
    queries = [json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()]
    assert len(queries) >= 2 and all(q["K"] == 1 and q["C"] == 1 for q in queries)
    assert all(q["latency_s"] > 0 for q in queries)  # the decision time is the charged latency
    ticks = [json.loads(x) for x in (out / "ticks.jsonl").read_text().splitlines()]
    moves = [t["sent"] for t in ticks if t["kind"] == "act"]
    assert moves and all(abs((m[0] ** 2 + m[1] ** 2) ** 0.5 - 0.02) < 1e-6 and m[4] == 1.0 for m in moves)


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


@pytest.mark.parametrize("argv, needle", [
    (["--policy", "comet", "--task", "push", "--query-mode", "async"], "--query-mode sync"),
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
