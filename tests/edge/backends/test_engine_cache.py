"""TensorRT engine cache: key derivation (pure) and refusal of stale or foreign engines (no GPU, no
tensorrt import)."""

import json

import pytest

from edge.backends.engine_cache import (
    DeviceInfo,
    EngineCache,
    default_cache_dir,
    engine_key,
    key_differences,
    key_digest,
)
from edge.errors import EdgeError

ORIN = DeviceInfo("Orin", "8.7")
H200 = DeviceInfo("NVIDIA H200", "9.0")
SHA = "ab" * 32


def key(**over):
    args = {"onnx_sha256": SHA, "tensorrt_version": "10.3.0", "device": ORIN, "precision": "fp16",
            "batch_range": (1, 1, 8), "builder": {"workspace_mb": 1024, "api": "edge-trt-1"}}
    args.update(over)
    return engine_key(**args)


def test_key_is_a_pure_function_of_every_field():
    assert key() == key() and key_digest(key()) == key_digest(key())
    assert key(builder={"api": "edge-trt-1", "workspace_mb": 1024}) == key()  # order-free
    variants = [key(onnx_sha256="cd" * 32), key(tensorrt_version="10.4.0"), key(device=H200),
                key(device=DeviceInfo("Orin", "8.6")), key(precision="fp32"),
                key(batch_range=(1, 1, 4)), key(batch_range=(1, 2, 8)),
                key(builder={"workspace_mb": 2048, "api": "edge-trt-1"})]
    digests = {key_digest(k) for k in variants} | {key_digest(key())}
    assert len(digests) == len(variants) + 1
    assert key()["gpu"] == "Orin" and key()["compute_capability"] == "8.7" and key()["batch"] == [1, 1, 8]


@pytest.mark.parametrize("over, match", [
    ({"onnx_sha256": "xyz"}, "64 lowercase hex"),
    ({"precision": "int8"}, "precision"),
    ({"batch_range": (2, 1, 8)}, "1 <= min <= opt <= max"),
    ({"batch_range": (0, 1, 8)}, "1 <= min"),
    ({"tensorrt_version": ""}, "tensorrt_version"),
])
def test_bad_key_fields_are_refused(over, match):
    with pytest.raises(EdgeError, match=match):
        key(**over)
    with pytest.raises(EdgeError, match="compute capability"):
        DeviceInfo("Orin", "sm87")


def test_store_then_lookup_hits(tmp_path):
    cache = EngineCache(tmp_path / "c")
    assert not cache.lookup("step", key()).hit
    assert cache.lookup("step", key()).reason == "no cached engine"
    path = cache.store("step", key(), b"ENGINE-BYTES")
    found = cache.lookup("step", key())
    assert found.hit and found.engine == b"ENGINE-BYTES" and found.path == path
    sidecar = json.loads(path.with_suffix(".json").read_text())
    assert sidecar["key"] == key() and sidecar["engine_bytes"] == 12


def test_other_gpu_or_trt_version_misses(tmp_path):
    cache = EngineCache(tmp_path)
    cache.store("step", key(), b"orin engine")
    assert not cache.lookup("step", key(device=H200)).hit
    assert not cache.lookup("step", key(tensorrt_version="10.4.0")).hit
    assert not cache.lookup("step", key(precision="fp32")).hit


def test_foreign_engine_under_our_name_is_refused(tmp_path):
    """An engine + sidecar copied from another machine and renamed to our slot: never loaded."""
    cache = EngineCache(tmp_path)
    theirs = cache.store("step", key(device=H200), b"h200 engine")
    ours, ours_sidecar = cache.paths("step", key())
    theirs.rename(ours)
    theirs.with_suffix(".json").rename(ours_sidecar)
    found = cache.lookup("step", key())
    assert not found.hit
    assert "stale or foreign" in found.reason and "NVIDIA H200" in found.reason and "Orin" in found.reason


def test_missing_corrupt_sidecar_or_swapped_bytes_are_refused(tmp_path):
    cache = EngineCache(tmp_path)
    path = cache.store("step", key(), b"good engine")
    sidecar = path.with_suffix(".json")
    path.write_bytes(b"truncated")
    assert "do not match the sidecar" in cache.lookup("step", key()).reason
    cache.store("step", key(), b"good engine")
    sidecar.write_text("{not json")
    assert "unreadable sidecar" in cache.lookup("step", key()).reason
    sidecar.unlink()
    assert "no sidecar" in cache.lookup("step", key()).reason


def test_get_or_build_rebuilds_stale_and_undeserialisable_engines(tmp_path):
    cache = EngineCache(tmp_path)
    builds = []

    def build():
        builds.append(1)
        return b"engine v%d" % len(builds)

    obj, how = cache.get_or_build("enc", key(), build)
    assert obj == b"engine v1" and how == "no cached engine"
    obj, how = cache.get_or_build("enc", key(), build)
    assert obj == b"engine v1" and how == "cache hit" and len(builds) == 1
    # the runtime refuses the bytes (e.g. a TensorRT patch release changed the format): rebuilt
    obj, how = cache.get_or_build("enc", key(), build, load=lambda b: None if b == b"engine v1" else b)
    assert obj == b"engine v2" and "could not deserialise" in how
    assert cache.lookup("enc", key()).engine == b"engine v2"
    # a changed key (new TensorRT) builds next to the old one
    obj, how = cache.get_or_build("enc", key(tensorrt_version="10.5.0"), build)
    assert obj == b"engine v3" and how == "no cached engine"


def test_read_only_cache_still_builds(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = EngineCache(blocker / "cache")
    obj, _ = cache.get_or_build("enc", key(), lambda: b"bytes")
    assert obj == b"bytes" and "not cached" in caplog.text


def test_timing_cache_is_per_trt_version_and_gpu(tmp_path):
    cache = EngineCache(tmp_path)
    assert cache.read_timing_cache("10.3.0", ORIN) == b""
    cache.write_timing_cache("10.3.0", ORIN, b"timings")
    assert cache.read_timing_cache("10.3.0", ORIN) == b"timings"
    assert cache.read_timing_cache("10.3.0", H200) == b""
    assert cache.read_timing_cache("10.4.0", ORIN) == b""


def test_differences_and_default_dir(monkeypatch, tmp_path):
    assert key_differences(key(), key()) == []
    assert key_differences(key(), key(precision="fp32")) == ["precision: cached 'fp32', wanted 'fp16'"]
    monkeypatch.setenv("EDGE_ENGINE_CACHE", str(tmp_path / "e"))
    assert default_cache_dir() == tmp_path / "e"
    monkeypatch.delenv("EDGE_ENGINE_CACHE")
    monkeypatch.setenv("EDGE_CACHE_DIR", str(tmp_path / "root"))
    assert default_cache_dir() == tmp_path / "root" / "tensorrt"
