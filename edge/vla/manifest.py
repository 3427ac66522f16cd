"""The manifest written next to every trained checkpoint: how to reproduce it and what it scored."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from edge import atomic
from edge.config import to_dict

REPO_ROOT = Path(__file__).resolve().parents[2]


def git_revision(root: Path = REPO_ROOT) -> dict[str, Any]:
    """{"commit": sha or None, "dirty": bool or None} of the source tree that trained the model."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        return {"commit": None, "dirty": None, "error": str(err)}
    if sha.returncode != 0:
        return {"commit": None, "dirty": None, "error": sha.stderr.strip()[:200]}
    return {"commit": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def write_manifest(trainer: Any, model_path: Path, wall_s: float) -> dict[str, Any]:
    """Write ``manifest.json`` beside the checkpoint and return it."""
    import torch

    from edge.digest import sha256_file
    from edge.vla.verify import file_table

    spec = trainer.spec.to_dict()
    spec["instruction_embeddings"] = sorted(spec["instruction_embeddings"])  # texts only
    losses = [h["loss"] for h in trainer.history]
    done = [e for e in trainer.evals if "success_rate" in e]
    manifest = {
        "kind": "edge-vla",
        "command": trainer.command,
        "task": trainer.task,
        "seed": trainer.config.seed,
        "init": trainer.init_info,
        "data": {"dir": (str(trainer.data_dirs[0]) if len(trainer.data_dirs) == 1
                         else [str(d) for d in trainer.data_dirs]), "sha256": trainer.data_hash,
                 "episodes": trainer.data.n_episodes, "frames": trainer.data.n_frames,
                 "instructions": len(trainer.data.instructions)},
        "git": git_revision(),
        "step": trainer.step,
        "steps": trainer.config.steps,
        "complete": trainer.step >= trainer.config.steps,
        "resumed_at_steps": trainer.resumed_at,
        "wall_time_s": round(wall_s, 1),
        "metrics": {
            "final_loss": losses[-1] if losses else None,
            "loss_history": trainer.history[-200:],
            "eval": [{k: v for k, v in e.items() if k != "per_episode"} for e in trainer.evals],
            "final_success_rate": done[-1]["success_rate"] if done else None,
            "vision_pretrain": trainer.pretrain,
            "scene_locator": getattr(trainer, "locator_record", None),
        },
        "model": {"file": model_path.name, "sha256": sha256_file(model_path),
                  "bytes": model_path.stat().st_size, "weights": "ema",
                  "parameters": trainer.param_summary()},
        # every file a loader reads, verified on load (edge.vla.verify)
        "files": file_table(model_path.parent, [model_path.name]),
        "config": to_dict(trainer.config),
        "spec": spec,
        "versions": {"torch": torch.__version__, "python": platform.python_version(),
                     "platform": platform.platform()},
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = Path(trainer.out_dir) / "manifest.json"
    atomic.write_json(path, manifest)
    return manifest
