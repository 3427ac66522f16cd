"""benchmarks/campaign_speed.py: the lazy and every-step arms give the same episodes; the JSON says so."""

import json

from tests.benchmarks._load import load_benchmark

campaign_speed = load_benchmark("campaign_speed")


def test_one_round_writes_identical_outcomes_and_a_speedup(tmp_path):
    out = tmp_path / "cs.json"
    assert campaign_speed.main(["--episodes", "1", "--rounds", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["outcomes_identical"] is True and len(res["rounds"]) == 1
    r = res["rounds"][0]
    assert r["every_step"]["steps"] == r["lazy"]["steps"] > 0
    assert r["speedup"] > 0 and res["cell"] == {"K": 2, "C": 8}
