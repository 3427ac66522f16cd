"""The wheel is complete: built from pyproject.toml and installed (not editable), ``edge`` finds its
configs, presets and shipped checkpoint inside the installed package, never in the checkout.

The wheel is built from a copy of the source tree (so no stale ``build/`` is packaged) without build
isolation (no index needed: .venv's setuptools builds it) and installed with ``--no-deps --target``;
the installed copy runs on .venv's interpreter (whose site-packages provide the dependencies) from a
working directory outside the repository, with PYTHONPATH = the install target so it shadows the
checkout's editable install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "runs", "data", "repro", "tmp",
                                "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis",
                                "train_state.pt", "onnx", "*.pyc")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(site dir with the installed wheel, env to run it with, a cwd outside the repo)."""
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE, symlinks=True)
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist)], check=True, cwd=tmp, timeout=300)
    wheels = list(dist.glob("edge_runtime-*.whl"))
    assert len(wheels) == 1, wheels
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                    str(wheels[0])], check=True, cwd=tmp, timeout=300)
    cwd = tmp / "cwd"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "EDGE_CACHE_DIR": str(tmp / "cache"),
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return site, env, cwd


def run(cmd: list[str], env: dict, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def tree(directory: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(directory).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*"))}


def test_installed_package_uses_its_own_configs_and_checkpoint(installed):
    site, env, cwd = installed
    probe = """
import json, edge, edge.resources, edge.robot_spec, edge.hil.harness as hil, edge.commands.train as tr
import drivers, sim, firmware_bridge
from edge.vla.verify import verify_checkpoint
ckpt = edge.resources.PACKAGE_DIR / "vla" / "checkpoints" / "stack"
print(json.dumps({"edge": edge.__file__, "modules": [m.__file__ for m in (drivers, sim, firmware_bridge)],
                  "configs": str(edge.resources.config_dir()), "robots": str(edge.robot_spec.ROBOTS_DIR),
                  "hil": str(hil.CATALOGUE_DIR), "train": str(tr.PRESETS_DIR), "ckpt": str(ckpt),
                  "step": verify_checkpoint(ckpt / "model.pt")["step"],
                  "files": sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*"))}))
"""
    res = run([sys.executable, "-c", probe], env, cwd)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    for key in ("edge", "configs", "robots", "hil", "train", "ckpt"):
        assert Path(info[key]).is_relative_to(site), (key, info[key])
    assert all(Path(m).is_relative_to(site) for m in info["modules"])
    assert info["configs"] == str(site / "edge" / "_configs")
    for rel in ("robots/panda.yaml", "hil/rig.yaml", "train/vla_tiny.yaml", "train/vla_default.yaml"):
        assert (site / "edge" / "_configs" / rel).is_file(), rel
    assert {"model.pt", "manifest.json"} <= set(info["files"]) and "lineage" in info["files"]
    assert not any(f.startswith("onnx") or f.endswith("train_state.pt") for f in info["files"])
    assert not (site / "configs").exists()  # no top-level "configs" package in site-packages
    for name in ("stack", "stack_efficient", "stack_latency"):  # the shipped EQRL adapters, by name
        d = site / "adapters" / "eqrl" / "checkpoints" / name
        assert {p.name for p in d.iterdir()} == {"adapter.pt", "eqrl_decision.onnx", "manifest.json"}, name


def test_wheel_metadata_license_and_extras(installed):
    site, _, _ = installed
    meta = next(site.glob("edge_runtime-*.dist-info"))
    text = (meta / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in text
    assert (meta / "licenses" / "LICENSE").is_file()
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    assert any(r.startswith("onnxruntime>=") for r in requires)
    assert any(r.startswith("mujoco") and "<4" in r for r in requires)
    gpu = [r for r in requires if 'extra == "gpu"' in r]
    assert gpu and all(r.startswith("tensorrt") for r in gpu)  # onnxruntime-gpu is a swap: install_gpu.sh
    assert "edge = edge.cli:main" in (meta / "entry_points.txt").read_text()


def test_console_script_lists_hil_scenarios_and_trains_from_the_packaged_preset(installed, tmp_path):
    site, env, cwd = installed
    edge = str(site / "bin" / "edge")
    res = run([edge, "hil", "--list"], env, cwd)
    assert res.returncode == 0, res.stderr
    assert "bit_flip" in res.stdout and "mcu_reboot" in res.stdout
    res = run([edge, "train", "vla", "--preset", "tiny", "--help"], env, cwd)
    assert res.returncode == 0 and "--preset" in res.stdout, res.stderr
    demos = tmp_path / "demos"
    make = ("import sys; from edge.training.vla.synthetic import write_synthetic_demos; "
            "write_synthetic_demos(sys.argv[1], episodes=2, steps=12)")
    assert run([sys.executable, "-c", make, str(demos)], env, cwd).returncode == 0
    out = tmp_path / "ckpt"
    res = run([edge, "train", "vla", "--data", str(demos), "--out", str(out), "--preset", "tiny",
               "--steps", "2", "--no-progress", "--set", "language_encoder=hash-ngram-384-v1"], env, cwd,
              timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["steps"] == 2 and set(manifest["files"]) == {"model.pt"}


def test_edge_run_one_episode_from_the_installed_copy(installed):
    site, env, cwd = installed
    ckpt = site / "edge" / "vla" / "checkpoints" / "stack"
    before = tree(ckpt)
    res = run([str(site / "bin" / "edge"), "run", "--episodes", "1"], env, cwd, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "success   " in res.stdout and "edge report" in res.stdout  # the summary, and how to look at the run
    assert tree(ckpt) == before  # the onnxruntime export went to EDGE_CACHE_DIR, not the package
    assert list((Path(env["EDGE_CACHE_DIR"]) / "onnx").glob("*/metadata.json"))


def test_built_wheel_in_a_fresh_venv_runs_the_shipped_vla(installed, tmp_path):
    """The user's path without the checkout's .venv: a new venv from the base interpreter, torch's CPU
    build first (as ``make setup``), then the wheel with its dependencies resolved by pip under the
    tested constraints; ``edge run`` from outside the repository runs the packaged VLA."""
    site, _, cwd = installed
    wheel = next((site.parent / "dist").glob("edge_runtime-*.whl"))
    venv = tmp_path / "fresh"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    torch = subprocess.run([*pip, "torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu",
                            "--timeout", "15", "--retries", "1"], check=False, capture_output=True, text=True,
                           timeout=1200)
    if torch.returncode != 0:  # PyTorch's CPU index unreachable: pip's configured sources (as make setup)
        subprocess.run([*pip, "torch==2.13.0"], check=True, timeout=1200)
    subprocess.run([*pip, "-c", str(ROOT / "constraints.txt"), str(wheel)], check=True, timeout=1800)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(EDGE_CACHE_DIR=str(tmp_path / "cache"), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    where = run([str(venv / "bin" / "python"), "-c", "import edge, torch; print(edge.__file__); print(torch.__version__)"],
                env, cwd)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.split()[0]).is_relative_to(venv), where.stdout  # not the checkout
    out = tmp_path / "run"
    res = run([str(venv / "bin" / "edge"), "run", "--episodes", "1", "--out", str(out)], env, cwd, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["policy"]["kind"] == "vla", meta["policy"]
    assert Path(meta["policy"]["model_pt"]).is_relative_to(venv), meta["policy"]["model_pt"]
    assert meta["policy"]["model_sha256"] == json.loads(
        (ROOT / "edge/vla/checkpoints/stack/manifest.json").read_text())["files"]["model.pt"]
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 1 and episodes[0]["queries"] > 0
