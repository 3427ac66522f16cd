"""The two vector forms of QueryEnv (local processes, Ray actors): the same interface and the same
payloads, so the EQRL trainer runs identically on either; ``--ray`` without Ray fails in one line."""

import json
import sys

import numpy as np
import pytest

from adapters.eqrl.collect import RayVecQueryEnv, VecQueryEnv
from edge.errors import EdgeError
from edge.runtime.session import DEFAULT_CHECKPOINT

SESSION = {"task": "stack", "checkpoint": str(DEFAULT_CHECKPOINT), "execution": "sync",
           "latency": "constant", "latency_ms": 0.0, "noise_temperature": 0.5}
PLAN = {"noise": None, "num_steps": 2, "execute": 8}
SEEDS = (20_000_000, 20_000_001)
EPISODE_KEYS = ("seed", "success", "steps", "nfe", "executed")


def _roll(envs, seeds=SEEDS, max_queries=200):
    """One episode per env under the fixed plan: per env its features per query, its step payloads
    (without the arrays) and its episode record."""
    n = len(seeds)
    for i, s in enumerate(seeds):
        envs.send(i, "reset", s)
    first = [envs.recv(i) for i in range(n)]
    assert [seed for _, seed in first] == list(seeds)
    feats = [[obs["features"]] for obs, _ in first]
    ctxs = [[obs["context"]] for obs, _ in first]
    steps: list[list] = [[] for _ in range(n)]
    chunks: list[list] = [[] for _ in range(n)]
    episodes: list = [None] * n
    for _ in range(max_queries):
        live = [i for i in range(n) if episodes[i] is None]
        if not live:
            break
        for i in live:  # all sent before any is read, as the trainer does
            envs.send(i, "step", PLAN)
        for i in live:
            obs, r, term, trunc, small = envs.recv(i)
            steps[i].append((r, term, trunc, *(small[k] for k in ("ticks", "executed", "nfe", "K", "C"))))
            chunks[i].append(small["chunk"])
            if term or trunc:
                episodes[i] = small["episode"]
            else:
                feats[i].append(obs["features"])
                ctxs[i].append(obs["context"])
    assert all(ep is not None for ep in episodes), "an episode did not finish"
    return feats, ctxs, steps, chunks, episodes


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray", reason="Ray is the optional 'dist' extra")
    from edge.runtime.campaign import init_ray

    init_ray("local", num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


def _assert_same_rollouts(a, b):
    fa, xa, sa, ca, ea = a
    fb, xb, sb, cb, eb = b
    for i in range(len(SEEDS)):
        assert {k: ea[i][k] for k in EPISODE_KEYS} == {k: eb[i][k] for k in EPISODE_KEYS}
        assert ea[i]["seed"] == SEEDS[i]
        assert sa[i] == sb[i]
        assert len(fa[i]) == len(fb[i]) > 1
        for u, v in zip(fa[i], fb[i]):
            assert u.dtype == v.dtype == np.float32
            np.testing.assert_array_equal(u, v)
        for u, v in zip(xa[i], xb[i]):
            np.testing.assert_array_equal(u, v)
        for u, v in zip(ca[i], cb[i]):
            assert (u is None) == (v is None)
            if u is not None:
                np.testing.assert_array_equal(u, v)


@pytest.mark.slow
def test_ray_actors_give_the_same_episodes_and_observations_as_processes(ray_local):
    procs = VecQueryEnv(2, SESSION)
    try:
        shape = (procs.chunk_len, procs.action_dim)
        local = _roll(procs)
    finally:
        procs.close()
    actors = RayVecQueryEnv(2, SESSION)  # Ray is already up (2 CPUs): reused, not shut down by close
    try:
        assert (actors.chunk_len, actors.action_dim) == shape
        remote = _roll(actors)
        # payloads come back writable, as from the pipes (the trainer may keep and modify them)
        assert remote[0][0][0].flags.writeable
    finally:
        actors.close()
    assert ray_local.is_initialized()
    _assert_same_rollouts(local, remote)


@pytest.mark.slow
def test_an_env_error_and_a_dead_actor_name_the_env(ray_local):
    envs = RayVecQueryEnv(2, SESSION)
    try:
        envs.send(0, "step", PLAN)  # before reset: the env refuses, the actor stays up
        with pytest.raises(RuntimeError, match=r"QueryEnv worker 0: RuntimeError: .*before reset"):
            envs.recv(0)
        envs.send(0, "reset", SEEDS[0])
        assert envs.recv(0)[1] == SEEDS[0]
        ray_local.kill(envs.actors[1])
        envs.send(1, "reset", SEEDS[1])
        with pytest.raises(RuntimeError, match=r"^QueryEnv actor 1 died \(") as err:
            envs.recv(1)
        assert "\n" not in str(err.value)
    finally:
        envs.close()


@pytest.mark.slow
def test_training_over_ray_actors_equals_training_over_processes(ray_local, tmp_path):
    from adapters.eqrl.config import EqrlConfig
    from adapters.eqrl.train import LOG_FILE, MANIFEST_FILE, AdapterTrainer

    cfg = EqrlConfig(episodes=2, envs=2, warmup_queries=5, batch_size=8, distill_batch=4, hidden=16,
                     feature_proj=8, n_critics=2, save_every=2, actor_delay_updates=0, actor_every=1)
    logs, manifests = {}, {}
    for name, address in (("procs", None), ("ray", "local")):
        out = tmp_path / name
        AdapterTrainer(cfg, out, str(DEFAULT_CHECKPOINT), progress=False, ray_address=address,
                       command=f"edge train adapter --out {out}" + (" --ray" if address else "")).run()
        logs[name] = [json.loads(x) for x in (out / LOG_FILE).read_text().splitlines()]
        manifests[name] = json.loads((out / MANIFEST_FILE).read_text())
    assert manifests["ray"]["envs"] == {"count": 2, "executor": "ray", "ray_address": "local"}
    assert manifests["procs"]["envs"]["executor"] == "processes"
    assert manifests["ray"]["command"].endswith("--ray")
    assert manifests["ray"]["session"] == manifests["procs"]["session"]
    assert manifests["ray"]["counters"]["queries"] == manifests["procs"]["counters"]["queries"]
    assert logs["ray"] == logs["procs"]


def test_ray_flag_without_ray_is_one_clear_line(monkeypatch, tmp_path, capsys):
    from edge.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "ad"
    rc = main(["train", "adapter", "--preset", "tiny", "--out", str(out), "--ray", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert "pip install ray" in err and "-e '.[dist]'" in err
    assert not out.exists()  # refused before anything was built


def test_ray_vec_env_without_ray_raises_the_same_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(EdgeError, match=r"--ray needs Ray: pip install ray"):
        RayVecQueryEnv(1, SESSION)


def test_ray_flag_parses_local_auto_and_absent():
    from edge.cli import build_parser

    p = build_parser()
    base = ["train", "adapter", "--out", "x"]
    assert p.parse_args(base).ray is None
    assert p.parse_args([*base, "--ray"]).ray == "local"
    assert p.parse_args([*base, "--ray", "auto"]).ray == "auto"
