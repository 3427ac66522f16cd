"""Slot encoder (tiny preset), its metrics' known answers, and resumable pretraining on a tiny dataset."""

import json

from pathlib import Path

import numpy as np
import pytest
import torch

from sim.backends.base import SEG_BACKGROUND, SEG_OBJECT0, SEG_ROBOT, SEG_TABLE
from world_models.slot_encoder import (
    SlotAutoencoder,
    SlotEncoderConfig,
    SlotTracker,
    load_encoder,
    save_encoder,
)
from world_models.slot_metrics import fg_ari, identity_rate, identity_rate_from_masks
from world_models.slot_pretrain import (
    ARRAYS,
    data_hash,
    load_dataset,
    main,
    train_slot_encoder,
)
from tests._damage import flip_a_stored_byte

CFG = SlotEncoderConfig.tiny()


def frames(b: int, seed: int = 0, size: int = CFG.image_size) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (b, size, size, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def model() -> SlotAutoencoder:
    torch.manual_seed(0)
    return SlotAutoencoder(CFG).eval()


# ---------------------------------------------------------------------- model
def test_shapes(model):
    k, d, r = CFG.num_slots, CFG.slot_dim, CFG.decoder_res
    with torch.no_grad():
        slots, attn = model.encode_masks(frames(3))
        recon, rgb, masks = model.decode(slots)
        first = model.encode_first(frames(3))
    assert slots.shape == first.shape == (3, k, d)
    assert attn.shape == (3, k, CFG.feature_res, CFG.feature_res)
    assert recon.shape == (3, 3, r, r) and rgb.shape == (3, k, 3, r, r) and masks.shape == (3, k, r, r)
    torch.testing.assert_close(masks.sum(1), torch.ones(3, r, r))
    torch.testing.assert_close(attn.sum(1), torch.ones(3, CFG.feature_res, CFG.feature_res))
    assert torch.is_tensor(model.encode(torch.from_numpy(frames(1))))


def test_feature_parameters_are_exactly_those_the_feature_map_depends_on():
    torch.manual_seed(0)
    m = SlotAutoencoder(CFG)
    m.features(m.prepare(frames(2))).sum().backward()
    used = {id(p) for p in m.parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert {id(p) for p in m.feature_parameters()} == used


def test_init_slots_replace_the_learned_init(model):
    x = frames(2)
    a, b = torch.randn(2, CFG.num_slots, CFG.slot_dim), torch.randn(2, CFG.num_slots, CFG.slot_dim)
    with torch.no_grad():
        learned = model.encode(x)
        explicit = model.encode(x, model.slot_attention.init_slots.expand(2, -1, -1))
        out_a, out_a2, out_b = model.encode(x, a), model.encode(x, a.clone()), model.encode(x, b)
    torch.testing.assert_close(learned, explicit)
    torch.testing.assert_close(out_a, out_a2)
    assert not torch.allclose(out_a, out_b, atol=1e-4)
    assert not torch.allclose(out_a, learned, atol=1e-4)
    with pytest.raises(ValueError, match="init_slots"):
        model.encode(x, torch.zeros(2, CFG.num_slots + 1, CFG.slot_dim))


def test_tracker_propagates_slots_per_env(model):
    tracker = SlotTracker(model)
    x0, x1 = frames(3, 1), frames(3, 2)
    s0 = tracker.reset(x0)
    s1 = tracker.step(x1)
    with torch.no_grad():
        torch.testing.assert_close(s0, model.encode_first(x0))
        torch.testing.assert_close(s1, model.encode(x1, s0))
        tracker.reset(x0[1:2], env_ids=[1])  # only env 1 restarts
        torch.testing.assert_close(tracker.slots[1:2], model.encode_first(x0[1:2]))
        torch.testing.assert_close(tracker.slots[0], s1[0])
    with pytest.raises(ValueError, match="envs"):
        tracker.step(x1[:2])


def test_carried_slot_norm_does_not_matter(model):
    """Each frame starts from layer-normalised slots, so a state grown over many frames cannot drift."""
    x, init = frames(2, 3), torch.randn(2, CFG.num_slots, CFG.slot_dim)
    with torch.no_grad():
        torch.testing.assert_close(model.encode(x, 50.0 * init), model.encode(x, init), atol=1e-4, rtol=1e-4)


def test_carried_frames_get_the_tracking_rounds_and_first_frames_all_rounds():
    torch.manual_seed(0)
    full = SlotAutoencoder(SlotEncoderConfig.tiny(iters=3)).eval()
    track = SlotAutoencoder(SlotEncoderConfig.tiny(iters=3, carry_iters=1)).eval()
    one = SlotAutoencoder(SlotEncoderConfig.tiny(iters=1)).eval()
    track.load_state_dict(full.state_dict())
    one.load_state_dict(full.state_dict())
    x0, x1 = frames(2, 5), frames(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(track.encode_first(x0), full.encode_first(x0))  # reset: all rounds
        torch.testing.assert_close(track.encode(x1), full.encode(x1))  # from the learned init: all rounds
        s0 = full.encode_first(x0)
        torch.testing.assert_close(track.encode(x1, s0), one.encode(x1, s0))  # carried: one round
        assert not torch.allclose(track.encode(x1, s0), full.encode(x1, s0), atol=1e-4)
        loss_first, _ = track.loss(x0, first=True)
        torch.testing.assert_close(loss_first, full.loss(x0, first=True)[0])
    assert SlotEncoderConfig.tiny(iters=3).tracking_iters == 3
    assert SlotEncoderConfig.tiny(iters=3, carry_iters=2).tracking_iters == 2
    with pytest.raises(ValueError, match="carry_iters=11"):
        SlotEncoderConfig(carry_iters=11)


def test_tracking_prior_adds_the_previous_slots_log_masks_to_carried_frames_only():
    torch.manual_seed(0)
    off = SlotAutoencoder(SlotEncoderConfig.tiny(iters=2, carry_iters=1)).eval()
    on = SlotAutoencoder(SlotEncoderConfig.tiny(iters=2, carry_iters=1, carry_prior=2.0)).eval()
    on.load_state_dict(off.state_dict())
    x0, x1 = frames(2, 5), frames(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(on.encode_first(x0), off.encode_first(x0))  # a reset has no prior
        torch.testing.assert_close(on.encode(x1), off.encode(x1))  # nor a frame from the learned init
        s0 = off.encode_first(x0)
        prior = on.tracking_prior(s0, on.cfg.feature_res)  # tiny: decoder 16², attention 16²
        masks = off.decode(s0)[2]
        torch.testing.assert_close(prior, 2.0 * torch.log(masks.clamp_min(1e-4)).flatten(2))
        # the round by hand: the off model's attention logits plus the prior, softmax over slots
        h = off.enc_mlp(off.enc_pos(off.cnn(off.prepare(x1)).permute(0, 2, 3, 1))).flatten(1, 2)
        sa = off.slot_attention
        q = sa.to_q(sa.norm_slots(torch.nn.functional.layer_norm(s0, (CFG.slot_dim,))))
        logits = torch.einsum("bkd,bnd->bkn", q, sa.to_k(sa.norm_in(h))) * CFG.slot_dim ** -0.5
        _, attn_on = on.encode_masks(x1, s0)
        torch.testing.assert_close(attn_on.flatten(2), torch.softmax(logits + prior, 1), atol=1e-5, rtol=1e-5)
        assert not torch.allclose(on.encode(x1, s0), off.encode(x1, s0), atol=1e-4)
        # a strong prior pins each pixel to the slot that held it: the argmax follows the masks
        pinned = SlotAutoencoder(SlotEncoderConfig.tiny(iters=2, carry_iters=1, carry_prior=10.0)).eval()
        pinned.load_state_dict(off.state_dict())
        agree = (pinned.encode_masks(x1, s0)[1].flatten(2).argmax(1) == masks.flatten(2).argmax(1)).float().mean()
        assert agree > (off.encode_masks(x1, s0)[1].flatten(2).argmax(1) == masks.flatten(2).argmax(1)).float().mean()
    for bad in (-0.5, 11.0, True, "1"):
        with pytest.raises(ValueError, match="carry_prior"):
            SlotEncoderConfig(carry_prior=bad)


def test_set_refuses_the_tracking_prior_in_training():
    from world_models.slot_pretrain import _config_from_args

    assert _config_from_args("tiny", ["first_stride=1"]).first_stride == 1
    with pytest.raises(ValueError, match="carry_prior is an inference setting"):
        _config_from_args("tiny", ["carry_prior=1"])


def test_load_encoder_overrides_the_tracking_rounds(tmp_path, model):
    save_encoder(model, tmp_path / "enc")
    assert load_encoder(tmp_path / "enc")[0].cfg.tracking_iters == CFG.iters
    m, _ = load_encoder(tmp_path / "enc", carry_iters=1)
    assert m.cfg.carry_iters == 1 and m.cfg.tracking_iters == 1 and m.cfg.carry_prior == 0.0
    assert load_encoder(tmp_path / "enc", carry_prior=1.5)[0].cfg.carry_prior == 1.5
    torch.testing.assert_close(m.slot_attention.init_slots, model.slot_attention.init_slots)


def test_shipped_encoders_verify_and_v2_tracks_with_one_round():
    root = Path(__file__).resolve().parents[2] / "world_models" / "checkpoints"
    v1, _ = load_encoder(root / "slots_push3")
    v2, manifest = load_encoder(root / "slots_push3_v2", carry_iters=1)  # as the comparison uses it
    assert v1.cfg.tracking_iters == 3 and v2.cfg.tracking_iters == 1 and v2.cfg.iters == 3
    assert manifest["metrics"]["step"] == 8000 and "--steps 8000" in manifest["command"]


def test_bad_config_names_key_and_range():
    with pytest.raises(ValueError, match="num_slots=0.*allowed"):
        SlotEncoderConfig(num_slots=0)
    with pytest.raises(ValueError, match="decoder_res"):
        SlotEncoderConfig(decoder_res=24)
    with pytest.raises(ValueError, match="frames must be"):
        SlotAutoencoder(CFG).encode(frames(1, size=64))


def test_manifest_hash_detects_tampering(tmp_path, model):
    manifest_path = save_encoder(model, tmp_path, command="test", seed=3, data_hash="abc", metrics={"x": 1.0})
    manifest = json.loads(manifest_path.read_text())
    assert manifest["config"]["num_slots"] == CFG.num_slots and manifest["seed"] == 3
    loaded, _ = load_encoder(tmp_path)
    x = frames(2)
    with torch.no_grad():
        torch.testing.assert_close(loaded.encode(x), model.encode(x))
    with open(tmp_path / "encoder.pt", "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match="sha256"):
        load_encoder(tmp_path / "manifest.json")


# ---------------------------------------------------------------------- metrics
def scene_seg(shift: int = 0) -> np.ndarray:
    """(8, 8): table, a robot block and two cubes; ``shift`` moves the cubes right."""
    seg = np.full((8, 8), SEG_TABLE)
    seg[0, :] = SEG_BACKGROUND
    seg[5:8, 0:3] = SEG_ROBOT
    seg[1:3, 1 + shift:3 + shift] = SEG_OBJECT0
    seg[1:3, 5:7] = SEG_OBJECT0 + 1
    return seg


def masks_from(seg: np.ndarray, order: list[int], k: int = 4) -> np.ndarray:
    """(k, H, W) one-hot masks putting entity ``order[i]`` (table, robot, cube0, cube1) in slot i."""
    ids = [SEG_TABLE, SEG_ROBOT, SEG_OBJECT0, SEG_OBJECT0 + 1]
    out = np.zeros((k, *seg.shape))
    for slot, entity in enumerate(order):
        out[slot][seg == ids[entity]] = 1.0
    out[order.index(0)][seg == SEG_BACKGROUND] = 1.0
    return out


def test_fg_ari_known_answers():
    seg = scene_seg()[None]
    perfect = masks_from(seg[0], [0, 1, 2, 3])[None]
    assert fg_ari(seg, perfect) == pytest.approx(1.0)
    assert fg_ari(seg, masks_from(seg[0], [3, 0, 2, 1])[None]) == pytest.approx(1.0)  # slot labels permuted
    assert fg_ari(seg, np.full((1, 4, 8, 8), 0.25)) == pytest.approx(0.0)  # uniform: one cluster
    # background/table pixels are ignored: lumping them with any object changes nothing
    merged = perfect.copy()
    merged[0, 1][seg[0] <= SEG_TABLE] = 2.0
    assert fg_ari(seg, merged) == pytest.approx(1.0)
    # low-resolution masks are upsampled to the segmentation
    assert fg_ari(seg.repeat(2, 1).repeat(2, 2), perfect) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    big = rng.integers(SEG_OBJECT0, SEG_OBJECT0 + 4, (4, 64, 64))
    assert abs(fg_ari(big, rng.random((4, 6, 64, 64)))) < 0.02


def test_identity_rate_known_answers():
    seg = np.stack([scene_seg(0), scene_seg(1), scene_seg(2)])  # one cube moves
    same = np.stack([masks_from(s, [0, 1, 2, 3]) for s in seg])
    assert identity_rate_from_masks(seg, same) == 1.0
    swapped = same.copy()
    swapped[1:] = same[1:][:, [0, 1, 3, 2]]  # the cubes change slots after frame 0
    assert identity_rate_from_masks(seg, swapped) == 0.5  # one of two transitions keeps identity
    assert identity_rate(same[:1], swapped[1:2], seg[:1], seg[1:2]) == 0.0
    # a slot holding only table is ignored, so swapping two table slots is still identity
    five = np.concatenate([same, np.zeros((3, 1, 8, 8))], 1)
    five[1, [0, 4]] = five[1, [4, 0]]
    assert identity_rate_from_masks(seg, five) == 1.0


# ---------------------------------------------------------------------- data + training
def tiny_dataset(path, n: int = 24, seed: int = 0, episode_len: int = 6) -> None:
    """Synthetic moving-square frames in the collect format (fast; no simulator)."""
    rng = np.random.default_rng(seed)
    s = CFG.image_size
    arrays = {"frames": np.full((n, s, s, 3), 120, np.uint8), "seg": np.full((n, s, s), SEG_TABLE, np.int16),
              "episode": (np.arange(n) // episode_len).astype(np.int32),
              "step": (np.arange(n) % episode_len).astype(np.int16), "action": np.zeros(n, np.int8)}
    for i in range(n):
        y, x = rng.integers(0, s - 4, 2)
        arrays["frames"][i, y:y + 4, x:x + 4] = (220, 30, 30)
        arrays["seg"][i, y:y + 4, x:x + 4] = SEG_OBJECT0
    meta = {"data_hash": data_hash(arrays), "seed": seed}
    np.savez_compressed(path, **arrays, meta=np.array(json.dumps(meta)))


def test_train_resumes_step_and_optimizer(tmp_path):
    tiny_dataset(tmp_path / "train.npz")
    tiny_dataset(tmp_path / "eval.npz", seed=1)
    kw = {"eval_data_path": tmp_path / "eval.npz", "warmup_steps": 2, "ckpt_every": 2, "log_every": 1,
          "log": lambda s: None}
    out = tmp_path / "enc"
    m2 = train_slot_encoder(CFG, tmp_path / "train.npz", out, 2, batch_size=4, seed=0, **kw)
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["step"] == 2 and m2["step"] == 2
    m4 = train_slot_encoder(CFG, tmp_path / "train.npz", out, 4, batch_size=4, seed=0, seq_len=1, **kw)
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["step"] == 4 and m4["step"] == 4
    adam_steps = {float(s["step"]) for s in state["optimizer"]["state"].values()}
    assert adam_steps == {4.0}  # 2 + 2: the optimizer state came back with the checkpoint
    steps = [e["step"] for e in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in e]
    assert steps == [1, 2, 3, 4]
    for key in ("fg_ari_attn", "fg_ari_decoder", "identity_rate_attn", "identity_rate_decoder"):
        assert key in m4
    from world_models.slot_pretrain import evaluate, load_dataset

    model4, _ = load_encoder(out)
    arrays = load_dataset(tmp_path / "eval.npz")[0]
    ev = evaluate(model4, arrays, per_episode=True)
    per = ev["per_episode"]
    assert len(per["identity_rate_attn"]) == ev["eval_episodes"] == 4  # 24 frames, 6 per episode
    assert np.isclose(np.nanmean(per["fg_ari_decoder"]), ev["fg_ari_decoder"])  # equal-length episodes
    assert json.loads((out / "metrics.json").read_text())["step"] == 4
    model, manifest = load_encoder(out)
    assert manifest["metrics"]["step"] == 4 and isinstance(model, SlotAutoencoder)
    with pytest.raises(ValueError, match="other settings"):
        train_slot_encoder(CFG, tmp_path / "train.npz", out, 6, batch_size=8, seed=0, **kw)
    with pytest.raises(ValueError, match="other settings"):  # a changed new key is a change
        train_slot_encoder(SlotEncoderConfig.tiny(carry_iters=1), tmp_path / "train.npz", out, 6, batch_size=4,
                           seed=0, seq_len=1, **kw)
    # a run saved before carry_iters existed (its settings lack the key) resumes at the default
    state = torch.load(out / "train_state.pt", weights_only=True)
    settings = json.loads(state["settings"])
    del settings["config"]["carry_iters"]
    state["settings"] = json.dumps(settings)
    torch.save(state, out / "train_state.pt")
    keep = (out / "train_state.pt").read_bytes()
    flip_a_stored_byte(out / "train_state.pt")  # a byte changed on disk: not resumed (torch.load would not notice)
    with pytest.raises(ValueError, match="its bytes changed on disk after it was saved"):
        train_slot_encoder(CFG, tmp_path / "train.npz", out, 6, batch_size=4, seed=0, seq_len=1, **kw)
    (out / "train_state.pt").write_bytes(keep)
    with open(out / "log.jsonl", "a") as f:  # a killed run logged step 7 after its last checkpoint (6)
        f.write(json.dumps({"step": 7, "loss": 9.0}) + "\n")
    m6 = train_slot_encoder(CFG, tmp_path / "train.npz", out, 6, batch_size=4, seed=0, seq_len=1, **kw)
    assert m6["step"] == 6
    train_slot_encoder(CFG, tmp_path / "train.npz", out, 7, batch_size=4, seed=0, seq_len=1, **kw)
    steps = [e["step"] for e in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if "loss" in e]
    assert steps == [1, 2, 3, 4, 5, 6, 7]  # its step-7 row redone, not kept twice
    # --no-resume starts over: the old run's state and kept weights go with its log
    (out / "weights_000004.pt").write_bytes(b"old")
    train_slot_encoder(CFG, tmp_path / "train.npz", out, 1, batch_size=4, seed=0, seq_len=1, resume=False, **kw)
    assert not (out / "weights_000004.pt").exists()
    assert torch.load(out / "train_state.pt", weights_only=True)["step"] == 1


def test_init_from_starts_from_another_runs_weights_and_is_part_of_the_identity(tmp_path):
    from world_models.slot_pretrain import load_init_weights

    tiny_dataset(tmp_path / "train.npz")
    kw = {"warmup_steps": 2, "log_every": 1, "log": lambda s: None}
    src = tmp_path / "src"
    train_slot_encoder(CFG, tmp_path / "train.npz", src, 2, batch_size=4, seed=0, **kw)
    track = SlotEncoderConfig.tiny(carry_iters=1)  # the tracking rounds may differ from the source's
    for source in (src, src / "train_state.pt", src / "manifest.json"):
        weights, info = load_init_weights(source, track)
        assert info["step"] == 2
        ref = torch.load(src / "train_state.pt", weights_only=True)["model"]
        assert all(torch.equal(weights[k], ref[k]) for k in ref)
    # lr 1e-12: one step leaves the weights where they started, so the run began at the source's
    ft = tmp_path / "ft"
    train_slot_encoder(track, tmp_path / "train.npz", ft, 1, batch_size=4, seed=1, lr=1e-12, init_from=src, **kw)
    got = torch.load(ft / "train_state.pt", weights_only=True)["model"]
    assert all(torch.allclose(got[k], ref[k], atol=1e-6) for k in ref)
    fresh = torch.load(src / "train_state.pt", weights_only=True)  # differs from a random init
    assert any(not torch.equal(fresh["model"][k], SlotAutoencoder(track).state_dict()[k].cpu()) for k in ref)
    manifest = json.loads((ft / "manifest.json").read_text())
    assert manifest["init_from"]["step"] == 2 and manifest["config"]["carry_iters"] == 1
    # resuming needs the same source; another architecture is refused by name
    other = tmp_path / "other"
    train_slot_encoder(CFG, tmp_path / "train.npz", other, 1, batch_size=4, seed=5, **kw)
    with pytest.raises(ValueError, match="started from other weights"):
        train_slot_encoder(track, tmp_path / "train.npz", ft, 2, batch_size=4, seed=1, lr=1e-12, init_from=other,
                           **kw)
    with pytest.raises(ValueError, match="--init-from"):  # resumed without its source: named
        train_slot_encoder(track, tmp_path / "train.npz", ft, 2, batch_size=4, seed=1, lr=1e-12, **kw)
    with pytest.raises(ValueError, match="another architecture.*slot_dim"):
        load_init_weights(src, SlotEncoderConfig.tiny(slot_dim=CFG.slot_dim * 2))
    with pytest.raises(ValueError, match="--init-from.*no train_state.pt or manifest.json"):
        load_init_weights(tmp_path / "nowhere", CFG)
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="--init-from.*junk.pt is not a slot-encoder run"):
        load_init_weights(tmp_path / "junk.pt", CFG)
    (tmp_path / "wm").mkdir()  # e.g. a world-model directory: a manifest of another kind
    (tmp_path / "wm" / "manifest.json").write_text('{"config": {}}')
    with pytest.raises(ValueError, match="--init-from.*not a slot-encoder run"):
        load_init_weights(tmp_path / "wm", CFG)
    load_init_weights(src, SlotEncoderConfig.tiny(fg_weight=3))  # a loss weight, not architecture
    fine = SlotEncoderConfig.tiny(first_stride=1)  # the same weights on a finer feature map
    weights, _ = load_init_weights(src, fine)
    model = SlotAutoencoder(fine)
    model.load_state_dict(weights)
    assert all(torch.equal(model.state_dict()[k].cpu(), ref[k]) for k in ref)
    finer = SlotEncoderConfig.tiny(decoder_res=32, broadcast_res=16)  # the same layers, a finer target
    weights, _ = load_init_weights(src, finer)
    model = SlotAutoencoder(finer)
    model.load_state_dict(weights)
    assert all(torch.equal(model.state_dict()[k].cpu(), ref[k]) for k in ref)
    assert model.decode(torch.zeros(1, CFG.num_slots, CFG.slot_dim))[2].shape[-1] == 32
    weights, _ = load_init_weights(src, SlotEncoderConfig.tiny(carry_prior=1.0))  # an inference setting
    with pytest.raises(ValueError, match="weights do not fit"):  # one more upsampling layer: refused
        load_init_weights(src, SlotEncoderConfig.tiny(decoder_res=32, broadcast_res=8))


def test_first_stride_one_keeps_every_pixel_in_the_feature_map():
    cfg = SlotEncoderConfig.tiny(first_stride=1, carry_iters=1, carry_prior=1.0)
    assert cfg.feature_res == cfg.image_size and CFG.feature_res == CFG.image_size // 2
    m = SlotAutoencoder(cfg).eval()
    x = frames(2, 3)
    with torch.no_grad():
        slots, attn = m.encode_first_masks(x)
        assert slots.shape == (2, cfg.num_slots, cfg.slot_dim) and attn.shape == (2, cfg.num_slots, 32, 32)
        s2, a2 = m.encode_masks(frames(2, 4), slots)
        assert a2.shape == attn.shape
        # the prior is resampled to the attention's grid: repeated onto a finer one, averaged onto a coarser one
        masks = m.decode(slots)[2]  # (2, K, 16, 16)
        up = torch.log(masks.clamp_min(1e-4)).repeat_interleave(2, -1).repeat_interleave(2, -2)
        torch.testing.assert_close(m.tracking_prior(slots, 32), up.flatten(2))
        coarse = SlotAutoencoder(SlotEncoderConfig.tiny(decoder_res=32, broadcast_res=16, carry_prior=1.0)).eval()
        cm = coarse.decode(slots)[2]  # (2, K, 32, 32) onto the 16² attention grid
        want = torch.log(torch.nn.functional.avg_pool2d(cm, 2).clamp_min(1e-4)).flatten(2)
        torch.testing.assert_close(coarse.tracking_prior(slots, 16), want)
        assert m.decode(s2)[2].shape == (2, cfg.num_slots, cfg.decoder_res, cfg.decoder_res)
    for bad in (0, 3):
        with pytest.raises(ValueError, match="first_stride"):
            SlotEncoderConfig(first_stride=bad)


def test_kept_weights_are_a_shorter_runs_and_export_to_a_verified_encoder(tmp_path):
    from world_models.slot_pretrain import export_encoder
    from world_models.slot_pretrain import main as cli

    tiny_dataset(tmp_path / "train.npz")
    tiny_dataset(tmp_path / "eval.npz", seed=1)
    kw = {"warmup_steps": 2, "log_every": 1, "log": lambda s: None}
    long = tmp_path / "long"
    train_slot_encoder(CFG, tmp_path / "train.npz", long, 3, batch_size=4, seed=0, keep_every=2,
                       command="train-cmd", **kw)
    assert sorted(p.name for p in long.glob("weights_*.pt")) == ["weights_000002.pt"]  # 2, not 1 or 3
    short = tmp_path / "short"
    train_slot_encoder(CFG, tmp_path / "train.npz", short, 2, batch_size=4, seed=0, **kw)
    kept = torch.load(long / "weights_000002.pt", weights_only=True)
    ref = torch.load(short / "train_state.pt", weights_only=True)["model"]
    assert kept["step"] == 2 and "optimizer" not in kept and kept["command"] == "train-cmd"
    assert all(torch.equal(kept["model"][k], ref[k]) for k in ref)  # the 2-step run's weights
    out = tmp_path / "exported"
    metrics = export_encoder(long / "weights_000002.pt", tmp_path / "train.npz", out,
                             eval_data_path=tmp_path / "eval.npz", command="export-cmd")
    model, manifest = load_encoder(out)
    assert all(torch.equal(model.state_dict()[k].cpu(), ref[k]) for k in ref)
    assert manifest["metrics"] == metrics and metrics["step"] == 2 and "identity_rate_attn" in metrics
    assert manifest["command"] == "train-cmd  # then: export-cmd" and manifest["seed"] == 0
    assert manifest["exported_from"]["step"] == 2
    assert manifest["data_hash"] == json.loads(kept["settings"])["data_hash"]
    with pytest.raises(ValueError, match="--data .*eval.npz: data_hash"):  # not the run's training data
        export_encoder(long / "weights_000002.pt", tmp_path / "eval.npz", tmp_path / "x")
    for junk in (b"", b"not a checkpoint"):
        (tmp_path / "junk.pt").write_bytes(junk)
        assert cli(["export", "--weights", str(tmp_path / "junk.pt"), "--data", str(tmp_path / "train.npz"),
                    "--out", str(tmp_path / "y")]) == 2
    torch.save({"nothing": 1}, tmp_path / "junk.pt")
    assert cli(["export", "--weights", str(tmp_path / "junk.pt"), "--data", str(tmp_path / "train.npz"),
                "--out", str(tmp_path / "y")]) == 2
    with pytest.raises(ValueError, match="holds a training run"):  # would overwrite the run's own encoder
        export_encoder(long / "weights_000002.pt", tmp_path / "train.npz", long)
    # the CLI: kept weights across a resume are still the 2-step run's, and export from the command line
    args = ["--data", str(tmp_path / "train.npz"), "--batch-size", "4", "--warmup-steps", "2", "--ckpt-every", "1",
            "--keep-every", "2", "--preset", "tiny"]
    cli_run = ["train", "--out", str(tmp_path / "cli"), *args]
    assert cli([*cli_run, "--steps", "1"]) == 0 and cli([*cli_run, "--steps", "3"]) == 0  # 1 step, then resumed
    assert cli(["train", "--out", str(tmp_path / "cli2"), *args, "--steps", "2"]) == 0  # 2 steps in one go
    resumed = torch.load(tmp_path / "cli" / "weights_000002.pt", weights_only=True)["model"]
    ref2 = torch.load(tmp_path / "cli2" / "train_state.pt", weights_only=True)["model"]
    assert all(torch.equal(resumed[k], ref2[k]) for k in ref2)
    assert cli(["export", "--weights", str(tmp_path / "cli" / "weights_000002.pt"), "--data",
                str(tmp_path / "train.npz"), "--out", str(tmp_path / "cli_export")]) == 0
    assert load_encoder(tmp_path / "cli_export")[1]["exported_from"]["step"] == 2
    assert cli(["export", "--weights", str(tmp_path / "none.pt"), "--data", str(tmp_path / "train.npz"),
                "--out", str(tmp_path / "y")]) == 2
    with pytest.raises(ValueError, match="keep_every=-1"):
        train_slot_encoder(CFG, tmp_path / "train.npz", tmp_path / "z", 1, keep_every=-1, **kw)


def test_train_on_windows_with_temporal_init(tmp_path):
    tiny_dataset(tmp_path / "train.npz")
    metrics = train_slot_encoder(CFG, tmp_path / "train.npz", tmp_path / "enc", 2, batch_size=2, seq_len=3,
                                 log_every=1, log=lambda s: None)
    assert metrics == {"step": 2}  # no eval data: nothing else to report
    with pytest.raises(ValueError, match="no window of 7"):
        train_slot_encoder(CFG, tmp_path / "train.npz", tmp_path / "enc7", 1, seq_len=7, log=lambda s: None)


def test_collect_from_env_and_cli_errors(tmp_path, capsys):
    from world_models.slot_pretrain import collect_frames

    meta = collect_frames(5, 0, tmp_path / "d.npz", episode_len=3, image_size=32, progress=False)
    arrays, loaded = load_dataset(tmp_path / "d.npz")
    assert loaded == meta and set(arrays) == set(ARRAYS)
    assert arrays["frames"].shape == (5, 32, 32, 3) and arrays["seg"].dtype == np.int16
    assert arrays["step"].tolist() == [0, 1, 2, 0, 1] and arrays["episode"].tolist() == [0, 0, 0, 1, 1]
    assert (arrays["seg"] == SEG_ROBOT).any() and (arrays["seg"] >= SEG_OBJECT0).any()
    assert main(["train", "--data", str(tmp_path / "missing.npz"), "--out", str(tmp_path / "o"),
                 "--steps", "1"]) == 2
    assert main(["train", "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "o"), "--steps", "0",
                 "--preset", "tiny"]) == 2
    assert main(["train", "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "o"), "--steps", "1",
                 "--set", "num_slots=0"]) == 2
    assert "num_slots" in capsys.readouterr().err


def test_motion_weight_adds_weight_where_the_frame_changed():
    from world_models.slot_encoder import fg_weighted_mse

    t = torch.full((1, 3, 8, 8), 0.5)  # uniform: no foreground pixels
    prev = t.clone()
    prev[0, :, 2, 3] = 0.0  # one pixel changed since the previous frame
    recon = t.clone()
    recon[0, :, 2, 3] += 0.1  # the reconstruction is wrong only there
    plain = fg_weighted_mse(recon, t, 0)
    assert torch.isclose(plain, torch.tensor(0.01 / 64))
    assert torch.isclose(fg_weighted_mse(recon, t, 10, prev, 0), plain)  # motion_weight 0: as before
    assert torch.isclose(fg_weighted_mse(recon, t, 10, t, 10), plain)  # nothing moved: as before
    # weight 11 on the moved pixel, 1 on the 63 others, normalised by the mean weight 74 / 64
    assert torch.isclose(fg_weighted_mse(recon, t, 10, prev, 10), plain * 11 * 64 / 74)
    recon_elsewhere = t.clone()
    recon_elsewhere[0, :, 5, 5] += 0.1  # the same error on a still pixel now weighs less than plain
    assert torch.isclose(fg_weighted_mse(recon_elsewhere, t, 10, prev, 10), plain * 64 / 74)


def test_motion_weight_reaches_the_loss_and_training():
    import dataclasses

    torch.manual_seed(0)
    moving = SlotAutoencoder(dataclasses.replace(CFG, motion_weight=10)).eval()
    still = SlotAutoencoder(dataclasses.replace(CFG, motion_weight=0)).eval()
    still.load_state_dict(moving.state_dict())
    x, p = frames(2, 1), frames(2, 2)
    with torch.no_grad():
        base = moving.loss(x)[0]
        assert torch.equal(moving.loss(x, prev_frames=x)[0], base)  # no pixel changed
        assert torch.equal(still.loss(x, prev_frames=p)[0], base)  # motion_weight 0 ignores prev
        assert not torch.isclose(moving.loss(x, prev_frames=p)[0], base)
    with pytest.raises(ValueError, match="motion_weight=-1"):
        SlotEncoderConfig.tiny(motion_weight=-1)


def test_training_with_motion_weight_weighs_the_windows_moving_pixels(tmp_path):
    import dataclasses

    tiny_dataset(tmp_path / "train.npz")
    kw = dict(batch_size=2, seq_len=2, log_every=1, log=lambda s: None)
    train_slot_encoder(CFG, tmp_path / "train.npz", tmp_path / "a", 2, **kw)
    train_slot_encoder(dataclasses.replace(CFG, motion_weight=10), tmp_path / "train.npz", tmp_path / "b", 2, **kw)
    la = [json.loads(line)["loss"] for line in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    lb = [json.loads(line)["loss"] for line in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert la[0] != lb[0]  # same init and batches; the moved square's pixels weigh more in b
    a = torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "train_state.pt", weights_only=True)["model"]
    assert any(not torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="motion_weight=10 needs windows"):
        train_slot_encoder(dataclasses.replace(CFG, motion_weight=10), tmp_path / "train.npz", tmp_path / "c", 1,
                           log=lambda s: None)


def test_training_passes_each_frame_the_windows_previous_one(tmp_path, monkeypatch):
    import dataclasses

    tiny_dataset(tmp_path / "train.npz")
    seen = []
    real = SlotAutoencoder.loss

    def spy(self, frames, init_slots=None, *, first=False, prev_frames=None):
        seen.append((np.asarray(frames).copy(), None if prev_frames is None else np.asarray(prev_frames).copy()))
        return real(self, frames, init_slots, first=first, prev_frames=prev_frames)

    monkeypatch.setattr(SlotAutoencoder, "loss", spy)
    train_slot_encoder(dataclasses.replace(CFG, motion_weight=10), tmp_path / "train.npz", tmp_path / "m", 2,
                       batch_size=2, seq_len=3, log=lambda s: None)
    assert len(seen) == 6  # 2 steps x windows of 3
    for step in range(2):
        window = seen[3 * step:3 * step + 3]
        assert window[0][1] is None  # the window's first frame has no previous one
        for j in (1, 2):
            assert np.array_equal(window[j][1], window[j - 1][0])  # frame j's previous is frame j - 1


def test_collect_with_object_play_moves_the_cubes(tmp_path, capsys):
    from world_models.slot_pretrain import collect_frames

    moved = {}
    for policy in ("random", "play"):
        meta = collect_frames(120, 3, tmp_path / f"{policy}.npz", episode_len=40, image_size=32,
                              progress=False, policy=policy)
        assert meta.get("policy") == (None if policy == "random" else "play")
        arrays = load_dataset(tmp_path / f"{policy}.npz")[0]
        assert arrays["episode"].max() == 2  # a fresh player per episode (the scene's cubes change)
        cubes = arrays["seg"] >= SEG_OBJECT0
        same = arrays["episode"][1:] == arrays["episode"][:-1]
        moved[policy] = float(((cubes[1:] != cubes[:-1]).sum((1, 2)) > 2)[same].mean())
    assert moved["play"] > moved["random"] + 0.15, moved  # ~0.45 vs ~0.03 on 400 frames
    with pytest.raises(ValueError, match="policy='walk'"):
        collect_frames(4, 0, tmp_path / "x.npz", policy="walk", progress=False)
    with pytest.raises(ValueError, match="eps=2"):
        collect_frames(4, 0, tmp_path / "x.npz", policy="play", eps=2.0, progress=False)
    assert main(["collect", "--frames", "4", "--out", str(tmp_path / "y.npz"), "--policy", "play",
                 "--play-segment", "0.5"]) == 2
    assert "--play-segment 0.5" in capsys.readouterr().err
    assert main(["collect", "--frames", "4", "--out", str(tmp_path / "y.npz"), "--eps", "0.3"]) == 2
    assert "--eps 0.3 applies to object play only" in capsys.readouterr().err


def test_collect_with_object_play_starts_a_fresh_player_each_episode(tmp_path, monkeypatch):
    import world_models.scripted as scripted
    from world_models.slot_pretrain import collect_frames

    made = []
    real = scripted.ObjectPlay

    class Counting(real):
        def __init__(self, *a, **k):
            made.append(1)
            super().__init__(*a, **k)

    monkeypatch.setattr(scripted, "ObjectPlay", Counting)
    collect_frames(9, 3, tmp_path / "p.npz", episode_len=3, image_size=32, progress=False, policy="play")
    assert len(made) == 1 + 3  # one to check the settings, then one per episode


def test_slot_predictor_starts_from_no_change_and_reads_the_action():
    from world_models.slot_encoder import SlotPredictor

    torch.manual_seed(0)
    pred = SlotPredictor(CFG.slot_dim, 8)
    s = torch.randn(3, CFG.num_slots, CFG.slot_dim)
    a = torch.tensor([0, 1, 7])
    assert torch.equal(pred(s, a), s)  # zero-initialised change: training starts from "no change"
    torch.nn.init.normal_(pred.delta.weight)
    out0, out1 = pred(s, torch.zeros(3, dtype=torch.long)), pred(s, torch.ones(3, dtype=torch.long))
    assert out0.shape == s.shape and not torch.allclose(out0, out1)  # the action moves the prediction
    with pytest.raises(ValueError, match="actions must be"):
        pred(s, torch.zeros(2, dtype=torch.long))


def test_next_frame_loss_trains_the_encoder_through_the_previous_slots():
    from world_models.slot_encoder import SlotPredictor, next_frame_loss

    torch.manual_seed(0)
    model, pred = SlotAutoencoder(CFG), SlotPredictor(CFG.slot_dim, 8)
    x, y = frames(2, 1), frames(2, 2)
    slots = model.encode(x)
    loss = next_frame_loss(model, pred, slots, np.array([3, 4]), y, x)
    loss.backward()
    assert loss.item() > 0 and model.cnn[0].weight.grad.abs().sum() > 0  # reaches the CNN via the slots
    assert pred.delta.weight.grad.abs().sum() > 0  # the zero-initialised change is what learns first
    with torch.no_grad():  # the target is the next frame, not the current one
        recon = model.decode(pred(slots, torch.tensor([3, 4])))[0]
        from world_models.slot_encoder import fg_weighted_mse

        assert torch.isclose(next_frame_loss(model, pred, slots, np.array([3, 4]), y),
                             fg_weighted_mse(recon, model.target(model.prepare(y)), CFG.fg_weight))


def test_training_with_predict_weight_resumes_exactly_and_exports_the_encoder_alone(tmp_path):
    import dataclasses

    tiny_dataset(tmp_path / "train.npz")
    cfg = dataclasses.replace(CFG, predict_weight=2)
    kw = dict(batch_size=2, seq_len=3, log_every=1, ckpt_every=2, warmup_steps=2, log=lambda s: None)
    train_slot_encoder(CFG, tmp_path / "train.npz", tmp_path / "plain", 2, **kw)
    train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "a", 4, **kw)
    train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "b", 2, **kw)
    train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "b", 4, **kw)  # resumed at step 2
    lp = [json.loads(line)["loss"] for line in (tmp_path / "plain" / "log.jsonl").read_text().splitlines()]
    la = [json.loads(line)["loss"] for line in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    assert la[0] > lp[0]  # same init and batches; the prediction's loss is added
    first = json.loads((tmp_path / "a" / "log.jsonl").read_text().splitlines()[0])
    assert first["predict_loss"] > 0 and "predict_loss" not in json.loads(
        (tmp_path / "plain" / "log.jsonl").read_text().splitlines()[0])
    a = torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "train_state.pt", weights_only=True)
    for part in ("model", "predictor"):
        assert a[part].keys() == b[part].keys()
        assert all(torch.equal(a[part][k], b[part][k]) for k in a[part])  # the predictor came back too
    assert any(v.abs().sum() > 0 for k, v in a["predictor"].items() if k.startswith("delta"))  # it trained
    enc, manifest = load_encoder(tmp_path / "a")
    assert manifest["config"]["predict_weight"] == 2
    assert not any(k.startswith(("action", "mix", "delta")) for k in enc.state_dict())
    with pytest.raises(ValueError, match="predict_weight=2 needs windows"):
        train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "c", 1, log=lambda s: None)
    with pytest.raises(ValueError, match="predict_weight=-1"):
        SlotEncoderConfig.tiny(predict_weight=-1)


def test_training_with_predict_weight_refuses_windows_without_actions(tmp_path):
    import dataclasses

    tiny_dataset(tmp_path / "train.npz")
    d = dict(np.load(tmp_path / "train.npz"))
    d["action"][3] = -1  # a frame inside an episode with no action recorded
    meta = json.loads(str(d.pop("meta")))
    d.pop("meta", None)
    meta["data_hash"] = data_hash(d)
    np.savez_compressed(tmp_path / "bad.npz", **d, meta=np.array(json.dumps(meta)))
    with pytest.raises(ValueError, match=r"bad.npz: action -1 inside a window"):
        train_slot_encoder(dataclasses.replace(CFG, predict_weight=1), tmp_path / "bad.npz", tmp_path / "x", 1,
                           seq_len=2, log=lambda s: None)
    # the same data trains without the prediction, and from weights trained without it
    train_slot_encoder(CFG, tmp_path / "bad.npz", tmp_path / "y", 1, seq_len=2, log=lambda s: None)
    train_slot_encoder(dataclasses.replace(CFG, predict_weight=1), tmp_path / "train.npz", tmp_path / "z", 1,
                       seq_len=2, init_from=tmp_path / "y", log=lambda s: None)


def test_training_predicts_each_windows_next_frame_from_the_action_taken_there(tmp_path, monkeypatch):
    """Actions as collect records them (action[i] leads from frame i to i + 1, -1 on an episode's
    last frame): frame j of a window is predicted with action[i0 + j - 1] and scored against frame j."""
    import dataclasses

    import world_models.slot_encoder as se

    tiny_dataset(tmp_path / "t.npz")
    d = dict(np.load(tmp_path / "t.npz"))
    meta = json.loads(str(d.pop("meta")))
    n = len(d["episode"])
    d["action"] = (np.arange(n) % 8).astype(np.int8)
    d["action"][d["step"] == d["step"].max()] = -1  # nothing acted after an episode's last frame
    meta["data_hash"] = data_hash(d)
    np.savez_compressed(tmp_path / "train.npz", **d, meta=np.array(json.dumps(meta)))
    seen, real = [], se.next_frame_loss

    def spy(model, predictor, slots, actions, next_frames, frames=None):
        seen.append((np.asarray(actions).copy(), np.asarray(next_frames).copy(), np.asarray(frames).copy()))
        return real(model, predictor, slots, actions, next_frames, frames)

    monkeypatch.setattr(se, "next_frame_loss", spy)
    train_slot_encoder(dataclasses.replace(CFG, predict_weight=1), tmp_path / "train.npz", tmp_path / "p", 3,
                       batch_size=4, seq_len=3, log=lambda s: None)
    assert len(seen) == 6  # 3 steps x 2 transitions per window of 3
    frames_all = d["frames"]
    for actions, nxt, cur in seen:
        idx = [int(np.flatnonzero((frames_all == f).all(axis=(1, 2, 3)))[0]) for f in nxt]
        assert np.array_equal(actions, d["action"][np.array(idx) - 1])  # the action taken on the frame before
        assert (actions >= 0).all() and np.array_equal(cur, frames_all[np.array(idx) - 1])
        assert (d["episode"][np.array(idx)] == d["episode"][np.array(idx) - 1]).all()  # never across episodes


def test_init_from_an_encoder_with_fewer_slots_keeps_its_slots_and_adds_fresh_ones(tmp_path):
    from world_models.slot_pretrain import load_init_weights, load_into

    tiny_dataset(tmp_path / "train.npz")
    kw = {"warmup_steps": 2, "log_every": 1, "log": lambda s: None, "batch_size": 4}
    src = tmp_path / "src"
    train_slot_encoder(CFG, tmp_path / "train.npz", src, 2, seed=0, **kw)
    ref = torch.load(src / "train_state.pt", weights_only=True)["model"]
    more = SlotEncoderConfig.tiny(num_slots=CFG.num_slots + 1)
    weights, info = load_init_weights(src, more)
    assert info["grown_slots"] == [CFG.num_slots, CFG.num_slots + 1]
    torch.manual_seed(7)
    model = SlotAutoencoder(more)
    own = model.slot_attention.init_slots.detach().clone()
    load_into(model, weights)
    got = model.state_dict()
    key = "slot_attention.init_slots"
    assert torch.equal(got[key][:CFG.num_slots], ref[key]) and torch.equal(got[key][-1], own[-1])
    assert all(torch.equal(got[k], ref[k]) for k in ref if k != key)  # every other weight is shared by all slots
    assert model.encode(frames(2)).shape == (2, CFG.num_slots + 1, CFG.slot_dim)
    # a run started from it: lr 1e-12, so one step leaves it where it began (the source's + seed-0 fresh rows)
    ft = tmp_path / "ft"
    train_slot_encoder(more, tmp_path / "train.npz", ft, 1, seed=0, lr=1e-12, init_from=src, **kw)
    ran = torch.load(ft / "train_state.pt", weights_only=True)["model"]
    torch.manual_seed(0)
    fresh_row = SlotAutoencoder(more).slot_attention.init_slots[-1].detach()
    assert torch.allclose(ran[key][:CFG.num_slots], ref[key], atol=1e-6)
    assert torch.allclose(ran[key][-1], fresh_row, atol=1e-6)
    assert json.loads((ft / "manifest.json").read_text())["init_from"]["grown_slots"] == [4, 5]
    with pytest.raises(ValueError, match="another architecture.*num_slots"):  # fewer slots: refused
        load_init_weights(src, SlotEncoderConfig.tiny(num_slots=CFG.num_slots - 1))
    with pytest.raises(ValueError, match="another architecture") as err:  # more slots and another width: refused
        load_init_weights(src, SlotEncoderConfig.tiny(num_slots=CFG.num_slots + 1, slot_dim=CFG.slot_dim * 2))
    assert "slot_dim" in str(err.value) and "num_slots" not in str(err.value)  # names what must match
    # a grown run resumes (the grown initialisation is in its own state), and a manifest is a source too
    train_slot_encoder(more, tmp_path / "train.npz", ft, 2, seed=0, lr=1e-12, init_from=src, **kw)
    assert torch.load(ft / "train_state.pt", weights_only=True)["step"] == 2
    assert load_init_weights(src / "manifest.json", SlotEncoderConfig.tiny(num_slots=6, carry_iters=1))[1][
        "grown_slots"] == [4, 6]


def test_slot_prediction_loss_is_a_cosine_with_the_target_held_fixed():
    from world_models.slot_encoder import slot_prediction_loss

    x = torch.randn(2, 3, 8)
    assert slot_prediction_loss(x, 2.0 * x).item() == pytest.approx(0.0, abs=1e-6)  # scale does not matter
    assert slot_prediction_loss(x, -x).item() == pytest.approx(2.0, abs=1e-6)
    p, t = torch.randn(2, 3, 8, requires_grad=True), torch.randn(2, 3, 8, requires_grad=True)
    slot_prediction_loss(p, t).backward()
    assert p.grad.abs().sum() > 0 and t.grad is None  # no gradient reaches the target


def test_training_with_latent_weight_predicts_the_next_slots_and_resumes_exactly(tmp_path, monkeypatch):
    import dataclasses

    import world_models.slot_encoder as se

    tiny_dataset(tmp_path / "train.npz")
    cfg = dataclasses.replace(CFG, latent_weight=3)
    kw = dict(batch_size=2, seq_len=3, log_every=1, ckpt_every=2, warmup_steps=2, log=lambda s: None)
    train_slot_encoder(CFG, tmp_path / "train.npz", tmp_path / "plain", 2, **kw)
    calls, real = [], se.slot_prediction_loss

    def spy(predicted, target):
        calls.append((predicted.detach().clone(), target.detach().clone()))
        return real(predicted, target)

    monkeypatch.setattr(se, "slot_prediction_loss", spy)
    train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "a", 4, **kw)
    assert len(calls) == 8  # 4 steps x 2 transitions per window of 3
    monkeypatch.setattr(se, "slot_prediction_loss", real)
    train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "b", 2, **kw)
    train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "b", 4, **kw)  # resumed at step 2
    a = torch.load(tmp_path / "a" / "train_state.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "train_state.pt", weights_only=True)
    for part in ("model", "predictor"):
        assert all(torch.equal(a[part][k], b[part][k]) for k in a[part])
    log = [json.loads(line) for line in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    plain = [json.loads(line) for line in (tmp_path / "plain" / "log.jsonl").read_text().splitlines()]
    assert log[0]["latent_loss"] > 0 and "predict_loss" not in log[0] and "latent_loss" not in plain[0]
    assert log[0]["loss"] == pytest.approx(plain[0]["loss"] + 3 * log[0]["latent_loss"], rel=1e-5)
    enc, manifest = load_encoder(tmp_path / "a")
    assert manifest["config"]["latent_weight"] == 3 and not any(k.startswith("delta") for k in enc.state_dict())
    with pytest.raises(ValueError, match="latent_weight=3 needs windows"):
        train_slot_encoder(cfg, tmp_path / "train.npz", tmp_path / "c", 1, log=lambda s: None)


def test_latent_loss_predicts_frame_js_slots_from_frame_j_minus_1s_and_the_action_taken_there(tmp_path, monkeypatch):
    """On data with actions as collect records them, each transition of a window scores the
    predictor on (frame j − 1's slots, action[j − 1]) against frame j's slots as encoded."""
    import dataclasses

    import world_models.slot_encoder as se

    tiny_dataset(tmp_path / "t.npz")
    d = dict(np.load(tmp_path / "t.npz"))
    meta = json.loads(str(d.pop("meta")))
    d["action"] = (np.arange(len(d["episode"])) % 8).astype(np.int8)
    d["action"][d["step"] == d["step"].max()] = -1
    meta["data_hash"] = data_hash(d)
    np.savez_compressed(tmp_path / "train.npz", **d, meta=np.array(json.dumps(meta)))
    encoded, predicted, scored = [], [], []
    real_loss, real_fwd, real_lat = SlotAutoencoder.loss, se.SlotPredictor.forward, se.slot_prediction_loss

    def loss_spy(self, frames, init_slots=None, *, first=False, prev_frames=None):
        out = real_loss(self, frames, init_slots, first=first, prev_frames=prev_frames)
        encoded.append((np.asarray(frames).copy(), out[1].detach().clone()))
        return out

    def fwd_spy(self, slots, actions):
        predicted.append((slots.detach().clone(), actions.detach().cpu().numpy().copy()))
        return real_fwd(self, slots, actions)

    def lat_spy(pred, target):
        scored.append(target.detach().clone())
        return real_lat(pred, target)

    monkeypatch.setattr(SlotAutoencoder, "loss", loss_spy)
    monkeypatch.setattr(se.SlotPredictor, "forward", fwd_spy)
    monkeypatch.setattr(se, "slot_prediction_loss", lat_spy)
    train_slot_encoder(dataclasses.replace(CFG, latent_weight=1), tmp_path / "train.npz", tmp_path / "l", 2,
                       batch_size=3, seq_len=3, log=lambda s: None)
    assert len(encoded) == 6 and len(predicted) == 4 and len(scored) == 4
    for step in range(2):
        window = encoded[3 * step:3 * step + 3]
        for j in (1, 2):
            slots_in, actions = predicted[2 * step + j - 1]
            assert torch.equal(slots_in, window[j - 1][1])  # the predictor reads frame j − 1's slots
            assert torch.equal(scored[2 * step + j - 1], window[j][1])  # and is scored against frame j's
            idx = [int(np.flatnonzero((d["frames"] == f).all(axis=(1, 2, 3)))[0]) for f in window[j][0]]
            assert np.array_equal(actions, d["action"][np.array(idx) - 1])  # the action taken on frame j − 1


def test_foreground_window_and_threshold_decide_what_the_loss_weighs():
    from world_models.slot_encoder import SlotEncoderConfig, fg_weighted_mse, foreground_mask

    t = torch.full((1, 3, 32, 32), 0.5)
    t[0, :, 4:24, 4:24] = 0.65  # a large square, 0.45 from the background summed over channels
    centre = (0, 0, 14, 14)
    assert not foreground_mask(t)[centre]  # inside, the 9x9 neighbourhood is the square itself
    assert foreground_mask(t, window=31)[centre]  # the wide window's mean is mostly background
    assert not foreground_mask(t, window=31, threshold=0.3)[centre]  # ... unless the threshold is higher
    assert foreground_mask(t)[0, 0, 4, 14] and not foreground_mask(t)[0, 0, 30, 30]  # edge yes, table no
    recon = t.clone()
    recon[0, :, 14, 14] += 0.1  # wrong only at the centre: weighs 11 only with the wide window
    base = fg_weighted_mse(recon, t, 10)
    wide = fg_weighted_mse(recon, t, 10, fg_window=31)
    assert wide > base
    for window, threshold in ((9, 0.15), (31, 0.15), (31, 0.3)):  # weight 1 + 10 on the mask's pixels
        w = 1 + 10 * foreground_mask(t, window, threshold).float()
        want = ((recon - t) ** 2 * w).mean() / w.mean()
        assert torch.isclose(fg_weighted_mse(recon, t, 10, fg_window=window, fg_threshold=threshold), want)
    for bad, said in (({"fg_window": 8}, "fg_window=8 must be odd"), ({"fg_window": 65}, "fg_window=65"),
                      ({"fg_threshold": 0}, "fg_threshold=0"), ({"fg_threshold": True}, "fg_threshold=True")):
        with pytest.raises(ValueError, match=said):
            SlotEncoderConfig(**bad)
    with pytest.raises(ValueError, match="window=4"):
        foreground_mask(t, window=4)


def test_encoder_loss_uses_its_foreground_settings_and_set_parses_them():
    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig
    from world_models.slot_pretrain import _config_from_args

    cfg = _config_from_args("tiny", ["fg_window=15", "fg_threshold=0.05"])
    assert cfg.fg_window == 15 and cfg.fg_threshold == 0.05
    with pytest.raises(ValueError, match="fg_threshold takes a number"):
        _config_from_args("tiny", ["fg_threshold=low"])
    torch.manual_seed(0)
    model = SlotAutoencoder(SlotEncoderConfig.tiny())
    frames = np.full((2, 32, 32, 3), 120, np.uint8)
    frames[:, 4:28, 4:28] = 160  # a large faint square
    torch.manual_seed(1)
    base = model.loss(frames, first=True)[0]
    wide = SlotAutoencoder(SlotEncoderConfig.tiny(fg_window=15, fg_threshold=0.05))
    wide.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    assert not torch.isclose(wide.loss(frames, first=True)[0], base)


# ---------------------------------------------------------------------- RGB-D frames
def test_rgbd_encoder_reads_and_reconstructs_four_channels():
    cfg = SlotEncoderConfig.tiny(in_channels=4)
    torch.manual_seed(0)
    m = SlotAutoencoder(cfg).eval()
    k, r = cfg.num_slots, cfg.decoder_res
    x = np.random.default_rng(1).integers(0, 256, (2, cfg.image_size, cfg.image_size, 4), dtype=np.uint8)
    with torch.no_grad():
        slots, _ = m.encode_masks(x)
        recon, per_slot, masks = m.decode(slots)
        loss, _ = m.loss(x, first=True)
    assert recon.shape == (2, 4, r, r) and per_slot.shape == (2, k, 4, r, r) and masks.shape == (2, k, r, r)
    assert m.target(m.prepare(x)).shape == (2, 4, r, r) and torch.isfinite(loss)
    # the depth channel reaches the features: changing it alone changes the slots
    y = x.copy()
    y[..., 3] = 255 - y[..., 3]
    with torch.no_grad():
        assert not torch.allclose(m.encode(x, slots), m.encode(y, slots))
    with pytest.raises(ValueError, match=r"\(B, 32, 32, 4\) uint8, RGB-D"):
        m.encode(x[..., :3])
    with pytest.raises(ValueError, match=r"\(B, 32, 32, 3\) uint8, RGB"):
        SlotAutoencoder(CFG).encode(x)
    with pytest.raises(ValueError, match="in_channels=5 is out of range"):
        SlotEncoderConfig.tiny(in_channels=5)


def test_collect_with_depth_keeps_the_rgb_frames_and_training_checks_the_channels(tmp_path, capsys):
    from world_models.slot_pretrain import collect_frames

    plain = collect_frames(6, 3, tmp_path / "rgb.npz", episode_len=3, image_size=32, progress=False)
    meta = collect_frames(6, 3, tmp_path / "rgbd.npz", episode_len=3, image_size=32, progress=False, depth=True)
    a, _ = load_dataset(tmp_path / "rgb.npz")
    b, _ = load_dataset(tmp_path / "rgbd.npz")
    assert b["frames"].shape == (6, 32, 32, 4)
    assert np.array_equal(b["frames"][..., :3], a["frames"])  # the same scenes, actions and colours
    for key in ("seg", "episode", "step", "action"):
        assert np.array_equal(a[key], b[key])
    assert meta["depth"] == {"near_m": 0.6, "far_m": 1.0, "clipped_px": 0} and "depth" not in plain
    assert meta["data_hash"] != plain["data_hash"]
    depth, seg = b["frames"][..., 3], b["seg"]
    assert depth[seg == SEG_ROBOT].mean() > depth[seg == SEG_TABLE].mean() + 40  # the arm is nearer: brighter
    assert main(["train", "--data", str(tmp_path / "rgbd.npz"), "--out", str(tmp_path / "o"), "--steps", "1",
                 "--preset", "tiny"]) == 2
    assert "4-channel frames (RGB-D) but slot_encoder.in_channels=3" in capsys.readouterr().err
    assert main(["train", "--data", str(tmp_path / "rgb.npz"), "--out", str(tmp_path / "o"), "--steps", "1",
                 "--preset", "tiny", "--set", "in_channels=4"]) == 2
    assert "3-channel frames (RGB) but slot_encoder.in_channels=4" in capsys.readouterr().err
    assert main(["train", "--data", str(tmp_path / "rgbd.npz"), "--out", str(tmp_path / "o"), "--steps", "1",
                 "--preset", "tiny", "--set", "in_channels=4", "--seq-len", "2"]) == 0
    assert load_encoder(tmp_path / "o")[0].cfg.in_channels == 4


def test_init_from_refuses_an_rgbd_source_for_an_rgb_encoder(tmp_path):
    from world_models.slot_pretrain import load_init_weights

    save_encoder(SlotAutoencoder(SlotEncoderConfig.tiny()), tmp_path / "rgb")
    save_encoder(SlotAutoencoder(SlotEncoderConfig.tiny(in_channels=4)), tmp_path / "rgbd")
    with pytest.raises(ValueError, match=r"'in_channels': \(4, 3\)"):
        load_init_weights(tmp_path / "rgbd" / "manifest.json", SlotEncoderConfig.tiny())
    # an RGB source for an RGB-D encoder grows it (test_an_rgb_encoder_starts_an_rgbd_one_...), also with more slots
    _, info = load_init_weights(tmp_path / "rgb" / "manifest.json", SlotEncoderConfig.tiny(in_channels=4, num_slots=5))
    assert info["grown_channels"] == [3, 4] and info["grown_slots"] == [4, 5]


def test_an_rgb_encoder_starts_an_rgbd_one_that_computes_its_slots_and_masks(tmp_path):
    from world_models.slot_pretrain import collect_frames, load_init_weights, load_into

    tiny_dataset(tmp_path / "train.npz")
    kw = {"warmup_steps": 2, "log_every": 1, "log": lambda s: None, "batch_size": 4}
    src = tmp_path / "src"
    train_slot_encoder(CFG, tmp_path / "train.npz", src, 2, seed=0, **kw)
    rgbd = SlotEncoderConfig.tiny(in_channels=4)
    weights, info = load_init_weights(src, rgbd)
    assert info["grown_channels"] == [3, 4] and "grown_slots" not in info
    source = SlotAutoencoder(CFG).eval()
    source.load_state_dict(torch.load(src / "train_state.pt", weights_only=True)["model"])
    grown = SlotAutoencoder(rgbd).eval()
    load_into(grown, weights)
    x = np.random.default_rng(3).integers(0, 256, (3, CFG.image_size, CFG.image_size, 4), dtype=np.uint8)
    with torch.no_grad():
        s3, m3 = source.encode_first_masks(x[..., :3])
        s4, m4 = grown.encode_first_masks(x)  # whatever the depth: it is not read yet
        r3, _, d3 = source.decode(s3)
        r4, _, d4 = grown.decode(s4)
    assert torch.allclose(s3, s4, atol=1e-5) and torch.allclose(m3, m4, atol=1e-6)
    assert torch.allclose(d3, d4, atol=1e-6) and torch.allclose(r3, r4[:, :3], atol=1e-6)
    assert torch.equal(r4[:, 3], torch.zeros_like(r4[:, 3]))  # the depth reconstruction starts at 0
    # a run grown from it trains on RGB-D frames, records where it came from, and learns to read the depth
    collect_frames(16, 5, tmp_path / "rgbd.npz", episode_len=4, image_size=CFG.image_size, progress=False, depth=True)
    ft = tmp_path / "ft"
    train_slot_encoder(rgbd, tmp_path / "rgbd.npz", ft, 2, seed=0, init_from=src, **kw)
    assert json.loads((ft / "manifest.json").read_text())["init_from"]["grown_channels"] == [3, 4]
    assert torch.load(ft / "train_state.pt", weights_only=True)["model"]["cnn.0.weight"][:, 3].abs().sum() > 0
    with pytest.raises(ValueError, match=r"another architecture.*in_channels"):  # RGB-D to RGB: refused
        load_init_weights(ft, CFG)


def test_keep_slots_makes_the_same_network_with_fewer_slots(tmp_path, capsys):
    from world_models.slot_pretrain import keep_slots, main

    torch.manual_seed(0)
    src = SlotAutoencoder(CFG).eval()
    save_encoder(src, tmp_path / "src")
    x = frames(2)
    man = keep_slots(tmp_path / "src", list(range(CFG.num_slots)), tmp_path / "all")
    same, _ = load_encoder(tmp_path / "all")
    with torch.no_grad():  # every slot kept, in order: the source itself
        assert torch.equal(same.encode_first(x), src.encode_first(x))
    assert man["kept_slots"]["slots"] == [0, 1, 2, 3] and man["kept_slots"]["source_num_slots"] == 4
    keep_slots(tmp_path / "src", [0, 2, 3], tmp_path / "three")
    three, manifest = load_encoder(tmp_path / "three")
    key = "slot_attention.init_slots"
    assert three.cfg.num_slots == 3 and torch.equal(three.state_dict()[key], src.state_dict()[key][[0, 2, 3]])
    assert all(torch.equal(v, src.state_dict()[k]) for k, v in three.state_dict().items() if k != key)
    assert manifest["kept_slots"]["source_sha256"] == load_encoder(tmp_path / "src")[1]["sha256"]
    keep_slots(tmp_path / "src", [3, 0], tmp_path / "swapped")  # in the order given
    assert torch.equal(load_encoder(tmp_path / "swapped")[0].state_dict()[key], src.state_dict()[key][[3, 0]])
    with pytest.raises(ValueError, match="exists"):  # never over another directory
        keep_slots(tmp_path / "src", [0, 1], tmp_path / "three")
    with torch.no_grad():
        slots, masks = three.encode_first_masks(x)
    assert slots.shape == (2, 3, CFG.slot_dim) and masks.shape[1] == 3
    for bad, said in ((["--slots", "0,4"], "2..4 distinct slot indices in 0..3"), (["--slots", "1,1"], "distinct"),
                      (["--slots", "0"], "2..4"), (["--slots", "a,b"], "comma-separated")):
        assert main(["keep-slots", "--encoder", str(tmp_path / "src"), *bad, "--out", str(tmp_path / "n")]) == 2
        assert said in capsys.readouterr().err and not (tmp_path / "n").exists()
    assert main(["keep-slots", "--encoder", str(tmp_path / "src"), "--slots", "0,1", "--out", str(tmp_path / "three")]) == 2
    assert "exists" in capsys.readouterr().err


def test_keep_slots_records_metrics_measured_on_the_encoder_it_makes(tmp_path):
    from world_models.slot_pretrain import keep_slots

    torch.manual_seed(0)
    save_encoder(SlotAutoencoder(CFG).eval(), tmp_path / "src")
    sha = keep_slots(tmp_path / "src", [0, 1, 3], tmp_path / "a")["sha256"]
    assert keep_slots(tmp_path / "src", [0, 1, 3], tmp_path / "b")["sha256"] == sha  # the same bytes again
    stat = lambda m: {"mean": m, "ci95": [m - 0.01, m + 0.01], "episodes": 80}  # noqa: E731
    pooled = {"encoder_sha256": sha, "carry_iters": 1, "runs": [{"seeds": [5, 6]}],
              "pooled": {"fg_ari_attn": stat(0.86), "identity_rate_attn": stat(0.97)}}
    (tmp_path / "pool.json").write_text(json.dumps(pooled))
    man = keep_slots(tmp_path / "src", [0, 1, 3], tmp_path / "c", metrics_file=tmp_path / "pool.json")
    assert man["metrics"] == {"fg_ari_attn": 0.86, "identity_rate_attn": 0.97, "episodes": 80, "carry_iters": 1,
                              "measured_in": str(tmp_path / "pool.json"), "heldout_seeds": [5, 6]}
    assert load_encoder(tmp_path / "c")[1]["metrics"]["identity_rate_attn"] == 0.97  # still verifies
    with pytest.raises(ValueError, match="not this one"):  # measured on another encoder: nothing left
        keep_slots(tmp_path / "src", [0, 1, 2], tmp_path / "d", metrics_file=tmp_path / "pool.json")
    del pooled["pooled"]["fg_ari_attn"]["episodes"]
    (tmp_path / "bad.json").write_text(json.dumps(pooled))
    with pytest.raises(ValueError, match="not a slot_pool_judgements.py result"):  # checked before writing
        keep_slots(tmp_path / "src", [0, 1, 3], tmp_path / "d", metrics_file=tmp_path / "bad.json")
    assert not (tmp_path / "d").exists()


def test_the_shipped_five_slot_encoder_is_v2_without_slot_2_and_remakes_byte_for_byte(tmp_path):
    from world_models.slot_pretrain import keep_slots

    ckpt = Path(__file__).resolve().parents[2] / "world_models" / "checkpoints"
    k5, manifest = load_encoder(ckpt / "slots_push3_v2_k5")  # verifies its sha256
    v2, v2_manifest = load_encoder(ckpt / "slots_push3_v2")
    assert k5.cfg.num_slots == 5 and manifest["kept_slots"]["slots"] == [0, 1, 3, 4, 5]
    assert manifest["kept_slots"]["source_sha256"] == v2_manifest["sha256"]
    assert manifest["metrics"]["identity_rate_attn"] >= 0.95 and manifest["metrics"]["fg_ari_attn"] >= 0.8
    assert keep_slots(ckpt / "slots_push3_v2", [0, 1, 3, 4, 5], tmp_path / "k5")["sha256"] == manifest["sha256"]
