"""scripts/reproduce_vla.sh runs the README's whole recipe end to end (smoke scale: a few episodes
and steps, tiny model), times every step, and a second run skips what is done."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["record_viapoint", "record_direct", "stage1", "stage2", "stage3", "stage4", "stage5", "dagger1", "stage6", "stage7",
         "dagger2", "stage8", "dagger3_4", "stage9"]


@pytest.mark.slow
@pytest.mark.timeout(1900)  # its two subprocess runs may take 900 s each
def test_smoke_recipe_chains_every_stage_and_resumes(tmp_path):
    out = tmp_path / "repro"
    env = {**os.environ, "MUJOCO_GL": "egl"}
    subprocess.run([str(ROOT / "scripts" / "reproduce_vla.sh"), "--smoke", str(out)], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=900)
    timing = json.loads((out / "timing.json").read_text())
    assert sorted(s["step"] for s in timing["steps"]) == sorted(STEPS)
    stage8 = json.loads((out / "runs" / "vla_stack_scene_dagger" / "manifest.json").read_text())
    scene = json.loads((out / "runs" / "vla_stack_scene" / "manifest.json").read_text())
    assert stage8["complete"] and stage8["init"]["sha256"] == scene["model"]["sha256"]
    assert scene["metrics"]["scene_locator"]["steps"] == 4 and stage8["spec"]["scene_memory"]
    final = json.loads((out / "runs" / "vla_stack_s11wrist" / "manifest.json").read_text())
    assert final["complete"] and final["init"]["sha256"] == stage8["model"]["sha256"]
    assert final["config"]["model"]["scene_memory_moved"] and final["metrics"]["vision_pretrain"]["steps"] == 4
    # again: recordings are kept and finished stages skipped, so only the cheap steps are timed
    second = subprocess.run([str(ROOT / "scripts" / "reproduce_vla.sh"), "--smoke", str(out)], cwd=ROOT,
                            env=env, check=True, capture_output=True, text=True, timeout=900)
    assert second.stderr.count("is complete, skipped") == 9
