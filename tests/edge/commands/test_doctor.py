"""``edge doctor``: runs here, reports what is usable and why the rest is not; Jetson detection from
injected device-tree / L4T / nvpmodel stand-ins."""

import json
import os
import stat

import pytest

from edge.cli import main
from edge.commands.doctor import jetson_info, parse_l4t, parse_nvpmodel


def _run(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr().out


def test_doctor_json_reports_backends_with_reasons(capsys, tmp_path):
    code, out = _run(["doctor", "--json", "--device-tree-model", str(tmp_path / "none"),
                      "--tegra-release", str(tmp_path / "none")], capsys)
    assert code == 0
    r = json.loads(out)
    assert r["python"]["version"] and r["torch"]["installed"] and r["onnxruntime"]["installed"]
    rows = {b["name"]: b for b in r["backends"]}
    assert rows["torch (cpu)"]["usable"] and rows["onnxruntime (cpu)"]["usable"]
    assert "CPUExecutionProvider" in r["onnxruntime"]["providers"]
    trt = rows["tensorrt (native engines, engine cache)"]
    if not r["tensorrt"]["installed"]:
        assert not trt["usable"] and "tensorrt is not installed" in trt["reason"]
        assert "JetPack" in trt["reason"] and "pip install tensorrt" in trt["reason"]
    for b in r["backends"]:
        assert b["usable"] or b["reason"], b  # never "no" without a reason
    if not r["torch"]["cuda_available"]:
        cuda = rows["torch (cuda, CUDA graphs per K, fp32/bf16/fp16)"]
        assert not cuda["usable"] and cuda["reason"]
        assert r["torch"]["devices"] == []
    if "CUDAExecutionProvider" not in r["onnxruntime"]["providers"]:
        assert "onnxruntime-gpu" in rows["onnxruntime (cuda EP)"]["reason"]
        assert "uninstall" in rows["onnxruntime (cuda EP)"]["reason"]
    assert r["jetson"] == {"is_jetson": False, "model": None, "l4t": None, "power_mode": None,
                           "power_mode_reason": "not a Jetson"}


def test_doctor_text_report(capsys, tmp_path):
    code, out = _run(["doctor", "--device-tree-model", str(tmp_path / "none"),
                      "--tegra-release", str(tmp_path / "none")], capsys)
    assert code == 0
    assert "torch" in out and "onnxruntime" in out and "backends" in out and "[yes] torch (cpu)" in out
    assert "jetson       no" in out


@pytest.fixture
def fake_jetson(tmp_path):
    model = tmp_path / "model"
    model.write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\x00")
    release = tmp_path / "nv_tegra_release"
    release.write_text("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64\n")
    nvp = tmp_path / "nvpmodel"
    nvp.write_text("#!/bin/sh\necho 'NV Fan Mode:quiet'\necho 'NV Power Mode: MAXN'\necho 0\n")
    nvp.chmod(nvp.stat().st_mode | stat.S_IXUSR)
    return model, release, nvp


def test_jetson_detected_from_injected_device_tree(fake_jetson, tmp_path):
    model, release, nvp = fake_jetson
    j = jetson_info(model, release, str(nvp))
    assert j["is_jetson"] and j["model"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert j["l4t"] == "36.4.3" and j["power_mode"] == {"name": "MAXN", "id": 0}
    missing = jetson_info(model, tmp_path / "none", str(tmp_path / "no-nvpmodel"))
    assert missing["is_jetson"] and missing["l4t"] is None and missing["power_mode"] is None
    assert "not found" in missing["power_mode_reason"] or "gave no power mode" in missing["power_mode_reason"]
    assert not jetson_info(tmp_path / "none", tmp_path / "none")["is_jetson"]


@pytest.mark.skipif(os.name != "posix", reason="uses a shell-script stand-in for nvpmodel")
def test_doctor_cli_shows_the_jetson(fake_jetson, capsys):
    model, release, nvp = fake_jetson
    code, out = _run(["doctor", "--device-tree-model", str(model), "--tegra-release", str(release),
                      "--nvpmodel", str(nvp)], capsys)
    assert code == 0 and "NVIDIA Jetson AGX Orin Developer Kit" in out and "MAXN (id 0)" in out
    assert "L4T 36.4.3" in out


def test_parsers():
    assert parse_nvpmodel("NV Power Mode: 15W\n2\n") == {"name": "15W", "id": 2}
    assert parse_nvpmodel("garbage") is None
    assert parse_l4t("# R35 (release), REVISION: 5.0, GCID: 1") == "35.5.0"
    assert parse_l4t("") is None
