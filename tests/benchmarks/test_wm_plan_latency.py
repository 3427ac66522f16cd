"""benchmarks/wm_plan_latency.py: torch vs onnxruntime search passes on the same frames."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

bench = load_benchmark("wm_plan_latency")


def test_both_backends_decide_on_the_same_frames(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "o.json"
    assert bench.main(["--simulations", "2", "--episodes", "1", "--steps", "3", "--out", str(out),
                       "--no-progress"]) == 0
    res = json.loads(out.read_text())
    (row,) = res["budgets"]
    assert row["decisions"] == 3 and 0.0 <= row["same_move"] <= 1.0
    for b in ("torch", "onnxruntime"):
        assert row[b]["decision"]["n"] == 3 and row[b]["search"]["n"] == 3 and row[b]["search"]["p50_ms"] > 0
    assert row["onnxruntime_export"]["parity_max_abs"] <= 1e-4 and row["decision_p50_ratio_torch_over_ort"] > 0
    assert res["model_kind"] == "comet" and res["versions"]["onnxruntime"] and res["onnxruntime_threads"] == 1
    for bad, said in ((["--simulations", "0"], "--simulations 0"), (["--steps", "1"], "--steps 1"),
                      (["--world-model", str(tmp_path / "none")], "--world-model")):
        with pytest.raises(SystemExit) as e:
            bench.main([*bad, "--out", str(out)])
        assert e.value.code == 2 and said in capsys.readouterr().err


def test_an_oracle_slot_model_is_refused_before_any_frame_is_rendered(tmp_path, monkeypatch, capsys):
    import world_models.slot_pretrain as sp
    from world_models.train import Trainer, tiny

    Trainer(tiny(env_steps=4, eval_every=4, checkpoint_every=4, min_replay=2), tmp_path / "oracle",
            progress=False).run()

    def no_frames(*a, **k):
        raise AssertionError("frames rendered before the model was refused")

    monkeypatch.setattr(sp, "random_episodes", no_frames)
    assert bench.main(["--world-model", str(tmp_path / "oracle"), "--out", str(tmp_path / "o.json"),
                       "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--world-model" in err and "oracle-slot world model" in err


def test_a_slots_model_whose_encoder_is_gone_is_refused_in_one_line(reach_model, tmp_path, capsys):
    enc = reach_model.parent / "slots"  # the shared fixture's encoder, put back below
    away = reach_model.parent / "slots_away"
    enc.rename(away)
    try:
        assert bench.main(["--world-model", str(reach_model), "--out", str(tmp_path / "o.json"), "--no-progress"]) == 2
    finally:
        away.rename(enc)
    err = capsys.readouterr().err
    assert err.startswith("error: --world-model") and "Traceback" not in err and not (tmp_path / "o.json").exists()
