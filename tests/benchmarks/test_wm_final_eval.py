"""benchmarks/wm_final_eval.py: final models on fresh seeds, pooled over training seeds, paired against a reference."""

import json
import shutil

import pytest

from world_models.train import Trainer, tiny

from tests.benchmarks._load import load_benchmark

wfe = load_benchmark("wm_final_eval")


def test_pooled_and_paired_on_the_same_fresh_seeds(tmp_path):
    runs = tmp_path / "runs"
    src = runs / "reach3_comet_s0"
    Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8), src, progress=False).run()
    # a second "method": the same final model, so every episode must pair with itself (same seeds)
    shutil.copytree(src, runs / "reach3_pixels_s0")
    out = tmp_path / "res.json"
    assert wfe.main(["--runs", str(runs), "--task", "reach3", "--methods", "comet", "pixels", "--seeds", "0",
                     "--episodes", "3", "--out", str(out)]) == 0
    res = json.loads(out.read_text())["methods"]
    a, b = res["comet"], res["pixels"]
    assert a["episodes"] == b["episodes"] == 3 and len(a["runs"]["0"]["per_episode"]) == 3
    assert a["runs"]["0"]["per_episode"] == b["runs"]["0"]["per_episode"]
    assert a["vs_reference"] == {"only_this": 0, "only_reference": 0, "mcnemar_p": 1.0, "difference": 0.0,
                                 "ci95": [0.0, 0.0]}
    assert a["ci95"][0] <= a["success"] <= a["ci95"][1]


def test_missing_runs_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        wfe.main(["--runs", str(tmp_path), "--methods", "comet", "pixels", "--seeds", "0"])
    assert e.value.code == 2 and "reach3_comet_s0" in capsys.readouterr().err


def test_reuse_skips_matching_runs_only(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    for seed, m in enumerate(("comet", "pixels")):  # different seeds: different models
        Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8, seed=seed), runs / f"reach3_{m}_s0",
                progress=False).run()
    first = tmp_path / "a.json"
    base = ["--runs", str(runs), "--task", "reach3", "--methods", "comet", "pixels", "--seeds", "0", "--episodes", "2"]
    wfe.main([*base, "--out", str(first)])
    played = []
    real = wfe.evaluate_run
    monkeypatch.setattr(wfe, "evaluate_run", lambda path, *a: played.append(path.name) or real(path, *a))
    wfe.main([*base, "--reuse", str(first), "--out", str(tmp_path / "b.json")])
    assert played == []
    (runs / "reach3_pixels_s0" / "model.pt").write_bytes((runs / "reach3_comet_s0" / "model.pt").read_bytes())
    (runs / "reach3_pixels_s0" / "manifest.json").write_bytes((runs / "reach3_comet_s0" / "manifest.json").read_bytes())
    res = tmp_path / "c.json"
    wfe.main([*base, "--reuse", str(first), "--out", str(res)])
    assert played == ["reach3_pixels_s0"]  # its model changed: replayed
    for order in ((first, res), (res, first)):  # whichever file holds the current model's result
        wfe.main([*base, "--reuse", *map(str, order), "--out", str(tmp_path / "merged.json")])
        assert played == ["reach3_pixels_s0"]  # nothing replayed
    wfe.main([*base[:-1], "3", "--reuse", str(res), "--out", str(tmp_path / "d.json")])
    assert played == ["reach3_pixels_s0", "reach3_comet_s0", "reach3_pixels_s0"]  # other episodes: all replayed
    assert "comet vs pixels" in json.loads(res.read_text())["pairs"]


@pytest.mark.parametrize("argv, needle", [
    (["--seeds", "0", "0"], "--seeds 0 0: repeated"),
    (["--methods", "comet", "comet", "pixels"], "--methods comet comet pixels: repeated"),
    (["--seed0", "899999990", "--episodes", "20"], "overlaps seeds 900000000"),
    (["--seed0", "-1"], "--seed0 -1"),
])
def test_bad_flags_exit_2_naming_them(tmp_path, capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        wfe.main(["--runs", str(tmp_path), *argv])
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_a_bad_reuse_file_is_named(tmp_path, capsys):
    runs = tmp_path / "runs"
    for m in ("comet", "pixels"):
        Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8), runs / f"reach3_{m}_s0", progress=False).run()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit) as e:
        wfe.main(["--runs", str(runs), "--methods", "comet", "pixels", "--seeds", "0", "--reuse", str(bad)])
    assert e.value.code == 2 and "--reuse" in capsys.readouterr().err


def test_a_run_that_does_not_verify_is_refused_before_any_run_is_evaluated(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    src = runs / "reach3_comet_s0"
    Trainer(tiny(env_steps=8, eval_every=8, checkpoint_every=8), src, progress=False).run()
    shutil.copytree(src, runs / "reach3_pixels_s0")
    with open(runs / "reach3_pixels_s0" / "model.pt", "ab") as f:  # changed since its manifest was written
        f.write(b"\0")
    played = []
    monkeypatch.setattr(wfe, "evaluate_run", lambda path, *a: played.append(path.name))
    assert wfe.main(["--runs", str(runs), "--task", "reach3", "--methods", "comet", "pixels", "--seeds", "0",
                     "--episodes", "3", "--out", str(tmp_path / "res.json")]) == 2
    assert played == [] and "reach3_pixels_s0" in capsys.readouterr().err and not (tmp_path / "res.json").exists()
