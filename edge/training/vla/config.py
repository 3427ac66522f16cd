"""``edge train vla`` settings: :class:`TrainVLAConfig` (every knob, documented; YAML presets in
``configs/train/vla_*.yaml``) and the learning-rate schedule."""

from __future__ import annotations

import math
from dataclasses import dataclass

from edge.config import ConfigError, cfg, check_fields
from edge.vla.language import HASH_ID, MINILM_ID
from edge.vla.model import CAMERAS, VLAConfig

TRAIN_FORMAT = "edge-vla-train"
HELDOUT_SCENES = 20  # evaluation scenes for the localisation check after vision pre-training
# Settings that may change between an interrupted run and its resume without changing the result
# (except ``steps``, which stretches the LR schedule and is reported).
RESUME_MUTABLE = {"steps", "save_every_steps", "log_every_steps", "threads", "eval_every_steps",
                  "eval_episodes", "eval_sim", "eval_num_steps", "eval_execute", "eval_max_steps",
                  "eval_seed"}


@dataclass(frozen=True)
class TrainVLAConfig:
    """``edge train vla`` settings (YAML presets in configs/train/vla_*.yaml)."""

    model: VLAConfig = cfg(default_factory=VLAConfig, help="architecture (see VLAConfig)")  # noqa: RUF009
    steps: int = cfg(8000, "optimiser steps", range=(1, 10_000_000))
    batch_size: int = cfg(64, "observations per step", range=(1, 4096))
    flow_samples: int = cfg(2, "noise/time draws per observation (the prefix is shared)", range=(1, 64))
    lr: float = cfg(3e-4, "peak learning rate (AdamW)", range=(1e-7, 1.0))
    min_lr_ratio: float = cfg(0.1, "final / peak learning rate of the cosine decay", range=(0.0, 1.0))
    warmup_steps: int = cfg(500, "linear learning-rate warm-up", range=(0, 1_000_000))
    weight_decay: float = cfg(1e-4, "AdamW weight decay", range=(0.0, 1.0))
    grad_clip: float = cfg(1.0, "max gradient norm (0 = off)", range=(0.0, 1e6))
    ema_decay: float = cfg(0.999, "EMA decay of the deployed weights", range=(0.0, 1.0))
    aux_object_weight: float = cfg(0.5, "weight of the auxiliary object-position loss (uses the "
                                   "demos' privileged object_pos; 0 = off)", range=(0.0, 100.0))
    vision_pretrain_steps: int = cfg(0, "before the policy, train the front camera trunk (with the "
                                     "instruction projection and the aux head) alone to localise "
                                     "the task's objects on frames before the lift, where only "
                                     "pixels can answer; 0 = off. Needs aux_object_weight > 0 and "
                                     "model.aux_source=front", range=(0, 10_000_000))
    vision_pretrain_lr: float = cfg(1e-3, "peak learning rate of the vision pre-training (cosine, "
                                    "100-step warm-up)", range=(1e-7, 1.0))
    vision_pretrain_base_after_lift: bool = cfg(False, "vision pre-training also teaches the "
                                                "base-block outputs on frames after the lift (the "
                                                "moved block's outputs stay pre-lift only): the base "
                                                "stays put, so only pixels can place it, and the "
                                                "policy needs it while it carries the block there "
                                                "(measured without: 3.1 cm off during the carry)")
    vision_pretrain_parts: tuple[str, ...] = cfg(("front", "wrist"), "what the vision pre-training "
                                                 "trains: 'front' (front trunk, instruction projection, "
                                                 "aux head) and/or 'wrist' (wrist trunk and head, "
                                                 "model.wrist_token). ['wrist'] re-trains the hand's "
                                                 "view alone from an --init, the rest untouched: e.g. "
                                                 "on DAgger data, where the policy's own grasps hold "
                                                 "the block off-centre and the in-hand offset varies")
    vision_freeze: bool = cfg(False, "after vision pre-training, freeze the front trunk, the "
                              "instruction projection and the aux head: the flow loss then cannot "
                              "trade the localisation away (measured: it does, from 2 to 5-9 cm)")
    scene_data: tuple[str, ...] = cfg((), "scene datasets (`edge data scenes`) the scene locator "
                                      "learns from (model.scene_memory)")
    locator_steps: int = cfg(0, "before the policy, train the scene locator on scene_data for this "
                             "many steps, then freeze it; 0 = keep the --init checkpoint's "
                             "locator", range=(0, 10_000_000))
    locator_lr: float = cfg(1e-3, "peak learning rate of the locator training (cosine, 200-step "
                            "warm-up)", range=(1e-7, 1.0))
    shift_px: int = cfg(4, "random-shift augmentation, pixels each way", range=(0, 32))
    shift_cameras: tuple[str, ...] = cfg(("front", "wrist"), "cameras that get the random shift. "
                                         "Leave 'front' out when it feeds the object token: a shift of "
                                         "a fixed camera moves every object in the image, so the "
                                         "localiser learns shift-blurred positions and the policy "
                                         "learns a token that is wrong by up to shift_px pixels",
                                         choices=CAMERAS)
    seed: int = cfg(0, "seed of init, data order, augmentation and flow noise", range=(0, 2**31 - 1))
    successful_only: bool = cfg(True, "train on successful demonstrations only")
    max_episodes: int = cfg(0, "use at most this many episodes (0 = all)", range=(0, 10_000_000))
    language_encoder: str = cfg("auto", "frozen sentence encoder (auto = MiniLM if installed)",
                                choices=("auto", MINILM_ID, HASH_ID))
    threads: int = cfg(0, "torch threads (0 = torch's default)", range=(0, 256))
    save_every_steps: int = cfg(500, "write checkpoint + resume state every N steps", range=(1, 10**9))
    log_every_steps: int = cfg(50, "loss logging period", range=(1, 10**9))
    eval_every_steps: int = cfg(0, "evaluate in sim every N steps (0 = only at the end)",
                                range=(0, 10**9))
    eval_episodes: int = cfg(10, "sim episodes per evaluation (0 = no evaluation)", range=(0, 100_000))
    eval_sim: str = cfg("mujoco", "simulator for evaluation", choices=("mujoco", "pybullet"))
    eval_num_steps: int = cfg(10, "denoising steps K during evaluation", range=(1, 1000))
    eval_execute: int = cfg(8, "actions executed per query C during evaluation", range=(1, 256))
    eval_max_steps: int = cfg(400, "control steps per evaluation episode", range=(1, 100_000))
    eval_seed: int = cfg(1_000_000, "env seed of the first evaluation episode (disjoint from demos)",
                         range=(0, 2**31 - 1))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.locator_steps and not (self.model.scene_memory and self.scene_data):
            raise ConfigError("locator_steps > 0 needs model.scene_memory=true and scene_data "
                              "(directories written by `edge data scenes`)")
        if self.eval_execute > self.model.chunk_len:
            raise ConfigError(f"eval_execute={self.eval_execute} exceeds model.chunk_len="
                              f"{self.model.chunk_len}")


def lr_at(config: TrainVLAConfig, step: int) -> float:
    return warmup_cosine(config.lr, step, config.steps, config.warmup_steps, config.min_lr_ratio)


def warmup_cosine(peak: float, step: int, steps: int, warmup: int, min_ratio: float) -> float:
    """Learning rate at ``step`` (0-based) of ``steps``: linear warm-up over ``warmup`` steps (0 =
    none), then cosine decay from ``peak`` to ``min_ratio * peak``."""
    warm = min(1.0, (step + 1) / warmup) if warmup else 1.0
    progress = min(step / max(steps, 1), 1.0)
    return peak * warm * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
