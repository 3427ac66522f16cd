"""The VLA as a runtime policy: observations in, action chunks out, on any backend.

Implements :class:`edge.contracts.DenoisingPolicy` (single query, unbatched) on top of an
:class:`edge.backends.base.Backend` (batched, numpy). Observations are either
:class:`edge.contracts.Observation` or the sim env's dict ``{"front": ..., "proprio": ...,
"instruction": ...}``. Instructions are embedded through the checkpoint's cache; unseen text loads
the checkpoint's sentence encoder on first use.

Example::

    policy = load_policy("checkpoints/vla_stack", BackendConfig(name="onnxruntime"), robot=robot)
    policy.reset()                                              # new episode (scene memory)
    feats = policy.encode(obs)                                  # (D,), once per query
    actions = policy.sample(feats, noise=None, num_steps=4)     # (H, Da) float32, physical units

A model with scene memory (``spec.scene_memory``) localises the task objects once per episode, on the
first :meth:`VLAPolicy.encode` after :meth:`VLAPolicy.reset`, and feeds that to every later query of
the episode: call ``reset()`` whenever a new episode (a new scene) starts.

Output contract (un-normalisation + clip, as LeRobot's ``unnormalize`` followed by the action-space
clip): the model was trained on gripper commands in ``[0, 1]`` (0 = open .. 1 = closed, what the
demonstrations record), so :meth:`VLAPolicy.to_actions` and :meth:`VLAPolicy.sample` clip the
``gripper`` dimension to :data:`GRIPPER_RANGE` after un-normalising. A flow sample lands slightly
outside it (e.g. -0.0009 for "open"); that is the model's numerics, not a command the safety layer
should have to correct, so it is post-processed here and counted (:meth:`VLAPolicy.clip_counts`:
how many gripper outputs were clipped and by how much). No other dimension is touched: every other
limit stays the safety supervisor's, and what it corrects is counted as a real intervention.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge.backends import Backend, BackendConfig, make_backend
from edge.errors import EdgeError
from edge.vla.language import InstructionCache
from edge.vla.spec import EE_DELTA_NAMES, layout_name

#: the gripper command range the model was trained on (0 = open .. 1 = closed): its output contract
GRIPPER_RANGE = (0.0, 1.0)


def gripper_index(action_layout: str | Sequence[str], action_dim: int) -> int | None:
    """Index of the ``gripper`` dimension in an action layout (a name or per-dimension names)."""
    if isinstance(action_layout, str):
        if action_layout == "ee_delta":
            return EE_DELTA_NAMES.index("gripper")
        return action_dim - 1 if action_layout == "joint_pos" else None
    names = list(action_layout)
    return names.index("gripper") if "gripper" in names else None


class VLAPolicy:
    """Single-query view of a backend; ``denoise_step`` works on normalised latents (see below)."""

    def __init__(self, backend: Backend, language: InstructionCache | None = None) -> None:
        spec = backend.spec
        self.backend = backend
        self.spec = spec
        self.chunk_len = spec.chunk_len
        self.action_dim = spec.action_dim
        self.control_rate_hz = spec.control_rate_hz
        self.action_layout = layout_name(spec.action_layout)  # contracts: "ee_delta" / "joint_pos"
        self.language = language or InstructionCache(spec.lang_encoder_id, spec.lang_dim,
                                                     spec.instruction_embeddings)
        self._mean, self._std = spec.action_stats()
        self.scene: np.ndarray | None = None  # (6,) scene memory of the current episode
        self.gripper_dim = gripper_index(spec.action_layout, spec.action_dim)
        self.source: dict[str, Any] = {}  # where the weights came from (load_policy fills it)
        self._clip = {"outputs": 0, "clipped": 0, "max_abs": 0.0, "sum_abs": 0.0}

    # --- what runs ---------------------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        """The backend and where it runs, e.g. ``onnxruntime[CPUExecutionProvider]``, ``torch[cpu]``
        (what the inference worker writes into every query record)."""
        d = self.backend.describe()
        where = d.get("providers") or ([d["device"]] if d.get("device") else [])
        return f"{d.get('name', self.backend.name)}[{','.join(map(str, where))}]"

    def describe(self) -> dict[str, Any]:
        """Policy kind, checkpoint (path, sha256 of ``model.pt``), backend, spec essentials and the
        output post-processing: what a run directory's ``meta.json`` records as ``policy``."""
        spec = self.spec
        return {
            "kind": "vla", **self.source, "backend_name": self.backend_name,
            "backend": self.backend.describe(), "task": spec.task, "cameras": list(spec.cameras),
            "image_hw": list(spec.image_hw), "chunk_len": spec.chunk_len, "action_dim": spec.action_dim,
            "action_layout": self.action_layout, "control_rate_hz": spec.control_rate_hz,
            "lang_encoder_id": spec.lang_encoder_id, "scene_memory": spec.scene_memory,
            "output_clip": (None if self.gripper_dim is None
                            else {"dim": self.gripper_dim, "name": "gripper", "range": list(GRIPPER_RANGE)}),
        }

    def clip_counts(self, reset: bool = False) -> dict[str, float]:
        """Gripper outputs produced (``outputs``, one per chunk action), how many were clipped to
        :data:`GRIPPER_RANGE` (``clipped``), the largest and the summed clip (``max_abs``,
        ``sum_abs``), since the last ``reset=True`` call (the runtime resets per episode)."""
        out = dict(self._clip)
        if reset:
            self._clip = {"outputs": 0, "clipped": 0, "max_abs": 0.0, "sum_abs": 0.0}
        return out

    def _postprocess(self, actions: np.ndarray) -> np.ndarray:
        """Physical actions (..., H, Da) -> the same, gripper clipped to the model's range (counted)."""
        g = self.gripper_dim
        if g is None:
            return actions
        col = actions[..., g]
        clipped = np.clip(col, *GRIPPER_RANGE)
        delta = np.abs(col - clipped)
        n = int(np.count_nonzero(delta))
        c = self._clip
        c["outputs"] += int(col.size)
        if n:
            c["clipped"] += n
            c["max_abs"] = max(c["max_abs"], float(delta.max()))
            c["sum_abs"] += float(delta.sum())
            actions[..., g] = clipped
        return actions

    def reset(self, obs: Any = None) -> None:
        """A new episode starts: forget the scene memory. With ``obs`` (the episode's first
        observation) a scene-memory model localises now; otherwise at the next :meth:`encode`."""
        self.scene = None
        if obs is not None and self.spec.scene_memory:
            self.scene = self._locate(self.inputs([obs]))[0]

    def _locate(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Encoder inputs of B observations -> the scene locator's output (B, 6) on their front frames."""
        return self.backend.locate({"front": inputs["front"], "lang": inputs["lang"]})

    # --- observations ------------------------------------------------------------------------------
    def inputs(self, observations: Sequence[Any]) -> dict[str, np.ndarray]:
        """Batch of observations -> encoder inputs (images uint8, raw proprio, instruction embedding)."""
        images: dict[str, list[np.ndarray]] = {cam: [] for cam in self.spec.cameras}
        proprio, texts = [], []
        for obs in observations:
            if isinstance(obs, Mapping):
                cams, p, text = obs, obs["proprio"], obs["instruction"]
            else:  # edge.contracts.Observation
                cams, p, text = obs.images, obs.proprio, obs.instruction
            for cam in self.spec.cameras:
                if cam not in cams:
                    raise EdgeError(f"observation has no {cam!r} image; this model needs "
                                    f"{list(self.spec.cameras)}")
                images[cam].append(np.asarray(cams[cam]))
            proprio.append(np.asarray(p, np.float32))
            texts.append(str(text))
        out = {cam: np.stack(v) for cam, v in images.items()}
        out["proprio"] = np.stack(proprio)
        out["lang"] = self.language(texts)
        return out

    def encode(self, obs: Any) -> np.ndarray:
        """One observation -> features (D,) float32 (vision + language prefix, once per query).
        With scene memory, the first call after :meth:`reset` also localises the scene."""
        inputs = self.inputs([obs])
        if self.spec.scene_memory:
            if self.scene is None:
                self.scene = self._locate(inputs)[0]
            inputs["scene"] = self.scene[None]
        return self.backend.encode(inputs)[0]

    def encode_batch(self, observations: Sequence[Any], scenes: np.ndarray | None = None) -> np.ndarray:
        """B observations -> features (B, D). With scene memory, ``scenes`` (B, 6) are the rows'
        episode memories; None treats every observation as its episode's first frame. Does not
        touch this policy's own memory."""
        inputs = self.inputs(observations)
        if self.spec.scene_memory:
            inputs["scene"] = self._locate(inputs) if scenes is None else np.asarray(scenes, np.float32)
        return self.backend.encode(inputs)

    # --- sampling ----------------------------------------------------------------------------------
    def draw_noise(self) -> np.ndarray:
        """Standard-normal initial latent (H, Da) float32 from the backend's seeded generator."""
        return self.backend.draw_noise(1)[0]

    def sample(self, features: np.ndarray, noise: np.ndarray | None = None,
               num_steps: int = 10) -> np.ndarray:
        """features (D,), noise (H, Da) normalised latent or None, K >= 1 -> actions (H, Da),
        physical units, gripper clipped to :data:`GRIPPER_RANGE` (the output contract, see above)."""
        f = np.asarray(features, np.float32).reshape(1, -1)
        n = None if noise is None else np.asarray(noise, np.float32)[None]
        return self._postprocess(np.array(self.backend.sample(f, n, num_steps)[0], np.float32))

    def velocity(self, features: np.ndarray, x: np.ndarray, tau: float) -> np.ndarray:
        """One network evaluation: normalised latent x (H, Da) at flow time tau -> velocity (H, Da)."""
        f = np.asarray(features, np.float32).reshape(1, -1)
        return self.backend.denoise_step(np.asarray(x, np.float32)[None], tau, f)[0]

    def denoise_step(self, features: np.ndarray, x: np.ndarray, tau: float, dtau: float) -> np.ndarray:
        """One Euler step of the flow in **normalised** units: x (H, Da) at tau -> x at tau + dtau.

        Start from standard-normal noise at tau = 0; after the last step (tau = 1) call
        :meth:`to_actions` to get physical actions. ``sample`` does exactly this loop.
        """
        x = np.asarray(x, np.float32)
        return (x + np.float32(dtau) * self.velocity(features, x, tau)).astype(np.float32)

    def to_actions(self, x: np.ndarray) -> np.ndarray:
        """Normalised latent (..., H, Da) -> physical actions (float32): un-normalise, then clip the
        gripper to :data:`GRIPPER_RANGE` (the model's output contract; counted, see :meth:`clip_counts`)."""
        return self._postprocess((np.asarray(x, np.float32) * self._std + self._mean).astype(np.float32))

    def to_latent(self, actions: np.ndarray) -> np.ndarray:
        """Physical actions (..., H, Da) -> normalised latent (for inpainting / guidance)."""
        return ((np.asarray(actions, np.float32) - self._mean) / self._std).astype(np.float32)


def load_policy(path: str | Path, backend: BackendConfig | str = "torch", robot: Any = None,
                language_device: str = "cpu", verify: bool = True) -> VLAPolicy:
    """Checkpoint (dir or model.pt) or ONNX export dir -> ready policy, checked against ``robot``.
    ``verify``: the files must match the sha256 hashes recorded with them (:mod:`edge.vla.verify`)."""
    b = make_backend(backend, path, robot=robot, verify=verify)
    spec = b.spec
    lang = InstructionCache(spec.lang_encoder_id, spec.lang_dim, spec.instruction_embeddings,
                            device=language_device)
    policy = VLAPolicy(b, lang)
    policy.source = checkpoint_source(path)
    return policy


def checkpoint_source(path: str | Path) -> dict[str, Any]:
    """What a policy was loaded from: ``checkpoint`` (the path given), ``model_sha256`` (of the
    ``model.pt`` read, or the one an ONNX export was made from, per its metadata.json) and, for an
    export directory, ``export``."""
    from edge.vla.verify import METADATA_FILE
    from edge.vla.verify import sha256_file

    p = Path(path)
    if p.is_dir() and (p / METADATA_FILE).is_file():
        import json

        meta = json.loads((p / METADATA_FILE).read_text())
        return {"checkpoint": str(path), "export": str(p), "model_sha256": meta.get("checkpoint_sha256"),
                "source_checkpoint": meta.get("source_checkpoint")}
    model = p / "model.pt" if p.is_dir() else p  # = edge.vla.checkpoint.resolve (which imports torch)
    return {"checkpoint": str(path), "model_pt": str(model),
            "model_sha256": sha256_file(model) if model.is_file() else None}
