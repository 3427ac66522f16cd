"""benchmarks/wm_feature_probe.py: replayed frames match the episodes, the probe reads a step, bad input."""

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

fp = load_benchmark("wm_feature_probe")
ENCODER = "world_models/checkpoints/slots_push3_v2"


def test_collected_episodes_are_the_oracle_scripts_replayed_through_the_camera():
    cc = load_benchmark("wm_contact_ceiling")
    (e,) = fp.collect(840_000_002, 1, False, 0.2, 20.0)
    ref = cc.collect_episode(840_000_002, 0.5)
    np.testing.assert_allclose(e["red"], ref["red"], atol=1e-9)
    assert e["frames"].shape == (len(ref["actions"]) + 1, 64, 64, 3) and e["frames"].dtype == np.uint8
    assert not np.array_equal(e["frames"][0], e["frames"][-1])  # the arm moved


def test_probe_is_fitted_and_reads_a_step_of_the_right_shape():
    from world_models.slot_encoder import load_encoder

    enc, _ = load_encoder(ENCODER)
    eps = fp.collect(830_000_000, 3, True, 0.2, 20.0)
    probe, info, predict = fp.fit(enc, eps[:2], eps[2:], 2, batch=4)
    assert info["best_update"] == 2 and info["train_transitions"] == sum(len(e["red"]) - 1 for e in eps[:2])
    a, b, r = fp.pairs(eps[2:])
    assert predict(a, b).shape == r.shape == (len(a), 2)
    with pytest.raises(ValueError, match="need updates"):
        fp.fit(enc, eps[:2], [], 2)


def test_finetune_trains_a_copy_of_the_trunk_and_leaves_the_encoder_alone():
    import torch

    from world_models.slot_encoder import load_encoder

    enc, _ = load_encoder(ENCODER)
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    eps = fp.collect(830_000_000, 3, True, 0.2, 20.0)
    a, b, _ = fp.pairs(eps[2:])
    _, info_f, pred_f = fp.fit(enc, eps[:2], eps[2:], 2, batch=4)
    _, info_t, pred_t = fp.fit(enc, eps[:2], eps[2:], 2, batch=4, trunk="finetune", trunk_lr=1e-2)
    assert info_f["trunk"] == "frozen" and "trunk_lr" not in info_f
    assert info_t["trunk"] == "finetune" and info_t["trunk_lr"] == 1e-2
    assert all(torch.equal(before[k], v) for k, v in enc.state_dict().items())  # the encoder is untouched
    # the same probe seed and batches: only the trained trunk makes the readings differ
    assert not np.allclose(pred_f(a, b), pred_t(a, b))
    with pytest.raises(ValueError, match="trunk 'pixels'"):
        fp.fit(enc, eps[:2], eps[2:], 2, trunk="pixels")
    with pytest.raises(ValueError, match="trunk_lr 0"):
        fp.fit(enc, eps[:2], eps[2:], 2, trunk="finetune", trunk_lr=0.0)


def test_bad_input_names_the_flag(tmp_path, capsys):
    for bad, said in ((["--updates", "0"], "--updates 0"), (["--eps", "2"], "--eps 2"),
                      (["--encoder", str(tmp_path / "x")], "--encoder"), (["--test-seed", "830000001"], "overlap"),
                      (["--trunk-lr", "0"], "--trunk-lr 0"), (["--trunks", "frozen", "frozen"], "each trunk once")):
        with pytest.raises(SystemExit) as e:
            fp.main(bad)
        assert e.value.code == 2 and said in capsys.readouterr().err


def test_a_diverged_fit_exits_1_naming_the_trunk_and_keeps_the_trunks_that_finished(tmp_path, monkeypatch, capsys):
    import json

    rng = np.random.default_rng(0)
    fake = [{"frames": rng.integers(0, 255, (4, 64, 64, 3), dtype=np.uint8), "red": rng.normal(size=(4, 2)) * 0.01}
            for _ in range(3)]
    monkeypatch.setattr(fp, "collect", lambda *a, **k: fake)
    real_fit = fp.fit

    def fit(*a, trunk="frozen", **k):
        if trunk == "finetune":
            raise ValueError("no finite validation loss")
        return real_fit(*a, trunk=trunk, **{**k, "batch": 4})

    monkeypatch.setattr(fp, "fit", fit)
    out = tmp_path / "r.json"
    code = fp.main(["--train-episodes", "3", "--test-episodes", "3", "--updates", "1", "--trunks", "frozen",
                    "finetune", "--out", str(out)])
    assert code == 1 and "trunk finetune: no finite validation loss" in capsys.readouterr().err
    assert list(json.loads(out.read_text())["trunks"]) == ["frozen"]
