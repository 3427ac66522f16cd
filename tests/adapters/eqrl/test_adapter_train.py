"""A tiny EQRL run end to end on the shipped VLA in a QueryEnv process: train, save, resume, export,
and the deployed scheduler (ONNX decision) equal to the torch decision."""

import json

import numpy as np
import pytest

from adapters.eqrl.config import EqrlConfig
from adapters.eqrl.deploy import EqrlScheduler, load_agent
from adapters.eqrl.export import ONNX_FILE
from adapters.eqrl.train import LOG_FILE, MANIFEST_FILE, STATE_FILE, AdapterTrainer
from edge.runtime.session import DEFAULT_CHECKPOINT
from tests._damage import flip_a_stored_byte

TINY = dict(envs=1, warmup_queries=5, batch_size=8, distill_batch=4, hidden=16, feature_proj=8, n_critics=2,
            save_every=1, actor_delay_updates=0, actor_every=1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("eqrl")
    AdapterTrainer(EqrlConfig(episodes=2, **TINY), out, str(DEFAULT_CHECKPOINT), progress=False).run()
    first = json.loads((out / MANIFEST_FILE).read_text())
    AdapterTrainer(EqrlConfig(episodes=3, **TINY), out, str(DEFAULT_CHECKPOINT), resume=True,
                   progress=False).run()
    return out, first


def test_train_saves_and_resume_continues(trained):
    out, first = trained
    assert first["counters"]["episodes"] == 2 and first["complete"]
    m = json.loads((out / MANIFEST_FILE).read_text())
    assert m["counters"]["episodes"] == 3 and m["counters"]["queries"] > first["counters"]["queries"]
    assert m["counters"]["updates"] > 0 and (out / STATE_FILE).is_file()
    rows = [json.loads(x) for x in (out / LOG_FILE).read_text().splitlines()]
    assert [r["episode"] for r in rows] == [0, 1, 2]
    assert m["vla"]["sha256"] and set(m["files"]) == {"adapter.pt", ONNX_FILE}


def test_a_state_changed_on_disk_is_not_resumed(trained, tmp_path, monkeypatch):
    import shutil

    import adapters.eqrl.collect as collect
    from edge.errors import EdgeError

    out = tmp_path / "ad"
    shutil.copytree(trained[0], out)
    flip_a_stored_byte(out / STATE_FILE)

    def no_envs(*a, **k):
        raise AssertionError("envs started before the state was checked")

    monkeypatch.setattr(collect, "VecQueryEnv", no_envs)
    with pytest.raises(EdgeError, match="--resume: .*changed on disk after it was saved"):
        AdapterTrainer(EqrlConfig(episodes=4, **TINY), out, str(DEFAULT_CHECKPOINT), resume=True,
                       progress=False).run()


def test_onnx_decision_equals_torch_decision(trained):
    out, _ = trained
    onnx_s, torch_s = EqrlScheduler.load(out), EqrlScheduler.load(out, backend="torch")
    assert (onnx_s.backend, torch_s.backend) == ("onnxruntime", "torch")
    rng = np.random.default_rng(0)
    agent, gate, _ = load_agent(out)
    for _ in range(5):
        f = rng.normal(size=agent.enc.proj.in_features).astype(np.float32)
        x = rng.random(8).astype(np.float32)
        a, b = onnx_s.decide(f, x), torch_s.decide(f, x)
        np.testing.assert_allclose(a["w"], b["w"], atol=1e-5)
        assert (int(a["K"][0]), int(a["C"][0])) == (int(b["K"][0]), int(b["C"][0]))


def test_a_tampered_onnx_decision_is_refused(trained, tmp_path):
    import shutil

    from edge.errors import EdgeError

    out, _ = trained
    copy = tmp_path / "ad"
    shutil.copytree(out, copy)
    with open(copy / ONNX_FILE, "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(EdgeError, match="sha256"):
        EqrlScheduler.load(copy)
    # a graph the manifest does not list (left from before a resumed run's saves) never decides
    m = json.loads((copy / MANIFEST_FILE).read_text())
    del m["files"][ONNX_FILE]
    (copy / MANIFEST_FILE).write_text(json.dumps(m))
    assert EqrlScheduler.load(copy).backend == "torch"
    with pytest.raises(EdgeError, match="not listed in"):
        EqrlScheduler.load(copy, backend="onnxruntime")
    # no manifest (a run killed before its first one): the weights are not loaded unverified
    (copy / MANIFEST_FILE).unlink()
    with pytest.raises(EdgeError, match="no manifest.json beside it lists its sha256"):
        load_agent(copy)


def test_resume_continues_exactly_as_the_uninterrupted_run(tmp_path):
    """Saves happen with no episode in flight, so 3 episodes + resume to 5 equals 5 in one go: the
    same weights (bit for bit), the same per-episode log and counters (2 envs, a save every 2)."""
    import torch

    from adapters.eqrl.checkpoint import ADAPTER_FILE

    kw = dict(TINY, envs=2, save_every=2)
    one, two = tmp_path / "one", tmp_path / "two"
    AdapterTrainer(EqrlConfig(episodes=5, **kw), one, str(DEFAULT_CHECKPOINT), progress=False).run()
    AdapterTrainer(EqrlConfig(episodes=3, **kw), two, str(DEFAULT_CHECKPOINT), progress=False).run()
    with open(two / LOG_FILE, "a") as f:  # a run killed after its last save had logged more episodes
        f.write('{"episode": 3, "seed": 1}\n{"episode": 4, "se')
    AdapterTrainer(EqrlConfig(episodes=5, **kw), two, str(DEFAULT_CHECKPOINT), resume=True, progress=False).run()

    def log(d):
        return [{k: v for k, v in json.loads(x).items()} for x in (d / LOG_FILE).read_text().splitlines()]

    assert log(one) == log(two) and [r["episode"] for r in log(one)] == [0, 1, 2, 3, 4]
    # resuming a finished run trains nothing more: it is saved and exported again
    before = json.loads((two / MANIFEST_FILE).read_text())["counters"]
    AdapterTrainer(EqrlConfig(episodes=5, **kw), two, str(DEFAULT_CHECKPOINT), resume=True, progress=False).run()
    after = json.loads((two / MANIFEST_FILE).read_text())
    assert {k: after["counters"][k] for k in ("episodes", "queries", "updates", "next_seed")} == \
        {k: before[k] for k in ("episodes", "queries", "updates", "next_seed")} and after["complete"]
    assert log(one) == log(two)
    a, b = (torch.load(d / ADAPTER_FILE, weights_only=False)["agent"] for d in (one, two))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ca, cb = (json.loads((d / MANIFEST_FILE).read_text())["counters"] for d in (one, two))
    assert {k: ca[k] for k in ("episodes", "queries", "updates", "next_seed")} == \
        {k: cb[k] for k in ("episodes", "queries", "updates", "next_seed")}


def test_a_checkpoint_keeps_the_filled_replay_rows_only_and_restores_them():
    from adapters.eqrl.train import Replay
    from edge.errors import EdgeError

    a = Replay(50, 4, 3, 2, 1)
    for j in range(7):
        a.add(features=np.full(4, j, np.float32), reward=float(j))
    st = a.state()
    assert st["replay_n"] == st["replay_i"] == 7 and all(len(v) == 7 for v in st["replay"].values())
    b = Replay(50, 4, 3, 2, 1)
    b.load(st)
    assert (b.n, b.i) == (7, 7) and all(np.array_equal(b.data[k], a.data[k]) for k in a.data)
    full = {"replay": a.data, "replay_n": a.n, "replay_i": a.i}  # checkpoints written before: the whole capacity
    c = Replay(50, 4, 3, 2, 1)
    c.load(full)
    assert all(np.array_equal(c.data[k], a.data[k]) for k in a.data)
    for _ in range(60):  # wrapped: every row filled, the next write at i
        a.add(features=np.ones(4, np.float32))
    d = Replay(50, 4, 3, 2, 1)
    d.load(a.state())
    assert (d.n, d.i) == (50, a.i) and all(np.array_equal(d.data[k], a.data[k]) for k in a.data)
    with pytest.raises(EdgeError, match="does not fit"):  # another capacity: a wrapped buffer's order would break
        Replay(60, 4, 3, 2, 1).load(a.state())
    with pytest.raises(EdgeError, match="replay_size=50"):
        Replay(10, 4, 3, 2, 1).load(a.state())
    with pytest.raises(EdgeError, match="does not fit"):  # other row shapes
        Replay(50, 5, 3, 2, 1).load(a.state())


def test_the_log_keeps_the_last_row_of_each_saved_episode(tmp_path):
    """A log resumed by an older version holds episodes 100-129 twice (killed at 130 after a save at 100):
    cut to 200 saved episodes it keeps each episode's last row, in order, and drops a torn last line."""
    from adapters.eqrl.train import _cut_log

    rows = [{"episode": i, "v": "a"} for i in range(130)] + [{"episode": i, "v": "b"} for i in range(100, 205)]
    log = tmp_path / LOG_FILE
    log.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"episode": 20')
    _cut_log(log, 200)
    got = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["episode"] for r in got] == list(range(200))
    assert [r["v"] for r in got] == ["a"] * 100 + ["b"] * 100
