"""benchmarks/slot_pool_judgements.py: one encoder's per-episode values pooled over judgement runs."""

import json

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

pj = load_benchmark("slot_pool_judgements")


def _run(path, seeds, sha, identity, carry_prior=None):
    results = []
    for s, ident in zip(seeds, identity):
        r = {"sha256": sha, "carry_iters": 1, "seed": s, "eval_episodes": len(ident), "data_hash": f"h{s}",
             "per_episode": {"fg_ari_attn": [0.9] * len(ident), "fg_ari_decoder": [0.8] * len(ident),
                             "identity_rate_attn": ident, "identity_rate_decoder": ident}}
        if carry_prior is not None:
            r["carry_prior"] = carry_prior
        results.append(r)
    other = {**results[0], "sha256": "other", "per_episode": {k: [0.0] for k in pj.METRICS}}
    path.write_text(json.dumps({"results": [*results, other]}))
    return str(path)


def test_pools_the_encoders_episodes_and_refuses_overlaps(tmp_path, capsys):
    enc = tmp_path / "enc"
    enc.mkdir()
    (enc / "manifest.json").write_text(json.dumps({"sha256": "abc"}))
    a = _run(tmp_path / "a.json", [1, 2], "abc", [[1.0, 0.9], [0.8, float("nan")]])  # a NaN episode is left out
    b = _run(tmp_path / "b.json", [3], "abc", [[0.5]], carry_prior=0.0)
    out = tmp_path / "o.json"
    assert pj.main(["--encoder", str(enc), "--judgements", a, b, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    ident = res["pooled"]["identity_rate_attn"]
    assert ident["episodes"] == 4 and ident["mean"] == pytest.approx(np.mean([1.0, 0.9, 0.8, 0.5]), abs=1e-4)
    assert ident["ci95"][0] <= ident["mean"] <= ident["ci95"][1]
    assert [r["seeds"] for r in res["runs"]] == [[1, 2], [3]] and res["pooled"]["fg_ari_attn"]["mean"] == 0.9
    c = _run(tmp_path / "c.json", [2], "abc", [[0.7]])
    assert pj.main(["--encoder", str(enc), "--judgements", a, c, "--out", str(out)]) == 2
    assert "seed 2 was also judged" in capsys.readouterr().err
    d = _run(tmp_path / "d.json", [4], "zzz", [[0.7]])
    assert pj.main(["--encoder", str(enc), "--judgements", a, d, "--out", str(out)]) == 2
    assert "no result of --encoder" in capsys.readouterr().err
    assert pj.main(["--encoder", str(enc), "--judgements", a, "--carry-iters", "2", "--out", str(out)]) == 2
    with pytest.raises(SystemExit) as e:
        pj.main(["--encoder", str(tmp_path / "none"), "--judgements", a])
    assert e.value.code == 2 and "--encoder" in capsys.readouterr().err
