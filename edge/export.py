"""Export a VLA checkpoint to ONNX: one graph for the encoder, one for a single denoising step.

Output directory::

    encoder.onnx        front [, wrist] (B, H_img, W_img, 3) uint8, proprio (B, P) float32 raw,
                        lang (B, L) float32  ->  features (B, D) float32
    denoise_step.onnx   x (B, H, Da) float32 normalised, t (B,) float32, features (B, D)
                        ->  velocity (B, H, Da) float32
    locator.onnx        scene-memory models only (spec.scene_memory): front (B, H_img, W_img, 3)
                        uint8, lang (B, L) -> scene (B, 6) float32 metres, run once per episode; the
                        encoder then also takes that ``scene``
    metadata.json       ModelSpec (layouts, rate, chunk length, normalisation, language encoder id and
                        cached instruction embeddings), io names/shapes, opset, versions, source
                        checkpoint hash, the sha256 of every graph (``file_sha256``, verified before
                        a backend loads them) and the measured torch-vs-onnxruntime parity

The batch dimension is dynamic in both graphs. Both pass ``onnx.checker.check_model(full_check=True)``
and the export is refused if onnxruntime disagrees with torch by more than ``tolerance`` (max abs).
The sampling loop is *not* in a graph: K changes per query, and the loop keeps its state in float32
(:class:`edge.backends.base.Backend`). This module imports torch only inside its functions.

When the onnxruntime backend is given a checkpoint, :func:`ensure_export` exports it once into a
cache *outside* the checkpoint (``$EDGE_CACHE_DIR/onnx/<sha256 of model.pt>-<EXPORTER_ID>/``, default
``~/.cache/edge``), verified before every reuse; nothing is ever written into a checkpoint directory.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from edge import atomic
from edge.errors import EdgeError
from edge.vla.verify import (  # noqa: F401 - METADATA_FILE is re-exported
    EXPORT_FILES_KEY, METADATA_FILE, VerificationError, sha256_file, verify_export)

log = logging.getLogger(__name__)

EXPORT_FORMAT = "edge-vla-onnx"
EXPORT_VERSION = 1
ENCODER_FILE = "encoder.onnx"
STEP_FILE = "denoise_step.onnx"
LOCATOR_FILE = "locator.onnx"
DEFAULT_OPSET = 17
PARITY_TOLERANCE = 1e-4
EXPORTER_ID = f"export-v{EXPORT_VERSION}-opset{DEFAULT_OPSET}"  # part of the cache key
CACHE_ENV = "EDGE_CACHE_DIR"


def read_metadata(export_dir: str | Path) -> dict[str, Any]:
    path = Path(export_dir) / METADATA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{export_dir} is not a VLA export (no {METADATA_FILE}); "
                                "create one with `edge export --checkpoint CKPT --out DIR`")
    meta = json.loads(path.read_text())
    if meta.get("format") != EXPORT_FORMAT or meta.get("version") != EXPORT_VERSION:
        raise EdgeError(f"{path}: export format {meta.get('format')} v{meta.get('version')} is not "
                        f"{EXPORT_FORMAT} v{EXPORT_VERSION}; re-export with this build")
    for key in meta["files"]:
        if not (Path(export_dir) / meta["files"][key]).is_file():
            raise FileNotFoundError(f"{export_dir}: {meta['files'][key]} is missing; re-export")
    return meta


def example_inputs(spec: Any, batch: int, seed: int = 0, real: dict[str, np.ndarray] | None = None
                   ) -> dict[str, np.ndarray]:
    """Encoder inputs for tracing and parity. ``real`` (e.g. demo frames) wins where given;
    otherwise images are random uint8, proprio is drawn around the training statistics and the
    instruction is a cached training embedding (or a random unit vector if none is cached)."""
    rng = np.random.default_rng(seed)
    h, w = spec.image_hw
    out = {cam: rng.integers(0, 256, (batch, h, w, 3), dtype=np.uint8) for cam in spec.cameras}
    mean, std = np.asarray(spec.proprio_mean, np.float32), np.asarray(spec.proprio_std, np.float32)
    out["proprio"] = (mean + std * rng.standard_normal((batch, spec.proprio_dim))).astype(np.float32)
    cached = list(spec.instruction_embeddings.values())
    if cached:
        out["lang"] = np.asarray([cached[i % len(cached)] for i in range(batch)], np.float32)
    else:
        lang = rng.standard_normal((batch, spec.lang_dim)).astype(np.float32)
        out["lang"] = lang / np.linalg.norm(lang, axis=1, keepdims=True)
    if getattr(spec, "scene_memory", False):  # objects somewhere on the table, metres
        out["scene"] = np.concatenate([rng.uniform(0.35, 0.65, (batch, 1)), rng.uniform(-0.2, 0.2, (batch, 1)),
                                       np.full((batch, 1), 0.022)] * 2, axis=1).astype(np.float32)
    for key, value in (real or {}).items():
        out[key] = np.asarray(value)[:batch]
    return out


def _graphs(model):
    import torch

    cams = tuple(model.config.cameras)

    class EncoderGraph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            images = dict(zip(cams, args[: len(cams)]))
            scene = args[len(cams) + 2] if len(args) > len(cams) + 2 else None
            return self.model.encode(images, args[len(cams)], args[len(cams) + 1], scene)

    class StepGraph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
            return self.model.denoise_step(x, t, features)

    class LocatorGraph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, front: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
            return self.model.locate_scene(front, lang)

    return EncoderGraph().eval(), StepGraph().eval(), LocatorGraph().eval()


def _export_graph(module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
                  opset: int) -> None:
    import warnings

    import onnx
    import torch

    axes = {name: {0: "batch"} for name in inputs + outputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter needs no onnxscript
        # shape checks inside torch (e.g. GroupNorm's batch-size test) are traced as constants; the
        # batch axis is still dynamic (tests run the graphs at other batch sizes)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(module, args, str(path), dynamo=False, input_names=inputs,
                          output_names=outputs, dynamic_axes=axes, opset_version=opset,
                          do_constant_folding=True)
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except onnx.checker.ValidationError as err:
        raise EdgeError(f"exported {path.name} fails onnx.checker: {err}") from None


def parity(model, export_dir: Path, inputs: dict[str, np.ndarray], seed: int = 0) -> dict[str, float]:
    """Max abs difference torch vs onnxruntime (CPU) for the encoder and the step at several t."""
    import onnxruntime as ort
    import torch

    so = ort.SessionOptions()
    so.log_severity_level = 3
    enc = ort.InferenceSession(str(export_dir / ENCODER_FILE), so, providers=["CPUExecutionProvider"])
    stp = ort.InferenceSession(str(export_dir / STEP_FILE), so, providers=["CPUExecutionProvider"])
    spec = model.spec
    names = list(spec.encoder_inputs)
    out = {}
    if spec.scene_memory:
        loc = ort.InferenceSession(str(export_dir / LOCATOR_FILE), so, providers=["CPUExecutionProvider"])
        with torch.no_grad():
            scene_t = model.locate_scene(torch.from_numpy(inputs["front"]), torch.from_numpy(inputs["lang"]))
        scene_o = loc.run(["scene"], {"front": inputs["front"], "lang": inputs["lang"]})[0]
        out["locator_max_abs"] = float(np.max(np.abs(scene_t.numpy() - scene_o)))
    with torch.no_grad():
        feats_t = model.encode({c: torch.from_numpy(inputs[c]) for c in spec.cameras},
                               torch.from_numpy(inputs["proprio"]), torch.from_numpy(inputs["lang"]),
                               torch.from_numpy(inputs["scene"]) if spec.scene_memory else None)
    feats_o = enc.run(["features"], {n: inputs[n] for n in names})[0]
    out["encoder_max_abs"] = float(np.max(np.abs(feats_t.numpy() - feats_o)))
    rng = np.random.default_rng(seed)
    batch = feats_o.shape[0]
    worst = 0.0
    for t_val in (0.0, 0.37, 0.9):
        x = rng.standard_normal((batch, spec.chunk_len, spec.action_dim)).astype(np.float32)
        t = np.full(batch, t_val, np.float32)
        with torch.no_grad():
            v_t = model.denoise_step(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(feats_o))
        v_o = stp.run(["velocity"], {"x": x, "t": t, "features": feats_o})[0]
        worst = max(worst, float(np.max(np.abs(v_t.numpy() - v_o))))
    out["denoise_step_max_abs"] = worst
    return out


def export_onnx(checkpoint: str | Path, out_dir: str | Path, opset: int = DEFAULT_OPSET,
                tolerance: float = PARITY_TOLERANCE, real_inputs: dict[str, np.ndarray] | None = None,
                seed: int = 0, verify: bool = True) -> dict[str, Any]:
    """Export, check and verify; returns the metadata written to ``out_dir/metadata.json``.
    ``verify``: the checkpoint must match its manifest first (:func:`edge.vla.verify.verify_checkpoint`)."""
    import onnx
    import onnxruntime
    import torch

    from edge.vla.checkpoint import load_model, resolve

    ckpt = resolve(checkpoint)
    model = load_model(ckpt, verify=verify)  # float32, cpu, eval
    spec = model.spec
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(f"cannot create export directory {out}: {err.strerror}") from None
    enc_graph, step_graph, loc_graph = _graphs(model)
    trace = example_inputs(spec, batch=2, seed=seed)
    names = list(spec.encoder_inputs)
    t0 = time.perf_counter()
    with torch.no_grad():
        enc_args = tuple(torch.from_numpy(trace[n]) for n in names)
        feats = enc_graph(*enc_args)
        x = torch.zeros(2, spec.chunk_len, spec.action_dim)
        _export_graph(enc_graph, enc_args, out / ENCODER_FILE, names, ["features"], opset)
        _export_graph(step_graph, (x, torch.full((2,), 0.5), feats), out / STEP_FILE,
                      ["x", "t", "features"], ["velocity"], opset)
        if spec.scene_memory:
            _export_graph(loc_graph, (torch.from_numpy(trace["front"]), torch.from_numpy(trace["lang"])),
                          out / LOCATOR_FILE, ["front", "lang"], ["scene"], opset)
    checks = {
        "random": parity(model, out, example_inputs(spec, batch=3, seed=seed + 1), seed),
        "real_format": parity(model, out, example_inputs(spec, batch=3, seed=seed + 2, real=real_inputs),
                              seed + 1),
    }
    worst = max(v for c in checks.values() for v in c.values())
    if worst > tolerance:
        raise EdgeError(f"ONNX export of {ckpt} disagrees with torch by {worst:.2e} (> {tolerance:g}); "
                        f"details: {checks}")
    meta = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "files": {"encoder": ENCODER_FILE, "denoise_step": STEP_FILE,
                  **({"locator": LOCATOR_FILE} if spec.scene_memory else {})},
        "inputs": {"encoder": names, "denoise_step": ["x", "t", "features"],
                   **({"locator": ["front", "lang"]} if spec.scene_memory else {})},
        "outputs": {"encoder": ["features"], "denoise_step": ["velocity"],
                    **({"locator": ["scene"]} if spec.scene_memory else {})},
        "shapes": {
            **{cam: ["batch", *spec.image_hw, 3] for cam in spec.cameras},
            "proprio": ["batch", spec.proprio_dim], "lang": ["batch", spec.lang_dim],
            "features": ["batch", spec.feature_dim],
            "x": ["batch", spec.chunk_len, spec.action_dim], "t": ["batch"],
            "velocity": ["batch", spec.chunk_len, spec.action_dim],
            **({"scene": ["batch", 6]} if spec.scene_memory else {}),
        },
        "dtypes": {**{cam: "uint8" for cam in spec.cameras}, "others": "float32"},
        "opset": opset,
        "spec": spec.to_dict(),
        "source_checkpoint": str(ckpt),
        "checkpoint_sha256": sha256_file(ckpt),
        EXPORT_FILES_KEY: {},  # filled below
        "parity_max_abs": checks,
        "parity_tolerance": tolerance,
        "real_inputs": sorted(real_inputs) if real_inputs else [],
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__,
                     "onnxruntime": onnxruntime.__version__},
        "export_s": round(time.perf_counter() - t0, 3),
    }
    meta[EXPORT_FILES_KEY] = {f: sha256_file(out / f) for f in meta["files"].values()}
    atomic.write_json(out / METADATA_FILE, meta)
    return meta


def cache_root() -> Path:
    """Where exports made on the fly are kept: ``$EDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/edge``,
    else ``~/.cache/edge``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "edge"


def _valid_export(export_dir: Path, digest: str) -> bool:
    """A cached export is used only if it is complete, of this format, made from ``digest`` and
    every graph still matches its recorded hash."""
    try:
        meta = read_metadata(export_dir)
        if meta.get("checkpoint_sha256") != digest:
            return False
        verify_export(export_dir, meta)
    except (FileNotFoundError, EdgeError, json.JSONDecodeError, OSError, KeyError, TypeError):
        return False
    return True


def ensure_export(checkpoint: str | Path, verify: bool = True) -> Path:
    """An ONNX export for onnxruntime of a checkpoint (dir or ``model.pt``) or an export directory.

    An export directory is returned as it is, after its graphs are checked against the hashes in its
    ``metadata.json`` (``verify``). A checkpoint is verified against its manifest (``verify``) and
    exported once into :func:`cache_root` ``/onnx/<sha256 of model.pt>-<EXPORTER_ID>/``, reused while
    it verifies; never into the checkpoint directory. If the cache cannot be written the export goes
    to a fresh temporary directory.
    """
    from edge.vla.checkpoint import resolve
    from edge.vla.verify import verify_checkpoint

    path = Path(checkpoint)
    if path.is_dir() and (path / METADATA_FILE).is_file():
        if verify:
            verify_export(path)
        return path
    ckpt = resolve(path)
    if verify:
        verify_checkpoint(ckpt)
    digest = sha256_file(ckpt)
    final = cache_root() / "onnx" / f"{digest}-{EXPORTER_ID}"
    return export_into_cache(final, lambda d: _valid_export(d, digest),
                             lambda d: export_onnx(ckpt, d, verify=False),  # verified above when asked to
                             f"{ckpt} to ONNX", "edge-vla-onnx-")


def export_into_cache(final: Path, valid: Any, make: Any, what: str, tmp_prefix: str) -> Path:
    """``final`` if ``valid(final)``; else ``make(dir)`` into a fresh folder beside it, renamed to
    ``final`` (a stale or broken ``final`` is replaced; if another process has just made a valid one,
    it is used). If the cache cannot be written, ``make`` writes into a temporary folder (named
    ``tmp_prefix``…), which is returned and not kept. ``what`` names the export in the log."""
    if valid(final):
        return final
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{final.name[:12]}-", dir=final.parent))
    except OSError as err:
        work = Path(tempfile.mkdtemp(prefix=tmp_prefix))
        log.warning("cannot write the export cache %s (%s); exporting %s in %s (not kept)",
                    final.parent, err.strerror, what, work)
        make(work)
        return work
    log.info("exporting %s in %s (first use)", what, final)
    try:
        make(work)
        if final.exists():  # stale or broken (another process may have just finished: use it then)
            if valid(final):
                return final
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(work, final)
        except OSError:  # lost a race to a concurrent export: keep the winner if it verifies
            if valid(final):
                return final
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone after a successful rename
    if not valid(final):
        raise VerificationError(f"{final}: the fresh ONNX export does not verify; delete "
                                f"{final.parent} and retry")
    return final
