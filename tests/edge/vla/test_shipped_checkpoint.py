"""The shipped checkpoint is what its manifest says, and its lineage is an unbroken chain of the
project's own training runs (each stage's model is the next stage's --init)."""

import hashlib
import json
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[3] / "edge" / "vla" / "checkpoints" / "stack"


def test_shipped_model_matches_its_manifest_and_its_lineage_chains():
    manifest = json.loads((SHIPPED / "manifest.json").read_text())
    blob = (SHIPPED / "model.pt").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == manifest["model"]["sha256"]
    assert len(blob) <= 20 * 1024 * 1024 and manifest["complete"]
    stages = [json.loads(p.read_text()) for p in sorted((SHIPPED / "lineage").glob("*.json"),
                                                        key=lambda p: int(p.name.split("_")[0]))]
    assert stages and stages[0].get("init") is None  # the first stage trains from scratch
    for earlier, later in zip(stages, [*stages[1:], manifest]):
        assert later["init"]["sha256"] == earlier["model"]["sha256"]
        assert later["init"]["command"] == earlier["command"]
        assert later["command"].startswith("edge train vla ")
