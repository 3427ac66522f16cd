"""Loading a trained adapter directory: ``adapter.pt`` (config, weights, frozen gate) + ``manifest.json``
(+ ``eqrl_decision.onnx``, the exported decision, listed with its sha256 in the manifest)."""

from __future__ import annotations

import json
from pathlib import Path

from edge.errors import EdgeError

ADAPTER_FILE, ONNX_FILE, MANIFEST_FILE = "adapter.pt", "eqrl_decision.onnx", "manifest.json"
SHIPPED_ADAPTERS = Path(__file__).resolve().parent / "checkpoints"  # the shipped adapters, one per folder


def load_agent(path: str | Path):
    """adapter dir (or adapter.pt) -> (agent in eval mode, gate, manifest or None)."""
    import torch

    from adapters.eqrl.agent import EqrlAgent
    from adapters.eqrl.config import EqrlConfig
    from edge.runtime.query_env import CONTEXT_DIM

    p = Path(path)
    f = p / ADAPTER_FILE if p.is_dir() else p
    if not f.is_file():
        from difflib import get_close_matches

        names = sorted(d.name for d in SHIPPED_ADAPTERS.iterdir() if (d / ADAPTER_FILE).is_file())
        close = get_close_matches(p.name, names, n=1) if len(p.parts) == 1 else []
        raise EdgeError(f"no EQRL adapter at {p} (expected {ADAPTER_FILE}"
                        + (f"; did you mean {close[0]}?" if close else "") + "); train one with "
                        "`edge train adapter --out DIR`, or name a shipped adapter: " + ", ".join(names))
    mf = f.parent / MANIFEST_FILE
    try:
        manifest = json.loads(mf.read_text()) if mf.is_file() else None
    except (ValueError, UnicodeDecodeError) as err:
        raise EdgeError(f"{mf}: not readable JSON ({err}); the adapter's manifest is damaged") from None
    want = ((manifest if isinstance(manifest, dict) else {}).get("files") or {}).get(ADAPTER_FILE)
    if want is None:  # e.g. a training run killed between its first adapter.pt and its manifest
        raise EdgeError(f"{f}: no {MANIFEST_FILE} beside it lists its sha256, so it cannot be verified (a training "
                        "run stopped before its first manifest, or an adapter copied without it); resume the run "
                        "that made it (`edge train adapter --out DIR --resume`) or train it again")
    from edge.export import sha256_file

    if sha256_file(f) != want:
        raise EdgeError(f"{f}: sha256 does not match {mf}; the adapter file is damaged or was replaced")
    blob = torch.load(f, weights_only=False)
    cfg = EqrlConfig(**blob["config"])
    agent = EqrlAgent(cfg, blob["feature_dim"], CONTEXT_DIM, blob["chunk_len"], blob["action_dim"])
    agent.load_state_dict(blob["agent"])
    agent.eval()
    return agent, float(blob["gate"]), manifest
