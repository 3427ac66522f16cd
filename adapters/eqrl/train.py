"""``edge train adapter``: train the EQRL adapter in QueryEnv processes (or Ray actors with
``ray_address``) on the frozen VLA.

Collection and learning interleave: the learner sends every env its action, runs its updates while
the envs step, then reads their answers. Each finished episode's NFE-budget penalty is written back
into its queries' rewards. Saves ``adapter.pt`` + ``train_state.pt`` (networks, optimisers, replay,
counters, RNG) every ``save_every`` episodes and at the end; ``--resume`` continues from there.
Writes ``manifest.json`` (command, seed, config, git revision, VLA sha256, the env executor, metrics) and
``train_log.jsonl`` (one line per episode).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from adapters.eqrl import schedule as S
from adapters.eqrl.checkpoint import ADAPTER_FILE, MANIFEST_FILE
from adapters.eqrl.config import EqrlConfig
from edge import atomic
from edge.errors import EdgeError
from edge.config import to_dict

STATE_FILE, LOG_FILE = "train_state.pt", "train_log.jsonl"


class Replay:
    """Ring buffer of query transitions (numpy)."""

    def __init__(self, capacity: int, D: int, X: int, H: int, Da: int) -> None:
        self.cap, self.n, self.i = capacity, 0, 0
        z = np.zeros
        self.data = {"features": z((capacity, D), np.float32), "context": z((capacity, X), np.float32),
                     "w": z((capacity, H, Da), np.float32), "c": z((capacity, 2), np.float32),
                     "chunk": z((capacity, H, Da), np.float32), "reward": z(capacity, np.float32),
                     "ticks": z(capacity, np.float32), "done": z(capacity, np.float32),
                     "features2": z((capacity, D), np.float32), "context2": z((capacity, X), np.float32)}

    def add(self, **row: Any) -> int:
        j = self.i
        for k, v in row.items():
            self.data[k][j] = v
        self.i = (self.i + 1) % self.cap
        self.n = min(self.n + 1, self.cap)
        return j

    def sample(self, rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.n, size=batch)
        return {k: v[idx] for k, v in self.data.items()}

    def state(self) -> dict[str, Any]:
        """The filled rows only (rows fill from 0 up, so they are the first ``n``): a checkpoint does
        not carry the capacity's empty rows."""
        return {"replay": {k: v[:self.n] for k, v in self.data.items()}, "replay_n": self.n, "replay_i": self.i,
                "replay_cap": self.cap}

    def load(self, saved: dict[str, Any]) -> None:
        """Restore :meth:`state` (or a checkpoint that saved the whole capacity) into this buffer,
        which must have the saved buffer's capacity and row shapes (the order of a wrapped buffer's
        rows depends on its capacity)."""
        rows = saved["replay"]
        n, i = int(saved["replay_n"]), int(saved["replay_i"])
        cap = int(saved.get("replay_cap", len(next(iter(rows.values())))))  # before: the whole capacity saved
        shapes_fit = set(rows) == set(self.data) and all(
            rows[k].shape[1:] == self.data[k].shape[1:] and len(rows[k]) >= n for k in rows)
        if cap != self.cap or not shapes_fit or not (0 <= i < cap and (n == cap or i == n)):
            raise EdgeError(f"the saved replay ({cap} rows of capacity, {n} filled, next write at {i}; fields "
                            f"{sorted(rows)}) does not fit this run's buffer ({self.cap} rows, fields "
                            f"{sorted(self.data)}): resume with the run's own config (replay_size={cap})")
        for k, v in rows.items():
            self.data[k][:n] = v[:n]
        self.n, self.i = n, i


def _vla_latent(checkpoint: str):
    """The frozen VLA as ``(features, noise, ks) -> latent chunk`` for the Q^W distillation."""
    from edge.backends import BackendConfig, make_backend

    backend = make_backend(BackendConfig(name="onnxruntime", threads=1), checkpoint)
    mean, std = backend.spec.action_stats()

    def run(features: np.ndarray, noise: np.ndarray, ks: np.ndarray) -> np.ndarray:
        a = backend.sample(np.asarray(features, np.float32), np.asarray(noise, np.float32), ks)
        return ((a - mean) / std).astype(np.float32)

    return run


class AdapterTrainer:
    def __init__(self, cfg: EqrlConfig, out: str | Path, checkpoint: str, session: dict | None = None,
                 resume: bool = False, progress: bool = True, command: str | None = None,
                 ray_address: str | None = None) -> None:
        self.cfg, self.out, self.checkpoint = cfg, Path(out), str(checkpoint)
        self.session = {"task": "stack", "checkpoint": self.checkpoint, "execution": cfg.query_mode,
                        "latency": "constant", "latency_ms": cfg.latencies_ms()[0],
                        "noise_temperature": cfg.noise_temperature, **(session or {})}
        self.progress, self.resume = progress, resume
        # None: QueryEnv processes; else Ray actors ("local" = a fresh local instance, "auto" = a cluster)
        self.ray_address = ray_address
        self.command = command or " ".join(["edge", *sys.argv[1:]])
        self.out.mkdir(parents=True, exist_ok=True)

    def run(self) -> dict[str, Any]:
        import torch
        from tqdm import tqdm

        from adapters.eqrl.agent import EqrlAgent
        from adapters.eqrl.collect import RayVecQueryEnv, VecQueryEnv
        from edge.runtime.query_env import CONTEXT_DIM

        cfg = self.cfg
        torch.set_num_threads(cfg.threads)
        t_start = time.perf_counter()
        if self.resume and (self.out / STATE_FILE).exists():
            atomic.verify_torch_file(self.out / STATE_FILE, flag="--resume:")  # before the envs start
        vla = _vla_latent(self.checkpoint)
        envs = (VecQueryEnv(cfg.envs, self.session) if self.ray_address is None
                else RayVecQueryEnv(cfg.envs, self.session, address=self.ray_address))
        H, Da = envs.chunk_len, envs.action_dim
        try:
            obs = []
            for i in range(cfg.envs):
                envs.send(i, "reset", self._reset_arg(cfg.train_seed + i))
            obs = [envs.recv(i)[0] for i in range(cfg.envs)]
            D = obs[0]["features"].size
            agent = EqrlAgent(cfg, D, CONTEXT_DIM, H, Da)
            replay = Replay(cfg.replay_size, D, CONTEXT_DIM, H, Da)
            st = {"queries": 0, "episodes": 0, "updates": 0, "next_seed": cfg.train_seed + cfg.envs,
                  "wall_s": 0.0}
            rng = np.random.default_rng(cfg.seed)
            if self.resume and (self.out / STATE_FILE).exists():
                saved = torch.load(self.out / STATE_FILE, weights_only=False)
                agent.load_state_dict(saved["agent"])
                for name in ("opt_critic", "opt_actor", "opt_alpha"):
                    getattr(agent, name).load_state_dict(saved[name])
                replay.load(saved)
                st = saved["counters"]
                rng.bit_generator.state = saved["rng"]
                torch.set_rng_state(saved["torch_rng"])
                _cut_log(self.out / LOG_FILE, st["episodes"])  # rows logged after the save (a kill) come again
                if st["episodes"] < cfg.episodes:  # a finished run is only saved again (and exported)
                    for i in range(cfg.envs):  # nothing was in flight at the save: the next episodes, in order
                        envs.send(i, "reset", self._reset_arg(st["next_seed"] + i))
                    obs = [envs.recv(i)[0] for i in range(cfg.envs)]
                    st["next_seed"] += cfg.envs
            ep_rows: list[list[int]] = [[] for _ in range(cfg.envs)]
            ep_k: list[list[int]] = [[] for _ in range(cfg.envs)]
            log = open(self.out / LOG_FILE, "a")  # noqa: SIM115 - line-buffered for the whole run, closed below
            bar = tqdm(total=cfg.episodes, initial=st["episodes"], desc="eqrl train", unit="ep",
                       disable=not self.progress)
            recent: list[bool] = []
            metrics: dict[str, float] = {}
            gate = S.gate(st["queries"], cfg.prior_start_queries, cfg.prior_ramp_queries)
            # Saves happen with no episode in flight: once a save is due, an env whose episode ends
            # waits (idle) until every env's has; then the state is saved and all envs start their
            # next episodes together, in index order, on the next seeds -- exactly what --resume
            # does, so a resumed run continues as the uninterrupted one would (bit-identical).
            idle = [st["episodes"] >= cfg.episodes] * cfg.envs  # resumed when done: save, export, stop
            draining = False
            while True:
                if all(idle):
                    self._save(agent, replay, st, rng, gate, t_start)
                    if st["episodes"] >= cfg.episodes:
                        break  # then the final save (adds the ONNX export, checked against this one)
                    for i in range(cfg.envs):
                        envs.send(i, "reset", self._reset_arg(st["next_seed"] + i))
                    obs = [envs.recv(i)[0] for i in range(cfg.envs)]
                    st["next_seed"] += cfg.envs
                    idle, draining = [False] * cfg.envs, False
                active = [i for i in range(cfg.envs) if not idle[i]]
                gate = S.gate(st["queries"], cfg.prior_start_queries, cfg.prior_ramp_queries)
                f = np.stack([obs[i]["features"] for i in active])
                x = np.stack([obs[i]["context"] for i in active])
                act = agent.act(f, x, gate, deterministic=False, update_stats=True)
                for j, i in enumerate(active):
                    envs.send(i, "step", {"noise": act["w"][j], "num_steps": int(act["K"][j]),
                                          "execute": int(act["C"][j])})
                if st["queries"] >= cfg.warmup_queries and replay.n >= cfg.batch_size:
                    for _ in range(cfg.utd * len(active)):
                        metrics = agent.update(replay.sample(rng, cfg.batch_size), gate, vla, rng)
                        st["updates"] += 1
                lam = cfg.cost_weight_start + (cfg.cost_weight_end - cfg.cost_weight_start) * \
                    S.gate(st["queries"], 0, cfg.cost_ramp_queries)
                for j, i in enumerate(active):
                    o2, r, term, trunc, info = envs.recv(i)
                    ticks = max(1, info["ticks"])
                    chunk = info["chunk"] if info["chunk"] is not None else np.zeros((H, Da), np.float32)
                    row = replay.add(features=obs[i]["features"], context=obs[i]["context"], w=act["w"][j],
                                     c=act["c"][j], chunk=chunk, reward=r * cfg.gamma ** (ticks - 1),
                                     ticks=ticks, done=float(term), features2=o2["features"],
                                     context2=o2["context"])
                    ep_rows[i].append(row)
                    ep_k[i].append((info["K"], info["executed"]))
                    st["queries"] += 1
                    obs[i] = o2
                    if not (term or trunc):
                        continue
                    ep = info["episode"]
                    sk = float(sum(k for k, _ in ep_k[i]))
                    sc = float(sum(c for _, c in ep_k[i]))
                    pen = S.budget_penalty(sk, sc, bool(ep["success"]), cfg.budget_lo, cfg.budget_hi,
                                           cfg.budget_debt, cfg.budget_scale)
                    for r_ in ep_rows[i]:
                        replay.data["reward"][r_] -= lam * pen / len(ep_rows[i])
                    recent = (recent + [bool(ep["success"])])[-100:]
                    log.write(json.dumps({"episode": st["episodes"], "seed": ep["seed"],
                                          "latency_ms": cfg.episode_latency_ms(ep["seed"]),
                                          "success": bool(ep["success"]), "steps": ep["steps"],
                                          "queries": len(ep_rows[i]), "nfe_per_action": sk / max(sc, 1),
                                          "penalty": pen, "lambda_cost": lam, "gate": gate,
                                          "updates": st["updates"], **metrics}) + "\n")
                    log.flush()
                    ep_rows[i], ep_k[i] = [], []
                    st["episodes"] += 1
                    bar.update(1)
                    bar.set_postfix(success=f"{np.mean(recent):.2f}", nfe=f"{sk / max(sc, 1):.3f}",
                                    q=st["queries"])
                    draining = draining or st["episodes"] % cfg.save_every == 0 or st["episodes"] >= cfg.episodes
                    if draining:
                        idle[i] = True  # wait for the others, then save
                    else:
                        envs.send(i, "reset", self._reset_arg(st["next_seed"]))
                        st["next_seed"] += 1
                        obs[i] = envs.recv(i)[0]
            bar.close()
            log.close()
            return self._save(agent, replay, st, rng, gate, t_start, final=True)
        finally:
            envs.close()

    def _reset_arg(self, seed: int) -> Any:
        """The env's reset argument: the seed, plus the episode's latency when it is drawn per episode."""
        if len(self.cfg.latencies_ms()) == 1:
            return seed  # the session's constant latency throughout
        return (seed, {"latency_ms": self.cfg.episode_latency_ms(seed)})

    def _save(self, agent: Any, replay: Replay, st: dict, rng: np.random.Generator, gate: float,
              t_start: float, final: bool = False) -> dict[str, Any]:
        import torch

        from edge.export import sha256_file
        from edge.vla.manifest import git_revision

        st = dict(st, wall_s=st.get("wall_s_base", st["wall_s"]) + time.perf_counter() - t_start)
        deploy = {"config": to_dict(self.cfg), "agent": agent.state_dict(), "gate": gate,
                  "feature_dim": agent.enc.proj.in_features, "chunk_len": agent.H, "action_dim": agent.Da}
        atomic.write_torch(self.out / ADAPTER_FILE, deploy)
        atomic.write_torch(self.out / STATE_FILE, {
            "agent": agent.state_dict(),
            **{n: getattr(agent, n).state_dict() for n in ("opt_critic", "opt_actor", "opt_alpha")},
            **replay.state(),
            "counters": st, "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state()})
        files = {ADAPTER_FILE: sha256_file(self.out / ADAPTER_FILE)}
        if final:
            from adapters.eqrl.export import ONNX_FILE, export_onnx

            export_onnx(self.out)
            files[ONNX_FILE] = sha256_file(self.out / ONNX_FILE)
        vla_file = Path(self.checkpoint) / "model.pt" if Path(self.checkpoint).is_dir() else Path(self.checkpoint)
        rows = [json.loads(line) for line in (self.out / LOG_FILE).read_text().splitlines() if line.strip()]
        last = rows[-200:]
        command = self.command
        old = self.out / MANIFEST_FILE
        if self.resume and old.is_file():  # a resumed run keeps the command that started it
            command = json.loads(old.read_text()).get("command", command)
        manifest = {"kind": "edge-eqrl-adapter", "command": command, "seed": self.cfg.seed,
                    "config": to_dict(self.cfg), "session": self.session, "git": git_revision(),
                    "vla": {"path": str(self.checkpoint), "sha256": sha256_file(vla_file) if vla_file.is_file() else None},
                    "envs": {"count": self.cfg.envs, "executor": "processes" if self.ray_address is None else "ray",
                             "ray_address": self.ray_address},
                    "files": files, "complete": final,
                    "counters": st, "gate": gate,
                    "metrics": {"train_episodes": len(rows),
                                "train_success_last200": float(np.mean([r["success"] for r in last])) if last else None,
                                "train_nfe_per_action_last200": float(np.mean([r["nfe_per_action"] for r in last])) if last else None}}
        atomic.write_json(self.out / MANIFEST_FILE, manifest)  # a kill never leaves an empty manifest to resume from
        return manifest


def _cut_log(path: Path, episodes: int) -> None:
    """Keep the training log's rows of episodes 0 .. ``episodes`` - 1, the saved state's (a run killed
    after its last save logged more, which the resumed run logs again): the last row of each, in
    episode order (a log resumed by an older version may hold an episode twice)."""
    if not path.is_file():
        return
    text = path.read_text()
    rows: dict[int, str] = {}
    for line in text.splitlines():
        try:
            ep = json.loads(line)["episode"]
        except (ValueError, KeyError, TypeError):
            continue  # the torn last line of a killed writer
        if isinstance(ep, int) and 0 <= ep < episodes:
            rows[ep] = line
    kept = "".join(rows[ep] + "\n" for ep in sorted(rows))
    if kept != text:
        atomic.write_text(path, kept)
