"""benchmarks/wm_offline_slots.py: the oracle script's episodes seen through the encoder, data reuse, a tiny fit."""

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

ofs = load_benchmark("wm_offline_slots")
cc = load_benchmark("wm_contact_ceiling")
ENCODER = "world_models/checkpoints/slots_push3_v2"


@pytest.fixture(scope="module")
def slot_run(tmp_path_factory):
    """A push3 run over the shipped encoder (default task settings, a tiny model, 4 steps)."""
    from world_models.object_env import ObjectTaskConfig
    from world_models.train import Trainer, tiny

    t = tiny()
    cfg = replace(t, env=ObjectTaskConfig(task="push3"), obs="slots", encoder=ENCODER, encoder_carry_iters=1,
                  model=replace(t.model, num_slots=6, slot_dim=64, image_size=64), env_steps=4, eval_every=4,
                  checkpoint_every=4, eval_episodes=1)
    out = tmp_path_factory.mktemp("wm") / "slots"
    Trainer(cfg, out, progress=False).run()
    return str(out)


def test_play_episodes_are_the_oracle_scripts(slot_run):
    seeds = [830_000_000, 830_000_001]
    got = ofs.collect_group(slot_run, seeds, play=True, eps=0.2, segment=20.0)
    for s, e in zip(seeds, got):
        ref = cc.collect_episode(s, 0.2, eps_min=0.2, explorer="play")
        np.testing.assert_array_equal(e["actions"], ref["actions"])
        np.testing.assert_allclose(e["red"], ref["red"], atol=1e-9)
        np.testing.assert_allclose(e["rewards"], ref["rewards"], atol=1e-6)
        assert e["success"] == ref["success"] and e["states"].shape == (len(e["actions"]) + 1, 6, 64)
    assert ofs.contact_mask(got[0]).shape == (len(got[0]["actions"]),)


def test_scripted_test_episodes_in_lockstep_match_a_sequential_encoding(slot_run):
    """840,000,002 succeeds early (after 26 steps on one machine, 15 on another: the contact's
    physics differs in the last bits between CPUs), 840,000,001 runs all 60: the group goes on with one row."""
    import torch

    from world_models.object_env import ObjectTaskEnv
    from world_models.policy import load_world_model
    from world_models.train import load_encoder

    seeds = [840_000_002, 840_000_001]
    got = ofs.collect_group(slot_run, seeds, play=False, eps=0.2, segment=20.0)
    cfg, _, _ = load_world_model(slot_run)
    enc = load_encoder(cfg.encoder, cfg.encoder_carry_iters)
    for s, e in zip(seeds, got):
        ref = cc.collect_episode(s, 0.5)
        np.testing.assert_array_equal(e["actions"], ref["actions"])
        np.testing.assert_allclose(e["red"], ref["red"], atol=1e-9)
        np.testing.assert_allclose(e["rewards"], ref["rewards"], atol=1e-6)
        assert e["success"] == ref["success"]
        # the frames re-rendered by replaying the actions, encoded one at a time as training tracks them
        env = ObjectTaskEnv(cfg.env)
        try:
            frames = [env.reset(seed=s)[0]["frame"]] + [env.step(int(a))[0]["frame"] for a in e["actions"]]
        finally:
            env.close()
        with torch.no_grad():
            slots = [enc.encode_first(frames[0][None])]
            for f in frames[1:]:
                slots.append(enc.encode(f[None], init_slots=slots[-1]))
        np.testing.assert_allclose(e["states"], np.concatenate([x.numpy() for x in slots]), atol=1e-4)
    lengths = [len(e["actions"]) for e in got]
    assert lengths[0] < lengths[1] == 60 and [e["success"] for e in got] == [True, False]


def test_main_saves_reuses_and_refuses_other_data(slot_run, tmp_path, capsys):
    data, out = tmp_path / "d.npz", tmp_path / "r.json"
    base = ["--config", slot_run, "--train-episodes", "4", "--test-episodes", "2", "--group", "2",
            "--data", str(data), "--no-progress"]
    assert ofs.main([*base, "--updates", "3", "--save", str(tmp_path / "fit"), "--out", str(out)]) == 0
    first = json.loads(out.read_text())
    assert first["data"]["collected_now"] and data.is_file() and first["fit"]["updates"] == 3
    assert first["fit"]["steps"] == first["data"]["test_transitions"] and first["saved"] == str(tmp_path / "fit")
    assert (tmp_path / "fit" / "model.pt").is_file()
    assert ofs.main([*base, "--agents", f"a={slot_run}", "--out", str(out)]) == 0
    again = json.loads(out.read_text())
    assert not again["data"]["collected_now"]
    same = {k: v for k, v in first["data"].items() if k not in ("collected_now", "data_s")}
    assert {k: again["data"][k] for k in same} == same
    assert again["fit"] is None and again["agents"]["a"]["steps"] == first["fit"]["steps"]
    assert again["probe"] is None and "probe_step" not in again["agents"]["a"]
    assert ofs.main([*base, "--agents", f"a={slot_run}", "--probe-updates", "5", "--out", str(out)]) == 0
    probed = json.loads(out.read_text())
    assert probed["probe"]["updates"] == 5 and probed["probe"]["train_transitions"] > 0
    assert probed["probe"]["episodes"] == 4
    assert ofs.main([*base, "--probe-updates", "5", "--probe-episodes", "2", "--out", str(out)]) == 0
    fewer = json.loads(out.read_text())["probe"]
    assert fewer["episodes"] == 2 and fewer["train_transitions"] < probed["probe"]["train_transitions"]
    assert ofs.main([*base, "--agents", f"a={slot_run}", "--probe-updates", "5", "--probe-centroids",
                     "--out", str(out)]) == 0
    cen = json.loads(out.read_text())
    assert cen["probe"]["centroids"] and cen["agents"]["a"]["probe_step"]["steps"] == first["fit"]["steps"]
    for key in ("ceiling", "no_change"):
        assert probed["probe"][key]["steps"] == first["fit"]["steps"]
    assert probed["agents"]["a"]["probe_step"]["steps"] == first["fit"]["steps"]
    capsys.readouterr()
    assert ofs.main([*base, "--eps", "0.3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--data" in err and "eps" in err and "other settings" in err


def _synthetic_episodes(n: int, seed: int) -> list[dict]:
    """The red cube's xy (m) in the first two dimensions of slot 2 (the rest noise), 3 slots of 8."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        steps = rng.normal(0, 0.004, (21, 2)) * (rng.random((21, 1)) < 0.5)  # half the steps move it
        red = np.cumsum(steps, 0)
        states = rng.normal(0, 1, (21, 3, 8)).astype(np.float32)
        states[:, 2, :2] = red * 100.0  # in cm, so a 4 mm step moves the slot by 0.4
        states[:, :2] = states[0, :2]  # the other slots hold still
        out.append({"states": states, "actions": np.zeros(20, np.int64), "red": red})
    return out


def test_mask_centroids_are_each_slots_decoder_mask_centre_and_share():
    import torch

    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig

    torch.manual_seed(0)
    enc = SlotAutoencoder(SlotEncoderConfig.tiny()).eval()  # 32² frames, 16² decoder masks
    z = np.random.default_rng(0).normal(0, 1, (2, 3, 4, 16)).astype(np.float32)  # (T, B, K, D)
    got = ofs.mask_centroids(enc, z, batch=4)
    assert got.shape == (2, 3, 4, 19)
    np.testing.assert_array_equal(got[..., :16], z)
    with torch.no_grad():
        m = enc.decode(torch.as_tensor(z[1, 2][None]))[2][0].numpy()  # (K, 16, 16)
    centres = (np.arange(16) + 0.5) * 2.0  # pixel centres of the 32² frame
    k = 3
    np.testing.assert_allclose(got[1, 2, k, 16], (m[k].sum(0) * centres).sum() / m[k].sum(), rtol=1e-4)
    np.testing.assert_allclose(got[1, 2, k, 17], (m[k].sum(1) * centres).sum() / m[k].sum(), rtol=1e-4)
    np.testing.assert_allclose(got[1, 2, :, 18].sum(), 1.0, rtol=1e-4)  # the shares cover the frame


def test_step_probe_reads_the_step_from_the_slot_that_carries_it():
    train, test = _synthetic_episodes(300, 0), _synthetic_episodes(40, 1)
    probe, info = ofs.fit_step_probe(train[:270], train[270:], 500, seed=0)  # here: R² 0.99, MSE 0.016 of zero
    assert info["best_update"] > 0 and info["val_mse_cm2"] < 0.2 * info["val_mse_zero_cm2"]
    ceiling = ofs.probe_steps(probe, test, what="ceiling")
    assert ceiling["contact_steps"] > 100 and ceiling["r2_at_contact"] > 0.8
    assert 0.8 < ceiling["length_ratio_median_at_contact"] < 1.2 and ceiling["cosine_median_at_contact"] > 0.95
    still = ofs.probe_steps(probe, test, what="no_change")  # no change in the slots reads as no step
    assert still["length_ratio_median_at_contact"] < 0.2 and still["r2_at_contact"] < 0.2
    # the probe does not depend on slot order
    import torch

    s, n, _ = ofs._step_pairs(test[:2])
    perm = [2, 0, 1]
    with torch.no_grad():
        torch.testing.assert_close(probe(s[:, perm], n[:, perm]), probe(s, n), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="need updates >= 1"):
        ofs.fit_step_probe(train[:2], [], 5)
    m = ofs.step_measures(np.array([[0.5, 0.0], [0.0, 0.0]]), np.array([[1.0, 0.0], [0.1, 0.0]]))
    assert m["contact_steps"] == 1 and m["length_ratio_median_at_contact"] == 0.5 and m["r2_at_contact"] == 0.75
    assert m["cosine_median_at_contact"] == 1.0 and m["calibration_slope_at_contact"] == 2.0


def test_bad_input_names_the_flag(slot_run, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        ofs.main(["--config", slot_run, "--save", str(tmp_path / "x")])
    assert e.value.code == 2 and "--save needs --updates" in capsys.readouterr().err
    for bad, said in ((["--eps", "1.5"], "--eps 1.5"), (["--fit-seed", "-1"], "--fit-seed -1"),
                      (["--play-segment", "nan"], "--play-segment nan"), (["--data", str(tmp_path)], "--data"),
                      (["--agents", f"a={slot_run}", f"a={slot_run}"], "given twice"),
                      (["--agents", "noequals"], "NAME=RUN"), (["--test-seed", "830000001"], "overlap"),
                      (["--probe-updates", "-1"], "--probe-updates -1"), (["--probe-episodes", "1"], "--probe-episodes 1"),
                      (["--probe-episodes", "4000", "--probe-updates", "5"], "more than --train-episodes"),
                      (["--probe-episodes", "5"], "needs --probe-updates"),
                      (["--probe-centroids"], "--probe-centroids needs")):
        with pytest.raises(SystemExit) as e:
            ofs.main(["--config", slot_run, *bad])
        assert e.value.code == 2 and said in capsys.readouterr().err, bad
    assert ofs.main(["--config", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert "--config" in capsys.readouterr().err
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not an npz")
    assert ofs.main(["--config", slot_run, "--data", str(junk), "--out", str(tmp_path / "o.json")]) == 2
    assert "not a file this script wrote" in capsys.readouterr().err
