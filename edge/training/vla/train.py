"""Training the reference VLA on demonstrations: rectified flow, EMA weights, resumable.

Read top to bottom: :class:`~edge.training.vla.config.TrainVLAConfig` (every knob, documented), then
:class:`VLATrainer.run` (the vision stages it may run first: :mod:`edge.training.vla.stages`).
Loss per step: rectified-flow MSE on normalised action chunks (``flow_samples`` draws per
observation) + ``aux_object_weight`` x MSE of a head that predicts the positions of the moved block
and its base from the prefix features (privileged ``object_pos`` of the demos). Optionally a vision
pre-training stage comes first (``vision_pretrain_steps``): the front trunk learns to localise the
objects on pre-lift frames alone, before the flow loss can teach the policy to lean on the arm's
own motion instead (a closed-loop diagnosis found exactly that in models trained without it).

Determinism and resume. Everything random in step ``s`` (augmentation shifts, flow noise and times)
comes from a torch generator seeded with ``(seed, s)``, and the data order from
:class:`edge.training.vla.data.BatchOrder` (a permutation per epoch plus a saved cursor). ``train_state.pt``
holds weights, EMA, optimiser state and the cursor, so a run interrupted at any step boundary and
resumed with ``--resume`` produces the same parameters as an uninterrupted run. Evaluation, logging
and saving consume no training randomness.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

import numpy as np
import torch

from edge import atomic
from edge.config import ConfigError, to_dict
from edge.errors import EdgeError
from edge.training.vla.config import (  # noqa: F401 - TrainVLAConfig, warmup_cosine re-exported
    RESUME_MUTABLE,
    TRAIN_FORMAT,
    TrainVLAConfig,
    lr_at,
    warmup_cosine,
)
from edge.training.vla.data import BatchOrder, DemoSet, random_shift
from edge.training.vla.stages import VisionStages
from edge.vla import checkpoint as ckpt
from edge.vla.language import make_encoder
from edge.vla.manifest import write_manifest
from edge.vla.model import VLAConfig, VLAModel, parameter_count
from edge.vla.spec import ModelSpec

log = logging.getLogger(__name__)
class VLATrainer(VisionStages):
    """One training run writing into ``out_dir`` (see :mod:`edge.vla.checkpoint` for the files)."""

    def __init__(self, config: TrainVLAConfig, task: str, data_dir: str | Path | list[str | Path],
                 out_dir: str | Path, resume: bool = False, command: str = "", progress: bool = True,
                 init: str | Path | None = None) -> None:
        from sim.demos import dataset_hash

        self.config, self.task = config, task
        self.data_dirs = [Path(d) for d in (data_dir if isinstance(data_dir, (list, tuple)) else [data_dir])]
        self.data_dir, self.out_dir = self.data_dirs[0], Path(out_dir)
        self.command = command or " ".join(["edge", *sys.argv[1:]])
        self.progress = progress
        if config.threads:
            torch.set_num_threads(config.threads)
        state = self._read_resume_state() if resume else None
        self._check_settings(config, init, state)  # what the settings alone decide, before the data is read
        t0 = time.perf_counter()
        self.data = DemoSet.load_many(self.data_dirs, config.model.cameras, task=task,
                                      successful_only=config.successful_only,
                                      max_episodes=config.max_episodes)
        self.data_hash = dataset_hash(self.data_dirs)
        log.info("loaded %d episodes / %d frames in %.1f s", self.data.n_episodes, self.data.n_frames,
                 time.perf_counter() - t0)
        if state is not None and state["data_hash"] != self.data_hash:
            raise EdgeError(f"resume: {self.data_dir} changed since {self.out_dir} was started "
                            "(dataset hash differs); resume needs the same data, or start a new --out")
        init_payload = None
        if state is not None:
            self.init_info = state.get("init")
            if init is not None and (self.init_info or {}).get("path") != str(init):
                was = (self.init_info or {}).get("path")
                raise EdgeError(f"--init {init}: the interrupted run was started "
                                + (f"from {was}" if was else "from scratch (no --init)") + "; drop --init")
            self.spec = ModelSpec.from_dict(state["spec"])
        elif init is not None:
            init_payload, self.init_info = self._read_init(init)
            self.spec = self._extend_spec(ModelSpec.from_dict(init_payload["spec"]))
        else:
            self.init_info = None
            self.spec = self._make_spec()
        model_config = config.model
        if self.spec.scene_memory != model_config.scene_memory:
            self.spec = dataclasses.replace(self.spec, scene_memory=model_config.scene_memory)
        self.scenes, self.scenes_hash = None, None
        if config.locator_steps:
            from sim.scenes import load_scenes, scenes_hash

            try:
                self.scenes = load_scenes(list(config.scene_data), task=task, image_hw=self.spec.image_hw)
            except ValueError as err:
                raise EdgeError(f"scene_data: {err}") from None
            self.scenes_hash = scenes_hash(list(config.scene_data))
            # the locator reads instructions the demos may not have
            self.spec = self._extend_spec(self.spec, sorted(set(self.scenes["instruction"].tolist())))
        self.aux = None
        if config.aux_object_weight > 0 and self.data.aux_objects is not None:
            st = self.data.stats()
            self.aux_mean, self.aux_std = st["aux_mean"], st["aux_std"]
            self.aux = (self.data.aux_objects - self.aux_mean) / self.aux_std  # (N, 6) normalised
            model_config = dataclasses.replace(model_config, aux_outputs=self.aux.shape[1])
        elif config.aux_object_weight > 0:
            log.warning("demos have no object_pos: training without the auxiliary object loss")
        self.wrist_aux = None
        if model_config.wrist_token and self.aux is not None:
            self.wrist_aux = self._wrist_targets(self.data.aux_objects)
        if config.vision_pretrain_steps and (self.aux is None or model_config.aux_source != "front"):
            raise ConfigError("vision_pretrain_steps > 0 needs aux_object_weight > 0, demos with "
                              "object_pos and model.aux_source=front")
        parts = set(config.vision_pretrain_parts)
        if config.vision_pretrain_steps and "wrist" in parts and "front" not in parts \
                and (self.wrist_aux is None or init is None):
            raise ConfigError("vision_pretrain_parts=[wrist] re-trains the wrist head of an --init "
                              "checkpoint: it needs --init and model.wrist_token=true")
        if model_config.object_token and self.aux is None:
            raise ConfigError("model.object_token=true needs aux_object_weight > 0 and demos with "
                              "object_pos (the token is the aux head's prediction)")
        torch.manual_seed(config.seed)
        self._vision_frozen = False
        self.model = VLAModel(model_config, self.spec)
        if self.aux is not None:
            self.model.set_aux_stats(torch.from_numpy(self.aux_mean), torch.from_numpy(self.aux_std))
        if init_payload is not None:
            grown = load_grown(self.model, init_payload["state_dict"], source=f"--init {init}")
            if grown:
                log.info("--init %s: new inputs/parts start from scratch: %s", init, ", ".join(grown))
        if init_payload is not None and not config.vision_pretrain_steps:
            self._freeze_vision()  # the init checkpoint's localiser is the one to keep
        self.ema = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=config.lr,
                                     weight_decay=config.weight_decay)
        self.order = BatchOrder(self.data.n_frames, config.batch_size, config.seed)
        self.lang_table = torch.tensor(np.stack([self.spec.instruction_embeddings[t]
                                                 for t in self.data.instructions]), dtype=torch.float32)
        mean, std = self.spec.action_stats()
        self._action_mean, self._action_std = mean, std
        self.step, self.wall_s, self.history, self.evals, self.resumed_at = 0, 0.0, [], [], []
        self.pretrain: dict[str, Any] | None = None  # vision pre-training record, once done
        self.locator_record: dict[str, Any] | None = None  # scene locator training record, once done
        self.scene_memory: np.ndarray | None = None  # (N, 6) per frame: its episode's scene memory
        if model_config.scene_memory and not config.locator_steps:
            if init_payload is not None and not any(k.startswith("locator.") for k in init_payload["state_dict"]):
                raise ConfigError(f"--init {init} has no scene locator; set locator_steps and scene_data")
            self._freeze_locator()
        if state is not None:
            self._load_state(state)
            if self._steps_changed is not None:  # after every refusal: only a resume that goes ahead warns
                log.warning("resume with steps %s -> %s: the LR schedule changes length, so the result differs "
                            "from an uninterrupted %s-step run", *self._steps_changed, self._steps_changed[1])

    # --- setup -------------------------------------------------------------------------------------
    def _make_spec(self) -> ModelSpec:
        encoder = make_encoder(self.config.language_encoder)
        emb = encoder.encode(self.data.instructions)
        s = self.data.stats()
        meta, m = self.data.meta, self.config.model
        h, w = self.data.images["front"].shape[1:3]
        return ModelSpec(
            task=self.task, action_layout=_layout(meta["action_layout"]),
            proprio_layout=_layout(meta["proprio_layout"]), action_dim=int(self.data.action.shape[1]),
            proprio_dim=int(self.data.proprio.shape[1]), control_rate_hz=float(meta["control_rate_hz"]),
            chunk_len=m.chunk_len, cameras=tuple(m.cameras), image_hw=(int(h), int(w)),
            feature_dim=m.d_model, lang_encoder_id=encoder.id, lang_dim=encoder.dim,
            action_mean=tuple(map(float, s["action_mean"])), action_std=tuple(map(float, s["action_std"])),
            proprio_mean=tuple(map(float, s["proprio_mean"])),
            proprio_std=tuple(map(float, s["proprio_std"])),
            instruction_embeddings={t: tuple(map(float, e)) for t, e in zip(self.data.instructions, emb)},
        )

    def _wrist_targets(self, objects: np.ndarray) -> np.ndarray:
        """(N, 6) world object positions -> their offsets from the TCP in its frame, decimetres."""
        from edge.vla.model import TCP_QUAT, hand_frame_offsets

        layout = list(self.spec.proprio_layout)
        missing = [n for n in ("tcp_x_m", "tcp_y_m", "tcp_z_m", *TCP_QUAT) if n not in layout]
        if missing:
            raise ConfigError(f"model.wrist_token=true needs {missing} in the demos' proprio layout")
        p = torch.from_numpy(self.data.proprio)
        tcp = p[:, [layout.index(n) for n in ("tcp_x_m", "tcp_y_m", "tcp_z_m")]]
        quat = p[:, [layout.index(n) for n in TCP_QUAT]]
        return hand_frame_offsets(torch.from_numpy(objects), tcp, quat).numpy().astype(np.float32)

    def _read_init(self, init: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """Warm start: a trained checkpoint's weights *and* its spec (normalisation statistics), so
        fine-tuning on more data keeps the input/output scaling the weights were trained with."""
        from edge.config import from_dict
        from edge.export import sha256_file

        path = ckpt.resolve(init)
        payload = ckpt.read_payload(path)
        spec = ModelSpec.from_dict(payload["spec"])
        stored = to_dict(from_dict(VLAConfig, payload["config"]))
        wanted = to_dict(self.config.model)
        # aux_*: training-only; wrist_token may be switched on for a fine-tune (a grown input)
        training_only = ("aux_outputs", "aux_source", "wrist_token", "scene_memory", "scene_memory_moved",
                         "locator_channels")
        diff = sorted(k for k in wanted if k not in training_only and stored.get(k) != wanted[k])
        if diff:
            raise EdgeError(f"--init {path}: architecture differs from this run's model settings: "
                            + ", ".join(f"model.{k}: {stored.get(k)!r} (checkpoint) vs {wanted[k]!r}"
                                        for k in diff) + "; use the checkpoint's settings")
        if spec.task != self.task:
            raise EdgeError(f"--init {path}: trained for task {spec.task!r}, not {self.task!r}")
        meta = self.data.meta
        spec.check_robot(control_rate_hz=float(meta["control_rate_hz"]), action_layout=meta["action_layout"],
                         proprio_layout=meta["proprio_layout"], source=f"--init {path}")
        manifest_path = path.parent / ckpt.MANIFEST_FILE
        command, parent = None, None
        if manifest_path.is_file():
            import json

            manifest = json.loads(manifest_path.read_text())
            command, parent = manifest.get("command"), manifest.get("init")
        # ``init`` nests the init checkpoint's own init: the whole chain of commands, stage by stage
        return payload, {"path": str(init), "sha256": sha256_file(path),
                         "step": payload.get("extra", {}).get("step"), "command": command, "init": parent}

    def _extend_spec(self, spec: ModelSpec, texts: list[str] | None = None) -> ModelSpec:
        """Add cached embeddings for instructions (default: the data's) the spec has not seen."""
        new = [t for t in (self.data.instructions if texts is None else texts)
               if t not in spec.instruction_embeddings]
        if not new:
            return spec
        emb = make_encoder(spec.lang_encoder_id).encode(new)
        table = dict(spec.instruction_embeddings)
        table.update({t: tuple(map(float, e)) for t, e in zip(new, emb)})
        return dataclasses.replace(spec, instruction_embeddings=table)

    @staticmethod
    def _check_settings(config: TrainVLAConfig, init: Any, state: Any) -> None:
        """Refuse settings that need no data to be refused."""
        if config.vision_freeze and not config.vision_pretrain_steps and init is None and state is None:
            raise ConfigError("vision_freeze=true needs vision_pretrain_steps > 0 or --init (a trained "
                              "localiser to keep)")
        parts = set(config.vision_pretrain_parts)
        if not parts or parts - {"front", "wrist"}:
            raise ConfigError(f"vision_pretrain_parts={list(config.vision_pretrain_parts)!r}: choose "
                              "from 'front' and 'wrist' (at least one)")
        if config.vision_pretrain_steps and "wrist" in parts and "front" not in parts and init is None:
            raise ConfigError("vision_pretrain_parts=[wrist] re-trains the wrist head of an --init "
                              "checkpoint: it needs --init and model.wrist_token=true")
        if config.model.scene_memory and not config.locator_steps and init is None and state is None:
            raise ConfigError("model.scene_memory=true needs a scene locator: set locator_steps "
                              "and scene_data, or --init a checkpoint that has one")

    def _read_resume_state(self) -> dict[str, Any]:
        path = self.out_dir / ckpt.TRAIN_STATE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"--resume: no {ckpt.TRAIN_STATE_FILE} in {self.out_dir}; "
                                    "start without --resume")
        atomic.verify_torch_file(path, flag="--resume:")
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("format") != TRAIN_FORMAT:
            raise EdgeError(f"{path} is not a VLA training state")
        saved, now = state["config"], to_dict(self.config)
        changed = sorted(k for k in now if k not in RESUME_MUTABLE and saved.get(k) != now[k])
        if changed:
            raise EdgeError("--resume: settings differ from the interrupted run: "
                            + ", ".join(f"{k}: {saved.get(k)!r} -> {now[k]!r}" for k in changed)
                            + ". Resume with the original settings or start a new --out")
        if now["steps"] < int(state["step"]):
            raise EdgeError(f"--steps {now['steps']}: {self.out_dir} has trained {int(state['step'])} steps already; "
                            f"resume with --steps {int(state['step'])} or more (a larger number extends the run)")
        self._steps_changed = (saved["steps"], now["steps"]) if saved["steps"] != now["steps"] else None
        return state

    def _load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.ema.load_state_dict(state["ema"])
        self.opt.load_state_dict(state["optimizer"])
        self.order.load_state_dict(state["order"])
        self.step, self.wall_s = int(state["step"]), float(state["wall_s"])
        self.history, self.evals = list(state["history"]), list(state["evals"])
        self.pretrain = state.get("pretrain")
        if self.pretrain is not None or self.init_info is not None:
            self._freeze_vision()
        self.locator_record = state.get("locator")
        if self.locator_record is not None:
            self._freeze_locator()
        self.resumed_at = list(state["resumed_at"]) + [self.step]
        log.info("resumed %s at step %d", self.out_dir, self.step)

    # --- one optimiser step ----------------------------------------------------------------------------
    def _shift(self, camera: str) -> int:
        """Random-shift pixels for ``camera`` (0 where ``shift_cameras`` leaves it out)."""
        return self.config.shift_px if camera in self.config.shift_cameras else 0

    def _batch(self, gen: torch.Generator) -> tuple[Any, ...]:
        idx = self.order.next()
        images = {cam: random_shift(torch.from_numpy(self.data.images[cam][idx]), self._shift(cam), gen)
                  for cam in self.config.model.cameras}
        actions, mask = self.data.chunks(idx, self.config.model.chunk_len)
        actions = (actions - self._action_mean) / self._action_std
        return (images, torch.from_numpy(self.data.proprio[idx]),
                self.lang_table[torch.from_numpy(self.data.instruction_index[idx])],
                torch.from_numpy(actions.astype(np.float32)), torch.from_numpy(mask), idx)

    def train_step(self) -> float:
        c = self.config
        gen = torch.Generator().manual_seed(c.seed * 1_000_003 + self.step)
        images, proprio, lang, actions, mask, idx = self._batch(gen)
        n = c.flow_samples * actions.shape[0]
        noise = torch.randn((n, *actions.shape[1:]), generator=gen)
        t = torch.rand((n,), generator=gen)
        for group in self.opt.param_groups:
            group["lr"] = lr_at(c, self.step)
        self.model.train()
        scene = None if self.scene_memory is None else torch.from_numpy(self.scene_memory[idx])
        features, aux_input = self.model.encode_with_aux_input(images, proprio, lang, scene)
        loss = self.model.flow_loss(features, actions, mask, noise, t)
        if self.aux is not None and not self._vision_frozen:
            target = torch.from_numpy(self.aux[idx])
            loss = loss + c.aux_object_weight * torch.nn.functional.mse_loss(
                self.model.aux_head(aux_input), target)
            if self.wrist_aux is not None:
                wrist = self.model.locate_from_wrist(images["wrist"], lang)
                loss = loss + c.aux_object_weight * torch.nn.functional.mse_loss(
                    wrist, torch.from_numpy(self.wrist_aux[idx]))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if c.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip)
        self.opt.step()
        decay = min(c.ema_decay, (1 + self.step) / (10 + self.step))
        with torch.no_grad():
            for e, p in zip(self.ema.parameters(), self.model.parameters()):
                e.lerp_(p, 1.0 - decay)
        self.step += 1
        return float(loss.detach())

    # --- the run -----------------------------------------------------------------------------------------
    def param_summary(self) -> dict[str, int]:
        return param_summary(self.model)

    def run(self, stop_at: int | None = None) -> dict[str, Any]:
        """Train to ``config.steps`` (or stop after step ``stop_at``, saving resume state)."""
        from tqdm import tqdm

        c = self.config
        end = c.steps if stop_at is None else min(stop_at, c.steps)
        window: list[float] = []
        t_run = time.perf_counter()
        if c.locator_steps and self.locator_record is None and self.step == 0:
            self._train_locator()  # an interruption in here restarts it on --resume (minutes)
            self._save(time.perf_counter() - t_run)
        if c.vision_pretrain_steps and self.pretrain is None and self.step == 0:
            self._pretrain_vision()  # an interruption in here restarts it on --resume (minutes)
            self._save(time.perf_counter() - t_run)
        if self.model.locator is not None and self.scene_memory is None:
            self.scene_memory = self._episode_scene_memory()
        bar = tqdm(total=c.steps, initial=self.step, disable=not self.progress, unit="step",
                   desc="train vla", mininterval=1.0, dynamic_ncols=True)
        with _StopAtStepBoundary() as stop:
            while self.step < end and not stop.requested:
                window.append(self.train_step())
                bar.update(1)
                if self.step % c.log_every_steps == 0 or self.step == end:
                    self.history.append({"step": self.step, "loss": float(np.mean(window)),
                                         "lr": lr_at(c, self.step - 1)})
                    bar.set_postfix(loss=f"{np.mean(window):.4f}")
                    window = []
                if c.eval_every_steps and self.step % c.eval_every_steps == 0 and self.step < c.steps:
                    self._evaluate(bar)
                if self.step % c.save_every_steps == 0 and self.step < end:
                    self._save(time.perf_counter() - t_run)
        if stop.requested:
            self._save(time.perf_counter() - t_run)
            bar.close()
            print(f"saved step {self.step} to {self.out_dir}; continue with --resume", file=sys.stderr)
            raise KeyboardInterrupt
        bar.close()
        manifest = self._save(time.perf_counter() - t_run)  # a failing evaluation loses no training
        if self.step >= c.steps and c.eval_episodes:
            self._evaluate(None)
            manifest = self._save(time.perf_counter() - t_run)
        return manifest

    def _evaluate(self, bar: Any) -> None:
        from edge.backends.torch_backend import TorchBackend
        from edge.training.vla.rollout import evaluate, sim_unavailable_reason
        from edge.vla_policy import VLAPolicy

        c = self.config
        if c.eval_episodes == 0:
            return
        reason = sim_unavailable_reason()
        if reason:
            if not any(e.get("skipped") for e in self.evals):
                log.warning("skipping evaluation in sim: %s", reason)
            self.evals.append({"step": self.step, "skipped": reason})
            return
        policy = VLAPolicy(TorchBackend(self.ema))
        result = evaluate(policy, self.task, c.eval_sim, c.eval_episodes, c.eval_num_steps,
                          c.eval_execute, c.eval_seed, c.eval_max_steps)
        result["step"] = self.step
        self.evals.append(result)
        msg = (f"eval step {self.step}: success {result['successes']}/{result['episodes']} "
               f"(K={c.eval_num_steps}, C={c.eval_execute}, {c.eval_sim})")
        (bar.write if bar is not None else log.info)(msg)

    def _save(self, run_s: float) -> dict[str, Any]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        wall = self.wall_s + run_s
        state = {
            "format": TRAIN_FORMAT, "step": self.step, "wall_s": wall,
            "model": self.model.state_dict(), "ema": self.ema.state_dict(),
            "optimizer": self.opt.state_dict(), "order": self.order.state_dict(),
            "config": to_dict(self.config), "spec": self.spec.to_dict(), "data_hash": self.data_hash,
            "history": self.history, "evals": self.evals, "resumed_at": self.resumed_at,
            "init": self.init_info, "pretrain": self.pretrain, "locator": self.locator_record,
        }
        atomic.write_torch(self.out_dir / ckpt.TRAIN_STATE_FILE, state)
        model_path = ckpt.save_model(self.out_dir / ckpt.MODEL_FILE, self.ema,
                                     extra={"step": self.step, "weights": "ema"})
        return write_manifest(self, model_path, wall)


class _StopAtStepBoundary:
    """First Ctrl-C: finish the current step, then stop (so the saved state resumes exactly);
    a second Ctrl-C interrupts at once. Only installs a handler on the main thread."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nstopping after this step (Ctrl-C again to abort now)", file=sys.stderr)

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def load_grown(model: torch.nn.Module, state: dict[str, torch.Tensor], source: str) -> list[str]:
    """Load ``state`` into ``model`` where the model has grown since: parameters it lacks keep their
    fresh initialisation, and a weight matrix with more input columns gets the old columns and zeros
    in the new ones (a new input starts switched off, so the loaded network computes what it did).
    Anything else that does not fit is an error. Returns what was not loaded as-is."""
    own = model.state_dict()
    unexpected = sorted(set(state) - set(own))
    if unexpected:
        raise EdgeError(f"{source}: weights do not fit this architecture (unexpected: {unexpected})")
    grown, merged = [], {}
    for key, value in own.items():
        old = state.get(key)
        if old is None:
            grown.append(f"{key} (new)")
            merged[key] = value
        elif old.shape == value.shape:
            merged[key] = old
        elif old.dim() == 2 and value.dim() == 2 and old.shape[0] == value.shape[0] \
                and old.shape[1] < value.shape[1]:
            new = torch.zeros_like(value)
            new[:, : old.shape[1]] = old
            merged[key] = new
            grown.append(f"{key} ({old.shape[1]} -> {value.shape[1]} inputs)")
        else:
            raise EdgeError(f"{source}: weights do not fit this architecture ({key}: "
                            f"{tuple(old.shape)} in the checkpoint, {tuple(value.shape)} here)")
    model.load_state_dict(merged)
    return grown


def _layout(value: Any) -> str | tuple[str, ...]:
    return value if isinstance(value, str) else tuple(str(v) for v in value)


def param_summary(model: VLAModel) -> dict[str, int]:
    return {"total": parameter_count(model), "vision": parameter_count(model.trunks),
            "action_expert": parameter_count(model.expert)}
