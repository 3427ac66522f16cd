"""A tiny world-model + MCTS training run: it runs, writes its artefacts, resumes, refuses mixing."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from edge.config import ConfigError
from edge.errors import EdgeError

from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
from world_models.policy import WorldModelPolicy, load_world_model
from world_models.train import (
    CURVE_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    STATE_FILE,
    Trainer,
    tiny,
)
from tests._damage import flip_a_stored_byte


def test_tiny_train_then_resume_continues(tmp_path):
    out = tmp_path / "wm"
    m1 = Trainer(tiny(env_steps=12), out, command="edge train world-model --preset tiny", progress=False).run()
    assert m1["env_steps"] == 12 and m1["updates"] > 0
    for f in (STATE_FILE, MODEL_FILE, MANIFEST_FILE, CURVE_FILE):
        assert (out / f).is_file(), f
    # another seed in the same directory: refused (runs never mix), naming the value and the starting command
    with pytest.raises(ValueError, match=r"different configuration \(seed=0 \(now 1\)\); it was started by: "
                                         "edge train world-model --preset tiny; use a new --out"):
        Trainer(tiny(env_steps=24, seed=1), out, progress=False).run()
    # a longer budget continues from the saved state, not from zero
    t2 = Trainer(tiny(env_steps=24), out, progress=False)
    assert t2._load_state() and t2.st["env_steps"] == 12 and t2.learner.updates == m1["updates"]
    assert t2.replay.transitions > 0
    with open(out / CURVE_FILE, "a") as f:  # a row written after the last save, by a run then killed
        f.write(json.dumps({"env_steps": 18, "success": 0.5}) + "\n")
    t2 = Trainer(tiny(env_steps=24), out, progress=False)
    m2 = t2.run()
    assert m2["env_steps"] == 24 and m2["updates"] > m1["updates"]
    curve = [json.loads(x) for x in (out / CURVE_FILE).read_text().splitlines()]
    assert [c["env_steps"] for c in curve] == [0, 12, 24]  # the file mirrors the state: no killed run's row
    # the manifest of a resumed run names the command that started it
    assert json.loads((out / MANIFEST_FILE).read_text())["command"] == "edge train world-model --preset tiny"
    assert all(0.0 <= c["success"] <= 1.0 for c in curve)
    with pytest.raises(ConfigError, match="at 24 env steps already"):  # a shorter budget is not a resume
        Trainer(tiny(env_steps=12), out, progress=False).run()
    # a run saved before encoder_carry_iters existed resumes at its default
    blob = torch.load(out / STATE_FILE, weights_only=False)
    del blob["config"]["encoder_carry_iters"]
    torch.save(blob, out / STATE_FILE)
    assert Trainer(tiny(env_steps=36), out, progress=False)._load_state()
    # a state whose bytes changed on disk is not resumed (torch.load would read it without noticing)
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    flip_a_stored_byte(damaged / STATE_FILE)
    with pytest.raises(EdgeError, match="its bytes changed on disk after it was saved"):
        Trainer(tiny(env_steps=36), damaged, progress=False)._load_state()
    # an oracle run reads no encoder: a slot encoder or tracking rounds named by a preset leave it resumable
    assert Trainer(tiny(env_steps=36, encoder="world_models/checkpoints/slots_push3_v2", encoder_carry_iters=1), out,
                   progress=False)._load_state()


def test_shipped_model_round_trip_and_tamper(tmp_path):
    out = tmp_path / "wm"
    Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8), out, progress=False).run()
    cfg, _, manifest = load_world_model(out)
    assert manifest["files"][MODEL_FILE] and cfg.model.kind == "comet"
    with open(out / MODEL_FILE, "ab") as f:
        f.write(b"x")
    from edge.errors import EdgeError

    with pytest.raises(EdgeError, match="sha256"):
        load_world_model(out)
    (out / MANIFEST_FILE).unlink()  # killed between the model and its manifest: not loaded unverified
    with pytest.raises(EdgeError, match="no manifest.json beside it lists its sha256"):
        load_world_model(out)


def test_pixels_policy_plans_from_frames(tmp_path):
    from world_models.token_model import WorldModelConfig

    out = tmp_path / "px"
    base = tiny()
    cfg = tiny(env_steps=8, eval_every=8, checkpoint_every=8, obs="pixels",
               model=WorldModelConfig(**{**base.model.__dict__, "kind": "pixels"}))
    Trainer(cfg, out, progress=False).run()
    pol = WorldModelPolicy(out, simulations=2)
    env = ObjectTaskEnv(ObjectTaskConfig(task="reach3", image_size=32, distractors=1))
    obs, _ = env.reset(seed=3)
    a = pol.encode({"front": obs["frame"]})
    chunk = pol.sample(a, None, 1)
    assert 0 <= a < 8 and chunk.shape == (1, 5) and abs(float((chunk[0, :2] ** 2).sum()) - 0.02**2) < 1e-9
    obs, *_ = env.step(a)
    a2 = pol.encode({"front": obs["frame"]})  # second decision pushes the first into the history
    assert pol.hist.valid[0].sum() == 2 and pol.hist.actions[0, -2] == a and 0 <= a2 < 8
    env.close()


def test_diagnostics_on_a_tiny_model(tmp_path):
    from world_models import diagnostics as dg

    out = tmp_path / "wm"
    Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8), out, progress=False).run()
    cfg, model, _ = load_world_model(out)
    ro = dg._rollouts(cfg, model, None, 2, 950_000_000)
    err = dg.prediction_error(cfg, model, rollouts=ro, horizons=(1, 3))
    assert set(err) == {"h1", "h3"} and err["h1"] >= 0 and err["h3"] >= 0
    rel = dg.relevance_by_entity(cfg, model, rollouts=ro)
    assert set(rel) == set(dg.ENTITY_NAMES) and all(0 <= p <= 1 for v in rel.values() if v for p in v)


@pytest.mark.parametrize("obs", ["oracle", "pixels"])
def test_default_preset_leaves_the_slot_encoder_out_of_oracle_and_pixel_runs(obs, tmp_path, monkeypatch, capsys):
    import world_models.train as wt
    from edge.cli import main

    seen = {}

    class Capture:  # the configuration the command would train, without training
        def __init__(self, cfg, out, command="", progress=True, log=None):
            seen["cfg"] = cfg

        def run(self):
            return {"env_steps": 0, "updates": 0, "wall_s": 0.0, "final": {"success": 0.0}}

    monkeypatch.setattr(wt, "Trainer", Capture)
    main(["train", "world-model", "--out", str(tmp_path / "wm"), "--obs", obs])
    cfg = seen["cfg"]
    assert cfg.obs == obs and cfg.encoder == "" and cfg.encoder_carry_iters == 0
    # oracle slots: one per entity (robot, goal, target, two distractors), whatever the preset's encoder has
    assert cfg.model.num_slots == (5 if obs == "oracle" else 6)
    assert "note:" not in capsys.readouterr().err  # the shipped preset's settings go without a word
    # from a --config file they go with a note naming them
    from edge.resources import config_dir

    main(["train", "world-model", "--out", str(tmp_path / "wm2"), "--obs", obs,
          "--config", str(config_dir("train", "wm_default.yaml"))])
    assert seen["cfg"].encoder == "" and seen["cfg"].encoder_carry_iters == 0
    err = capsys.readouterr().err
    assert "encoder=" in err and "slots_push3_v2" in err and "encoder_carry_iters=1" in err and "left out" in err


def test_default_preset_finds_the_shipped_encoder_from_any_directory(tmp_path, monkeypatch, capsys):
    import json

    from edge.cli import main

    monkeypatch.chdir(tmp_path)  # the preset names world_models/checkpoints/slots_push3_v2, one tracking round
    out = tmp_path / "wm"
    base = ["train", "world-model", "--out", str(out), "--set", "eval_episodes=1", "--set", "eval_every=8",
            "--set", "planner.num_simulations=2", "--no-progress"]
    assert main([*base, "--env-steps", "8"]) == 0
    cfg = json.loads((out / "manifest.json").read_text())["config"]
    from pathlib import Path

    enc = cfg["encoder"]
    assert enc.endswith("world_models/checkpoints/slots_push3_v2") and Path(enc).is_absolute() and Path(enc).is_dir()
    assert cfg["encoder_carry_iters"] == 1 and cfg["obs"] == "slots"
    # a slot run's tracking rounds are part of its identity: other rounds do not resume it
    capsys.readouterr()
    assert main([*base, "--env-steps", "16", "--resume", "--set", "encoder_carry_iters=3"]) == 2
    err = capsys.readouterr().err
    assert "configuration (encoder_carry_iters=1 (now 3)); it was started by: edge " in err, err
    assert "--set encoder_carry_iters=1" in err


def test_a_slot_run_takes_its_token_count_from_the_encoders_slots(tmp_path, capsys):
    import json

    from edge.cli import main

    k5 = Path(__file__).resolve().parents[2] / "world_models" / "checkpoints" / "slots_push3_v2_k5"
    out = tmp_path / "wm"
    base = ["train", "world-model", "--out", str(out), "--encoder", str(k5), "--set", "eval_episodes=1",
            "--set", "eval_every=8", "--set", "planner.num_simulations=2", "--no-progress", "--env-steps", "8"]
    assert main(base) == 0  # the preset's six slots become the five-slot encoder's five
    assert json.loads((out / "manifest.json").read_text())["config"]["model"]["num_slots"] == 5
    capsys.readouterr()
    assert main([*base[:3], str(tmp_path / "wm6"), *base[4:], "--set", "model.num_slots=6"]) == 2
    assert "--set model.num_slots=6: the encoder" in capsys.readouterr().err and not (tmp_path / "wm6").exists()


def test_evaluation_outcomes_are_in_seed_order_however_episodes_are_batched(tmp_path):
    tr = Trainer(tiny(), tmp_path / "wm", progress=False)
    batched = tr.evaluate(tr._make_envs(2), 5, seed0=123)  # 2 envs, 5 episodes: batches of 2, 2, 1
    alone = [tr.evaluate(tr._make_envs(1), 1, seed0=123 + i) for i in range(5)]
    assert batched["per_episode_return"] == [a["per_episode_return"][0] for a in alone]
    assert batched["per_episode"] == [a["per_episode"][0] for a in alone]
    assert len(set(batched["per_episode_return"])) > 1  # the seeds differ, so the check can fail


def test_relevance_l1_prior_lowers_the_relevance_scores(tmp_path):
    """Same seed, same data: with the L1 prior the heads' relevance ends lower than without it."""
    from world_models.learner import LearnerConfig

    means = {}
    for l1 in (0.0, 5.0):
        tr = Trainer(tiny(env_steps=36, learner=LearnerConfig(batch=4, unroll=2, td_steps=2, relevance_l1=l1)),
                     tmp_path / f"wm{l1}", progress=False)
        tr.run()
        rel = torch.tensor(tr.last_stats["relevance"])  # (slots, 2): policy, value
        means[l1] = float(rel.mean())
    assert means[5.0] < means[0.0] - 0.01
    with pytest.raises(ConfigError, match="relevance_l1"):
        LearnerConfig(relevance_l1=-1.0)
    with pytest.raises(ConfigError, match="needs object-causal heads"):
        tiny(model=replace(tiny().model, kind="flat_slots"), learner=LearnerConfig(relevance_l1=0.1))


def test_explore_repeat_takes_runs_of_one_random_action_and_keeps_the_search_policy(tmp_path):
    """With explore_repeat=1 and runs longer than an episode, every training episode repeats one
    action throughout; the replay's policy targets stay the search's (not one-hot)."""
    tr = Trainer(tiny(env_steps=24, explore_repeat=1.0, explore_repeat_max=50), tmp_path / "rep", progress=False)
    tr.run()
    eps = tr.replay.episodes
    assert len(eps) >= 4 and all(len(set(e.actions.tolist())) == 1 for e in eps)
    assert len({int(e.actions[0]) for e in eps}) > 1  # random actions, not one fixed action
    assert all(e.policies.max() < 1.0 for e in eps)
    off = Trainer(tiny(env_steps=24), tmp_path / "off", progress=False)
    off.run()
    assert any(len(set(e.actions.tolist())) > 1 for e in off.replay.episodes)  # the search alone varies its actions
    with pytest.raises(ConfigError, match="explore_repeat"):
        tiny(explore_repeat=1.5)


def test_the_executed_action_reaches_env_replay_and_history_and_default_runs_draw_nothing(tmp_path, monkeypatch):
    import numpy as np

    import world_models.train as wt

    pushed: dict[int, list[int]] = {}  # History instance (in creation order) -> the actions pushed into it
    real_init, real_push = wt.History.__init__, wt.History.push

    def init(self, *a, **k):
        self._test_no = len(pushed)
        pushed[self._test_no] = []
        real_init(self, *a, **k)

    monkeypatch.setattr(wt.History, "__init__", init)
    monkeypatch.setattr(wt.History, "push", lambda self, i, a, s: pushed[self._test_no].append(int(a))
                        or real_push(self, i, a, s))
    monkeypatch.setattr(Trainer, "_explore_repeat", lambda self, searched: np.full(len(searched), 7))
    tr = Trainer(tiny(env_steps=12, explore_repeat=0.5), tmp_path / "fixed", progress=False)
    tr.run()
    acted = np.concatenate([e.actions for e in tr.replay.episodes])
    assert len(acted) >= 6 and set(acted.tolist()) == {7}  # whatever the search chose
    assert pushed[0] and set(pushed[0]) == {7}  # the first history is training's (evaluation builds its own)
    assert any(set(v) - {7} for v in list(pushed.values())[1:])  # evaluation's greedy search chose others

    def refuse(self, searched):
        raise AssertionError("explore_repeat=0 must not draw exploration runs")

    monkeypatch.setattr(Trainer, "_explore_repeat", refuse)
    Trainer(tiny(env_steps=12), tmp_path / "default", progress=False).run()


def test_a_run_saved_before_a_section_key_existed_resumes_at_its_default(tmp_path):
    """learner.relevance_l1 and env.approach were added after runs were saved: such a run resumes with
    them at their defaults, and refuses a different value."""
    from world_models.learner import LearnerConfig

    out = tmp_path / "wm"
    Trainer(tiny(env_steps=12), out, progress=False).run()
    blob = torch.load(out / STATE_FILE, weights_only=False)
    del blob["config"]["learner"]["relevance_l1"]
    del blob["config"]["env"]["approach"]  # added later still
    del blob["config"]["env"]["oracle_state"]  # and later again
    torch.save(blob, out / STATE_FILE)
    assert Trainer(tiny(env_steps=24), out, progress=False)._load_state()
    with pytest.raises(ConfigError, match="learner"):
        Trainer(tiny(env_steps=24, learner=LearnerConfig(batch=4, unroll=2, td_steps=2, relevance_l1=0.1)), out,
                progress=False)._load_state()


def test_an_oracle_run_with_control_features_trains_resumes_and_replays_12_features(tmp_path):
    out = tmp_path / "wm"
    cfg = tiny(env_steps=12, env=ObjectTaskConfig(task="push3", image_size=32, max_steps=6, distractors=1,
                                                   oracle_state="control"))
    Trainer(cfg, out, progress=False).run()
    blob = torch.load(out / STATE_FILE, weights_only=False)
    assert blob["config"]["env"]["oracle_state"] == "control"
    from world_models.observer import oracle_map

    ep = blob["replay"][0]
    feats = ep.states @ torch.linalg.pinv(torch.as_tensor(oracle_map(12, 16, cfg.seed))).numpy()
    assert abs(feats[..., 7] - 1.0).max() < 1e-4 and abs(feats[1:, 0, 8:10]).max() > 0.05  # the arm's lag is seen
    with pytest.raises(ValueError, match="different configuration"):  # the pose-only oracle does not continue it
        Trainer(replace(cfg, env=replace(cfg.env, oracle_state="pose"), env_steps=24), out, progress=False).run()
    m = Trainer(replace(cfg, env_steps=24), out, progress=False).run()  # the same settings continue it
    assert m["env_steps"] == 24
    from world_models.observer import Observer

    loaded, _, _ = load_world_model(out)  # its observer maps the 12 features; a pose observation is refused
    ob, env = Observer.for_run(loaded), ObjectTaskEnv(loaded.env)
    assert ob.observe([env.reset(seed=0)[0]], np.ones(1, bool)).shape == (1, cfg.env.n_entities, cfg.model.slot_dim)
    with pytest.raises(ValueError, match="8 features per slot"):
        ob.observe([{"oracle": np.zeros((cfg.env.n_entities, 8), np.float32)}], np.ones(1, bool))
    env.close()


def test_explore_scripted_plays_whole_episodes_with_the_scripted_policy(tmp_path):
    from world_models.scripted import scripted_action

    cfg = tiny(env_steps=24, explore_scripted=1.0)
    m = Trainer(cfg, tmp_path / "wm", progress=False).run()
    assert m["train_episodes_scripted"] == m["train_episodes"] > 0
    curve = [json.loads(x) for x in (tmp_path / "wm" / CURVE_FILE).read_text().splitlines()]
    assert "train_success_recent_agent" not in curve[0] and curve[-1]["train_success_recent_agent"] == 0.0  # none its own
    blob = torch.load(tmp_path / "wm" / STATE_FILE, weights_only=False)
    env = ObjectTaskEnv(cfg.env)
    scripted = []
    for k in range(blob["st"]["episodes"]):  # every episode the run started, played by the scripted policy
        env.reset(seed=cfg.seed * 10_000_000 + k)
        acts = []
        for _ in range(cfg.env.steps):
            acts.append(scripted_action(env))
            *_, term, trunc, _ = env.step(acts[-1])
            if term or trunc:
                break
        scripted.append(acts)
    env.close()
    assert all(ep.actions.tolist() in scripted for ep in blob["replay"])
    assert len({tuple(a) for a in scripted}) > 1  # the scenes differ, so do the scripted episodes
    half = Trainer(tiny(env_steps=24, explore_scripted=0.5), tmp_path / "half", progress=False).run()
    assert 0 < half["train_episodes_scripted"] < half["train_episodes"]
    assert "train_episodes_scripted" not in Trainer(tiny(env_steps=12), tmp_path / "none", progress=False).run()
    with pytest.raises(ConfigError, match="explore_scripted"):
        tiny(explore_scripted=1.5)


def test_init_from_starts_from_another_runs_weights_and_refuses_a_mismatch(tmp_path):
    a = tmp_path / "a"
    assert Trainer(tiny(env_steps=12), a, progress=False).run()["updates"] > 0
    _, trained, _ = load_world_model(a)
    t = Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8, init_from=str(a)), tmp_path / "b",
                progress=False)
    for (k, v), w in zip(t.model.state_dict().items(), trained.state_dict().values()):
        assert torch.equal(v, w), k
    assert all(torch.equal(v, w) for v, w in zip(t.learner.target.state_dict().values(), trained.state_dict().values()))
    t.run()
    manifest = json.loads((tmp_path / "b" / MANIFEST_FILE).read_text())
    assert manifest["config"]["init_from"] == str(a) and len(manifest["files"]["init_from"]) == 64
    # resumed, it keeps the hash of the weights it started from
    Trainer(tiny(env_steps=16, eval_every=8, checkpoint_every=8, init_from=str(a)), tmp_path / "b", progress=False).run()
    again = json.loads((tmp_path / "b" / MANIFEST_FILE).read_text())
    assert again["metrics"]["env_steps"] == 16 and again["files"]["init_from"] == manifest["files"]["init_from"]
    # a fresh run of the same seed starts elsewhere
    fresh = Trainer(tiny(env_steps=8), tmp_path / "c", progress=False).model.state_dict()
    assert not all(torch.equal(v, w) for v, w in zip(fresh.values(), trained.state_dict().values()))
    with pytest.raises(ConfigError, match="init_from.*model settings"):
        Trainer(tiny(env_steps=8, init_from=str(a), model=replace(tiny().model, width=32)), tmp_path / "d",
                progress=False)
    with pytest.raises(ConfigError, match="init_from.*seed"):  # the oracle map differs
        Trainer(tiny(env_steps=8, init_from=str(a), seed=1), tmp_path / "e", progress=False)
    with pytest.raises(ConfigError, match="init_from.*no world model"):
        Trainer(tiny(env_steps=8, init_from=str(tmp_path)), tmp_path / "f", progress=False)


def test_an_rgbd_slot_encoder_is_refused_by_the_world_models(tmp_path):
    from edge.config import ConfigError
    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig, save_encoder
    from world_models.train import load_encoder

    save_encoder(SlotAutoencoder(SlotEncoderConfig.tiny(in_channels=4)), tmp_path / "rgbd")
    with pytest.raises(ConfigError, match=r"rgbd: reads 4-channel \(RGB-D\) frames.*choose an RGB slot encoder"):
        load_encoder(str(tmp_path / "rgbd"))
    save_encoder(SlotAutoencoder(SlotEncoderConfig.tiny()), tmp_path / "rgb")
    assert load_encoder(str(tmp_path / "rgb")).cfg.in_channels == 3


def test_world_models_refuse_rgbd_env_frames():
    with pytest.raises(ConfigError, match="env.depth=True: the world models .* read RGB frames only"):
        tiny(env=ObjectTaskConfig(depth=True))


def test_a_slot_run_does_not_resume_over_an_encoder_changed_in_place(tmp_path):
    """The replay holds the old encoder's states: a resume over other weights is refused."""
    from edge.cli import main
    from world_models.token_model import WorldModelConfig

    enc = tmp_path / "slots"
    args = ["train", "slot-encoder", "--out", str(enc), "--preset", "tiny", "--frames", "48", "--eval-frames", "24"]
    assert main([*args, "--steps", "2"]) == 0
    base = tiny()
    cfg = lambda n: tiny(obs="slots", encoder=str(enc), env_steps=n, eval_every=8, checkpoint_every=8,  # noqa: E731
                         model=WorldModelConfig(**{**base.model.__dict__, "num_slots": 4, "slot_dim": 16}))
    Trainer(cfg(8), tmp_path / "wm", progress=False).run()
    assert main([*args, "--steps", "3", "--resume"]) == 0  # the encoder trains on, in place
    with pytest.raises(ConfigError, match="changed in place"):
        Trainer(cfg(16), tmp_path / "wm", progress=False).run()
