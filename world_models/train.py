"""Train a world model + MCTS agent on an object task: collect with search, learn from replay, evaluate.

``edge train world-model --kind comet --task push3 --obs slots --encoder DIR --out runs/wm/comet_s0``

Per round, ``n_envs`` environments each take one action chosen by batched tree search (Dirichlet
noise at the root, actions sampled from the visit counts at temperature 0.5, then 0.25 for
the second half of the budget; Gumbel search explores through its Gumbel noise instead); finished episodes go into the replay; then ``replay_ratio · n_envs``
learner updates run. Every ``eval_every`` environment steps, ``eval_episodes`` episodes on the
fixed evaluation seeds (never used for training; the same for every method and seed) run greedily
(no noise, most-visited action); the curve is appended to ``curve.jsonl``.

Resumable: ``train_state.pt`` (model, target, optimiser, replay, counters, RNG states, curve) is
written atomically every ``checkpoint_every`` env steps and at the end; a rerun with the same
``--out`` continues from it (episodes in flight at the checkpoint are dropped and restarted on new
seeds, so a resumed run is equivalent, not bit-identical). ``model.pt`` + ``manifest.json`` (command,
seed, config, git revision, encoder hash, metrics, file hashes) are the shipped artefact.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import MISSING, asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edge import atomic
from edge.config import ConfigError, describe_differences, differences
from edge.errors import EdgeError
from world_models.learner import Learner, LearnerConfig
from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
from world_models.observer import Observer
from world_models.planner import History, Planner, PlannerConfig
from world_models.replay import Episode, Replay
from world_models.token_model import TokenWorldModel, WorldModelConfig

EVAL_SEED0 = 900_000_000
#: settings a resumed run may change: a longer budget, how often it saves, how many threads
RESUMABLE = ("env_steps", "checkpoint_every", "threads")
STATE_FILE, MODEL_FILE, MANIFEST_FILE, CURVE_FILE = "train_state.pt", "model.pt", "manifest.json", "curve.jsonl"


@dataclass(frozen=True)
class RunConfig:
    """One training run (validated; every nested config validates itself)."""

    env: ObjectTaskConfig = field(default_factory=ObjectTaskConfig)
    model: WorldModelConfig = field(default_factory=WorldModelConfig)
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    obs: str = "oracle"  # oracle | slots | pixels (pixels iff model.kind == "pixels")
    encoder: str = ""  # slots: directory of a frozen slot encoder; pixels: of a pretrained pixel encoder to freeze ('' = learn the CNN end to end)
    encoder_carry_iters: int = 0  # slots: the encoder's tracking rounds per carried frame (0 = its own)
    env_steps: int = 20_000
    n_envs: int = 8
    replay_ratio: float = 0.25  # learner updates per environment step
    # temporally extended exploration (an extension, not in COMET; 0 = off): while training, at each
    # decision not already inside a run, with this probability one uniform random action is repeated
    # for 1..explore_repeat_max steps (uniform); the replay keeps the search's policy as the target
    explore_repeat: float = 0.0
    explore_repeat_max: int = 10
    # a diagnostic of data coverage, not a learning method (it reads the simulator's true poses; 0 =
    # off): the share of training episodes played by the task's scripted policy
    # (world_models.scripted), drawn per episode from its seed; the replay keeps the search's policy
    # as the target, as for explore_repeat. Evaluation episodes are always the agent's own.
    explore_scripted: float = 0.0
    min_replay: int = 400  # transitions before the first update
    capacity: int = 200_000
    eval_every: int = 2_000
    eval_episodes: int = 32
    checkpoint_every: int = 2_000
    seed: int = 0
    threads: int = 1  # torch intra-op threads
    # a trained world-model run (DIR with model.pt, verified against its manifest) whose weights
    # initialise this run's model and its target network; it must have the same model settings and
    # observe the same way (oracle slots: the same seed, which fixes the oracle map). '' = random init
    init_from: str = ""

    def __post_init__(self) -> None:
        for name, typ in (("env", ObjectTaskConfig), ("model", WorldModelConfig), ("planner", PlannerConfig),
                          ("learner", LearnerConfig)):
            v = getattr(self, name)
            if isinstance(v, dict):
                object.__setattr__(self, name, typ(**v))
        if self.obs not in ("oracle", "slots", "pixels"):
            raise ConfigError(f"obs={self.obs!r} is not allowed; choose oracle, slots or pixels")
        if (self.obs == "pixels") != (self.model.kind == "pixels"):
            raise ConfigError(f"obs={self.obs!r} with kind={self.model.kind!r}: the pixel model "
                             "needs obs=pixels and obs=pixels needs kind=pixels")
        if self.obs == "slots" and not self.encoder:
            raise ConfigError("obs='slots' needs --encoder DIR (a frozen slot encoder)")
        if self.env.depth:
            raise ConfigError("env.depth=True: the world models (and `edge run`) read RGB frames only; leave "
                              "env.depth off (RGB-D frames are for `edge train slot-encoder --set in_channels=4`)")
        if self.learner.relevance_l1 and not self.model.causal_heads:
            raise ConfigError(f"learner.relevance_l1={self.learner.relevance_l1!r} needs object-causal heads "
                              f"(kind comet or comet_nofusion; got {self.model.kind!r}); set it to 0")
        for key, (lo, hi) in {"encoder_carry_iters": (0, 10), "env_steps": (1, 10**8), "n_envs": (1, 256), "eval_every": (1, 10**8),
                              "eval_episodes": (1, 10**5), "checkpoint_every": (1, 10**8),
                              "replay_ratio": (0.0, 64.0), "threads": (1, 256), "explore_repeat": (0.0, 1.0),
                              "explore_repeat_max": (1, 1000), "explore_scripted": (0.0, 1.0)}.items():
            v = getattr(self, key)
            if not lo <= v <= hi:
                raise ConfigError(f"{key}={v!r} is out of range; allowed [{lo}, {hi}]")


def tiny(**overrides: Any) -> RunConfig:
    """A run small enough for tests (seconds)."""
    base = RunConfig(env=ObjectTaskConfig(task="reach3", image_size=32, max_steps=6, distractors=1),
                     model=WorldModelConfig(num_slots=4, slot_dim=16, width=16, heads=2, head_heads=2,
                                            image_size=32, cnn_channels=8, support_n=21),
                     planner=PlannerConfig(num_simulations=4, context=2),
                     learner=LearnerConfig(batch=4, unroll=2, td_steps=2),
                     env_steps=24, n_envs=2, min_replay=4, replay_ratio=0.5, eval_every=12, eval_episodes=2,
                     checkpoint_every=12)
    return replace(base, **overrides)


def to_dict(cfg: RunConfig) -> dict:
    return asdict(cfg)


def encoder_weights_file(encoder: str | Path) -> Path:
    """The weights file of a run's ``encoder`` setting (an encoder directory or the file itself)."""
    enc = Path(encoder)
    return enc / "encoder.pt" if enc.is_dir() else enc


def load_encoder(path: str, carry_iters: int = 0):
    """The frozen encoder; ``carry_iters`` > 0 overrides its tracking rounds (an inference setting)."""
    from world_models.slot_encoder import load_encoder as _load

    model, _manifest = _load(path, carry_iters=carry_iters or None)
    if model.cfg.in_channels != 3:
        raise ConfigError(f"encoder={path}: reads {model.cfg.in_channels}-channel (RGB-D) frames; the world models "
                          "and `edge run` see RGB camera frames only: choose an RGB slot encoder (in_channels=3)")
    return model


def resolve_shipped(path: str) -> str:
    """A relative encoder path that does not exist here but names a file shipped inside the package
    (``world_models/checkpoints/...``, as the presets write it) → that file's absolute path."""
    if not path or Path(path).is_absolute() or Path(path).exists():
        return path
    installed = Path(__file__).resolve().parent.parent / path
    return str(installed) if installed.exists() else path


def _is_slot_encoder(path: str) -> bool:
    p = Path(resolve_shipped(path))
    m = p / "manifest.json" if p.is_dir() else p
    try:
        return "num_slots" in (json.loads(m.read_text()).get("config") or {})
    except (OSError, ValueError):
        return False


def _with_new_defaults(saved: dict, new: dict, default: dict) -> dict:
    """``saved`` plus the keys it lacks where ``new`` holds their ``default`` (a key added after a run
    was saved, e.g. learner.relevance_l1, at its default changes nothing the run did), in sections too."""
    out = dict(saved)
    for k, v in new.items():
        if k not in out:
            if isinstance(default.get(k), dict) or default.get(k, MISSING) != v:
                continue
            out[k] = v
        elif isinstance(v, dict) and isinstance(out[k], dict) and isinstance(default.get(k), dict):
            out[k] = _with_new_defaults(out[k], v, default[k])
    return out


def unused_slot_encoder(cfg: RunConfig | dict) -> str | None:
    """The ``encoder`` of a pixel run when it names a slot encoder: runs made before pretrained pixel
    encoders existed carry the preset's slot encoder there, never used; None otherwise."""
    obs, enc = (cfg.get("obs"), cfg.get("encoder")) if isinstance(cfg, dict) else (cfg.obs, cfg.encoder)
    return enc if obs == "pixels" and enc and _is_slot_encoder(enc) else None


def _manifest_command(out: Path) -> str:
    try:
        return str(json.loads((out / MANIFEST_FILE).read_text()).get("command") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def _blank_unused_encoder(d: dict) -> None:
    """Blank, in a saved or new run's config dict, the encoder settings its observations do not use,
    so that a preset naming another slot encoder (or tracking rounds) does not change the identity of
    oracle and pixel runs: ``encoder_carry_iters`` outside slot runs, ``encoder`` in oracle runs and a
    slot encoder named by a pixel run (runs made before pretrained pixel encoders existed)."""
    if d.get("obs") != "slots":
        d["encoder_carry_iters"] = 0
    if d.get("obs") == "oracle" or unused_slot_encoder(d):
        d["encoder"] = ""


def freeze_pixel_encoder(model: TokenWorldModel, path: str) -> None:
    """Load a pretrained pixel encoder (:mod:`world_models.pixel_pretrain`) into the pixel model and
    freeze it, as the slot models' encoder is frozen (ConfigError if it is not one, or its shape
    differs from the model's)."""
    from world_models.pixel_pretrain import load_pixel_encoder

    try:
        pcfg, state, _ = load_pixel_encoder(path)
    except (ValueError, FileNotFoundError) as err:
        raise ConfigError(f"encoder={path}: {err}") from None
    m = model.cfg
    if (pcfg.image_size, pcfg.channels, pcfg.width) != (m.image_size, m.cnn_channels, m.width):
        raise ConfigError(f"encoder={path}: a pixel encoder for image_size/channels/width=({pcfg.image_size}, "
                          f"{pcfg.channels}, {pcfg.width}), but the model has model.image_size/cnn_channels/width="
                          f"({m.image_size}, {m.cnn_channels}, {m.width})")
    model.encoder.load_state_dict(state)
    model.encoder.requires_grad_(False)


def load_world_model(path: str | Path, verify: bool = True):
    """(RunConfig, TokenWorldModel in eval mode, manifest) from a training directory."""
    import torch

    from edge.digest import sha256_file

    p = Path(path)
    f = p / MODEL_FILE if p.is_dir() else p
    if not f.is_file():
        raise EdgeError(f"no world model at {p} (expected {MODEL_FILE}); train one with "
                        "`edge train world-model --out DIR --task push3|reach3`")
    mf = f.parent / MANIFEST_FILE
    try:
        manifest = json.loads(mf.read_text()) if mf.is_file() else {}
    except (ValueError, UnicodeDecodeError) as err:
        raise EdgeError(f"{mf}: not readable JSON ({err}); the world model's manifest is damaged") from None
    if not isinstance(manifest, dict):
        raise EdgeError(f"{mf}: not a manifest (a JSON object); the world model's manifest is damaged")
    want = (manifest.get("files") or {}).get(MODEL_FILE)
    if verify and not want:  # e.g. a run killed between writing its model and its manifest
        raise EdgeError(f"{f}: no {MANIFEST_FILE} beside it lists its sha256, so it cannot be verified (a training "
                        "run stopped while shipping it, or a model copied without its manifest); resume the run "
                        "that made it (`edge train world-model --out DIR --resume`) or train it again")
    if verify and sha256_file(f) != want:
        raise EdgeError(f"{f}: sha256 does not match {mf}; the world model is damaged or was replaced")
    what = ("a damaged file, or not a checkpoint of `edge train world-model` (e.g. a VLA checkpoint: "
            "that one runs with --policy vla --checkpoint)")
    try:
        blob = torch.load(f, weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unreadable file: one clear error
        raise EdgeError(f"{f}: cannot be read as a world model ({type(err).__name__}: {err}): {what}") from None
    if not (isinstance(blob, dict) and isinstance(blob.get("config"), dict) and "model" in blob):
        raise EdgeError(f"{f}: not a world model (no 'config' and 'model' entries): {what}")
    try:
        cfg = RunConfig(**blob["config"])
        model = TokenWorldModel(cfg.model)
        model.load_state_dict(blob["model"])
    except (TypeError, ValueError, KeyError, RuntimeError) as err:
        raise EdgeError(f"{f}: not a world model this code can load ({type(err).__name__}: "
                        f"{(str(err).splitlines() or [''])[0]}): {what}") from None
    return cfg, model.eval(), manifest


def init_model_from(model: TokenWorldModel, cfg: RunConfig) -> str:
    """Load the weights of the run ``cfg.init_from`` into ``model`` and return the sha256 of the file
    loaded (verified against that run's manifest); ConfigError naming the key if it cannot
    initialise this run."""
    from edge.digest import sha256_file

    try:
        icfg, imodel, _ = load_world_model(cfg.init_from)
    except (EdgeError, TypeError, KeyError) as e:
        raise ConfigError(f"init_from={cfg.init_from!r}: {e}") from None
    if cfg.obs in ("slots", "pixels") and (icfg.encoder, icfg.encoder_carry_iters) != (cfg.encoder, cfg.encoder_carry_iters):
        raise ConfigError(f"init_from={cfg.init_from!r}: that run reads encoder={icfg.encoder!r} with "
                          f"encoder_carry_iters={icfg.encoder_carry_iters}, this run encoder={cfg.encoder!r} with "
                          f"{cfg.encoder_carry_iters}; a model starts only from a run that sees the same way")
    if icfg.model != cfg.model or icfg.obs != cfg.obs:
        raise ConfigError(f"init_from={cfg.init_from!r}: that run has obs={icfg.obs!r} and model settings "
                          f"{to_dict(icfg)['model']}; this run needs obs={cfg.obs!r} and {to_dict(cfg)['model']}")
    if cfg.obs == "oracle" and (icfg.seed, icfg.env.oracle_layout) != (cfg.seed, cfg.env.oracle_layout):
        raise ConfigError(f"init_from={cfg.init_from!r}: its oracle slots come from seed {icfg.seed} with "
                          f"{len(icfg.env.oracle_layout)} features, this run's from seed {cfg.seed} with "
                          f"{len(cfg.env.oracle_layout)} (the seed fixes the oracle map); use a model of the same seed")
    model.load_state_dict(imodel.state_dict())
    return sha256_file(Path(cfg.init_from) / MODEL_FILE)


class Trainer:
    """Runs :class:`RunConfig` into ``out``; ``run()`` returns the final metrics."""

    def __init__(self, cfg: RunConfig, out: str | Path, command: str = "", progress: bool = True,
                 log: bool | None = None) -> None:
        """``progress``: a progress bar on stderr; ``log``: one line per evaluation on stderr
        (default: with the progress bar)."""
        self.cfg, self.out, self.command, self.progress = cfg, Path(out), command, progress
        self.log = progress if log is None else log
        self.started_by = ""  # a resumed run: the command that started it
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        enc = load_encoder(cfg.encoder, cfg.encoder_carry_iters) if cfg.obs == "slots" else None
        self.encoder = enc
        n_ent = cfg.env.n_entities
        mcfg = cfg.model
        if cfg.obs == "oracle" and mcfg.num_slots != n_ent:
            raise ConfigError(f"oracle slots: num_slots={mcfg.num_slots} must equal the task's "
                             f"{n_ent} entities (robot, goal, target, {cfg.env.distractors} distractors)")
        if enc is not None and (mcfg.num_slots, mcfg.slot_dim) != (enc.cfg.num_slots, enc.cfg.slot_dim):
            raise ConfigError(f"world_model.num_slots/slot_dim=({mcfg.num_slots}, {mcfg.slot_dim}) must match the "
                             f"encoder's ({enc.cfg.num_slots}, {enc.cfg.slot_dim})")
        self.model = TokenWorldModel(mcfg)
        if cfg.obs == "pixels" and unused_slot_encoder(cfg) is None and cfg.encoder:
            freeze_pixel_encoder(self.model, resolve_shipped(cfg.encoder))
        init_sha = init_model_from(self.model, cfg) if cfg.init_from else None
        self.planner = Planner(self.model, cfg.planner)
        self.learner = Learner(self.model, cfg.learner, cfg.planner.gamma, cfg.planner.context)
        self.replay = Replay(cfg.capacity)
        self.rng = np.random.default_rng(cfg.seed)
        self.st = {"env_steps": 0, "episodes": 0, "next_eval": 0, "next_ckpt": cfg.checkpoint_every,
                   "wall_s": 0.0, "train_returns": [], "train_success": []}
        if init_sha:  # the weights the run started from (a resumed run keeps its first start's)
            self.st["init_from_sha256"] = init_sha
        self.encoder_sha256 = None  # the frozen encoder's weights: a resume must find the same ones
        if cfg.encoder and (cfg.obs == "slots" or (cfg.obs == "pixels" and unused_slot_encoder(cfg) is None)):
            from edge.digest import sha256_file

            ef = encoder_weights_file(resolve_shipped(cfg.encoder))
            self.encoder_sha256 = sha256_file(ef) if ef.is_file() else None
            self.st["encoder_sha256"] = self.encoder_sha256
        self.curve: list[dict] = []
        self.last_stats: dict = {}
        self._repeat_action = np.zeros(cfg.n_envs, np.int64)  # explore_repeat: the action being repeated
        self._repeat_left = np.zeros(cfg.n_envs, np.int64)  # and how many more steps it is taken

    # ------------------------------------------------------------------ persistence
    def _save_state(self) -> None:
        blob = {"config": to_dict(self.cfg), "learner": self.learner.state_dict(), "replay": self.replay.episodes,
                "st": self.st, "curve": self.curve, "rng": self.rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(), "command": self.started_by or self.command}
        atomic.write_torch(self.out / STATE_FILE, blob)

    def _rewrite_curve(self) -> None:
        atomic.write_text(self.out / CURVE_FILE, "".join(json.dumps(row) + "\n" for row in self.curve))

    def _load_state(self) -> bool:
        f = self.out / STATE_FILE
        if not f.is_file():
            return False
        atomic.verify_torch_file(f)
        blob = torch.load(f, weights_only=False)
        new = to_dict(self.cfg)
        saved = _with_new_defaults(blob["config"], new, to_dict(RunConfig()))
        for d in (saved, new):
            _blank_unused_encoder(d)
        diff = sorted(k for k in set(saved) | set(new)
                      if k not in RESUMABLE and saved.get(k) != new.get(k))
        started = blob.get("command") or _manifest_command(self.out)  # runs saved before stop 56: the manifest's
        if diff:
            hint = ""
            if {"encoder", "encoder_carry_iters"} & set(diff) and saved.get("obs") == new.get("obs") == "slots":
                hint = (f"; it was trained with --encoder {saved.get('encoder') or ''} --set encoder_carry_iters="
                        f"{saved.get('encoder_carry_iters', 0)} (slot runs made with the preset before it named slots_push3_v2 "
                        "and 1 round used slots_push3 and 0)")
            shown = describe_differences(differences({k: saved.get(k) for k in diff}, {k: new.get(k) for k in diff}))
            by = f"; it was started by: {started}" if started else ""
            raise ConfigError(f"{f} was written by a different configuration ({shown}){by}; "
                             f"use a new --out, or the same settings to resume (only {RESUMABLE} may change){hint}")
        self.started_by = started
        done = int(blob["st"]["env_steps"])
        if self.cfg.env_steps < done:
            raise ConfigError(f"--env-steps {self.cfg.env_steps}: {self.out} is at {done} env steps already; "
                              f"resume with --env-steps >= {done} (a larger one extends the run)")
        old_enc = blob["st"].get("encoder_sha256")  # recorded since stop 55
        if old_enc is not None and self.encoder_sha256 is not None and old_enc != self.encoder_sha256:
            raise ConfigError(f"encoder={self.cfg.encoder}: its weights (sha256 {self.encoder_sha256[:12]}) are not "
                              f"the ones {self.out} was trained with ({old_enc[:12]}): the encoder was changed in "
                              "place, and the replay's states come from the old one; use a new --out")
        self.learner.load_state_dict(blob["learner"])
        for ep in blob["replay"]:
            self.replay.add(ep)
        self.st, self.curve = blob["st"], blob["curve"]
        self.rng.bit_generator.state = blob["rng"]
        torch.set_rng_state(blob["torch_rng"])
        return True

    # ------------------------------------------------------------------ acting
    def _make_envs(self, n: int) -> list[ObjectTaskEnv]:
        # an oracle-slot run reads the object states only: no camera frame is rendered for it
        return [ObjectTaskEnv(self.cfg.env, frames=self.cfg.obs != "oracle") for _ in range(n)]

    def _temperature(self) -> float:
        frac = self.st["env_steps"] / self.cfg.env_steps
        return 0.5 if frac < 0.5 else 0.25

    def evaluate(self, envs: list[ObjectTaskEnv], episodes: int, seed0: int = EVAL_SEED0) -> dict:
        """Greedy episodes on seeds ``seed0 .. seed0 + episodes - 1`` (default: the fixed evaluation
        seeds): success rate, return, root-value error, and ``per_episode`` success and
        ``per_episode_return`` in seed order."""
        cfg, n = self.cfg, len(envs)
        obs_er = Observer.for_run(cfg, n, self.encoder)
        rng = np.random.default_rng(12345)
        succ, rets, v_err, lens = {}, {}, [], []
        for start in range(0, episodes, n):
            rows = list(range(min(n, episodes - start)))
            obs = [envs[i].reset(seed=seed0 + start + i)[0] for i in rows]
            hist = History(len(rows), cfg.planner.context, obs_er.state_shape, obs_er.dtype)
            states = obs_er.observe(obs, np.ones(len(rows), bool), np.array(rows))
            for i in rows:
                hist.reset(i, states[i])
            alive = np.ones(len(rows), bool)
            rew = [[] for _ in rows]
            roots = [[] for _ in rows]
            while alive.any():
                idx = np.flatnonzero(alive)
                with torch.no_grad():
                    out = self.planner.plan(hist, rng, explore=False, rows=idx)
                new_obs = []
                for j, i in enumerate(idx):
                    o, r, term, trunc, info = envs[i].step(int(out.action[j]))
                    rew[i].append(r)
                    roots[i].append(float(out.root_value[j]))
                    if term or trunc:
                        alive[i] = False
                        succ[start + i] = bool(info["success"])
                    new_obs.append((i, o, out.action[j]))
                live = [(i, o, a) for i, o, a in new_obs if alive[i]]
                if live:
                    st = obs_er.observe([o for _, o, _ in live], np.zeros(len(live), bool), np.array([i for i, _, _ in live]))
                    for (i, _, a), s in zip(live, st):
                        hist.push(i, int(a), s)
            g = cfg.planner.gamma
            for i in rows:
                r = np.asarray(rew[i])
                disc = np.array([sum(g**k * x for k, x in enumerate(r[t:])) for t in range(len(r))])
                v_err.append(float(np.mean(np.abs(np.asarray(roots[i]) - disc))))
                rets[start + i] = float(r.sum())
                lens.append(len(r))
        per_episode = [succ[k] for k in sorted(succ)]
        return {"success": float(np.mean(per_episode)), "return": float(np.mean(list(rets.values()))),
                "root_value_abs_err": float(np.mean(v_err)), "episode_len": float(np.mean(lens)),
                "episodes": len(per_episode), "per_episode": per_episode,
                "per_episode_return": [round(rets[k], 6) for k in sorted(rets)]}

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict:
        cfg = self.cfg
        resumed = self._load_state()
        if resumed:  # the curve file mirrors the saved state: rows written after it (a kill) are redone, not kept twice
            self._rewrite_curve()
        envs = self._make_envs(cfg.n_envs)
        eval_envs = envs
        obs_er = Observer.for_run(cfg, cfg.n_envs, self.encoder)
        hist = History(cfg.n_envs, cfg.planner.context, obs_er.state_shape, obs_er.dtype)
        buf = [None] * cfg.n_envs

        scripted = np.zeros(cfg.n_envs, bool)  # explore_scripted: this env's episode is the scripted policy's

        def start(i: int) -> dict:
            seed = cfg.seed * 10_000_000 + self.st["episodes"]
            self.st["episodes"] += 1
            o, _ = envs[i].reset(seed=seed)
            if cfg.explore_scripted > 0:
                scripted[i] = np.random.default_rng([seed, 1]).random() < cfg.explore_scripted
            return o

        obs0 = [start(i) for i in range(cfg.n_envs)]
        states = obs_er.observe(obs0, np.ones(cfg.n_envs, bool))
        for i in range(cfg.n_envs):
            hist.reset(i, states[i])
            buf[i] = {"states": [states[i]], "actions": [], "rewards": [], "policies": [], "roots": []}
        bar = _progress(cfg.env_steps, self.st["env_steps"], self.progress, f"{cfg.model.kind}/{cfg.env.task}")
        t0, due = time.perf_counter(), 0.0
        if resumed:
            print(f"resumed {self.out} at {self.st['env_steps']} env steps, {self.learner.updates} updates",
                  file=sys.stderr)
        while self.st["env_steps"] < cfg.env_steps:
            if self.st["env_steps"] >= self.st["next_eval"]:
                self._record_eval(eval_envs, envs, obs_er, hist, buf)
            out = self.planner.plan(hist, self.rng, explore=True, temperature=self._temperature())
            acts = self._explore_repeat(out.action) if cfg.explore_repeat > 0 else out.action
            if scripted.any():
                from world_models.scripted import scripted_action

                acts = np.array(acts, dtype=np.int64)
                for i in np.flatnonzero(scripted):
                    acts[i] = scripted_action(envs[i])
            first = np.zeros(cfg.n_envs, bool)
            obs_list = []
            for i, env in enumerate(envs):
                a = int(acts[i])
                o, r, term, trunc, info = env.step(a)
                b = buf[i]
                b["actions"].append(a)
                b["rewards"].append(r)
                b["policies"].append(out.action_weights[i])
                b["roots"].append(out.root_value[i])
                if term or trunc:
                    b["states"].append(obs_er.observe([o], np.zeros(1, bool), np.array([i]))[0])
                    self._finish(b, term, info)
                    if cfg.explore_scripted > 0:
                        self.st.setdefault("train_scripted", []).append(bool(scripted[i]))
                    o = start(i)
                    first[i] = True
                    self._repeat_left[i] = 0  # a run of repeated actions ends with its episode
                obs_list.append(o)
            states = obs_er.observe(obs_list, first)
            for i in range(cfg.n_envs):
                if first[i]:
                    hist.reset(i, states[i])
                    buf[i] = {"states": [states[i]], "actions": [], "rewards": [], "policies": [], "roots": []}
                else:
                    hist.push(i, int(acts[i]), states[i])
                    buf[i]["states"].append(states[i])
            self.st["env_steps"] += cfg.n_envs
            bar(cfg.n_envs)
            due += cfg.n_envs * cfg.replay_ratio
            while due >= 1.0 and self.replay.transitions >= cfg.min_replay:
                batch = self.replay.sample(self.rng, cfg.learner.batch, self.learner.window,
                                           cfg.planner.context + cfg.learner.unroll)
                self.last_stats = self.learner.update(batch)
                due -= 1.0
            if self.replay.transitions < cfg.min_replay:
                due = 0.0
            if self.st["env_steps"] >= self.st["next_ckpt"]:
                self.st["wall_s"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                self._save_state()
                self.st["next_ckpt"] += cfg.checkpoint_every
        self._record_eval(eval_envs, envs, obs_er, hist, buf, final=True)
        self.st["wall_s"] += time.perf_counter() - t0
        self._save_state()
        for e in envs:
            e.close()
        return self._ship()

    def _explore_repeat(self, searched: np.ndarray) -> np.ndarray:
        """The actions to take: the search's, except inside a run of one repeated random action
        (see ``RunConfig.explore_repeat``)."""
        cfg = self.cfg
        acts = np.array(searched, dtype=np.int64)
        for i in range(len(acts)):
            if self._repeat_left[i] == 0 and self.rng.random() < cfg.explore_repeat:
                self._repeat_action[i] = self.rng.integers(cfg.model.num_actions)
                self._repeat_left[i] = int(self.rng.integers(1, cfg.explore_repeat_max + 1))
            if self._repeat_left[i] > 0:
                acts[i] = self._repeat_action[i]
                self._repeat_left[i] -= 1
        return acts

    def _finish(self, b: dict, terminated: bool, info: dict) -> None:
        ep = Episode(states=np.stack(b["states"]), actions=np.asarray(b["actions"], np.int64),
                     rewards=np.asarray(b["rewards"], np.float32), policies=np.stack(b["policies"]).astype(np.float32),
                     root_values=np.asarray(b["roots"], np.float32), terminated=bool(terminated))
        self.replay.add(ep)
        self.st["train_returns"].append(float(ep.rewards.sum()))
        self.st["train_success"].append(bool(info["success"]))

    def _record_eval(self, eval_envs, envs, obs_er, hist, buf, final: bool = False) -> None:
        # Evaluation uses its own envs so training episodes in flight are not disturbed.
        if not hasattr(self, "_eval_envs"):
            self._eval_envs = self._make_envs(min(self.cfg.n_envs, self.cfg.eval_episodes))
        if final and self.curve and self.curve[-1]["env_steps"] == self.st["env_steps"]:
            return
        ev = self.evaluate(self._eval_envs, self.cfg.eval_episodes)
        row = {"env_steps": self.st["env_steps"], "updates": self.learner.updates, **ev,
               "train_success_recent": float(np.mean(self.st["train_success"][-50:])) if self.st["train_success"] else 0.0,
               **self._agent_success_recent(),
               "wall_s": self.st["wall_s"]}
        row.update({k: v for k, v in self.last_stats.items() if k != "relevance"})
        if "relevance" in self.last_stats:
            row["relevance"] = self.last_stats["relevance"]
        self.curve.append(row)
        with open(self.out / CURVE_FILE, "a") as f:
            f.write(json.dumps(row) + "\n")
        if self.log:
            print(f"[{self.cfg.model.kind}] step {row['env_steps']}: success {row['success']:.2f} "
                  f"return {row['return']:.2f} v_err {row['root_value_abs_err']:.2f}", file=sys.stderr)
        self.st["next_eval"] = self.st["env_steps"] + self.cfg.eval_every

    def _agent_success_recent(self) -> dict:
        """With explore_scripted: the success of the last 50 training episodes the agent played
        itself (``train_success_recent`` counts the scripted ones too)."""
        flags = self.st.get("train_scripted")
        if not self.cfg.explore_scripted or not flags:
            return {}
        own = [s for s, f in zip(self.st["train_success"][-len(flags):], flags) if not f][-50:]
        return {"train_success_recent_agent": float(np.mean(own)) if own else 0.0}

    def _ship(self) -> dict:
        from edge.digest import sha256_file
        from edge.vla.manifest import git_revision

        f = self.out / MODEL_FILE
        atomic.write_torch(f, {"config": to_dict(self.cfg), "model": self.model.state_dict()})
        metrics = {"final": self.curve[-1] if self.curve else {}, "env_steps": self.st["env_steps"],
                   "updates": self.learner.updates, "wall_s": self.st["wall_s"],
                   "train_episodes": len(self.st["train_success"])}
        if self.cfg.explore_scripted:
            metrics["train_episodes_scripted"] = sum(self.st.get("train_scripted", []))
        files = {MODEL_FILE: sha256_file(f)}
        if self.cfg.encoder:
            ef = encoder_weights_file(self.cfg.encoder)
            files["encoder"] = self.encoder_sha256 or (sha256_file(ef) if ef.is_file() else None)
        if self.cfg.init_from:
            files["init_from"] = self.st.get("init_from_sha256")
        manifest = {"kind": "edge-world-model", "command": self.started_by or self.command,
                    **({"resumed_by": self.command} if self.started_by and self.command else {}), "seed": self.cfg.seed,
                    "config": to_dict(self.cfg), "git": git_revision(), "metrics": metrics, "files": files}
        atomic.write_json(self.out / MANIFEST_FILE, manifest)
        atomic.write_json(self.out / "metrics.json", metrics)
        return metrics


def _progress(total: int, done: int, enabled: bool, desc: str):
    if not enabled:
        return lambda n: None
    try:
        from tqdm import tqdm
    except ImportError:
        return lambda n: None
    bar = tqdm(total=total, initial=done, desc=desc, unit="step", file=sys.stderr, mininterval=5.0)
    return bar.update
