"""The backend interface: run a trained VLA's encoder and denoising step, and integrate the flow.

Every backend (torch, ONNX Runtime, TensorRT) implements three private primitives on its native
arrays; this base class owns the public, numpy-in / numpy-out API and the one sampling loop, so all
backends integrate identically:

* ``encode(inputs) -> features (B, D)``: once per query. ``inputs`` maps the spec's input names to
  arrays: one uint8 ``(B, H_img, W_img, 3)`` per camera, ``"proprio"`` raw ``(B, P)`` float32 and
  ``"lang"`` ``(B, L)`` float32 (from :class:`edge.vla.language.InstructionCache`).
* ``denoise_step(x, t, features) -> velocity (B, H, Da)``: one function evaluation (1 NFE), on
  normalised actions ``x`` at flow time ``t`` (0 = noise, 1 = clean).
* ``sample(features, noise=None, num_steps=K) -> actions (B, H, Da)`` in physical units: Euler from
  ``noise`` (normalised latent, N(0, I)) with ``K`` equal steps; ``K`` may be one int or one per row.

The integration state stays float32 whatever precision the network runs in: reduced-precision
accumulation across steps is a known source of wrong actions in deployed VLAs, so each velocity is
cast to float32 before ``x += dt * v``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from edge.errors import EdgeError
from edge.vla.spec import ModelSpec


class BackendUnavailable(EdgeError):
    """The requested backend (or its hardware) is not available here; the message lists what is."""


def steps_per_row(num_steps: int | Sequence[int] | np.ndarray, batch: int) -> np.ndarray:
    """K as one int or one per row -> (B,) int64, each >= 1."""
    ks = np.asarray(num_steps)
    if ks.ndim == 0:
        ks = np.full(batch, int(ks))
    if ks.shape != (batch,) or not np.issubdtype(ks.dtype, np.integer):
        raise EdgeError(f"num_steps must be an int or {batch} ints (one per row), got {num_steps!r}")
    if np.any(ks < 1):
        raise EdgeError(f"num_steps must be >= 1, got {ks.tolist()}")
    return ks.astype(np.int64)


def euler_schedule(ks: np.ndarray) -> tuple[np.ndarray, list[tuple[int, np.ndarray, np.ndarray]]]:
    """Per-row K (B,) -> ``(order, steps)`` for a device-side Euler loop over fixed buffers.

    ``order`` sorts the rows by K, largest first (stable), so after sorting the rows still
    integrating at step i are always the first ``n_i``; ``steps[i] = (n_i, t, dt)`` with ``t`` and
    ``dt`` float32 ``(n_i,)`` holding exactly the values :meth:`Backend.sample` uses (``i / K``,
    ``1 / K``). A loop that runs the network on ``buffer[:n_i]`` of the sorted batch and un-sorts at
    the end (``out[order] = sorted_out``) therefore integrates like :meth:`Backend.sample`.
    """
    ks = np.asarray(ks, np.int64)
    order = np.argsort(-ks, kind="stable")
    ks_sorted = ks[order]
    steps = []
    for i in range(int(ks.max()) if ks.size else 0):
        n = int(np.count_nonzero(ks_sorted > i))
        steps.append((n, (i / ks_sorted[:n]).astype(np.float32),
                      (1.0 / ks_sorted[:n]).astype(np.float32)))
    return order, steps


class Backend(ABC):
    """Common API of all inference backends. Public arrays are numpy float32 (images uint8)."""

    name: str = "base"

    def __init__(self, spec: ModelSpec, device: str = "cpu", seed: int = 0) -> None:
        self.spec = spec
        self.device = device
        self._rng = np.random.default_rng(seed)
        mean, std = spec.action_stats()
        self._action_mean, self._action_std = mean, std

    # --- native primitives implemented by each backend -------------------------------------------
    @abstractmethod
    def _encode(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Validated inputs -> features (B, D) float32 numpy."""

    @abstractmethod
    def _to_native(self, a: np.ndarray) -> Any:
        """numpy float32/int64 -> the backend's array type (on its device)."""

    @abstractmethod
    def _to_numpy(self, a: Any) -> np.ndarray: ...

    @abstractmethod
    def _step(self, x: Any, t: Any, features: Any) -> Any:
        """Native x (b, H, Da) f32, t (b,) f32, features (b, D) -> velocity (b, H, Da) **float32**."""

    # --- public API ------------------------------------------------------------------------------
    @property
    def input_names(self) -> tuple[str, ...]:
        return self.spec.encoder_inputs

    def _locate(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Validated {"front", "lang"} -> scene (B, 6) float32 metres (scene-memory models only)."""
        raise EdgeError(f"the {self.name} backend cannot run a scene locator")

    def locate(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """{"front": (B, H, W, 3) uint8, "lang": (B, L)} -> where the task objects are, (B, 6)
        metres: the scene-memory input of :meth:`encode`, computed once per episode."""
        if not self.spec.scene_memory:
            raise EdgeError("this model has no scene memory (spec.scene_memory is false): encode "
                            "takes no 'scene' input and there is no locator to run")
        checked = self._check_inputs(inputs, names=("front", "lang"))
        return np.asarray(self._locate(checked), np.float32)

    def describe(self) -> dict[str, Any]:
        """Name, device and settings, for logs and benchmark records."""
        return {"name": self.name, "device": self.device}

    def encode(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """inputs (see module docstring) -> features (B, D) float32."""
        return self._encode(self._check_inputs(inputs))

    def denoise_step(self, x: np.ndarray, t: float | np.ndarray, features: np.ndarray) -> np.ndarray:
        """x (B, H, Da) normalised, t scalar or (B,), features (B, D) -> velocity (B, H, Da) float32."""
        feats = self._check_features(features)
        x = self._check_latent(x, feats.shape[0], "x")
        t_arr = np.broadcast_to(np.asarray(t, np.float32), (feats.shape[0],)).copy()
        v = self._step(self._to_native(x), self._to_native(t_arr), self._to_native(feats))
        return self._to_numpy(v)

    def draw_noise(self, batch: int) -> np.ndarray:
        """Standard-normal latent (B, H, Da) float32 from this backend's seeded generator."""
        shape = (batch, self.spec.chunk_len, self.spec.action_dim)
        return self._rng.standard_normal(shape, dtype=np.float32)

    def sample(self, features: np.ndarray, noise: np.ndarray | None = None,
               num_steps: int | Sequence[int] | np.ndarray = 10) -> np.ndarray:
        """features (B, D), noise (B, H, Da) or None, K int or (B,) -> actions (B, H, Da) float32.

        Row b takes ``num_steps[b]`` Euler steps of size 1/K_b from t = 0 to 1; rows that are done
        are left out of later network calls (the step graphs take any batch size).
        """
        feats = self._check_features(features)
        batch = feats.shape[0]
        ks = steps_per_row(num_steps, batch)
        x0 = self.draw_noise(batch) if noise is None else self._check_latent(noise, batch, "noise")
        x = self._to_native(np.array(x0, dtype=np.float32, copy=True))
        f = self._to_native(feats)
        for i in range(int(ks.max())):
            rows = np.nonzero(ks > i)[0]
            t = (i / ks[rows]).astype(np.float32)
            dt = (1.0 / ks[rows]).astype(np.float32)[:, None, None]
            if len(rows) == batch:
                x = x + self._to_native(dt) * self._step(x, self._to_native(t), f)
            else:
                idx = self._to_native(rows)
                x[idx] = x[idx] + self._to_native(dt) * self._step(x[idx], self._to_native(t), f[idx])
        return self._to_numpy(x) * self._action_std + self._action_mean

    def warmup(self, batch: int = 1, num_steps: int = 2) -> None:
        """Run every graph once on zeros (first calls allocate, compile or build engines)."""
        h, w = self.spec.image_hw
        inputs = {cam: np.zeros((batch, h, w, 3), np.uint8) for cam in self.spec.cameras}
        inputs["proprio"] = np.asarray(self.spec.proprio_mean, np.float32)[None].repeat(batch, 0)
        inputs["lang"] = np.zeros((batch, self.spec.lang_dim), np.float32)
        if self.spec.scene_memory:
            inputs["scene"] = self.locate({"front": inputs["front"], "lang": inputs["lang"]})
        self.sample(self.encode(inputs), num_steps=num_steps)

    # --- validation (cheap; bad shapes should fail here, not deep inside a graph) ---------------
    def _check_inputs(self, inputs: Mapping[str, np.ndarray],
                      names: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
        names = self.input_names if names is None else names
        missing = [n for n in names if n not in inputs]
        extra = sorted(set(inputs) - set(names))
        if missing or extra:
            raise EdgeError(f"encoder inputs: missing {missing}, unexpected {extra}; "
                            f"this model takes {list(names)}")
        out: dict[str, np.ndarray] = {}
        batch = None
        h, w = self.spec.image_hw
        expect = {cam: ((h, w, 3), np.uint8) for cam in self.spec.cameras}
        expect["proprio"] = ((self.spec.proprio_dim,), np.float32)
        expect["lang"] = ((self.spec.lang_dim,), np.float32)
        expect["scene"] = ((6,), np.float32)
        for name in names:
            a = np.asarray(inputs[name])
            shape, dtype = expect[name]
            if a.shape[1:] != shape or (dtype == np.uint8 and a.dtype != np.uint8):
                raise EdgeError(f"encoder input {name!r}: got {a.dtype} {a.shape}, expected "
                                f"{np.dtype(dtype).name} (B, {', '.join(map(str, shape))})")
            if batch is None:
                batch = a.shape[0]
            elif a.shape[0] != batch:
                raise EdgeError(f"encoder input {name!r} has batch {a.shape[0]}, others {batch}")
            out[name] = np.ascontiguousarray(a, dtype=dtype)
        return out

    def _check_features(self, features: np.ndarray) -> np.ndarray:
        f = np.asarray(features, np.float32)
        if f.ndim != 2 or f.shape[1] != self.spec.feature_dim:
            raise EdgeError(f"features must be (B, {self.spec.feature_dim}), got {f.shape}")
        return f

    def _check_latent(self, x: np.ndarray, batch: int, what: str) -> np.ndarray:
        shape = (batch, self.spec.chunk_len, self.spec.action_dim)
        a = np.asarray(x, np.float32)
        if a.shape != shape:
            raise EdgeError(f"{what} must be {shape} (B, H, Da), got {a.shape}")
        return a
