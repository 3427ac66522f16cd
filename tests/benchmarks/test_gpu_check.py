"""scripts/gpu_check.sh: exits at once without a GPU (fast tier); its whole pipeline as a CPU dry run
(slow tier). The GPU run itself is not part of any test tier."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the check would run")
def test_exits_quickly_with_a_clear_message_without_a_gpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    t0 = time.perf_counter()
    r = subprocess.run([str(SCRIPT), "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       check=False, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert r.returncode == 2, r.stderr
    assert "no CUDA GPU visible" in r.stderr and "nothing was checked" in r.stderr
    assert not out.exists()
    assert time.perf_counter() - t0 < 60


@pytest.mark.slow  # ~30 s on the 2-core VM
def test_dry_run_on_cpu_writes_the_whole_record(tmp_path):
    out = tmp_path / "gpu_check.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu",
                        "--queries", "3", "--warmup", "1", "--k-max", "2", "--observations", "2",
                        "--parity-k", "1,2", "--out", str(out)], cwd=ROOT, capture_output=True,
                       text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["dry_run"] and d["observations"]["source"].startswith("synthetic")
    assert d["machine"]["packages"]["torch"] and "tf32" in d["machine"]
    assert set(d["latency"]) >= {"torch_eager_fp32", "torch_eager_bf16", "ort_cpu_fp32_dry_run"}
    assert set(d["latency"]["torch_eager_fp32"]["per_k"]) == {"1", "2"}
    assert d["latency"]["torch_eager_fp32"]["per_k"]["1"]["query"]["n"] == 3
    assert "not a CUDA device" in d["skipped"]["torch_graphs_fp32"]
    assert d["skipped"]["tensorrt_fp16"]
    assert d["parity"]["ort_cpu_fp32_dry_run"]["pass"] and d["parity"]["torch_eager_bf16"]["cosine_min"] > 0.99
    assert d["parity_failed"] == []


def test_a_checkpoint_that_is_not_one_is_refused_in_one_line(tmp_path, capsys):
    from tests.benchmarks._load import load_benchmark

    gc = load_benchmark("gpu_check")
    run = tmp_path / "run"
    run.mkdir()
    (run / "ticks.jsonl").write_text("")
    out = str(tmp_path / "o.json")
    assert gc.main(["--device", "cpu", "--checkpoint", str(run), "--out", out]) == gc.EXIT_SETUP
    err = capsys.readouterr().err
    assert f"--checkpoint: no VLA checkpoint at {run}" in err and "it is a run directory" in err
    assert err.count(str(run)) == 1  # the path said once
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "model.pt").write_bytes(b"not a torch file")
    assert gc.main(["--device", "cpu", "--checkpoint", str(torn), "--out", out]) == gc.EXIT_SETUP
    err = capsys.readouterr().err
    assert f"--checkpoint {torn}" in err and "Traceback" not in err
    assert not (tmp_path / "o.json").exists()
