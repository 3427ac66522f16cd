"""The search's model pass on ONNX Runtime: the planner's ``expand`` (one pass over a node's window
gives its policy prior and value, and every child's state and reward) as one ONNX graph.

Graph ``expand.onnx`` (window fixed at export; batch dynamic, or fixed where the caller always plans
one search at a time: the runtime policy's batch-1 graph folds away the shape arithmetic)::

    z (B, W, N, Dz) float32, actions (B, W) int64, valid (B, W) bool
        ->  policy_logits (B, A), value_logits (B, S), child_z (B, A, N, Dz), child_reward_logits (B, A, S)

exactly :meth:`TokenWorldModel.forward` with ``heads="last", branch=True`` (the last block's policy and
value logits, the branch outputs). The supports are decoded outside the graph, as with torch. At export
the graph must pass ``onnx.checker`` and agree with torch to ``tolerance`` (max abs over every output, on
random windows with 0 to W - 1 padded blocks, at batch 1 and 5, or at the fixed batch), else it is
refused.

:func:`ensure_expand_export` exports once per model and window into the edge cache
(``<cache>/onnx/wm-<model digest>-<EXPORTER_ID>-w<W>[-b<B>]/``, the cache of :func:`edge.export.cache_root`;
the digest covers the model's config, the traced code and the weights), checked before every reuse
(the graph's sha256 in ``metadata.json``, and agreement with torch at batch 1); a cache that cannot be
written gives a temporary export. torch and onnxruntime are imported inside the functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from edge.errors import EdgeError

GRAPH_FILE = "expand.onnx"
METADATA_FILE = "metadata.json"
EXPORT_FORMAT = "edge-wm-expand-onnx"
EXPORT_VERSION = 1
OPSET = 17
PARITY_TOLERANCE = 1e-4
EXPORTER_ID = f"wm-export-v{EXPORT_VERSION}-opset{OPSET}"
INPUTS = ("z", "actions", "valid")
OUTPUTS = ("policy_logits", "value_logits", "child_z", "child_reward_logits")


def model_digest(model) -> str:
    """sha256 over what the graph is made from: the model's config (head counts change the graph, not
    the weights), the source of :mod:`world_models.token_model` (the forward pass traced) and the
    weights (names, dtypes, shapes and bytes, in state-dict order)."""
    import dataclasses

    from world_models import token_model

    h = hashlib.sha256()
    h.update(json.dumps(dataclasses.asdict(model.cfg), sort_keys=True).encode())
    h.update(Path(token_model.__file__).read_bytes())
    for name, t in model.state_dict().items():
        a = t.detach().cpu().contiguous().numpy()
        h.update(f"{name}|{a.dtype}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _sha256_file(path: Path) -> str:
    from edge.digest import sha256_file

    return sha256_file(path)


def _graph_module(model):
    import torch

    class ExpandGraph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, z, actions, valid):
            out = self.model(z, actions, valid, heads="last", branch=True)
            return (out["policy_logits"][:, -1], out["value_logits"][:, -1], out["branch_next_z"],
                    out["branch_reward_logits"])

    return ExpandGraph().eval()


def example_window(model, window: int, batch: int, seed: int = 0, offset: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the graph's shapes: states ~ N(0, 1), random actions, and row i's oldest
    (i + ``offset``) mod ``window`` blocks padded (invalid), as acting histories are early in an
    episode (0 padded: full; ``window`` - 1: all but the current block padded)."""
    rng = np.random.default_rng(seed)
    c = model.cfg
    valid = np.ones((batch, window), bool)
    for i in range(batch):
        valid[i, : (i + offset) % window] = False
    return {"z": rng.standard_normal((batch, window, c.tokens, c.state_dim)).astype(np.float32),
            "actions": rng.integers(0, c.num_actions, (batch, window)).astype(np.int64), "valid": valid}


def parity(model, graph: Path, window: int, batches: tuple[int, ...] = (1, 5), fixed: int | None = None) -> float:
    """Max abs difference between torch (eval mode; the model's mode is restored) and onnxruntime over
    every output, on :func:`example_window` inputs at each batch size; for a graph of ``fixed`` batch,
    at that batch with every padding."""
    import torch

    sess = _session(graph, 1)
    was_training = model.training
    mod = _graph_module(model)
    worst = 0.0
    cases = [(fixed, off) for off in range(window)] if fixed else [(b, 0) for b in batches]
    try:
        for seed, (batch, offset) in enumerate(cases):
            feeds = example_window(model, window, batch, seed, offset)
            with torch.no_grad():
                want = mod(*(torch.as_tensor(feeds[k]) for k in INPUTS))
            got = sess.run(list(OUTPUTS), feeds)
            worst = max(worst, *(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want)))
    finally:
        model.train(was_training)
    return worst


def export_expand(model, window: int, out_dir: str | Path, tolerance: float = PARITY_TOLERANCE,
                  batch: int | None = None) -> dict[str, Any]:
    """Write ``expand.onnx`` + ``metadata.json`` for ``model`` and windows of ``window`` blocks into
    ``out_dir`` (``batch``: a graph of that batch only; None: any batch); returns the metadata.
    EdgeError if the graph fails the checker or disagrees with torch by more than ``tolerance``."""
    import warnings

    import onnx
    import torch

    if not 1 <= window <= model.cfg.max_blocks:
        raise EdgeError(f"window={window}: the model reads 1..{model.cfg.max_blocks} blocks (max_blocks)")
    if batch is not None and batch < 1:
        raise EdgeError(f"batch={batch}: a fixed batch must be >= 1 (or None for any batch)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    graph = out / GRAPH_FILE
    was_training = model.training
    model.eval()
    try:
        feeds = example_window(model, window, batch or 1)
        args = tuple(torch.as_tensor(feeds[k]) for k in INPUTS)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shapes are fixed but the batch
                torch.onnx.export(_graph_module(model), args, str(graph), dynamo=False, input_names=list(INPUTS),
                                  output_names=list(OUTPUTS),
                                  dynamic_axes=None if batch else {k: {0: "batch"} for k in INPUTS + OUTPUTS},
                                  opset_version=OPSET, do_constant_folding=True)
            onnx.checker.check_model(str(graph), full_check=True)
            err = parity(model, graph, window, fixed=batch)
        except EdgeError:
            raise
        except Exception as e:  # the exporter's, onnx's and onnxruntime's errors have no common base
            raise EdgeError(f"exporting the world model's search pass to ONNX failed ({type(e).__name__}: {e}); "
                            "use the torch search (--plan-backend torch)") from None
    finally:
        model.train(was_training)
    if not err <= tolerance:
        raise EdgeError(f"exported {graph}: onnxruntime differs from torch by {err:.3g} (max abs), over the "
                        f"tolerance {tolerance:g}; use the torch search (--plan-backend torch)")
    import onnxruntime

    meta = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exporter": EXPORTER_ID, "opset": OPSET,
            "window": window, "batch": batch, "model_digest": model_digest(model), "inputs": list(INPUTS),
            "outputs": list(OUTPUTS), "parity_max_abs": err, "tolerance": tolerance,
            "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
            "files": {GRAPH_FILE: _sha256_file(graph)}}
    tmp = out / (METADATA_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1) + "\n")
    os.replace(tmp, out / METADATA_FILE)
    return meta


def _valid(export_dir: Path, digest: str, window: int, batch: int | None = None) -> bool:
    """A cached export is used only if complete, of this format and exporter, made from this model
    (``digest``: :func:`model_digest`) for this window, and its graph still matches its recorded sha256."""
    try:
        meta = json.loads((export_dir / METADATA_FILE).read_text())
        return (meta.get("format") == EXPORT_FORMAT and meta.get("exporter") == EXPORTER_ID
                and meta.get("model_digest") == digest and meta.get("window") == window
                and meta.get("batch") == batch
                and _sha256_file(export_dir / GRAPH_FILE) == meta["files"][GRAPH_FILE])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _reusable(export_dir: Path, model, digest: str, window: int, batch: int | None = None) -> bool:
    """:func:`_valid`, and the graph still agrees with torch (batch 1, or the fixed batch with every
    padding; milliseconds; catches what the key cannot, e.g. another onnxruntime)."""
    if not _valid(export_dir, digest, window, batch):
        return False
    try:
        return parity(model, export_dir / GRAPH_FILE, window, (1,), fixed=batch) <= PARITY_TOLERANCE
    except Exception:  # noqa: BLE001 - a graph this onnxruntime cannot run is not reusable
        return False


def ensure_expand_export(model, window: int, batch: int | None = None) -> Path:
    """The export directory for ``model``, ``window`` and ``batch`` (None: any): made once in the
    cache, checked before every reuse (a stale or damaged one is made again); a temporary one where
    the cache cannot be written (:func:`edge.export.export_into_cache`)."""
    from edge.export import cache_root, export_into_cache

    digest = model_digest(model)
    final = cache_root() / "onnx" / (f"wm-{digest}-{EXPORTER_ID}-w{window}" + (f"-b{batch}" if batch else ""))
    return export_into_cache(final, lambda d: _reusable(d, model, digest, window, batch),
                             lambda d: export_expand(model, window, d, batch=batch),
                             "the world model's search pass to ONNX", "edge-wm-onnx-")


def _session(graph: Path, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])


class OrtExpand:
    """The planner's model pass on onnxruntime (CPU): called with torch tensors (z, actions, valid),
    returns torch tensors (policy logits, value logits, child states, child reward logits) that view
    onnxruntime's outputs."""

    def __init__(self, export_dir: str | Path, window: int, threads: int = 1) -> None:
        d = Path(export_dir)
        try:
            meta = json.loads((d / METADATA_FILE).read_text())
        except (OSError, ValueError) as e:
            raise EdgeError(f"{d}: not a world-model search export ({e}); make one with "
                            "world_models.onnx_search.ensure_expand_export, or use --plan-backend torch") from None
        if meta.get("window") != window:
            raise EdgeError(f"{d}: exported for windows of {meta.get('window')} blocks, the planner uses {window}; "
                            "export for this window (ensure_expand_export(model, window))")
        self.export_dir, self.window, self.meta, self.threads = d, window, meta, threads
        self.batch = meta.get("batch")  # None: any batch
        try:
            self.session = _session(d / GRAPH_FILE, threads)
        except Exception as e:  # noqa: BLE001 - onnxruntime's errors have no common base
            raise EdgeError(f"{d / GRAPH_FILE}: onnxruntime cannot load it ({type(e).__name__}: {e}); delete "
                            f"{d} to export again, or use --plan-backend torch") from None

    def __call__(self, z, actions, valid):
        import torch

        return tuple(torch.from_numpy(o) for o in self.run(np.asarray(z), np.asarray(actions), np.asarray(valid)))

    numpy_pass = True  # the planner keeps its tree's per-node work in numpy with this pass (:meth:`run`)

    def run(self, z: np.ndarray, actions: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, ...]:
        """The pass on numpy arrays: (policy logits, value logits, child states, child reward logits)."""
        if self.batch is not None and z.shape[0] != self.batch:
            raise EdgeError(f"{self.export_dir}: exported for batches of {self.batch}, called with {z.shape[0]}; "
                            "export with ensure_expand_export(model, window, batch=None) for any batch")
        feeds = {"z": np.ascontiguousarray(z, np.float32), "actions": np.ascontiguousarray(actions, np.int64),
                 "valid": np.ascontiguousarray(valid, bool)}
        return tuple(self.session.run(list(OUTPUTS), feeds))
