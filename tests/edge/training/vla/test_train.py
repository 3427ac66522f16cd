"""Training: manifest contents, resume equivalence, refusal of inconsistent resumes, CLI."""

import json
import os
import re
import signal

import numpy as np
import pytest
import torch

from edge.cli import main
from edge.config import load_config
from edge.errors import EdgeError
from edge.vla.checkpoint import TRAIN_STATE_FILE
from edge.vla.language import HASH_ID
from edge.training.vla.synthetic import write_synthetic_demos
from edge.training.vla.data import DemoSet
from edge.training.vla.train import TrainVLAConfig, VLATrainer
from tests._damage import flip_a_stored_byte

TINY = "configs/train/vla_tiny.yaml"


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    return write_synthetic_demos(tmp_path_factory.mktemp("demos") / "d", episodes=3, steps=20)


def tiny_config(*overrides: str) -> TrainVLAConfig:
    from edge.vla.manifest import REPO_ROOT

    return load_config(TrainVLAConfig, REPO_ROOT / TINY,
                       [f"language_encoder={HASH_ID}", "eval_episodes=0", *overrides])


def test_resume_gives_the_same_parameters_as_an_uninterrupted_run(demos, tmp_path):
    config = tiny_config("steps=8", "save_every_steps=1000")
    straight = VLATrainer(config, "stack", demos, tmp_path / "a", progress=False)
    straight.run()
    half = VLATrainer(config, "stack", demos, tmp_path / "b", progress=False)
    step = half.train_step

    def interrupted_step() -> float:  # Ctrl-C arrives in the middle of step 4
        if half.step == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return step()

    half.train_step = interrupted_step
    with pytest.raises(KeyboardInterrupt):
        half.run()
    assert half.step == 4 and (tmp_path / "b" / TRAIN_STATE_FILE).is_file()
    resumed = VLATrainer(config, "stack", demos, tmp_path / "b", resume=True, progress=False)
    assert resumed.step == 4
    resumed.run()
    for name, module in (("model", "model"), ("ema", "ema")):
        a, b = getattr(straight, module).state_dict(), getattr(resumed, module).state_dict()
        worst = max(float((a[k] - b[k]).abs().max()) for k in a)
        assert worst <= 1e-6, f"{name} differs by {worst}"
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["resumed_at_steps"] == [4] and manifest["complete"]


def test_manifest_records_how_to_reproduce(demos, tmp_path):
    VLATrainer(tiny_config("steps=3"), "stack", demos, tmp_path, command="edge train vla ...",
               progress=False).run()
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["command"] == "edge train vla ..." and m["seed"] == 0 and m["step"] == 3
    assert len(m["data"]["sha256"]) == 64 and m["data"]["episodes"] == 3
    assert "commit" in m["git"] and m["wall_time_s"] >= 0
    assert m["metrics"]["final_loss"] > 0 and m["model"]["bytes"] == (tmp_path / "model.pt").stat().st_size
    assert m["spec"]["lang_encoder_id"] == HASH_ID


def test_resume_refuses_changed_settings_or_data(demos, tmp_path):
    VLATrainer(tiny_config("steps=6"), "stack", demos, tmp_path / "r", progress=False).run(stop_at=2)
    with pytest.raises(EdgeError, match="lr: 0.001 -> 0.01"):
        VLATrainer(tiny_config("steps=6", "lr=0.01"), "stack", demos, tmp_path / "r", resume=True)
    other = write_synthetic_demos(tmp_path / "other", episodes=3, steps=20, seed=5)
    with pytest.raises(EdgeError, match="dataset hash differs"):
        VLATrainer(tiny_config("steps=6"), "stack", other, tmp_path / "r", resume=True)
    with pytest.raises(EdgeError, match="--steps 1: .* has trained 2 steps already"):  # fewer than trained
        VLATrainer(tiny_config("steps=1"), "stack", demos, tmp_path / "r", resume=True)
    with pytest.raises(EdgeError, match=r"--init .*: the interrupted run was started from scratch \(no --init\)"):
        VLATrainer(tiny_config("steps=6"), "stack", demos, tmp_path / "r", resume=True, init=tmp_path / "r")
    state = tmp_path / "r" / "train_state.pt"
    flip_a_stored_byte(state)  # a byte changed on disk (torch.load would not notice)
    with pytest.raises(EdgeError, match="--resume: .*changed on disk after it was saved"):
        VLATrainer(tiny_config("steps=6"), "stack", demos, tmp_path / "r", resume=True)


def test_cli_trains_refuses_overwrite_and_resumes(demos, tmp_path, capsys):
    out = tmp_path / "cli"
    base = ["train", "vla", "--task", "stack", "--data", str(demos), "--out", str(out), "--preset",
            "tiny", "--no-progress", "--set", f"language_encoder={HASH_ID}"]
    args = [*base, "--steps", "2"]
    assert main(args) == 0
    assert "final loss" in capsys.readouterr().out
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*base, "--steps", "3", "--resume"]) == 0
    assert torch.load(out / TRAIN_STATE_FILE, weights_only=True)["step"] == 3
    assert main(["train", "vla", "--data", str(demos), "--out", str(tmp_path / "x"), "--task",
                 "push", "--preset", "tiny"]) == 2
    assert "not 'push'" in capsys.readouterr().err


def test_init_fine_tunes_a_checkpoint_on_several_datasets(demos, tmp_path):
    base = VLATrainer(tiny_config("steps=3"), "stack", demos, tmp_path / "base", progress=False)
    base.run()
    more = write_synthetic_demos(tmp_path / "more", episodes=2, steps=20, seed=7)
    tuned = VLATrainer(tiny_config("steps=2"), "stack", [demos, more], tmp_path / "tuned",
                       progress=False, init=tmp_path / "base")
    assert tuned.data.n_episodes == 5 and tuned.data.n_frames == 100
    # starts from the checkpoint's (EMA) weights and keeps its normalisation
    saved = torch.load(tmp_path / "base" / "model.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(saved[k], v) for k, v in tuned.model.state_dict().items())
    assert tuned.spec.action_mean == base.spec.action_mean
    tuned.run()
    manifest = json.loads((tmp_path / "tuned" / "manifest.json").read_text())
    assert manifest["init"]["path"] == str(tmp_path / "base") and manifest["init"]["step"] == 3
    assert manifest["init"]["init"] is None  # the base was trained from scratch: the chain ends there
    again = VLATrainer(tiny_config("steps=1"), "stack", demos, tmp_path / "again", progress=False,
                       init=tmp_path / "tuned")
    assert again.init_info["init"]["path"] == str(tmp_path / "base")  # two stages back
    assert manifest["data"]["dir"] == [str(demos), str(more)]
    # the combined hash differs from either dataset's own
    assert manifest["data"]["sha256"] != json.loads(
        (tmp_path / "base" / "manifest.json").read_text())["data"]["sha256"]


def test_init_refuses_another_architecture(demos, tmp_path):
    VLATrainer(tiny_config("steps=1"), "stack", demos, tmp_path / "base", progress=False).run()
    with pytest.raises(EdgeError, match="model.d_model"):
        VLATrainer(tiny_config("steps=1", "model.d_model=48"), "stack", demos, tmp_path / "x",
                   progress=False, init=tmp_path / "base")


def test_vision_pretraining_localises_first_then_resumes_without_redoing_it(demos, tmp_path):
    from edge.config import ConfigError

    with pytest.raises(ConfigError, match="aux_source=front"):
        VLATrainer(tiny_config("vision_pretrain_steps=5"), "stack", demos, tmp_path / "x", progress=False)
    settings = ("steps=4", "save_every_steps=1000", "model.aux_source=front", "model.object_token=true",
                "vision_pretrain_steps=80", "vision_pretrain_lr=3e-3", "log_every_steps=20")
    straight = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "a", progress=False)
    expert0 = {k: v.clone() for k, v in straight.model.expert.state_dict().items()}
    trunk0 = straight.model.trunks["front"].stem[0].weight.clone()
    straight._pretrain_vision()
    curve = straight.pretrain["curve"]
    assert curve[-1]["loss"] < 0.5 * curve[0]["loss"]  # it learns to localise the blocks
    assert all(torch.equal(v, straight.model.expert.state_dict()[k]) for k, v in expert0.items())
    assert not torch.equal(trunk0, straight.model.trunks["front"].stem[0].weight)
    straight.pretrain = None  # run() from a fresh trainer, as the CLI does
    straight = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "a", progress=False)
    straight.run()
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["metrics"]["vision_pretrain"]["steps"] == 80
    part = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "b", progress=False)
    part.run(stop_at=2)
    resumed = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "b", resume=True, progress=False)
    assert resumed.pretrain is not None and resumed.step == 2
    resumed.run()
    for k, v in straight.ema.state_dict().items():
        assert torch.allclose(v, resumed.ema.state_dict()[k], atol=1e-6), k


def test_base_after_lift_teaches_the_base_on_carry_frames_and_never_the_carried_block(demos, tmp_path):
    import numpy as np

    settings = ("steps=1", "model.aux_source=front", "model.object_token=true", "vision_pretrain_steps=80",
                "vision_pretrain_lr=3e-3", "log_every_steps=20", "vision_pretrain_base_after_lift=true")
    trainer = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "a", progress=False)
    # the moved block lifts halfway through every episode; after that, its outputs' targets are
    # garbage that the mask must keep out (the arm's state, not pixels, gives them away)
    start = 0
    for end in np.unique(trainer.data.episode_end):
        trainer.data.aux_objects[start + (end - start) // 2:end, 2] += 0.05
        trainer.aux[start + (end - start) // 2:end, :3] = 100.0
        start = int(end)
    trainer._pretrain_vision()
    curve = trainer.pretrain["curve"]
    assert trainer.pretrain["frames"] == trainer.data.n_frames  # every frame feeds the base outputs
    assert all(np.isfinite(p["loss"]) and p["loss"] < 5.0 for p in curve)  # no garbage target learnt
    assert curve[-1]["base_after_lift_xy_error_m"] < 0.6 * curve[0]["base_after_lift_xy_error_m"]
    assert curve[-1]["moved_xy_error_m"] < 0.75 * curve[0]["moved_xy_error_m"]  # half the frames


def test_vision_freeze_keeps_the_pretrained_localiser(demos, tmp_path):
    from edge.config import ConfigError

    with pytest.raises(ConfigError, match="vision_pretrain_steps"):
        VLATrainer(tiny_config("vision_freeze=true"), "stack", demos, tmp_path / "x", progress=False)
    settings = ("steps=3", "model.aux_source=front", "model.object_token=true", "vision_pretrain_steps=5",
                "vision_freeze=true")
    trainer = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "a", progress=False)
    trainer.run(stop_at=1)
    frozen = {k: v.clone() for k, v in trainer.model.trunks["front"].state_dict().items()}
    expert = {k: v.clone() for k, v in trainer.model.expert.state_dict().items()}
    resumed = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "a", resume=True, progress=False)
    resumed.run()  # the freeze survives a resume
    assert all(torch.equal(v, resumed.model.trunks["front"].state_dict()[k]) for k, v in frozen.items())
    assert not all(torch.equal(v, resumed.model.expert.state_dict()[k]) for k, v in expert.items())
    # fine-tuning from it keeps the localiser frozen without pre-training again
    tuned = VLATrainer(tiny_config(*settings[:3], "vision_freeze=true"), "stack", demos, tmp_path / "t",
                       progress=False, init=tmp_path / "a")
    tuned.run()
    assert tuned.pretrain is None
    assert all(torch.equal(v, tuned.model.trunks["front"].state_dict()[k]) for k, v in frozen.items())


def test_wrist_token_pretrains_the_wrist_localiser_and_grows_from_an_object_token_checkpoint(tmp_path):
    wrist = write_synthetic_demos(tmp_path / "w", episodes=3, steps=20, wrist=True)
    common = ("model.cameras=[front,wrist]", "model.aux_source=front", "model.object_token=true")
    base = VLATrainer(tiny_config("steps=2", *common), "stack", wrist, tmp_path / "base", progress=False)
    base.run()
    settings = ("steps=2", *common, "model.wrist_token=true", "vision_pretrain_steps=60",
                "vision_pretrain_lr=3e-3", "log_every_steps=20", "vision_freeze=true", "shift_cameras=[]")
    grown = VLATrainer(tiny_config(*settings), "stack", wrist, tmp_path / "g", progress=False,
                       init=tmp_path / "base")
    # the new wrist input of the token starts switched off: the grown model computes what the base did
    saved = torch.load(tmp_path / "base" / "model.pt", weights_only=True)["state_dict"]
    old = saved["token_proj.0.weight"]
    new = grown.model.token_proj[0].weight
    assert new.shape[1] == old.shape[1] + 6
    assert torch.equal(new[:, : old.shape[1]], old) and not new[:, old.shape[1]:].any()
    grown.run()
    curve = grown.pretrain["curve"]
    assert curve[-1]["wrist_moved_offset_error_m"] < 0.7 * curve[0]["wrist_moved_offset_error_m"]
    # frozen afterwards: the policy steps leave both localisers alone
    before = {k: v.clone() for k, v in grown.model.wrist_head.state_dict().items()}
    grown.config = tiny_config(*settings).__class__(**{**grown.config.__dict__, "steps": 4})
    grown.run()
    assert all(torch.equal(v, grown.model.wrist_head.state_dict()[k]) for k, v in before.items())
    # vision_pretrain_parts=[wrist]: the hand's view alone is trained again, the front one untouched
    from edge.config import ConfigError

    with pytest.raises(ConfigError, match="vision_pretrain_parts"):
        VLATrainer(tiny_config(*settings, "vision_pretrain_parts=[wrist]"), "stack", wrist, tmp_path / "x",
                   progress=False)
    again = VLATrainer(tiny_config(*settings, "vision_pretrain_parts=[wrist]"), "stack", wrist, tmp_path / "r",
                       progress=False, init=tmp_path / "g")
    untouched = {name: {k: v.clone() for k, v in getattr(again.model, name).state_dict().items()}
                 for name in ("lang_proj", "aux_head", "wrist_head")}
    untouched["front"] = {k: v.clone() for k, v in again.model.trunks["front"].state_dict().items()}
    again.run()
    assert again.pretrain["steps"] == 60 and "wrist_in_hand_xy_error_m" in again.pretrain["curve"][-1]
    for name in ("lang_proj", "aux_head", "front"):
        now = again.model.trunks["front"] if name == "front" else getattr(again.model, name)
        assert all(torch.equal(v, now.state_dict()[k]) for k, v in untouched[name].items()), name
    assert not all(torch.equal(v, again.model.wrist_head.state_dict()[k]) for k, v in untouched["wrist_head"].items())


def test_scene_memory_trains_a_locator_and_feeds_each_episode_its_first_frame(demos, tmp_path):
    from edge.config import ConfigError
    from edge.training.vla.synthetic import write_synthetic_scenes

    scenes = write_synthetic_scenes(tmp_path / "scenes", count=400)
    common = ("model.aux_source=front", "model.object_token=true", "model.scene_memory=true")
    with pytest.raises(ConfigError, match="scene locator"):
        VLATrainer(tiny_config("steps=2", *common), "stack", demos, tmp_path / "x", progress=False)
    settings = ("steps=3", *common, f"scene_data=[{scenes}]", "locator_steps=500", "locator_lr=2e-3",
                "log_every_steps=5", "batch_size=32", "model.locator_channels=[8,16,32]")
    trainer = VLATrainer(tiny_config(*settings), "stack", demos, tmp_path / "a", progress=False)
    assert trainer.spec.scene_memory and trainer.model.input_names[-1] == "scene"
    trainer.run()
    rec = trainer.locator_record
    curve = rec["curve"]
    # it learns where the squares are on scenes it never saw (20 of 400 held out)
    assert rec["heldout_scenes"] == 20
    assert curve[-1]["heldout_base_xy_error_m"] < 0.25 * rec["mean_position_baseline_base_xy_error_m"]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["metrics"]["scene_locator"]["sha256"] == rec["sha256"]
    # every frame of an episode gets that episode's first-frame localisation
    d, mem = trainer.data, trainer.scene_memory
    first = np.flatnonzero(np.r_[True, d.episode_end[1:] != d.episode_end[:-1]])
    with torch.no_grad():
        expect = trainer.model.locate_scene(torch.from_numpy(d.images["front"][first]),
                                            trainer.lang_table[torch.from_numpy(d.instruction_index[first])])
    for k, start in enumerate(first):
        end = d.episode_end[start]
        assert np.allclose(mem[start:end], expect[k].numpy(), atol=1e-5)
    # frozen after its training, and a fine-tune keeps the init's locator without scene data
    loc = {k: v.clone() for k, v in trainer.model.locator.state_dict().items()}
    tuned = VLATrainer(tiny_config("steps=2", *common, "model.locator_channels=[8,16,32]"), "stack", demos, tmp_path / "t", progress=False,
                       init=tmp_path / "a")
    tuned.run()
    assert tuned.locator_record is None
    assert all(torch.equal(v, tuned.model.locator.state_dict()[k]) for k, v in loc.items())


@pytest.mark.parametrize("settings, said", [
    (("vision_freeze=true",), "vision_freeze=true needs"),
    (("vision_pretrain_parts=[hand]",), "vision_pretrain_parts=['hand']"),
    (("vision_pretrain_steps=5", "vision_pretrain_parts=[wrist]"), "needs --init"),
    (("model.aux_source=front", "model.object_token=true", "model.scene_memory=true"), "scene locator"),
])
def test_settings_alone_are_refused_before_the_data_is_read(settings, said, tmp_path, monkeypatch):
    from edge.config import ConfigError

    def no_reading(*a, **k):
        raise AssertionError("the demonstrations were read first")

    monkeypatch.setattr(DemoSet, "load_many", no_reading)
    with pytest.raises(ConfigError, match=re.escape(said)):
        VLATrainer(tiny_config(*settings), "stack", tmp_path / "demos", tmp_path / "x", progress=False)


def test_a_settings_error_found_with_the_data_blames_no_episode(demos, tmp_path, capsys, monkeypatch):
    import edge.commands.data

    def no_scan(*a, **k):
        raise AssertionError("every episode file was read again to find a bad one")

    monkeypatch.setattr(edge.commands.data, "find_bad_episode", no_scan)
    out = tmp_path / "x"  # the synthetic demos' object token needs the aux loss: known once they are read
    assert main(["train", "vla", "--data", str(demos), "--out", str(out), "--task", "stack", "--preset", "tiny",
                 "--set", "model.aux_source=front", "--set", "model.object_token=true",
                 "--set", "aux_object_weight=0"]) == 2
    assert "model.object_token=true needs" in capsys.readouterr().err and not out.exists()
