"""ONNX export: full checker, parity with torch (<= 1e-4) on random and real-format inputs, dynamic batch."""

import json

import numpy as np
import onnx
import pytest
import torch

from edge.cli import main
from edge.errors import EdgeError
from edge.export import ENCODER_FILE, STEP_FILE, export_onnx, read_metadata


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from edge.training.vla.synthetic import tiny_checkpoint

    root = tmp_path_factory.mktemp("export")
    ckpt = tiny_checkpoint(root, steps=10)
    export_onnx(ckpt, root / "onnx")
    return ckpt, root / "onnx", root / "demos"


def test_graphs_pass_the_full_checker_and_metadata_describes_them(exported):
    _, out, _ = exported
    for name in (ENCODER_FILE, STEP_FILE):
        onnx.checker.check_model(str(out / name), full_check=True)
    meta = read_metadata(out)
    assert meta["inputs"]["encoder"] == ["front", "proprio", "lang"]
    assert meta["inputs"]["denoise_step"] == ["x", "t", "features"]
    assert meta["spec"]["control_rate_hz"] == 20.0 and meta["spec"]["chunk_len"] == 16
    assert max(v for c in meta["parity_max_abs"].values() for v in c.values()) <= 1e-4
    assert len(meta["checkpoint_sha256"]) == 64


def _sessions(out):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return (ort.InferenceSession(str(out / ENCODER_FILE), so, providers=["CPUExecutionProvider"]),
            ort.InferenceSession(str(out / STEP_FILE), so, providers=["CPUExecutionProvider"]))


def _compare(ckpt, out, front, proprio, lang, wrist=None):
    from edge.vla.checkpoint import load_model

    model = load_model(ckpt)
    enc, stp = _sessions(out)
    images = {"front": front} if wrist is None else {"front": front, "wrist": wrist}
    with torch.no_grad():
        ft = model.encode({k: torch.from_numpy(v) for k, v in images.items()}, torch.from_numpy(proprio),
                          torch.from_numpy(lang)).numpy()
    fo = enc.run(["features"], {**images, "proprio": proprio, "lang": lang})[0]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((len(front), 16, 5)).astype(np.float32)
    t = rng.uniform(0, 1, len(front)).astype(np.float32)
    with torch.no_grad():
        vt = model.denoise_step(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(fo)).numpy()
    vo = stp.run(["velocity"], {"x": x, "t": t, "features": fo})[0]
    return float(np.abs(ft - fo).max()), float(np.abs(vt - vo).max())


def test_parity_on_random_inputs_with_another_batch_size(exported):
    ckpt, out, _ = exported
    rng = np.random.default_rng(1)
    b = 5  # traced with 2: the batch axis is dynamic
    lang = rng.standard_normal((b, 384)).astype(np.float32)
    errs = _compare(ckpt, out, rng.integers(0, 256, (b, 96, 96, 3), dtype=np.uint8),
                    rng.standard_normal((b, 22)).astype(np.float32), lang)
    assert max(errs) <= 1e-4, errs


def test_parity_on_real_format_inputs(exported):
    from edge.vla.checkpoint import load_model
    from edge.vla.language import InstructionCache
    from sim.demos import iter_episodes

    ckpt, out, demos = exported
    spec = load_model(ckpt).spec
    ep = next(iter_episodes(demos))
    cache = InstructionCache(spec.lang_encoder_id, spec.lang_dim, spec.instruction_embeddings)
    idx = np.array([0, 5, len(ep["action"]) - 1])
    errs = _compare(ckpt, out, ep["front"][idx], ep["proprio"][idx], cache([ep["instruction"]] * 3))
    assert max(errs) <= 1e-4, errs


def test_cli_export_with_real_frames(exported, tmp_path, capsys):
    ckpt, _, demos = exported
    assert main(["export", str(ckpt), "--out", str(tmp_path / "e"), "--data", str(demos)]) == 0
    assert "onnx.checker (full) passed" in capsys.readouterr().out
    meta = json.loads((tmp_path / "e" / "metadata.json").read_text())
    assert meta["real_inputs"] == ["front", "lang", "proprio"]
    assert main(["export", str(tmp_path / "missing"), "--out", str(tmp_path / "f")]) == 2


def test_object_token_model_exports_with_parity(tmp_path):
    from edge.training.vla.synthetic import tiny_checkpoint

    ckpt = tiny_checkpoint(tmp_path, steps=3, overrides=("model.aux_source=front", "model.object_token=true"))
    export_onnx(ckpt, tmp_path / "onnx")
    rng = np.random.default_rng(2)
    errs = _compare(ckpt, tmp_path / "onnx", rng.integers(0, 256, (3, 96, 96, 3), dtype=np.uint8),
                    rng.standard_normal((3, 22)).astype(np.float32),
                    rng.standard_normal((3, 384)).astype(np.float32))
    assert max(errs) <= 1e-4, errs


def test_wrist_token_model_exports_with_parity(tmp_path):
    from edge.training.vla.synthetic import tiny_checkpoint

    ckpt = tiny_checkpoint(tmp_path, steps=3, wrist=True,
                           overrides=("model.aux_source=front", "model.object_token=true",
                                      "model.wrist_token=true", "vision_pretrain_steps=2"))
    export_onnx(ckpt, tmp_path / "onnx")
    rng = np.random.default_rng(3)
    proprio = rng.standard_normal((3, 22)).astype(np.float32)
    errs = _compare(ckpt, tmp_path / "onnx", rng.integers(0, 256, (3, 96, 96, 3), dtype=np.uint8), proprio,
                    rng.standard_normal((3, 384)).astype(np.float32),
                    wrist=rng.integers(0, 256, (3, 96, 96, 3), dtype=np.uint8))
    assert max(errs) <= 1e-4, errs


def test_scene_memory_model_exports_a_locator_and_both_backends_agree(tmp_path):
    from edge.backends import BackendConfig, make_backend
    from edge.export import example_inputs, read_metadata
    from edge.training.vla.synthetic import tiny_checkpoint

    ckpt = tiny_checkpoint(tmp_path, steps=3, scene_memory=True)
    meta = export_onnx(ckpt, tmp_path / "onnx")
    assert meta["files"]["locator"] == "locator.onnx" and meta["inputs"]["encoder"][-1] == "scene"
    assert max(meta["parity_max_abs"]["random"].values()) <= 1e-4
    assert "locator_max_abs" in meta["parity_max_abs"]["random"]
    assert read_metadata(tmp_path / "onnx")["spec"]["scene_memory"] is True
    tb = make_backend(BackendConfig(name="torch"), ckpt)
    ob = make_backend(BackendConfig(name="onnxruntime", threads=1), tmp_path / "onnx")
    inputs = example_inputs(tb.spec, batch=3, seed=5)
    loc = {"front": inputs["front"], "lang": inputs["lang"]}
    np.testing.assert_allclose(tb.locate(loc), ob.locate(loc), atol=1e-4)
    np.testing.assert_allclose(tb.encode(inputs), ob.encode(inputs), atol=1e-4)
    # the scene input matters (it is the base's position in the object token), and is required
    moved = dict(inputs, scene=inputs["scene"] + np.float32(0.05))
    assert np.abs(tb.encode(moved) - tb.encode(inputs)).max() > 1e-4
    with pytest.raises(EdgeError, match="missing \\['scene'\\]"):
        ob.encode({k: v for k, v in inputs.items() if k != "scene"})


def test_export_into_cache_reuses_replaces_and_falls_back(tmp_path, monkeypatch):
    from edge.export import export_into_cache
    from edge.vla.verify import VerificationError

    made = []

    def make(d):
        made.append(d)
        (d / "graph").write_text("ok")

    def valid(d):
        return (d / "graph").is_file() and (d / "graph").read_text() == "ok"

    final = tmp_path / "cache" / "onnx" / "abc"
    assert export_into_cache(final, valid, make, "x", "edge-test-") == final and len(made) == 1
    assert export_into_cache(final, valid, make, "x", "edge-test-") == final and len(made) == 1  # reused
    (final / "graph").write_text("stale")
    assert export_into_cache(final, valid, make, "x", "edge-test-") == final and len(made) == 2  # replaced
    assert valid(final) and not [p for p in final.parent.iterdir() if p.name.startswith(".")]  # no leftovers
    with pytest.raises(VerificationError, match="does not verify"):
        export_into_cache(tmp_path / "c2" / "d", lambda d: False, make, "x", "edge-test-")
    blocked = tmp_path / "file"
    blocked.write_text("")  # the cache's parent is a file: it cannot be written
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    out = export_into_cache(blocked / "onnx" / "abc", valid, make, "x", "edge-test-")
    assert out.name.startswith("edge-test-") and valid(out)


def test_cli_export_over_an_earlier_one_and_a_failed_one_changes_nothing(exported, tmp_path, capsys):
    ckpt = exported[0]
    out = tmp_path / "e"
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # a parity check that fails (an impossible tolerance): the earlier export stays as it was, usable
    assert main(["export", str(ckpt), "--out", str(out), "--tolerance", "1e-30"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # and again over it, as a whole: the same graphs, no temporary folder left
    assert main(["export", str(ckpt), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(before)
    # a failed export into a new folder leaves no folder
    assert main(["export", str(ckpt), "--out", str(tmp_path / "new" / "e"), "--tolerance", "1e-30"]) == 2
    assert not (tmp_path / "new").exists() and not list(tmp_path.glob(".*export*"))
