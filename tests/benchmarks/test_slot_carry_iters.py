"""benchmarks/slot_carry_iters.py: repeated values are refused (they would count episodes twice)."""

import pytest

from tests.benchmarks._load import load_benchmark

sci = load_benchmark("slot_carry_iters")
ENCODER = "world_models/checkpoints/slots_push3_v2"


@pytest.mark.parametrize("bad,said", [(["--carry-prior", "0", "0.0"], "--carry-prior"),
                                      (["--carry-iters", "1", "1"], "--carry-iters"),
                                      (["--seed", "3", "3"], "--seed"),
                                      (["--carry-prior", "11"], "--carry-prior 11")])
def test_repeated_or_bad_values_are_refused(bad, said, capsys):
    with pytest.raises(SystemExit) as e:
        sci.main(["--encoders", ENCODER, *bad])
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_prior_is_paired_with_the_first_listed_on_the_same_episodes(tmp_path):
    import json

    out = tmp_path / "r.json"
    assert sci.main(["--encoders", ENCODER, "--carry-iters", "1", "--carry-prior", "0", "2", "--frames", "80",
                     "--episodes", "2", "--seed", "11", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (pair,) = res["paired"]
    assert pair["carry_prior"] == 2.0 and pair["reference_carry_prior"] == 0.0
    per = {r["carry_prior"]: r["per_episode"]["identity_rate_attn"] for r in res["results"]}
    want = sum(a - b for a, b in zip(per[2.0], per[0.0])) / 2
    assert pair["identity_rate_attn"]["episodes"] == 2
    assert pair["identity_rate_attn"]["mean_difference"] == pytest.approx(want)


def test_pair_encoders_differences_each_encoder_against_those_listed_before_it(tmp_path):
    import json

    out, off = tmp_path / "r.json", tmp_path / "off.json"
    other = "world_models/checkpoints/slots_push3"
    common = ["--encoders", ENCODER, other, "--carry-iters", "1", "--frames", "40", "--episodes", "1",
              "--seed", "11", "12"]
    assert sci.main([*common, "--pair-encoders", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (pair,) = res["paired_encoders"]
    assert pair["encoder"] == other and pair["reference_encoder"] == ENCODER
    per: dict[str, list] = {}
    for r in res["results"]:  # seed 11's episode, then seed 12's, for each encoder
        per.setdefault(r["path"], []).extend(r["per_episode"]["fg_ari_attn"])
    diffs = [a - b for a, b in zip(per[other], per[ENCODER])]
    assert pair["fg_ari_attn"]["episodes"] == 2
    assert pair["fg_ari_attn"]["mean_difference"] == pytest.approx(sum(diffs) / 2)
    assert pair["fg_ari_attn"]["ci95"] == pytest.approx(sorted(diffs))  # two episodes: the bootstrap's extremes
    assert sci.main([*common, "--out", str(off)]) == 0
    plain = json.loads(off.read_text())
    assert "paired_encoders" not in plain  # only when asked for, and nothing else changes
    assert plain["pooled"] == res["pooled"] and plain["paired"] == res["paired"]


def test_an_rgbd_encoder_is_paired_with_rgb_encoders_on_the_same_episodes(tmp_path):
    import json

    import torch

    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig, save_encoder

    torch.manual_seed(0)
    rgbd = tmp_path / "rgbd"
    save_encoder(SlotAutoencoder(SlotEncoderConfig.tiny(image_size=64, in_channels=4)), rgbd)
    common = ["--carry-iters", "1", "--frames", "40", "--episodes", "1", "--seed", "11"]
    out, alone = tmp_path / "r.json", tmp_path / "alone.json"
    assert sci.main(["--encoders", ENCODER, str(rgbd), *common, "--pair-encoders", "--out", str(out)]) == 0
    assert sci.main(["--encoders", ENCODER, *common, "--out", str(alone)]) == 0
    res, ref = json.loads(out.read_text()), json.loads(alone.read_text())
    assert res["heldout"][0]["depth"] is True and ref["heldout"][0]["depth"] is False
    v2 = [r for r in res["results"] if r["path"] == ENCODER]
    # the RGB encoder reads the colour channels of the RGB-D episodes: exactly what it scores on RGB frames
    assert v2[0]["per_episode"] == ref["results"][0]["per_episode"]
    (pair,) = res["paired_encoders"]
    assert pair["encoder"] == str(rgbd) and pair["fg_ari_attn"]["episodes"] == 1
