"""The world-model planner as a runtime policy: ``edge run --policy comet --task push``.

Per query (one per control tick, ``--query-mode sync``): the front camera frame goes through the
frozen slot encoder (initialised with the previous frame's slots, so slot k stays the same object),
the slots join the last ``context`` (slots, action) blocks, and a tree search with
``--plan-simulations`` simulations picks one of the 8 push directions; the chunk is that one move
as an ``ee_delta`` action ``[dx, dy, 0, 0, 1]`` (2 cm), which then goes through the same action
queue and safety layer as the VLA's. The decision time is the query latency the runtime records.
``edge run`` runs the search's model passes as an ONNX graph on onnxruntime by default
(``--plan-backend onnxruntime``; :mod:`world_models.onnx_search`, exported once per model into the
edge cache and checked against torch; this class's default is ``backend="torch"``); the slot
encoder stays on torch.

The checkpoint directory holds ``model.pt`` + ``manifest.json`` from ``edge train world-model``
(the manifest's sha256 is checked on load) and names its slot encoder, also verified.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge.errors import EdgeError

SHIPPED = Path(__file__).resolve().parent / "checkpoints" / "comet_push3"
PLAN_BACKENDS = ("torch", "onnxruntime")  # what runs the search's model passes
STEP_M = 0.02


@dataclass(frozen=True)
class PlannerSpec:
    """What the runtime needs to know to build the env and the loop around the planner."""

    task: str = "push"
    cameras: tuple[str, ...] = ("front",)
    image_hw: tuple[int, int] = (64, 64)
    action_dim: int = 5
    chunk_len: int = 1
    control_rate_hz: float = 20.0
    env: dict = field(default_factory=dict)  # TabletopEnv settings the model was trained with
    execution: str = "sync"  # the planner's history assumes each decision is executed once


def load_world_model(path: str | Path, verify: bool = True):
    """(RunConfig, TokenWorldModel in eval mode, manifest) from a training directory (sha256 checked
    against its manifest): :func:`world_models.train.load_world_model`, imported when called."""
    from world_models.train import load_world_model as load

    return load(path, verify)


class WorldModelPolicy:
    """A :class:`edge.contracts.ChunkPolicy` that plans with MCTS over the learned world model."""

    action_layout = "ee_delta"

    def __init__(self, path: str | Path, simulations: int = 0, seed: int = 0, verify: bool = True,
                 backend: str = "torch", ort_threads: int = 1) -> None:
        from dataclasses import replace

        from world_models.observer import Observer
        from world_models.planner import History, Planner

        if backend not in PLAN_BACKENDS:
            raise EdgeError(f"--plan-backend {backend!r}: choose one of {PLAN_BACKENDS}")
        cfg, model, manifest = load_world_model(path, verify=verify)
        if cfg.obs == "oracle":
            raise EdgeError(f"{path}: an oracle-slot world model needs privileged object states; the runtime "
                            "gives it camera frames only: use a model trained with --obs slots or pixels")
        enc = None
        if cfg.obs == "slots":
            from edge.digest import sha256_file
            from world_models.train import encoder_weights_file, load_encoder

            enc_path = Path(cfg.encoder)
            if not enc_path.is_absolute() and not enc_path.exists():
                enc_path = Path(path).parent / enc_path.name
            want = (manifest.get("files") or {}).get("encoder")
            weights = encoder_weights_file(enc_path)
            if verify and want and weights.is_file() and sha256_file(weights) != want:
                raise EdgeError(f"{weights}: not the slot encoder {path} was trained with (sha256 differs from "
                                f"its manifest's files.encoder); the world model needs that encoder")
            enc = load_encoder(enc_path, cfg.encoder_carry_iters)
        self.cfg, self.model, self.manifest = cfg, model, manifest
        pcfg = replace(cfg.planner, num_simulations=simulations) if simulations else cfg.planner
        expand = None
        if backend == "onnxruntime":  # one intra-op thread by default: the graph is small
            from world_models.onnx_search import OrtExpand, ensure_expand_export

            window = pcfg.context + 1  # one search at a time: a batch-1 graph (its shapes folded)
            expand = OrtExpand(ensure_expand_export(model, window, batch=1), window, ort_threads)
        self.backend = backend
        self.planner = Planner(model, pcfg, expand)
        self.observer = Observer.for_run(cfg, 1, enc)
        self._History = History
        self.hist: Any = None
        self.rng = np.random.default_rng(seed)
        s = cfg.env.image_size
        self.spec = PlannerSpec(image_hw=(s, s), env={"push_target_color": "red",
                                                      "push_distractors": cfg.env.distractors,
                                                      "hold_s": cfg.env.hold_s})
        self.chunk_len, self.action_dim = 1, 5
        self.control_rate_hz = self.spec.control_rate_hz
        self.decision_ms: list[float] = []
        self.search_ms: list[float] = []  # the tree search's share of each decision
        self._last_action: int | None = None
        self._warm_up()

    def _warm_up(self) -> None:
        """One decision on a blank frame at load time, so torch's first-call setup is not charged
        to the first query as latency."""
        self.encode({"front": np.zeros((*self.spec.image_hw, 3), np.uint8)})
        self.reset()
        self.decision_ms.clear()
        self.search_ms.clear()

    def reset(self, obs: Any = None) -> None:
        self.hist, self._last_action = None, None

    def describe(self) -> dict:
        return {"kind": "world_model", "model_kind": self.cfg.model.kind, "obs": self.cfg.obs,
                "simulations": self.planner.cfg.num_simulations, "search": self.planner.cfg.search,
                "plan_backend": self.backend, "backend_name": self.backend,
                **({"plan_ort_threads": self.planner.expand.threads} if self.planner.expand is not None else {}),
                "model_sha256": (self.manifest.get("files") or {}).get("model.pt")}

    def encode(self, obs: Any) -> int:
        """Observe, update the slot history with the last executed move, plan; returns the action index."""
        t0 = time.perf_counter()
        frame = obs.images["front"] if hasattr(obs, "images") else obs["front"]
        first = self.hist is None
        state = self.observer.observe([{"frame": np.asarray(frame)}], np.array([first]), np.array([0]))[0]
        if first:
            self.hist = self._History(1, self.planner.cfg.context, self.observer.state_shape, self.observer.dtype)
            self.hist.reset(0, state)
        else:
            self.hist.push(0, int(self._last_action), state)
        t1 = time.perf_counter()
        out = self.planner.plan(self.hist, self.rng, explore=False)
        a = int(out.action[0])
        self._last_action = a
        t2 = time.perf_counter()
        self.search_ms.append((t2 - t1) * 1e3)
        self.decision_ms.append((t2 - t0) * 1e3)
        return a

    def set_executed(self, action: int) -> None:
        """The move executed after the last decision, where it was not the policy's own (the history
        the next decision sees records it); e.g. two planners fed the same frames in lockstep."""
        if self.hist is None:
            raise EdgeError("set_executed before the first decision of an episode")
        if not 0 <= int(action) < self.model.cfg.num_actions:
            raise EdgeError(f"set_executed({action}): actions are 0..{self.model.cfg.num_actions - 1}")
        self._last_action = int(action)

    def sample(self, features: int, noise: np.ndarray, num_steps: int) -> np.ndarray:
        ang = int(features) * np.pi / 4
        return np.array([[STEP_M * np.cos(ang), STEP_M * np.sin(ang), 0.0, 0.0, 1.0]], np.float32)


def comet_policy(cfg: Any, robot: Any = None) -> WorldModelPolicy:
    """Registry factory: ``--world-model DIR`` ('' = the shipped push3 model), ``--plan-simulations``,
    ``--plan-backend``."""
    path = cfg.policy.comet.world_model or str(SHIPPED)
    if cfg.scene.task != "push":
        raise EdgeError(f"--policy comet plans pushes: run it with --task push (got --task {cfg.scene.task})")
    return WorldModelPolicy(path, simulations=int(cfg.policy.comet.plan_simulations or 0),
                            seed=int(cfg.run.seed), verify=cfg.policy.verify,
                            backend=cfg.policy.comet.plan_backend)
