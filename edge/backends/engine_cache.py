"""On-disk cache of TensorRT engines, keyed by everything an engine depends on.

A TensorRT engine is only valid for the exact ONNX graph, TensorRT version, GPU (model and compute
capability), precision and optimisation-profile batch range it was built with, and TensorRT does not
check most of that itself (ONNX Runtime's TensorRT EP documents the same: its caches are "not
invalidated automatically"). So every cached engine carries a JSON sidecar with its full key::

    <root>/<name>-<digest[:20]>.engine    the serialised engine (bytes from build_serialized_network)
    <root>/<name>-<digest[:20]>.json      {"key": {...}, "engine_sha256": ..., "engine_bytes": ...}
    <root>/timing-<trt>-<gpu>-sm<cc>.cache  TensorRT's timing cache for that TensorRT + GPU

:func:`engine_key` is a pure function of its arguments (no TensorRT, no GPU needed), and
:meth:`EngineCache.lookup` hands back an engine only if the sidecar's key equals the wanted key field
by field *and* the engine file's hash equals the sidecar's; anything else (no sidecar, unreadable
sidecar, a key from another build, GPU or TensorRT, a truncated or swapped engine file) is refused
with the reason, and :meth:`EngineCache.get_or_build` rebuilds and overwrites it. Writes are atomic
(temp file + rename; the sidecar is written last, so a crash mid-write leaves a refused entry, never a
wrong one).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from edge.digest import sha256_file  # noqa: F401 - re-exported
from edge.errors import EdgeError

log = logging.getLogger(__name__)

KEY_VERSION = 1
PRECISIONS = ("fp32", "fp16", "bf16")
ENGINE_SUFFIX = ".engine"
SIDECAR_SUFFIX = ".json"
ENV_CACHE_DIR = "EDGE_ENGINE_CACHE"
T = TypeVar("T")


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU an engine is built for: what TensorRT's tactics depend on."""

    name: str                 # e.g. "NVIDIA H200", "Orin"
    compute_capability: str   # "major.minor", e.g. "9.0", "8.7"

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise EdgeError("DeviceInfo.name must not be empty")
        if not re.fullmatch(r"\d+\.\d+", self.compute_capability):
            raise EdgeError(f"compute capability must look like '8.7', got {self.compute_capability!r}")

    @classmethod
    def from_torch(cls, index: int = 0) -> DeviceInfo:
        """The CUDA device ``index`` as torch sees it (imports torch; needs a CUDA GPU)."""
        import torch

        if not torch.cuda.is_available():
            raise EdgeError(f"no CUDA GPU visible to this torch ({torch.__version__})")
        major, minor = torch.cuda.get_device_capability(index)
        return cls(torch.cuda.get_device_name(index), f"{major}.{minor}")


def engine_key(*, onnx_sha256: str, tensorrt_version: str, device: DeviceInfo, precision: str,
               batch_range: tuple[int, int, int], builder: Mapping[str, Any] | None = None
               ) -> dict[str, Any]:
    """Everything a TensorRT engine depends on, as a JSON-able dict (pure; validates its inputs).

    ``batch_range`` is the optimisation profile's (min, opt, max) batch; ``builder`` holds any other
    build setting that changes the engine (workspace, optimisation level, flags) so that changing it
    invalidates the cache too.
    """
    if not re.fullmatch(r"[0-9a-f]{64}", onnx_sha256 or ""):
        raise EdgeError(f"onnx_sha256 must be 64 lowercase hex digits, got {onnx_sha256!r}")
    if not str(tensorrt_version).strip():
        raise EdgeError("tensorrt_version must not be empty")
    if precision not in PRECISIONS:
        raise EdgeError(f"precision {precision!r} is not one of {list(PRECISIONS)}")
    lo, opt, hi = (int(b) for b in batch_range)
    if not 1 <= lo <= opt <= hi:
        raise EdgeError(f"batch_range must satisfy 1 <= min <= opt <= max, got {tuple(batch_range)}")
    settings = {str(k): builder[k] for k in sorted(builder or {})}
    json.dumps(settings)  # must be JSON-able: raises TypeError here rather than at store time
    return {
        "key_version": KEY_VERSION,
        "onnx_sha256": onnx_sha256,
        "tensorrt": str(tensorrt_version),
        "gpu": device.name,
        "compute_capability": device.compute_capability,
        "precision": precision,
        "batch": [lo, opt, hi],
        "builder": settings,
    }


def key_digest(key: Mapping[str, Any]) -> str:
    """sha256 (hex) of the key's canonical JSON."""
    canon = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def key_differences(wanted: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """Human-readable list of the fields where two keys differ (empty = same key)."""
    out = []
    for field in sorted(set(wanted) | set(found)):
        if wanted.get(field) != found.get(field):
            out.append(f"{field}: cached {found.get(field)!r}, wanted {wanted.get(field)!r}")
    return out


def default_cache_dir() -> Path:
    """$EDGE_ENGINE_CACHE, else $EDGE_CACHE_DIR/tensorrt (the runtime's cache root, as for ONNX
    exports), else $XDG_CACHE_HOME/edge/tensorrt, else ~/.cache/edge/tensorrt."""
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    if os.environ.get("EDGE_CACHE_DIR"):
        return Path(os.environ["EDGE_CACHE_DIR"]) / "tensorrt"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edge" / "tensorrt"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Lookup:
    """Result of :meth:`EngineCache.lookup`: ``engine`` is None on a miss, ``reason`` says why."""

    engine: bytes | None
    path: Path
    reason: str

    @property
    def hit(self) -> bool:
        return self.engine is not None


class EngineCache:
    """Engines under ``root`` (created on first store), one file + sidecar per (name, key)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else default_cache_dir()

    def paths(self, name: str, key: Mapping[str, Any]) -> tuple[Path, Path]:
        stem = f"{_safe(name)}-{key_digest(key)[:20]}"
        return self.root / (stem + ENGINE_SUFFIX), self.root / (stem + SIDECAR_SUFFIX)

    def lookup(self, name: str, key: Mapping[str, Any]) -> Lookup:
        """The cached engine for (name, key), or a miss with the reason it was refused."""
        engine_path, sidecar_path = self.paths(name, key)
        if not engine_path.is_file():
            return Lookup(None, engine_path, "no cached engine")
        if not sidecar_path.is_file():
            return Lookup(None, engine_path, f"refused {engine_path.name}: it has no sidecar "
                          f"{sidecar_path.name}, so its origin is unknown")
        try:
            sidecar = json.loads(sidecar_path.read_text())
            found = sidecar["key"]
            expected_sha = sidecar["engine_sha256"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            return Lookup(None, engine_path, f"refused {engine_path.name}: unreadable sidecar ({err})")
        diffs = key_differences(dict(key), found if isinstance(found, dict) else {})
        if diffs:
            return Lookup(None, engine_path, f"refused {engine_path.name}: stale or foreign engine "
                          f"({'; '.join(diffs)})")
        try:
            data = engine_path.read_bytes()
        except OSError as err:
            return Lookup(None, engine_path, f"refused {engine_path.name}: cannot read it ({err})")
        if _sha256_bytes(data) != expected_sha:
            return Lookup(None, engine_path, f"refused {engine_path.name}: its bytes do not match the "
                          "sidecar's sha256 (truncated or replaced)")
        return Lookup(data, engine_path, "hit")

    def store(self, name: str, key: Mapping[str, Any], engine: bytes) -> Path:
        """Write the engine and then its sidecar, each atomically; returns the engine's path."""
        engine = bytes(engine)
        if not engine:
            raise EdgeError(f"refusing to cache an empty engine for {name!r}")
        engine_path, sidecar_path = self.paths(name, key)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise EdgeError(f"cannot create the engine cache directory {self.root}: {err}; set "
                            f"{ENV_CACHE_DIR} or the backend's engine_cache_dir") from None
        meta = {"key": dict(key), "engine_sha256": _sha256_bytes(engine), "engine_bytes": len(engine),
                "name": name}
        try:
            sidecar_path.unlink(missing_ok=True)  # while the engine is being replaced it is refused
            _atomic_write(engine_path, engine)
            _atomic_write(sidecar_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
        except OSError as err:
            raise EdgeError(f"cannot write {engine_path.name} to the engine cache {self.root}: {err}") from None
        return engine_path

    def get_or_build(self, name: str, key: Mapping[str, Any], build: Callable[[], bytes],
                     load: Callable[[bytes], T | None] = lambda b: b) -> tuple[T, str]:
        """``load(cached bytes)`` on a valid hit, else ``load(build())`` after storing the new engine.

        ``load`` may return None (e.g. TensorRT could not deserialise the bytes): that hit is then
        treated as stale and rebuilt. Returns (loaded object, how it was obtained: "cache hit" or
        the reason it had to be built).
        """
        found = self.lookup(name, key)
        if found.hit:
            obj = load(found.engine)  # type: ignore[arg-type]
            if obj is not None:
                return obj, "cache hit"
            reason = f"refused {found.path.name}: the runtime could not deserialise it"
        else:
            reason = found.reason
        log.info("building TensorRT engine %r (%s)", name, reason)
        data = bytes(build())
        try:
            self.store(name, key, data)
        except EdgeError as err:  # a read-only cache must not stop the backend
            log.warning("engine %r not cached: %s", name, err)
        obj = load(data)
        if obj is None:
            raise EdgeError(f"the freshly built engine {name!r} could not be loaded")
        return obj, reason

    def timing_cache_path(self, tensorrt_version: str, device: DeviceInfo) -> Path:
        """Where TensorRT's timing cache for this TensorRT version and GPU lives."""
        cc = device.compute_capability.replace(".", "")
        return self.root / f"timing-{_safe(tensorrt_version)}-{_safe(device.name)}-sm{cc}.cache"

    def read_timing_cache(self, tensorrt_version: str, device: DeviceInfo) -> bytes:
        path = self.timing_cache_path(tensorrt_version, device)
        try:
            return path.read_bytes()
        except OSError:
            return b""

    def write_timing_cache(self, tensorrt_version: str, device: DeviceInfo, data: bytes) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.timing_cache_path(tensorrt_version, device), bytes(data))
        except OSError as err:
            log.warning("timing cache not saved: %s", err)


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
