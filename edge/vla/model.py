"""The reference VLA: a vision-language prefix computed once per query + a flow-matching action expert.

Same split as pi0 / SmolVLA / GR00T, at a size that trains on a 2-core CPU::

    images (B, H_img, W_img, 3) uint8 ─┐  ConvTrunk per camera, FiLM-conditioned on the instruction
    proprio (B, P) raw float32 ────────┼─ normalised in-graph, MLP
    instruction embedding (B, L) ──────┘  frozen sentence encoder output (cached), projected
                     └── fuse MLP ──▶ features (B, D)            = encode(): once per query
    x (B, H, Da) at flow time t (B,) + features ──▶ velocity (B, H, Da)  = denoise_step(): 1 NFE

Flow convention (see edge.contracts): x_t = t * x_clean + (1 - t) * noise, t: 0 -> 1, target velocity
x_clean - noise, Euler integration. Actions are normalised with the spec's mean/std.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from edge.config import ConfigError, cfg, check_fields
from edge.vla.action_expert import ActionExpert
from edge.vla.spec import ModelSpec
from edge.vla.vision import ConvTrunk, SceneLocator

CAMERAS = ("front", "wrist")


@dataclass(frozen=True)
class VLAConfig:
    """Architecture of the reference VLA (sizes only; data-derived facts live in ModelSpec)."""

    chunk_len: int = cfg(16, "H: actions per chunk (20 Hz control -> 0.8 s)", range=(1, 256))
    cameras: tuple[str, ...] = cfg(("front",), "image inputs; add 'wrist' if the demos have it",
                                   choices=CAMERAS)
    conv_channels: tuple[int, ...] = cfg((16, 32, 64), "channels of the strided stem, then of each "
                                         "FiLM stage; each halves the resolution (96 -> 48 -> 24 "
                                         "-> 12)", range=(4, 1024))
    keypoints: int = cfg(32, "spatial-softmax keypoints per camera", range=(1, 512))
    d_model: int = cfg(128, "width of the features and of the action expert (D)", range=(16, 2048))
    d_lang: int = cfg(64, "projected instruction width (also the FiLM condition)", range=(8, 1024))
    d_proprio: int = cfg(64, "proprio MLP width", range=(8, 1024))
    expert_layers: int = cfg(3, "transformer blocks in the action expert", range=(1, 32))
    expert_heads: int = cfg(4, "attention heads in the action expert", range=(1, 32))
    mlp_ratio: float = cfg(2.0, "expert MLP hidden width / d_model", range=(1.0, 8.0))
    aux_outputs: int = cfg(0, "training-only head predicting object positions from the features "
                           "(set by the trainer; exported only as part of object_token)", range=(0, 64))
    aux_source: str = cfg("fused", "what the training-only aux head reads: the fused prefix features, "
                          "or the front camera trunk's own output (then only pixels can answer it: "
                          "the fused features let it lean on proprio)", choices=("fused", "front"))
    object_token: bool = cfg(False, "feed the aux head's object positions (read from the front camera "
                             "trunk, gradient stopped) to the fused features, with their offsets "
                             "from the TCP when proprio has tcp_x_m/tcp_y_m/tcp_z_m: an explicit "
                             "'where is the block' input, so the expert need not infer it from "
                             "the arm's own motion (needs aux_outputs > 0 and aux_source=front)")
    wrist_token: bool = cfg(False, "the wrist camera trunk also predicts each task object's offset "
                            "from the TCP in the hand's frame (gradient stopped, trained by the "
                            "localisation loss); rotated to the world frame with the proprio TCP "
                            "quaternion and added to the object token. Near the grasp the hand hides "
                            "the block from the front camera, but the wrist camera still sees it "
                            "(needs object_token, cameras with 'wrist', and tcp_* in the proprio)")
    scene_memory: bool = cfg(False, "the object token's base-block position comes from a scene "
                             "locator run once per episode, on the first query's front frame (arm "
                             "at home, nothing hidden), instead of from the current frame, where "
                             "the carried block and the hand hide the base (measured: 1.6 cm off "
                             "in failed carries). The base stays put until the block is on it. "
                             "The encoder then takes a 'scene' input, which the runtime policy "
                             "fills and keeps per episode (needs object_token)")
    scene_memory_moved: bool = cfg(False, "the object token also gets the block to move at its "
                                   "remembered first-frame position (and its offset from the TCP), "
                                   "beside the front head's per-frame estimate (the block lies still "
                                   "until the grasp, when the hand hides it from the front camera). "
                                   "Needs scene_memory")
    locator_channels: tuple[int, ...] = cfg((16, 32, 64), "channels of the scene locator's trunk "
                                            "(as conv_channels)", range=(4, 1024))
    ignore_proprio: tuple[str, ...] = cfg((), "proprio entries the network never sees (zeroed after "
                                          "normalisation). Joint velocities invite a copycat shortcut: "
                                          "open-loop the policy continues the demo's motion from qd "
                                          "instead of looking, and fails in closed loop")

    def __post_init__(self) -> None:
        check_fields(self)
        if "front" not in self.cameras:
            raise ConfigError(f"cameras={list(self.cameras)!r} must include 'front'")
        if self.object_token and self.aux_source != "front":
            raise ConfigError("object_token=true needs aux_source=front (the token must come from "
                              "pixels, not from features that already contain it)")
        if self.scene_memory and not self.object_token:
            raise ConfigError("scene_memory=true needs object_token=true (memory feeds the token)")
        if self.scene_memory_moved and not self.scene_memory:
            raise ConfigError("scene_memory_moved=true needs scene_memory=true")
        if self.wrist_token and (not self.object_token or "wrist" not in self.cameras):
            raise ConfigError("wrist_token=true needs object_token=true and 'wrist' in cameras")
        if self.d_model % self.expert_heads:
            raise ConfigError(f"d_model={self.d_model} must be divisible by "
                              f"expert_heads={self.expert_heads}")


class VLAModel(nn.Module):
    """The trainable network. Inputs/outputs are torch tensors; see module docstring for shapes."""

    def __init__(self, config: VLAConfig, spec: ModelSpec) -> None:
        super().__init__()
        if spec.chunk_len != config.chunk_len or tuple(spec.cameras) != tuple(config.cameras):
            raise ValueError("spec and config disagree on chunk_len or cameras")
        if spec.scene_memory != config.scene_memory:
            raise ValueError(f"spec.scene_memory={spec.scene_memory} but model.scene_memory="
                             f"{config.scene_memory}")
        self.config, self.spec = config, spec
        d = config.d_model
        self.register_buffer("proprio_mean", torch.tensor(spec.proprio_mean, dtype=torch.float32))
        self.register_buffer("proprio_std", torch.tensor(spec.proprio_std, dtype=torch.float32))
        layout = tuple(spec.proprio_layout) if not isinstance(spec.proprio_layout, str) else ()
        unknown = sorted(set(config.ignore_proprio) - set(layout))
        if unknown:
            raise ValueError(f"model.ignore_proprio names {unknown} not in the proprio layout {list(layout)}")
        keep = [0.0 if name in config.ignore_proprio else 1.0 for name in layout] or [1.0] * spec.proprio_dim
        self.register_buffer("proprio_keep", torch.tensor(keep, dtype=torch.float32), persistent=False)
        self.lang_proj = nn.Sequential(nn.Linear(spec.lang_dim, config.d_lang), nn.SiLU())
        self.trunks = nn.ModuleDict({
            cam: ConvTrunk(spec.image_hw, config.conv_channels, config.keypoints, config.d_lang, d)
            for cam in config.cameras
        })
        self.proprio_mlp = nn.Sequential(nn.Linear(spec.proprio_dim, config.d_proprio), nn.SiLU(),
                                         nn.Linear(config.d_proprio, config.d_proprio))
        fused = d * len(config.cameras) + config.d_proprio + config.d_lang
        self.token_proj = None
        if config.object_token:
            fused += self._init_object_token(config, spec, layout)
        self.fuse = nn.Sequential(nn.Linear(fused, d), nn.SiLU(), nn.Linear(d, d))
        self.expert = ActionExpert(spec.action_dim, config.chunk_len, d, config.expert_layers,
                                   config.expert_heads, config.mlp_ratio)
        # Auxiliary supervision for the prefix: where the task's objects are (training only). It
        # teaches the image trunk to localise the named blocks far sooner than the action loss alone.
        self.aux_head = nn.Linear(d, config.aux_outputs) if config.aux_outputs else None
        # The same objects seen from the hand: offsets from the TCP in the TCP frame, in decimetres.
        self.wrist_head = nn.Linear(d, config.aux_outputs) if config.wrist_token else None
        # Once per episode: where the objects are, from the first frame (see VLAConfig.scene_memory).
        self.locator = (SceneLocator(spec.image_hw, config.locator_channels, spec.lang_dim)
                        if config.scene_memory else None)

    def _init_object_token(self, config: VLAConfig, spec: ModelSpec, layout: tuple[str, ...]) -> int:
        """Buffers and projection of the object token; returns its width in the fused vector."""
        n = config.aux_outputs
        if n == 0 or n % 3:
            raise ValueError(f"object_token needs aux_outputs = 3 x objects (got {n}); train with "
                             "aux_object_weight > 0 on demos that have object_pos")
        # de-normalisation of the aux head (metres); set by the trainer from its data, saved with the weights
        self.register_buffer("aux_mean", torch.zeros(n))
        self.register_buffer("aux_std", torch.ones(n))
        tcp = ("tcp_x_m", "tcp_y_m", "tcp_z_m")
        self._tcp_index = [layout.index(name) for name in tcp] if set(tcp) <= set(layout) else None
        width = n * (2 if self._tcp_index is not None else 1)
        self._quat_index = None
        if config.wrist_token:
            if self._tcp_index is None or not set(TCP_QUAT) <= set(layout):
                raise ValueError("wrist_token needs tcp_x_m/tcp_y_m/tcp_z_m and "
                                 f"{'/'.join(TCP_QUAT)} in the proprio layout")
            self._quat_index = [layout.index(name) for name in TCP_QUAT]
            width += n
        if config.scene_memory_moved:  # the moved block's memory (normalised) and its offset from the TCP
            width += 3 * (2 if self._tcp_index is not None else 1)
        self.token_proj = nn.Sequential(nn.Linear(width, config.d_proprio), nn.SiLU())
        return config.d_proprio

    def set_aux_stats(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Metres = aux output * std + mean (the object token needs metres to relate them to the TCP)."""
        if self.token_proj is not None:
            self.aux_mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
            self.aux_std.copy_(torch.as_tensor(std, dtype=torch.float32))

    def _object_token(self, front: torch.Tensor, proprio: torch.Tensor,
                      wrist: torch.Tensor | None = None, scene: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted object positions (gradient stopped: the aux loss alone trains them) and, when the
        proprio has the TCP position, each object's offset from the TCP in decimetres. With scene
        memory, the base block's entries are the episode's remembered position (``scene``, metres);
        with ``scene_memory_moved`` the moved block's remembered position and offset are appended."""
        pred = self.aux_head(front).detach()  # (B, n) normalised
        moved = None
        if scene is not None:
            base = (scene[:, 3:6].to(self.aux_mean.dtype) - self.aux_mean[3:6]) / self.aux_std[3:6]
            pred = torch.cat([pred[:, :3], base.to(pred.dtype), pred[:, 6:]], dim=-1)
            if self.config.scene_memory_moved:
                moved = scene[:, 0:3].float()
        parts = [pred]
        tcp = proprio.float()[:, self._tcp_index] if self._tcp_index is not None else None
        if tcp is not None:
            metres = pred.float() * self.aux_std + self.aux_mean
            rel = (metres.view(metres.shape[0], -1, 3) - tcp[:, None, :]) * 10.0
            parts.append(rel.flatten(1).to(pred.dtype))
        if wrist is not None and self.wrist_head is not None:
            local = self.wrist_head(wrist).detach().float()  # (B, n) hand frame, decimetres
            parts.append(hand_to_world(local, proprio.float()[:, self._quat_index]).to(pred.dtype))
        if moved is not None:
            parts.append(((moved - self.aux_mean[0:3]) / self.aux_std[0:3]).to(pred.dtype))
            if tcp is not None:
                parts.append(((moved - tcp) * 10.0).to(pred.dtype))
        return self.token_proj(torch.cat(parts, dim=-1))

    @property
    def input_names(self) -> tuple[str, ...]:
        """Encoder inputs in export order."""
        return self.spec.encoder_inputs

    def encode(self, images: dict[str, torch.Tensor], proprio: torch.Tensor,
               lang: torch.Tensor, scene: torch.Tensor | None = None) -> torch.Tensor:
        """images[cam] (B, H_img, W_img, 3) uint8, proprio (B, P) raw, lang (B, L) -> (B, D).
        ``scene`` (B, 6) metres: :meth:`locate_scene` on the episode's first frame (scene memory only)."""
        return self.encode_with_aux_input(images, proprio, lang, scene)[0]

    def locate_scene(self, front_u8: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
        """The scene locator: first front frame (B, H, W, 3) uint8, (B, L) -> (B, 6) metres."""
        if self.locator is None:
            raise ValueError("this model has no scene locator (model.scene_memory=false)")
        return self.locator(front_u8, lang)

    def encode_with_aux_input(self, images: dict[str, torch.Tensor], proprio: torch.Tensor,
                              lang: torch.Tensor, scene: torch.Tensor | None = None
                              ) -> tuple[torch.Tensor, torch.Tensor]:
        """As :meth:`encode`, plus what the aux head reads (see ``VLAConfig.aux_source``)."""
        if (scene is None) != (self.locator is None):
            raise ValueError("scene memory: pass scene (B, 6) exactly when model.scene_memory=true "
                             f"(it is {self.locator is not None})")
        dtype = self.fuse[0].weight.dtype
        cond = self.lang_proj(lang.to(dtype))  # (B, d_lang)
        p = ((proprio.float() - self.proprio_mean) / self.proprio_std * self.proprio_keep).to(dtype)
        parts = [self.trunks[cam](images[cam], cond) for cam in self.config.cameras]
        front = parts[self.config.cameras.index("front")]
        parts += [self.proprio_mlp(p), cond]
        if self.token_proj is not None:
            wrist = parts[self.config.cameras.index("wrist")] if self.wrist_head is not None else None
            parts.append(self._object_token(front, proprio, wrist, scene))
        features = self.fuse(torch.cat(parts, dim=-1))
        return features, (front if self.config.aux_source == "front" else features)

    def locate_objects(self, front_u8: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
        """The object head on the front camera alone: (B, H, W, 3) uint8, (B, L) -> (B, aux_outputs),
        normalised (metres = out * aux std + aux mean). What vision pre-training trains."""
        return self.aux_head(self.trunks["front"](front_u8, self.lang_proj(lang.to(self.fuse[0].weight.dtype))))

    def locate_from_wrist(self, wrist_u8: torch.Tensor, lang: torch.Tensor) -> torch.Tensor:
        """The wrist head: (B, H, W, 3) uint8, (B, L) -> (B, aux_outputs), each object's offset from
        the TCP in the TCP frame, decimetres (see :func:`hand_frame_offsets`)."""
        cond = self.lang_proj(lang.to(self.fuse[0].weight.dtype))
        return self.wrist_head(self.trunks["wrist"](wrist_u8, cond))

    def denoise_step(self, x: torch.Tensor, t: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """x (B, H, Da) normalised, t (B,) in [0, 1], features (B, D) -> velocity (B, H, Da)."""
        return self.expert(x, t, features)

    def flow_loss(self, features: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor,
                  noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Rectified-flow loss, masked over padded chunk steps.

        features (B, D); actions (B, H, Da) normalised; mask (B, H) 1 = real step; noise (N*B, H, Da)
        and t (N*B,) for N flow samples per observation (the prefix is shared, which makes extra
        samples cheap: the expert is small next to the image trunk).
        """
        reps = noise.shape[0] // actions.shape[0]
        x1 = actions.repeat(reps, 1, 1)
        m = mask.repeat(reps, 1)[..., None]
        x_t = t[:, None, None] * x1 + (1.0 - t[:, None, None]) * noise
        v = self.denoise_step(x_t, t, features.repeat(reps, 1))
        err = F.mse_loss(v.float(), x1 - noise, reduction="none") * m
        return err.sum() / (m.sum() * actions.shape[-1]).clamp_min(1.0)


TCP_QUAT = ("tcp_qw", "tcp_qx", "tcp_qy", "tcp_qz")


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """(B, 4) quaternions w, x, y, z (normalised here) -> (B, 3, 3) rotation matrices."""
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    w, x, y, z = q.unbind(-1)
    rows = [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]
    return torch.stack(rows, dim=-1).view(-1, 3, 3)


def hand_frame_offsets(objects: torch.Tensor, tcp: torch.Tensor, quat: torch.Tensor) -> torch.Tensor:
    """World object positions (B, 3k), TCP position (B, 3) and quaternion (B, 4) -> each object's
    offset from the TCP in the TCP frame, decimetres (B, 3k): the wrist head's training target."""
    rot = quat_to_matrix(quat)
    rel = objects.view(objects.shape[0], -1, 3) - tcp[:, None, :]
    return (torch.einsum("bji,boj->boi", rot, rel) * 10.0).flatten(1)


def hand_to_world(local: torch.Tensor, quat: torch.Tensor) -> torch.Tensor:
    """The inverse rotation of :func:`hand_frame_offsets`: offsets (B, 3k) in the TCP frame and the
    TCP quaternion (B, 4) -> the same offsets in the world frame (B, 3k), same units."""
    rot = quat_to_matrix(quat)
    return torch.einsum("bij,boj->boi", rot, local.view(local.shape[0], -1, 3)).flatten(1)


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
