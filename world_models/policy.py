"""The world-model planner as a runtime policy: ``edge run --policy comet --task push|reach``.

Per query: the front camera frame (rendered at ``round(S * crop)`` square and cut to its centre S
square, exactly the frames the model was trained on: :class:`world_models.object_env.ObjectTaskEnv`)
goes through the frozen slot encoder (initialised with the previous frame's slots, so slot k stays
the same object), the slots join the last ``context``
(slots, action) blocks, and a tree search with ``--plan-simulations`` simulations picks one of the 8
push directions, an ``ee_delta`` action ``[dx, dy, 0, 0, 1]`` (2 cm), which then goes through the
same action queue and safety layer as the VLA's. The decision time is the query latency the runtime
records.

Two ways to run it (``--query-mode``):

* ``sync``: a query when the queue is empty, its one move executed from the tick it arrives. With the
  decision's time charged, the tick the decision takes is a hold: the arm moves every other tick,
  and the model (trained on one move per tick) sees each move followed by a hold.
* ``async`` (lookahead): a query every tick while the previous decision's move runs. Once the
  loop's latency estimate says a decision takes a tick or more (``delay_steps`` ≥ 1), the search
  starts from the state the model predicts after the move queued for the observation's tick
  (:meth:`Planner.advance`, one extra model pass) and its move is for the next tick: the chunk is
  ``[queued move, new move, new move]`` (C = 3), so a decision faster than the control period moves
  the arm every tick, as in training. A decision that takes one to two periods still lands: its
  first move's tick has passed when it arrives, the third action (the same move) runs on the next,
  and as one decision runs at a time the arm then moves on every other tick, as in sync. Longer
  decisions expire and the arm holds (the run's expired chunks). With no latency (``delay_steps`` 0) the search starts from the frame and
  its move runs on the frame's own tick. It needs the query made before the tick's command
  (``--inference inline``): a worker thread or process observes after it.

Either way the history the model sees is what the loop says the arm was commanded since the
previous frame (``QueryRequest.executed``: the safety layer's output): one move is pushed with the
new frame (a command the safety layer shortened or turned, e.g. by its acceleration cap, counts as
the nearest of the 8 moves, and is counted); no move (a hold) replaces the current frame; more than
one move, or an unknown history, restarts the context from the new frame (counted). Per episode the
policy reports these counts and the model's one-step prediction error in the loop against the
frames that followed (:meth:`episode_stats`).

With a workspace (``--plan-workspace-mask on``, ``edge run``'s default: the robot spec's TCP box), the search does not
consider a move at its root that the box would cut to under half its length, from the TCP position
in the observation's proprio (``tcp_x_m``, ``tcp_y_m``) plus, when the search starts after a queued
move, that move: the arm's own position tells what the slots alone may not (the model was trained on
episodes that rarely reach the box's walls). Moves deeper in the tree are not masked. Counted per
episode (``planner_masked``: decisions with a masked move; ``planner_masked_moves``).
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
import torch

from edge.errors import EdgeError
from edge.training.vla.synthetic import PROPRIO_LAYOUT

_TCP_XY_AT = PROPRIO_LAYOUT.index("tcp_x_m")  # tcp_y_m follows (the runtime's proprio layout)
_PROPRIO_LEN = len(PROPRIO_LAYOUT)
assert PROPRIO_LAYOUT[_TCP_XY_AT + 1] == "tcp_y_m"

SHIPPED = Path(__file__).resolve().parent / "checkpoints" / "comet_push3"
SHIPPED_BY_TASK = {"push": SHIPPED, "reach": SHIPPED.with_name("comet_reach3")}  # --world-model's default
RUNTIME_TASK = {"push3": "push", "reach3": "reach"}  # the object task a model learned -> the sim task it runs
PLAN_BACKENDS = ("torch", "onnxruntime")  # what runs the search's model passes
STEP_M = 0.02
LOOKAHEAD_CHUNK = 3  # async: [the move queued for the observation's tick, the new move, the new move again]


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
    execution: str = "sync"  # sync (one move per query) or async (lookahead): what the policy was built for


def load_world_model(path: str | Path, verify: bool = True):
    """(RunConfig, TokenWorldModel in eval mode, manifest) from a training directory (sha256 checked
    against its manifest): :func:`world_models.train.load_world_model`, imported when called."""
    from world_models.train import load_world_model as load

    return load(path, verify)


def model_encoder(path: str | Path, cfg: Any, manifest: dict, verify: bool = True):
    """The frozen slot encoder a ``--obs slots`` world model at ``path`` was trained with (its
    sha256 checked against the model's manifest), with the model's tracking rounds; None for
    other observation modes. A relative encoder path that does not exist is looked up beside the
    model's directory (a copied checkpoint folder)."""
    if cfg.obs != "slots":
        return None
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
    return load_encoder(enc_path, cfg.encoder_carry_iters)


class WorldModelPolicy:
    """A :class:`edge.contracts.ChunkPolicy` that plans with MCTS over the learned world model."""

    action_layout = "ee_delta"

    def __init__(self, path: str | Path, simulations: int = 0, seed: int = 0, verify: bool = True,
                 backend: str = "torch", ort_threads: int = 1, lookahead: bool = False,
                 workspace: tuple[Any, Any] | None = None, task: str | None = None,
                 deadline_ms: float = 0.0, torch_threads: int = 0) -> None:
        from dataclasses import replace

        from world_models.observer import Observer
        from world_models.planner import History, Planner

        if backend not in PLAN_BACKENDS:
            raise EdgeError(f"--plan-backend {backend!r}: choose one of {PLAN_BACKENDS}")
        if not (np.isfinite(deadline_ms) and deadline_ms >= 0):
            raise EdgeError(f"--plan-deadline-ms {deadline_ms!r}: must be >= 0 (0 = no deadline)")
        self.deadline_ms = float(deadline_ms)
        self.path = Path(path)
        cfg, model, manifest = load_world_model(path, verify=verify)
        if torch_threads > 0:
            import torch

            # process-wide, as the VLA's torch backend does: at batch 1 the ops are tiny, and a thread
            # per core fights the control loop and whatever else runs (measured: benchmarks/wm_plan_threads.py)
            torch.set_num_threads(int(torch_threads))
        if task is not None and RUNTIME_TASK[cfg.env.task] != task:  # before anything is exported or loaded
            raise EdgeError(f"--world-model {path}: a {cfg.env.task} model runs --task {RUNTIME_TASK[cfg.env.task]}, "
                            f"not --task {task}; pass a model trained with `edge train world-model --task {task}3` "
                            f"(or run --task {RUNTIME_TASK[cfg.env.task]})")
        if cfg.obs == "oracle":
            raise EdgeError(f"{path}: an oracle-slot world model needs privileged object states; the runtime "
                            "gives it camera frames only: use a model trained with --obs slots or pixels")
        enc = model_encoder(path, cfg, manifest, verify)
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
        from world_models.object_env import render_side

        s = cfg.env.image_size
        self.view_side, self.render_side = s, render_side(s, cfg.env.crop)
        self.lookahead = bool(lookahead)
        self.workspace = None  # (lo, hi) of the TCP's x, y (m): root moves it would cut are not searched
        if workspace is not None:
            lo, hi = (np.asarray(b, float).reshape(-1)[:2] for b in workspace)
            if lo.shape != (2,) or hi.shape != (2,) or not np.all(np.isfinite([*lo, *hi])) or np.any(hi - lo < 2 * STEP_M):
                raise EdgeError(f"workspace {workspace!r}: needs finite x, y bounds (lo, hi) at least "
                                f"{2 * STEP_M:g} m apart (the robot spec's workspace_min_m / workspace_max_m)")
            self.workspace = (lo, hi)
        # the camera renders round(S * crop) square and the model sees its centre S square, as trained
        # reach3's test holds for no time (ObjectTaskEnv judges each step), push3's for hold_s
        task = RUNTIME_TASK[cfg.env.task]
        self.spec = PlannerSpec(task=task, image_hw=(self.render_side,) * 2,
                                env={"push_target_color": "red", "push_distractors": cfg.env.distractors,
                                     "hold_s": cfg.env.hold_s if task == "push" else 0.0},
                                chunk_len=LOOKAHEAD_CHUNK if self.lookahead else 1,
                                execution="async" if self.lookahead else "sync")
        self.chunk_len, self.action_dim = self.spec.chunk_len, 5
        self._moves = np.array([self.sample(a, None, 1)[-1] for a in range(self.model.cfg.num_actions)])
        self._pred: Any = None  # the last root's predicted next state per action (torch, or numpy on ONNX Runtime)
        self._stats = self._zero_stats()
        self.control_rate_hz = self.spec.control_rate_hz
        self.decision_ms: list[float] = []
        self.search_ms: list[float] = []  # the tree search's share of each decision
        self.wait_ms: list[float] = []  # from the request to the decision's start, where the request's time is known
        self._last_action: int | None = None
        self.last_search: Any = None  # the last decision's search output (root visit counts, ...)
        self._warm_up()

    def _warm_up(self) -> None:
        """One decision on a blank frame at load time, so torch's first-call setup is not charged
        to the first query as latency."""
        ws, self.workspace = self.workspace, None  # a blank frame has no TCP position
        try:
            self.encode({"front": np.zeros((*self.spec.image_hw, 3), np.uint8)})
        finally:
            self.workspace = ws
        self.reset()
        self.decision_ms.clear()
        self.search_ms.clear()
        self.wait_ms.clear()
        self._stats = self._zero_stats()

    def reset(self, obs: Any = None) -> None:
        self.hist, self._last_action, self._pred = None, None, None

    def describe(self) -> dict:
        return {"kind": "world_model", "checkpoint": str(self.path), "model_kind": self.cfg.model.kind, "obs": self.cfg.obs,
                "simulations": self.planner.cfg.num_simulations, "search": self.planner.cfg.search,
                "deadline_ms": self.deadline_ms or None,
                "deadline_counts": "from the request on a real clock, else from the decision's start",
                "plan_backend": self.backend, "backend_name": self.backend, "lookahead": self.lookahead,
                "workspace_mask": None if self.workspace is None else [self.workspace[0].tolist(), self.workspace[1].tolist()],
                "frame": f"centre {self.view_side}x{self.view_side} of a {self.render_side}x{self.render_side} render",
                **({"plan_ort_threads": self.planner.expand.threads} if self.planner.expand is not None else {}),
                "model_sha256": (self.manifest.get("files") or {}).get("model.pt")}

    def view(self, obs: Any) -> np.ndarray:
        """The frame the model sees: the centre S x S of the camera's ``render_side`` square render
        (the world model's ``crop``), or an S x S frame that already is that view (e.g. from
        :class:`world_models.object_env.ObjectTaskEnv` or ``slot_pretrain collect``)."""
        from world_models.object_env import center_crop

        frame = np.asarray(obs.images["front"] if hasattr(obs, "images") else obs["front"])
        side = frame.shape[0] if frame.ndim == 3 and frame.shape[0] == frame.shape[1] else None
        if side == self.render_side:
            return center_crop(frame, self.view_side)
        if side == self.view_side:
            return frame
        raise EdgeError(f"front camera frame of shape {frame.shape}: the world model sees the centre "
                        f"{self.view_side}x{self.view_side} of a {self.render_side}x{self.render_side} render "
                        f"(crop {self.cfg.env.crop:g}); give frames of either size (RGB, uint8)")

    def encode(self, obs: Any) -> int:
        """Observe, update the slot history with the last executed move, plan; returns the action index."""
        return self._decide(obs, lambda state: self.hist.push(0, int(self._last_action), state))

    def _decide(self, obs: Any, update: Any, after: int | None = None, ahead_xy: Any = None,
                t_request_s: float | None = None) -> int:
        """One decision: the frame's slots start the history (an episode's first frame) or go to
        ``update(state)``; then the search, from after the move ``after`` if given (with a workspace,
        root moves are judged from the TCP plus ``ahead_xy``, the queued move's x, y). Timed. The
        deadline counts from ``t_request_s`` (``time.monotonic()`` when the decision was asked for,
        e.g. in another process) when given, else from this call."""
        t0 = time.perf_counter()
        waited = 0.0
        if t_request_s is not None:
            waited = time.monotonic() - float(t_request_s)
            if waited < -1e-3:  # a request from the future: its time is not this clock's
                raise EdgeError(f"a decision requested at t={t_request_s!r} s, {-waited * 1e3:.1f} ms after now on "
                                "time.monotonic(): the request's time must come from the same clock (the real "
                                "clock's)")
            waited = max(waited, 0.0)
            self.wait_ms.append(waited * 1e3)
        frame = self.view(obs)
        first = self.hist is None
        state = self.observer.observe([{"frame": frame}], np.array([first]), np.array([0]))[0]
        if first:
            self.hist = self._History(1, self.planner.cfg.context, self.observer.state_shape, self.observer.dtype)
            self.hist.reset(0, state)
        else:
            update(state)
        invalid = None if self.workspace is None else self._invalid_moves(obs, ahead_xy)
        stop = None
        if self.deadline_ms > 0:  # anytime: no new simulation once the decision has run this long
            end = t0 - waited + self.deadline_ms / 1e3
            stop = lambda done: time.perf_counter() >= end  # noqa: E731
        t1 = time.perf_counter()
        out = self.planner.plan(self.hist, self.rng, explore=False,
                                after=None if after is None else np.array([after]),
                                invalid_actions=None if invalid is None else invalid[None], stop=stop)
        a = int(out.action[0])
        self._last_action, self.last_search = a, out
        self._pred = self.planner.last_root.embedding["child_z"][0]
        t2 = time.perf_counter()
        self.search_ms.append((t2 - t1) * 1e3)
        self.decision_ms.append((t2 - t0) * 1e3)
        return a

    def _invalid_moves(self, obs: Any, ahead_xy: Any = None) -> np.ndarray | None:
        """The moves the workspace box would cut to under half their length from the TCP (the
        observation's proprio ``tcp_x_m``, ``tcp_y_m``) plus ``ahead_xy`` (the x, y of the move that
        runs first, when given; clipped into the box as the safety layer would); None when none is
        (counted in the episode's ``planner_masked``)."""
        proprio = getattr(obs, "proprio", None) if not isinstance(obs, dict) else obs.get("proprio")
        ix, n = _TCP_XY_AT, _PROPRIO_LEN
        p = None if proprio is None else np.asarray(proprio, np.float64).reshape(-1)
        if p is None or p.shape != (n,) or not np.all(np.isfinite(p[ix : ix + 2])):
            raise EdgeError(f"--plan-workspace-mask on needs the TCP position in the observation's proprio "
                            f"({n} values, tcp_x_m, tcp_y_m at {ix}, {ix + 1}); got "
                            f"{None if p is None else p.shape}: turn the mask off for this robot")
        lo, hi = self.workspace
        base = np.clip(p[ix : ix + 2] + (0.0 if ahead_xy is None else np.asarray(ahead_xy, np.float64)), lo, hi)
        invalid = wall_cut(base, self._moves[:, :2], lo, hi)
        if invalid.all() or not invalid.any():
            return None
        self._stats["masked"] += 1
        self._stats["masked_moves"] += int(invalid.sum())
        return invalid

    def move_index(self, action: Any) -> int:
        """The move an ``ee_delta`` action is (0..7), or -1 if it is none of the planner's moves."""
        a = np.asarray(action, np.float32).reshape(-1)
        if a.shape != (self.action_dim,):
            return -1
        hit = np.flatnonzero(np.abs(self._moves - a).max(1) <= 1e-6)
        return int(hit[0]) if len(hit) else -1

    def command_move(self, command: Any) -> tuple[int, bool]:
        """(move, exact) for a command the arm was sent: one of the 8 moves exactly, else the move
        nearest its xy direction (the safety layer shortened or turned it); (-1, False) for no xy
        motion (a hold) or something that is not an ``ee_delta`` action."""
        m = self.move_index(command)
        if m >= 0:
            return m, True
        a = np.asarray(command, np.float64).reshape(-1)
        if a.shape != (self.action_dim,) or not np.all(np.isfinite(a)) or np.hypot(a[0], a[1]) < 1e-6:
            return -1, False
        return int(np.round(np.arctan2(a[1], a[0]) / (np.pi / 4))) % 8, False

    def encode_query(self, obs: Any, queued: np.ndarray | None, executed: tuple[np.ndarray | None, ...] | None,
                     delay_steps: int = 1, t_request_s: float | None = None) -> tuple[int, int | None]:
        """One decision in the loop (see the module doc): ``queued`` the actions queued from the
        observation's slot on (with lookahead and ``delay_steps`` ≥ 1 the search starts from after
        the first), ``executed`` the commands sent at each slot since the previous query's
        observation (None: unknown), ``t_request_s`` the request's ``time.monotonic()`` when the
        loop runs on a real clock (a deadline then counts from it: the handover to a worker thread
        or process is the decision's time too). Returns (move, the queued move searched after or
        None); :meth:`sample` makes the chunk."""
        st = self._stats

        def update(state: np.ndarray) -> None:
            ran = None if executed is None else [self.command_move(a) for a in executed if a is not None]
            moves = None if ran is None else [m for m, _ in ran if m >= 0]
            if moves is None or len(moves) > 1:
                self.hist.reset(0, state)  # frames are missing between moves, or the history is unknown
                st["context_resets"] += 1
            elif not moves:
                self.hist.states[0, -1] = state  # a hold: the same step, a later frame
                st["held"] += 1
            else:
                st["modified"] += int(not any(exact for m, exact in ran if m >= 0))
                self._note_prediction(moves[0], state)
                self.hist.push(0, moves[0], state)

        after, ahead_xy = None, None
        if self.lookahead and delay_steps >= 1 and queued is not None and len(queued):
            after = self.move_index(queued[0])
            first = np.asarray(queued[0], np.float64).reshape(-1)
            if first.shape == (self.action_dim,) and np.all(np.isfinite(first[:2])):
                ahead_xy = first[:2]  # what runs first, a planner move or not
            if after < 0:
                after = None
                st["foreign_queued"] += 1
        a = self._decide(obs, update, after, ahead_xy, t_request_s)
        st["decisions"] += 1
        if t_request_s is not None:
            st["waited"] += 1
            st["wait_ms"] += self.wait_ms[-1]
            st["wait_ms_max"] = max(st["wait_ms_max"], self.wait_ms[-1])
        st["ahead"] += int(after is not None)
        st["simulations"] += int(self.last_search.simulations)
        st["cut"] += int(self.last_search.simulations < self.planner.cfg.num_simulations)
        return a, after

    def _note_prediction(self, move: int, state: np.ndarray) -> None:
        """The one-step error of the last root's prediction for ``move`` against the frame that
        followed, and the error of predicting no change (the last state), both summed per episode."""
        if self._pred is None:
            return
        with torch.no_grad():
            z = self.planner.to_z(np.stack([self.hist.states[0, -1], state])[None])[0]
            st = self._stats
            st["pred_sse"] += float(((torch.as_tensor(self._pred[move]) - z[1]) ** 2).mean())
            st["still_sse"] += float(((z[0] - z[1]) ** 2).mean())
            st["pred_n"] += 1

    @staticmethod
    def _zero_stats() -> dict:
        return {"decisions": 0, "ahead": 0, "held": 0, "modified": 0, "context_resets": 0, "foreign_queued": 0,
                "masked": 0, "masked_moves": 0, "pred_sse": 0.0, "still_sse": 0.0, "pred_n": 0, "simulations": 0,
                "cut": 0, "waited": 0, "wait_ms": 0.0, "wait_ms_max": 0.0}

    def episode_stats(self, reset: bool = False) -> dict:
        """This episode's planner counts (extra fields of the episode record): decisions, those
        searched from after a queued move (``planner_ahead``), the simulations the searches ran
        (``planner_simulations``) and the decisions the deadline cut short (``planner_cut``), frames after a hold
        (``planner_held``), moves the safety layer changed (``planner_modified``, taken as the
        nearest move), context restarts, queued actions that were not planner moves, decisions
        with root moves masked by the workspace (``planner_masked``, ``planner_masked_moves``), and the
        mean one-step prediction error of the model in the loop with the error of predicting no
        change (``planner_pred_mse`` / ``planner_still_mse`` over ``planner_pred_n`` transitions);
        on a real clock also the mean and longest wait from a request to its decision's start
        (``planner_wait_ms``, ``planner_wait_ms_max``: the handover to the worker)."""
        st = self._stats
        n = st["pred_n"]
        out = {f"planner_{k}": st[k] for k in ("decisions", "ahead", "simulations", "cut", "held", "modified",
                                               "context_resets", "foreign_queued", "pred_n")}
        if self.workspace is not None:
            out.update(planner_masked=st["masked"], planner_masked_moves=st["masked_moves"])
        if st["waited"]:  # the request's time was known (a real clock): its wait before the decision began
            out.update(planner_wait_ms=st["wait_ms"] / st["waited"], planner_wait_ms_max=st["wait_ms_max"])
        out["planner_pred_mse"] = st["pred_sse"] / n if n else None
        out["planner_still_mse"] = st["still_sse"] / n if n else None
        if reset:
            self._stats = self._zero_stats()
        return out

    def set_executed(self, action: int) -> None:
        """The move executed after the last decision, where it was not the policy's own (the history
        the next decision sees records it); e.g. two planners fed the same frames in lockstep."""
        if self.hist is None:
            raise EdgeError("set_executed before the first decision of an episode")
        if not 0 <= int(action) < self.model.cfg.num_actions:
            raise EdgeError(f"set_executed({action}): actions are 0..{self.model.cfg.num_actions - 1}")
        self._last_action = int(action)

    def sample(self, features: Any, noise: np.ndarray | None, num_steps: int) -> np.ndarray:
        """The chunk: the move (features: its index, or (move, queued move or None) from
        :meth:`encode_query`); with lookahead ``[queued move, move, move]``, or ``[move] * 3`` when
        the search started from the frame."""
        move, first = (features, None) if np.ndim(features) == 0 else features
        moves = [int(move)] if not self.lookahead else (
            [int(move)] * LOOKAHEAD_CHUNK if first is None else [int(first)] + [int(move)] * (LOOKAHEAD_CHUNK - 1))
        ang = np.array(moves) * np.pi / 4
        return np.stack([STEP_M * np.cos(ang), STEP_M * np.sin(ang), np.zeros(len(moves)),
                         np.zeros(len(moves)), np.ones(len(moves))], 1).astype(np.float32)


def wall_cut(xy: np.ndarray, moves: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(M,) bool: which xy ``moves`` (M, 2) from ``xy`` the box [lo, hi] cuts to under half their length."""
    d = np.asarray(moves, np.float64)
    kept = np.hypot(*(np.clip(xy + d, lo, hi) - xy).T)
    return kept < 0.5 * np.hypot(*d.T)


def comet_policy(cfg: Any, robot: Any = None) -> WorldModelPolicy:
    """Registry factory: ``--world-model DIR`` ('' = the shipped model for the task: push3's or
    reach3's), ``--plan-simulations``, ``--plan-backend``, ``--plan-deadline-ms``."""
    if cfg.scene.task not in SHIPPED_BY_TASK:
        raise EdgeError(f"--policy comet plans the object tasks: run it with --task push or reach (got --task "
                        f"{cfg.scene.task})")
    path = cfg.policy.comet.world_model or str(SHIPPED_BY_TASK[cfg.scene.task])
    lookahead = cfg.loop.execution == "async"
    if lookahead and (cfg.worker.mode in ("thread", "process")
                      or (cfg.worker.mode == "auto" and cfg.clock.kind == "real")):
        raise EdgeError(f"--policy comet --query-mode async searches from after the move queued for the "
                        f"frame's tick, so the frame must be read before that tick's command; an inference "
                        f"{cfg.worker.mode!r} worker (--clock {cfg.clock.kind}) reads it after: use "
                        "--inference inline, or --query-mode sync")
    if lookahead and cfg.queue.seam == "weighted":
        raise EdgeError("--seam weighted: --policy comet --query-mode async would blend a decision's move with "
                        "the previous one's on the overlap (not one of the planner's moves); use --seam replace "
                        "or rtc")
    fixed = cfg.scheduler.fixed
    want = (LOOKAHEAD_CHUNK, 1) if lookahead else (1, None)  # (execute, next query in steps; None: any)
    if cfg.scheduler.kind != "fixed" or fixed.execute != want[0] or (
            want[1] is not None and fixed.next_query_in_steps != want[1]):
        mode = "async (lookahead: [queued move, new move, new move], a query every tick)" if lookahead else "sync"
        raise EdgeError(f"--policy comet {mode} needs scheduler.kind=fixed, scheduler.fixed.execute={want[0]}"
                        + (f", scheduler.fixed.next_query_in_steps={want[1]}" if want[1] is not None else "")
                        + f" (got {cfg.scheduler.kind}, execute={fixed.execute}, next_query_in_steps="
                        f"{fixed.next_query_in_steps}); `edge run --policy comet` sets them")
    workspace = None
    if cfg.policy.comet.workspace_mask:
        if robot is None or getattr(robot, "workspace_min_m", None) is None:
            raise EdgeError("--plan-workspace-mask on masks moves by the robot spec's workspace box; this run "
                            "has no robot spec (use --plan-workspace-mask off)")
        workspace = (robot.workspace_min_m, robot.workspace_max_m)
    try:
        return WorldModelPolicy(path, simulations=int(cfg.policy.comet.plan_simulations or 0),
                                seed=int(cfg.run.seed), verify=cfg.policy.verify,
                                backend=cfg.policy.comet.plan_backend, lookahead=lookahead, workspace=workspace,
                                task=cfg.scene.task, deadline_ms=float(cfg.policy.comet.plan_deadline_ms),
                                ort_threads=int(cfg.policy.comet.plan_threads or 1),
                                torch_threads=int(cfg.policy.comet.plan_threads))
    except EdgeError as err:
        if str(err).startswith("--"):  # names its flag already
            raise
        text = str(err)
        text = text[len(f"{path}: "):] if text.startswith(f"{path}: ") else text  # the path once
        raise EdgeError(f"--world-model {path}: {text}") from None
