"""Pretrained pixel encoder: it learns to reconstruct, is verified when loaded, resumes, and the pixel
world model freezes it (and refuses one of another shape or kind)."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from edge.config import ConfigError
from world_models.pixel_pretrain import (
    PixelAutoencoder,
    PixelEncoderConfig,
    is_pixel_encoder,
    load_pixel_encoder,
    train_pixel_encoder,
)
from world_models.slot_pretrain import data_hash
from world_models.token_model import WorldModelConfig
from world_models.train import Trainer, tiny

CFG = PixelEncoderConfig(image_size=32, channels=8, width=16)


def squares(path, n: int = 48, seed: int = 0) -> None:
    """Frames of one red square on a grey table at random places, in the collect format."""
    rng = np.random.default_rng(seed)
    s = CFG.image_size
    arrays = {"frames": np.full((n, s, s, 3), 120, np.uint8), "seg": np.zeros((n, s, s), np.int16),
              "episode": (np.arange(n) // 6).astype(np.int32), "step": (np.arange(n) % 6).astype(np.int16),
              "action": np.zeros(n, np.int8)}
    for i in range(n):
        y, x = rng.integers(0, s - 6, 2)
        arrays["frames"][i, y:y + 6, x:x + 6] = (220, 30, 30)
    np.savez_compressed(path, **arrays, meta=np.array(json.dumps({"data_hash": data_hash(arrays)})))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("px")
    squares(d / "train.npz")
    squares(d / "eval.npz", n=24, seed=1)
    kw = {"eval_data_path": d / "eval.npz", "batch_size": 16, "warmup_steps": 5, "ckpt_every": 20,
          "eval_every": 1000, "log": lambda s: None, "command": "test"}
    first = train_pixel_encoder(CFG, d / "train.npz", d / "enc", 1, **kw)
    last = train_pixel_encoder(CFG, d / "train.npz", d / "enc", 120, **kw)  # resumes from step 1
    return d, first, last, kw


def test_training_reconstructs_and_resumes(trained):
    d, first, last, _ = trained
    assert first["step"] == 1 and last["step"] == 120
    assert last["eval_mse"] < 0.2 * first["eval_mse"]  # from a flat grey guess to the table and the square
    assert last["latent_var"] >= 0.0 and last["eval_frames"] == 24
    steps = [e["step"] for e in map(json.loads, (d / "enc" / "log.jsonl").read_text().splitlines()) if "loss" in e]
    assert steps[0] == 1 and steps[-1] == 120 and steps == sorted(set(steps))
    state = torch.load(d / "enc" / "train_state.pt", weights_only=True)
    assert {float(s["step"]) for s in state["optimizer"]["state"].values()} == {120.0}


def test_other_settings_refuse_to_resume(trained):
    d, _, _, kw = trained
    with pytest.raises(ValueError, match="other settings"):
        train_pixel_encoder(CFG, d / "train.npz", d / "enc", 130, **{**kw, "batch_size": 8})


def test_manifest_round_trip_and_tamper(trained, tmp_path):
    d, _, last, _ = trained
    cfg, state, manifest = load_pixel_encoder(d / "enc")
    assert cfg == CFG and is_pixel_encoder(d / "enc") and manifest["metrics"]["step"] == 120
    assert manifest["data_hash"] and manifest["command"] == "test"
    ae = PixelAutoencoder(CFG)
    ae.encoder.load_state_dict(state)  # the encoder's weights only
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(d / "enc", bad)
    with open(bad / "encoder.pt", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match="sha256"):
        load_pixel_encoder(bad)
    assert not is_pixel_encoder(tmp_path)


def _pixel_run(**kw):
    base = tiny()
    model = WorldModelConfig(**{**base.model.__dict__, "kind": "pixels", **kw})
    return tiny(env_steps=12, eval_every=12, checkpoint_every=12, obs="pixels", model=model)


def test_world_model_freezes_the_pretrained_encoder(trained, tmp_path):
    d = trained[0]
    cfg = _pixel_run()
    t = Trainer(replace(cfg, encoder=str(d / "enc")), tmp_path / "wm", progress=False)
    _, state, _ = load_pixel_encoder(d / "enc")
    t.run()
    assert t.learner.updates > 0 and t.model.encoder.weight_frozen
    for k, v in t.model.encoder.state_dict().items():  # unchanged by every update, in both networks
        torch.testing.assert_close(v, state[k])
        torch.testing.assert_close(t.learner.target.encoder.state_dict()[k], state[k])
    # without an encoder the CNN learns end to end
    t2 = Trainer(cfg, tmp_path / "wm2", progress=False)
    t2.run()
    assert not t2.model.encoder.weight_frozen


def test_world_model_refuses_an_encoder_of_another_shape(trained, tmp_path):
    d = trained[0]
    cfg = _pixel_run(width=32)
    with pytest.raises(ConfigError, match="image_size/channels/width"):
        Trainer(replace(cfg, encoder=str(d / "enc")), tmp_path / "wm", progress=False)


def test_cli_leaves_no_out_behind_for_an_encoder_of_another_shape(trained, tmp_path, capsys):
    from edge.cli import main

    rc = main(["train", "world-model", "--out", str(tmp_path / "new" / "wm"), "--preset", "tiny", "--obs", "pixels",
               "--encoder", str(trained[0] / "enc"), "--set", "model.width=32"])
    assert rc == 2 and "image_size/channels/width" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # nothing written, not even an empty --out or its parent


def test_cli_refuses_a_slot_encoder_for_pixels(tmp_path, capsys):
    from edge.cli import main

    rc = main(["train", "world-model", "--out", str(tmp_path / "wm"), "--preset", "tiny", "--obs", "pixels",
               "--encoder", "world_models/checkpoints/slots_push3_v2"])
    assert rc == 2 and "no pretrained pixel encoder" in capsys.readouterr().err
    rc = main(["train", "pixel-encoder", "--out", str(tmp_path / "pe"), "--set", "width=0"])
    assert rc == 2 and "width=0" in capsys.readouterr().err


def test_old_pixel_runs_naming_the_slot_encoder_still_train_end_to_end_and_resume(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the relative preset path resolves inside the package from anywhere
    cfg = _pixel_run()
    legacy = replace(cfg, encoder="world_models/checkpoints/slots_push3")
    t = Trainer(legacy, tmp_path / "wm", progress=False)
    t.run()
    assert not t.model.encoder.weight_frozen
    assert Trainer(replace(cfg, env_steps=24), tmp_path / "wm", progress=False)._load_state()  # encoder '' now
    with pytest.raises(ConfigError, match="no pixel encoder manifest"):
        Trainer(replace(cfg, encoder=str(tmp_path / "nowhere")), tmp_path / "x", progress=False)


def test_rgbd_frames_are_refused_by_name(tmp_path):
    squares(tmp_path / "rgb.npz", n=12)
    with np.load(tmp_path / "rgb.npz") as z:
        arrays = {k: z[k] for k in z.files if k != "meta"}
    arrays["frames"] = np.concatenate([arrays["frames"], arrays["frames"][..., :1]], -1)
    np.savez_compressed(tmp_path / "rgbd.npz", **arrays, meta=np.array(json.dumps({"data_hash": data_hash(arrays)})))
    with pytest.raises(ValueError, match="rgbd.npz has 4-channel frames; the pixel encoder reads RGB"):
        train_pixel_encoder(CFG, tmp_path / "rgbd.npz", tmp_path / "enc", 1, log=lambda s: None)


def test_a_killed_run_resumes_without_logging_a_row_twice(tmp_path):
    """Rows a killed run logged after its last checkpoint are logged again by the resumed run, not kept
    twice; an eval the kill cut off after its checkpoint is made on resume."""
    squares(tmp_path / "train.npz")
    squares(tmp_path / "eval.npz", n=12, seed=1)
    kw = {"eval_data_path": tmp_path / "eval.npz", "batch_size": 8, "warmup_steps": 2, "ckpt_every": 4,
          "log_every": 2, "eval_every": 4, "log": lambda s: None, "command": "test"}
    out = tmp_path / "enc"
    train_pixel_encoder(CFG, tmp_path / "train.npz", out, 8, **kw)
    lines = (out / "log.jsonl").read_text().splitlines()
    # killed at step 10: its rows at 10 were logged, the eval of step 8 (after its checkpoint) was not
    kept = [x for x in lines if not (json.loads(x)["step"] == 8 and "eval" in json.loads(x))]
    (out / "log.jsonl").write_text("\n".join([*kept, json.dumps({"step": 10, "loss": 9.0})]) + '\n{"step": 1')
    train_pixel_encoder(CFG, tmp_path / "train.npz", out, 12, **kw)
    rows = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [2, 4, 6, 8, 10, 12] and 9.0 not in [r.get("loss") for r in rows]
    assert [r["step"] for r in rows if "eval" in r] == [4, 8, 12]
    # killed between its final checkpoint and its final eval: the rerun makes and logs that eval
    (out / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if not ("eval" in r and r["step"] == 12)))
    train_pixel_encoder(CFG, tmp_path / "train.npz", out, 12, **kw)
    rows = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval" in r] == [4, 8, 12]
