"""Slot-encoder pretraining: frames from the object task (random or object-play actions), then offline autoencoder training.

Commands (run from the repository root)::

    python -m world_models.slot_pretrain collect --frames 30000 --seed 1 --out runs/slots/data_train.npz
    python -m world_models.slot_pretrain collect --frames 2000 --seed 2 --out runs/slots/data_eval.npz
    python -m world_models.slot_pretrain train --data runs/slots/data_train.npz \
        --eval-data runs/slots/data_eval.npz --out runs/slots/enc --steps 8000 --batch-size 8 --seq-len 4
    python -m world_models.slot_pretrain export --weights runs/slots/enc/weights_004000.pt \
        --data runs/slots/data_train.npz --eval-data runs/slots/data_eval.npz --out runs/slots/enc_4000

``collect --policy play`` pushes randomly chosen cubes about (:class:`world_models.scripted.ObjectPlay`)
instead of taking uniform random actions, which move a cube in few frames.

``--seq-len 4`` trains on windows of 4 consecutive frames with temporal initialisation, as the
tracker runs at rollout time; with ``--seq-len 1`` (single frames) the slots are only ever trained
from the learned init and reconstruct worse when carried over an episode.

A dataset is one compressed ``.npz``: ``frames`` (N, S, S, 3) uint8, ``seg`` (N, S, S) int16,
``episode`` (N,) int32, ``step`` (N,) int16 (0 = the reset frame), ``action`` (N,) int8 (the action
taken after the frame, -1 on an episode's last frame) and ``meta`` (a JSON string: task, seed,
sizes and ``data_hash``, the sha256 of the arrays above).

Training writes into ``--out``: ``train_state.pt`` (model, optimizer, step, RNG; re-running the same
command continues from it; ``edge train slot-encoder`` does so with ``--resume``), ``log.jsonl`` (loss per ``log_every`` steps, evaluations), and at the end
``metrics.json``, ``encoder.pt`` and ``manifest.json`` (:func:`world_models.slot_encoder.save_encoder`).
With ``--keep-every N`` it also keeps the weights every N steps (``weights_<step>.pt``), which
``export`` turns into a verified encoder directory.
The evaluation runs the encoder over held-out episodes with temporal initialisation and reports
FG-ARI and the identity rate (:mod:`world_models.slot_metrics`) for both the slot-attention masks and
the decoder's alpha masks.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pickle
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edge import atomic

ARRAYS = ("frames", "seg", "episode", "step", "action")


def _progress(total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="frame", mininterval=2.0)


def data_hash(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the dataset arrays (name, dtype, shape and bytes, in :data:`ARRAYS` order)."""
    h = hashlib.sha256()
    for name in ARRAYS:
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.data)
    return h.hexdigest()


# ---------------------------------------------------------------------- collection
def collect_frames(n_frames: int, seed: int, out_path: str | Path, task: str = "push3", episode_len: int = 40,
                   *, image_size: int = 64, progress: bool = True, policy: str = "random", eps: float = 0.2,
                   play_segment: float = 20.0, depth: bool = False) -> dict:
    """Roll out a policy and save ``n_frames`` frames with segmentation; returns ``meta``.

    ``policy``: ``"random"`` (uniform random actions) or ``"play"`` (:class:`world_models.scripted.ObjectPlay`
    with ε = ``eps`` and mean segment ``play_segment``: cubes get pushed about, the goal is not read).
    Both draw from the one generator seeded with ``seed``; a random-policy dataset is unchanged by
    the option (same arrays, same ``data_hash``). ``depth``: RGB-D frames (S, S, 4)
    (:class:`world_models.object_env.ObjectTaskConfig` ``depth``); the same seed gives the same RGB
    channels and actions as without it."""
    from world_models.object_env import N_ACTIONS, ObjectTaskConfig, ObjectTaskEnv
    from world_models.scripted import ObjectPlay

    if n_frames < 1 or episode_len < 2:
        raise ValueError(f"need n_frames >= 1 and episode_len >= 2, got {n_frames} and {episode_len}")
    if policy not in ("random", "play"):
        raise ValueError(f"policy={policy!r}: choose 'random' or 'play'")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cfg = ObjectTaskConfig(task=task, image_size=image_size, segmentation=True, max_steps=max(episode_len, 1),
                           depth=depth)
    rng = np.random.default_rng(seed)
    play = ObjectPlay(rng, eps, play_segment) if policy == "play" else None  # validates eps and play_segment
    s = image_size
    arrays = {"frames": np.zeros((n_frames, s, s, 4 if depth else 3), np.uint8), "seg": np.zeros((n_frames, s, s), np.int16),
              "episode": np.zeros(n_frames, np.int32), "step": np.zeros(n_frames, np.int16),
              "action": np.full(n_frames, -1, np.int8)}
    bar = _progress(n_frames, f"collect {out_path.name}") if progress else None
    env = ObjectTaskEnv(cfg)
    n, episode, t0 = 0, 0, time.monotonic()
    try:
        while n < n_frames:
            obs, _ = env.reset(seed=int(rng.integers(2**31 - 1)))
            if play is not None:  # a fresh player per episode: the scene's cubes change with each reset
                play = ObjectPlay(rng, eps, play_segment)
            terminated = False
            for t in range(episode_len):
                arrays["frames"][n], arrays["seg"][n] = obs["frame"], obs["seg"]
                arrays["episode"][n], arrays["step"][n] = episode, t
                n += 1
                if bar is not None:
                    bar.update(1)
                elif progress and n % 1000 == 0:
                    print(f"collect: {n}/{n_frames} frames, {n / (time.monotonic() - t0):.0f} frames/s", flush=True)
                if n == n_frames or t == episode_len - 1 or terminated:
                    break
                action = int(rng.integers(N_ACTIONS)) if play is None else play.action(env)
                obs, _, terminated, _, _ = env.step(action)  # success ends the episode after its frame
                arrays["action"][n - 1] = action
            episode += 1
    finally:
        env.close()
        if bar is not None:
            bar.close()
    meta = {"task": task, "seed": seed, "image_size": image_size, "episode_len": episode_len,
            "n_frames": n_frames, "n_episodes": episode, "data_hash": data_hash(arrays),
            **({} if play is None else {"policy": "play", "eps": float(eps), "play_segment": float(play_segment)}),
            **({} if not depth else {"depth": {"near_m": cfg.depth_near_m, "far_m": cfg.depth_far_m,
                                               "clipped_px": int(env.depth_clipped)}}),
            "collect_s": round(time.monotonic() - t0, 1)}
    atomic.write_with(out_path, lambda f: np.savez_compressed(f, **arrays, meta=np.array(json.dumps(meta))))
    return meta


def dataset_meta(path: str | Path) -> dict:
    """The ``meta`` of a collected dataset, without reading (or verifying) its arrays."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no slot dataset at {path} (collect one with `slot_pretrain collect`)")
    with np.load(path, allow_pickle=False) as z:
        if "meta" not in z.files:
            raise ValueError(f"{path} is not a slot dataset: no meta")
        return json.loads(str(z["meta"]))


def depth_encoding(meta: dict) -> dict:
    """``{"depth": {"near_m", "far_m"}}`` for an RGB-D dataset's meta (how its fourth channel maps
    depth; recorded in an encoder's manifest), ``{}`` for an RGB one."""
    d = meta.get("depth")
    return {"depth": {"near_m": d["near_m"], "far_m": d["far_m"]}} if d else {}


def load_dataset(path: str | Path, verify: bool = True) -> tuple[dict[str, np.ndarray], dict]:
    """Arrays and ``meta`` of a collected dataset; ``verify`` recomputes ``data_hash``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no slot dataset at {path} (collect one with `slot_pretrain collect`)")
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in (*ARRAYS, "meta") if k not in z.files]
        if missing:
            raise ValueError(f"{path} is not a slot dataset: missing arrays {missing}")
        arrays = {k: z[k] for k in ARRAYS}
        meta = json.loads(str(z["meta"]))
    if verify and data_hash(arrays) != meta["data_hash"]:
        raise ValueError(f"{path}: arrays do not match the data_hash recorded in its meta")
    return arrays, meta


# ---------------------------------------------------------------------- training helpers
def lr_at(step: int, lr: float, warmup_steps: int, half_life_steps: int) -> float:
    """Linear warmup to ``lr`` over ``warmup_steps``, then halving every ``half_life_steps``."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    return lr * 0.5 ** ((step - warmup_steps) / half_life_steps)


def window_starts(episode: np.ndarray, seq_len: int) -> np.ndarray:
    """Indices i such that frames i .. i+seq_len-1 belong to one episode."""
    n = len(episode)
    if seq_len == 1:
        return np.arange(n)
    ok = episode[: n - seq_len + 1] == episode[seq_len - 1:]
    return np.flatnonzero(ok)



def _rng_state(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state)


def _set_rng_state(rng: np.random.Generator, state: str) -> None:
    rng.bit_generator.state = json.loads(state)


def check_window(config: Any, seq_len: int) -> None:
    """Refuse losses that read windows of frames when the samples are single frames."""
    if config.motion_weight and seq_len < 2:
        raise ValueError(f"slot_encoder.motion_weight={config.motion_weight} needs windows of frames (seq_len >= 2, "
                         f"got {seq_len}): it weighs the pixels that changed since the window's previous frame")
    for key in ("predict_weight", "latent_weight"):
        if getattr(config, key) and seq_len < 2:
            raise ValueError(f"slot_encoder.{key}={getattr(config, key)} needs windows of frames (seq_len >= 2, "
                             f"got {seq_len}): it predicts each next frame's slots of a window from the previous "
                             "ones and the action")


def _save_train_state(path: Path, model, opt, step: int, rng: np.random.Generator, settings: dict,
                      predictor=None) -> None:
    import torch

    atomic.write_torch(path, {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                              "numpy_rng": _rng_state(rng), "torch_rng": torch.get_rng_state(),
                              "settings": json.dumps(settings),
                              **({} if predictor is None else {"predictor": predictor.state_dict()})})


def _save_weights(path: Path, model, step: int, settings: dict, command: str) -> None:
    """The weights alone at ``step`` (read, like a ``train_state.pt``, by :func:`load_run_weights`)."""
    atomic.write_torch(path, {"model": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "step": step,
                              "settings": json.dumps(settings), "command": command})


def load_run_weights(path: str | Path, flag: str = "--weights"):
    """``(model, settings, step, command)`` from a run's ``train_state.pt`` or kept ``weights_<step>.pt``
    (``command``: the training command kept weights record, else ""): the model in eval mode on the
    CPU; ValueError naming ``flag`` and the file for anything else."""
    import torch

    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig

    atomic.verify_torch_file(path, ValueError, flag)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        settings = json.loads(state["settings"])
        settings["data_hash"]  # noqa: B018 - every run records the hash of its training data
        model = SlotAutoencoder(SlotEncoderConfig(**settings["config"]))
        model.load_state_dict(state["model"])
        step, command = int(state["step"]), str(state.get("command", ""))
    except Exception as err:  # an empty, foreign or truncated file: say which and what it should be
        raise ValueError(f"{flag} {path}: not a weights_<step>.pt or train_state.pt of a slot-encoder run "
                         f"({type(err).__name__}: {err})") from None
    return model.eval(), settings, step, command


def export_encoder(weights_path: str | Path, data_path: str | Path, out_dir: str | Path, *,
                   eval_data_path: str | Path | None = None, eval_episodes: int = 32,
                   command: str | None = None) -> dict[str, Any]:
    """A verified encoder (``encoder.pt`` + manifest) from kept weights or a ``train_state.pt``.

    ``data_path`` must be the run's training data (its hash is checked against the one the weights
    were trained on); the manifest records the training command, its seed and step, the export
    command, and the held-out metrics on ``eval_data_path``."""
    from world_models.slot_encoder import save_encoder, sha256_file

    weights_path, out = Path(weights_path), Path(out_dir)
    if not weights_path.is_file():
        raise FileNotFoundError(f"--weights {weights_path}: no such file")
    if (out / "train_state.pt").exists():
        raise ValueError(f"--out {out}: holds a training run (train_state.pt); export into another directory")
    model, settings, step, train_cmd = load_run_weights(weights_path)
    _, meta = load_dataset(data_path)
    if meta["data_hash"] != settings["data_hash"]:
        raise ValueError(f"--data {data_path}: data_hash {meta['data_hash']}, but {weights_path} was trained on "
                         f"{settings['data_hash']}; pass the run's training data")
    metrics: dict[str, Any] = {"step": step}
    if eval_data_path is not None:
        metrics.update(evaluate(model, load_dataset(eval_data_path)[0], eval_episodes))
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    export_cmd = command if command is not None else shlex.join([sys.executable, *sys.argv])
    save_encoder(model, out, command=f"{train_cmd}  # then: {export_cmd}" if train_cmd else export_cmd,
                 seed=settings["seed"], data_hash=settings["data_hash"], metrics=metrics,
                 extra={"exported_from": {"path": str(weights_path), "step": step,
                                          "sha256": sha256_file(weights_path)},
                        **({"init_from_sha256": settings["init_from_sha256"]} if "init_from_sha256" in settings
                           else {}), **depth_encoding(meta)})
    return metrics


def cut_log_after(log_path: Path, step: int) -> bool:
    """Keep the training log's rows up to ``step`` (a resumed run's checkpoint): rows a killed run logged
    after it are logged again by the resumed run, not kept twice. True if an eval row of ``step`` is kept."""
    if not log_path.is_file():
        return False
    rows = []
    for line in log_path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # the line a kill cut short
        if isinstance(row, dict) and int(row.get("step", 0)) <= step:
            rows.append(row)
    atomic.write_text(log_path, "".join(json.dumps(r) + "\n" for r in rows))
    return any(r.get("step") == step and "eval" in r for r in rows)


def _load_train_state(path: Path, settings: dict, model, opt, rng: np.random.Generator, predictor=None) -> int:
    """Restore model, optimizer, RNGs (and the predictor of ``predict_weight`` / ``latent_weight``) from
    ``path``; returns its step. The settings must match."""
    import torch

    atomic.verify_torch_file(path, ValueError)
    state = torch.load(path, map_location=model.device, weights_only=True)
    saved = json.loads(state["settings"])
    saved_cfg, cfg = saved.get("config"), settings.get("config")
    if isinstance(saved_cfg, dict) and isinstance(cfg, dict):
        # a config key added after this run was saved, at its default, changes nothing the run did
        from world_models.slot_encoder import SlotEncoderConfig

        defaults = {f.name: f.default for f in dataclasses.fields(SlotEncoderConfig)}
        saved["config"] = {**{k: v for k, v in cfg.items() if k not in saved_cfg and defaults.get(k) == v},
                           **saved_cfg}
    if saved != settings:
        if saved.get("init_from_sha256") != settings.get("init_from_sha256"):
            raise ValueError(f"{path} was started from other weights (--init-from: saved sha256 "
                             f"{saved.get('init_from_sha256')}, now {settings.get('init_from_sha256')}); "
                             "pass the --init-from it was started with, or use another --out")
        diff = {k: (saved.get(k), settings.get(k)) for k in sorted(set(saved) | set(settings))
                if saved.get(k) != settings.get(k)}
        raise ValueError(f"{path} was trained with other settings (saved, now): {diff}; "
                         "use another --out (or the same settings to resume)")
    model.load_state_dict(state["model"])
    if predictor is not None:
        predictor.load_state_dict(state["predictor"])
    opt.load_state_dict(state["optimizer"])
    _set_rng_state(rng, state["numpy_rng"])
    torch.set_rng_state(state["torch_rng"].cpu())  # a GPU run's state was mapped onto its device
    return int(state["step"])


def load_init_weights(path: str | Path, config) -> tuple[dict, dict]:
    """Weights to start a run from: a run directory (its ``train_state.pt``, else its encoder), a
    ``train_state.pt`` or an encoder's ``manifest.json``. The architecture must match ``config``; only
    the tracking rounds (``carry_iters``), the loss's ``fg_weight``, ``fg_window``, ``fg_threshold``, ``motion_weight``, ``predict_weight`` and
    ``latent_weight``, the first conv's stride
    (``first_stride``: the same weights, a finer feature map) and the decoder's resolutions
    (``decoder_res``, ``broadcast_res``: allowed while every weight keeps its shape, i.e. the same
    number of upsampling layers) may differ; ``num_slots`` may grow: the learned initialisation
    of the slots there is kept for the first slots, the new ones start from the new run's own
    initialisation (:func:`load_into`; every other weight is shared by all slots); and an RGB encoder
    (``in_channels=3``) may start an RGB-D one (4): the depth channel's input weights and its
    reconstruction row start at zero, so the grown encoder computes the same slots and masks as its
    source until training changes them (:func:`load_into`). Returns (state_dict, provenance); any
    other file is refused by name (ValueError)."""
    import torch

    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig, sha256_file

    src = Path(path)
    if src.is_dir():
        src = src / "train_state.pt" if (src / "train_state.pt").is_file() else src / "manifest.json"
    if not src.is_file():
        raise ValueError(f"--init-from {str(path)!r}: no train_state.pt or manifest.json there")
    if src.suffix != ".json":
        atomic.verify_torch_file(src, ValueError, "--init-from")
    try:
        if src.suffix == ".json":
            from world_models.slot_encoder import load_encoder

            model, manifest = load_encoder(src)  # verifies the weights' sha256
            weights, cfg = model.state_dict(), dict(manifest["config"])
            info = {"path": str(path), "sha256": manifest["sha256"], "step": manifest.get("metrics", {}).get("step")}
        else:
            state = torch.load(src, map_location="cpu", weights_only=True)
            weights, cfg = state["model"], json.loads(state["settings"])["config"]
            info = {"path": str(path), "sha256": sha256_file(src), "step": int(state["step"])}
    except (KeyError, TypeError, ValueError, RuntimeError, OSError, EOFError, pickle.UnpicklingError) as err:
        raise ValueError(f"--init-from {str(path)!r}: {src} is not a slot-encoder run or encoder "
                         f"({type(err).__name__}: {err})") from None
    defaults = {f.name: f.default for f in dataclasses.fields(SlotEncoderConfig)}
    skip = ("device", "carry_iters", "carry_prior", "fg_weight", "fg_window", "fg_threshold", "motion_weight", "predict_weight", "latent_weight",
            "first_stride", "decoder_res", "broadcast_res")
    diff = {k: (cfg.get(k, defaults.get(k)), v) for k, v in dataclasses.asdict(config).items()
            if k not in skip and cfg.get(k, defaults.get(k)) != v}
    there_slots = cfg.get("num_slots", defaults["num_slots"])
    if there_slots < config.num_slots:  # more slots: allowed (load_into); only the other keys must match
        diff.pop("num_slots")
        info["grown_slots"] = [there_slots, config.num_slots]
    if diff.get("in_channels") == (3, 4):  # an RGB encoder grown to RGB-D (load_into): a depth input and output
        diff.pop("in_channels")
        info["grown_channels"] = [3, 4]
    if diff:
        raise ValueError(f"--init-from {str(path)!r} has another architecture (there, here): {diff}")
    try:
        load_into(SlotAutoencoder(config), weights)
    except RuntimeError as err:
        raise ValueError(f"--init-from {str(path)!r}: its weights do not fit this encoder: {err}") from None
    return weights, info


def load_into(model, weights: dict) -> None:
    """``model.load_state_dict(weights)``, where ``weights`` may come from an encoder with fewer slots
    (:func:`load_init_weights`): its learned slot initialisation fills the first rows, the model keeps
    its own for the rest; or from an RGB encoder into an RGB-D one: the first convolution's depth
    input weights are zero, and the decoder's last convolution gets a depth row of zero weights and
    bias between its colour rows and its mask row (so the depth reconstruction starts at 0)."""
    key = "slot_attention.init_slots"
    own = model.state_dict()
    if key in weights and weights[key].ndim == 2 and weights[key].shape[0] < own[key].shape[0] \
            and weights[key].shape[1:] == own[key].shape[1:]:
        grown = own[key].detach().clone()
        grown[:weights[key].shape[0]] = weights[key].to(grown.device)
        weights = {**weights, key: grown}
    conv_in, last = "cnn.0.weight", f"decoder.{len(model.decoder) - 1}"
    if conv_in in weights and weights[conv_in].shape[1] == 3 and own[conv_in].shape[1] == 4:
        w_in = own[conv_in].new_zeros(own[conv_in].shape)
        w_in[:, :3] = weights[conv_in]
        w_out = own[f"{last}.weight"].new_zeros(own[f"{last}.weight"].shape)  # rows R, G, B, depth, mask
        b_out = own[f"{last}.bias"].new_zeros(own[f"{last}.bias"].shape)
        w_out[:3], w_out[4] = weights[f"{last}.weight"][:3], weights[f"{last}.weight"][3]
        b_out[:3], b_out[4] = weights[f"{last}.bias"][:3], weights[f"{last}.bias"][3]
        weights = {**weights, conv_in: w_in, f"{last}.weight": w_out, f"{last}.bias": b_out}
    model.load_state_dict(weights)  # copies under no_grad itself


def keep_slots(encoder: str | Path, slots: list[int], out_dir: str | Path, command: str = "",
               metrics_file: str | Path | None = None) -> dict:
    """An encoder with only ``slots`` (indices into the learned initialisation) of the encoder at
    ``encoder``: every other weight is shared by all slots, so the result is the same network run with
    fewer slots. Written as a verified encoder directory whose manifest names its source (path, sha256)
    and the slots kept; returns the manifest. ``metrics_file``: a ``benchmarks/slot_pool_judgements.py``
    result measured on this very encoder (its ``encoder_sha256`` must be the new weights'), whose pooled
    means become the manifest's metrics. ValueError for an index out of range, twice, fewer than 2
    slots kept, an ``out_dir`` that exists, or metrics that are not such a result or were measured on
    another encoder (nothing is left written then)."""
    import torch

    from world_models.slot_encoder import SlotAutoencoder, load_encoder, save_encoder

    out = Path(out_dir)
    if out.exists():
        raise ValueError(f"--out {out}: exists; choose a new directory")
    model, manifest = load_encoder(encoder)
    k = model.cfg.num_slots
    if len(slots) < 2 or len(set(slots)) != len(slots) or not all(0 <= s < k for s in slots):
        raise ValueError(f"--slots {','.join(map(str, slots))}: give 2..{k} distinct slot indices in 0..{k - 1} "
                         f"(the encoder has {k} slots)")
    smaller = SlotAutoencoder(dataclasses.replace(model.cfg, num_slots=len(slots))).eval()
    key = "slot_attention.init_slots"
    weights = model.state_dict()
    smaller.load_state_dict({**weights, key: weights[key][torch.as_tensor(slots)]})
    pooled = None
    if metrics_file is not None:
        try:
            pooled = json.loads(Path(metrics_file).read_text())
            want_sha, stats = str(pooled["encoder_sha256"]), pooled["pooled"]
            metrics = {name: float(v["mean"]) for name, v in stats.items()}
            metrics["episodes"] = max(int(v["episodes"]) for v in stats.values())
            seeds = [s for r in pooled.get("runs", []) for s in r.get("seeds", [])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"--metrics {metrics_file}: not a slot_pool_judgements.py result "
                             f"({type(err).__name__}: {err})") from None
    path = save_encoder(smaller, out, command=command, seed=manifest.get("seed"), data_hash=manifest.get("data_hash"),
                        extra={"kept_slots": {"source": str(encoder), "source_sha256": manifest["sha256"],
                                              "slots": list(slots), "source_num_slots": k}})
    made = json.loads(path.read_text())
    if pooled is not None:
        if want_sha != made["sha256"]:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
            raise ValueError(f"--metrics {metrics_file}: measured encoder sha256 {want_sha[:12]}…, not this one "
                             f"({made['sha256'][:12]}…); pool the judgements of the encoder these slots make")
        made["metrics"] = {**metrics, "carry_iters": pooled.get("carry_iters"), "measured_in": str(metrics_file),
                           "heldout_seeds": seeds}
        atomic.write_text(path, json.dumps(made, indent=2) + "\n")
    return made


def random_episodes(episodes: int, steps: int, seed: int, task: str = "push3", image_size: int = 64,
                    progress: bool = False) -> tuple[np.ndarray, str]:
    """(E, T, S, S, 3) frames of ``episodes`` uniform-random-policy episodes of ``steps`` frames in
    ``task`` (:func:`collect_frames` into a temporary file), and their ``data_hash``."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        meta = collect_frames(episodes * steps, seed, Path(tmp) / "frames.npz", task=task, episode_len=steps,
                              image_size=image_size, progress=progress)
        arrays, _ = load_dataset(Path(tmp) / "frames.npz")
    return arrays["frames"][episode_index(arrays["episode"], episodes)], meta["data_hash"]


def episode_index(episode: np.ndarray, max_episodes: int) -> np.ndarray:
    """(E, T) frame indices, in step order, of the first ``max_episodes`` episodes of the commonest length."""
    ids, lengths = np.unique(episode, return_counts=True)
    full = ids[lengths == np.bincount(lengths).argmax()][:max_episodes]
    return np.stack([np.flatnonzero(episode == e) for e in full])


def track_masks(model, frames: np.ndarray, decode: bool = True):
    """Track E episodes of T frames (E, T, S, S, 3) as at run time (the first frame encoded twice, every
    later one from the previous frame's slots), without gradients in eval mode. Returns attention masks
    (E, T, K, h, w), decoder masks (E, T, K, R, R) and the per-step reconstruction MSE (both None
    without ``decode``)."""
    import torch

    attn_all, dec_all, mse = [], [], []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        slots = None
        for t in range(frames.shape[1]):
            if slots is None:  # reset: encode twice, the second time from its own output
                slots, attn = model.encode_first_masks(frames[:, 0])
            else:
                slots, attn = model.encode_masks(frames[:, t], slots)
            attn_all.append(attn.cpu().numpy())
            if decode:
                recon, _, masks = model.decode(slots)
                mse.append(float(torch.mean((recon - model.target(model.prepare(frames[:, t]))) ** 2)))
                dec_all.append(masks.cpu().numpy())
    model.train(was_training)
    return np.stack(attn_all, 1), (np.stack(dec_all, 1) if decode else None), (mse if decode else None)


def evaluate(model, arrays: dict[str, np.ndarray], max_episodes: int = 32,
             per_episode: bool = False) -> dict[str, Any]:
    """Temporal rollout over held-out episodes (the most common length): FG-ARI, identity rate, MSE.
    ``per_episode``: also ``per_episode`` = {metric: one value per episode} (for intervals)."""
    from world_models.slot_metrics import fg_ari, identity_rate_from_masks

    idx = episode_index(arrays["episode"], max_episodes)
    frames, seg = arrays["frames"][idx], arrays["seg"][idx].astype(np.int32)
    attn, dec, mse = track_masks(model, frames)
    flat_seg = seg.reshape(-1, *seg.shape[2:])
    out: dict[str, Any] = {
        "fg_ari_attn": fg_ari(flat_seg, attn.reshape(-1, *attn.shape[2:])),
        "fg_ari_decoder": fg_ari(flat_seg, dec.reshape(-1, *dec.shape[2:])),
        "identity_rate_attn": identity_rate_from_masks(seg, attn),
        "identity_rate_decoder": identity_rate_from_masks(seg, dec),
        "eval_mse": float(np.mean(mse)), "eval_episodes": len(idx), "eval_frames": int(idx.size)}
    if per_episode:
        e, t = idx.shape
        out["per_episode"] = {
            **{f"fg_ari_{name}": np.nanmean(fg_ari(flat_seg, m.reshape(-1, *m.shape[2:]), per_image=True)
                                            .reshape(e, t), 1).tolist() for name, m in (("attn", attn), ("decoder", dec))},
            **{f"identity_rate_{name}": [identity_rate_from_masks(seg[i], m[i]) for i in range(e)]
               for name, m in (("attn", attn), ("decoder", dec))}}
    return out


def _check_positive(**values: float) -> None:
    for key, v in values.items():
        if not 0 < v < float("inf"):
            raise ValueError(f"slot_pretrain.{key}={v!r} is out of range; must be a finite number > 0")


def train_slot_encoder(config, data_path: str | Path, out_dir: str | Path, steps: int, batch_size: int = 32,
                       lr: float = 4e-4, seed: int = 0, resume: bool = True, *,
                       eval_data_path: str | Path | None = None, warmup_steps: int = 500,
                       half_life_steps: int = 4000, grad_clip: float = 1.0, seq_len: int = 1,
                       ckpt_every: int = 250, eval_every: int = 2000, log_every: int = 25,
                       eval_episodes: int = 32, command: str | None = None,
                       init_from: str | Path | None = None, keep_every: int = 0,
                       log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or continue training) a slot autoencoder; returns the final metrics.

    ``seq_len`` > 1 trains on windows of consecutive frames as the tracker sees them: the first
    encoded like a reset frame (twice), each next one from the previous frame's slots (gradients flow
    through the chain), the losses averaged. Without it the encoder only ever sees ``iters`` rounds
    from the learned init, and slots propagated over a long episode can drift.

    With ``config.predict_weight`` > 0 (windows only) each frame after a window's first is also
    predicted from the previous frame's slots and the action taken (:class:`SlotPredictor`, trained
    alongside and kept in ``train_state.pt`` for resuming, not in the exported encoder), decoded, and
    its loss against the frame, times ``predict_weight``, averaged over the window's transitions, is
    added; the gradient reaches the encoder through the previous frame's slots. ``config.latent_weight``
    > 0 adds the same predictor's next slots scored against the next frame's slots as encoded
    (:func:`slot_prediction_loss`, the target detached), times ``latent_weight``, averaged the same way.

    ``init_from`` starts a new run from another run's weights (fine-tuning, e.g. with fewer tracking
    rounds); the optimiser and the learning-rate schedule start afresh. It is part of the run's
    identity and is recorded in the manifest.

    ``keep_every`` > 0 also keeps the weights every that many steps as ``weights_<step>.pt`` (no
    optimiser; ``export`` makes a verified encoder of one). The learning-rate schedule does not depend
    on ``steps``, so the weights at step N are those a run of N steps ends with (bit-exact on the CPU,
    a resume included; on a GPU up to its floating-point non-determinism).
    """
    import torch

    from world_models.slot_encoder import (
        SlotAutoencoder,
        SlotPredictor,
        next_frame_loss,
        save_encoder,
        slot_prediction_loss,
    )

    _check_positive(steps=steps, batch_size=batch_size, lr=lr, warmup_steps=warmup_steps,
                    half_life_steps=half_life_steps, grad_clip=grad_clip, seq_len=seq_len,
                    ckpt_every=ckpt_every, eval_every=eval_every, log_every=log_every, eval_episodes=eval_episodes)
    if keep_every < 0:
        raise ValueError(f"keep_every={keep_every} is out of range; must be >= 0 (0: keep none)")
    check_window(config, seq_len)
    predicting = bool(config.predict_weight or config.latent_weight)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arrays, meta = load_dataset(data_path)
    eval_arrays = load_dataset(eval_data_path)[0] if eval_data_path is not None else None
    if arrays["frames"].shape[1] != config.image_size:
        raise ValueError(f"{data_path} has {arrays['frames'].shape[1]}px frames but slot_encoder.image_size="
                         f"{config.image_size}")
    for path, arr in ((data_path, arrays), (eval_data_path, eval_arrays)):
        if arr is not None and arr["frames"].shape[-1] != config.in_channels:
            have = arr["frames"].shape[-1]
            raise ValueError(f"{path} has {have}-channel frames ({'RGB-D' if have == 4 else 'RGB'}) but "
                             f"slot_encoder.in_channels={config.in_channels}; collect with{'out' if have == 4 else ''} "
                             f"--depth, or set in_channels={have}")
    starts = window_starts(arrays["episode"], seq_len)
    if len(starts) == 0:
        raise ValueError(f"{data_path} has no window of {seq_len} consecutive frames")
    if predicting:
        from world_models.object_env import N_ACTIONS

        acted = arrays["action"][starts[:, None] + np.arange(seq_len - 1)]
        bad = acted[(acted < 0) | (acted >= N_ACTIONS)]
        if bad.size:
            raise ValueError(f"{data_path}: action {int(bad[0])} inside a window of {seq_len} frames, where "
                             f"slot_encoder's predictor needs the action taken (0..{N_ACTIONS - 1}); recollect "
                             "the frames with `collect`")

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = SlotAutoencoder(config)
    predictor = SlotPredictor(config.slot_dim, N_ACTIONS).to(model.device) if predicting else None
    params = list(model.parameters()) + ([] if predictor is None else list(predictor.parameters()))
    opt = torch.optim.Adam(params, lr=lr)
    arch = {k: v for k, v in dataclasses.asdict(config).items() if k != "device"}
    settings = {"config": arch, "data_hash": meta["data_hash"], "batch_size": batch_size,
                "lr": lr, "warmup_steps": warmup_steps, "half_life_steps": half_life_steps,
                "grad_clip": grad_clip, "seq_len": seq_len, "seed": seed}
    init_info = None
    if init_from is not None:
        init_weights, init_info = load_init_weights(init_from, config)
        settings["init_from_sha256"] = init_info["sha256"]
    state_path, log_path = out / "train_state.pt", out / "log.jsonl"
    step = 0
    if resume and state_path.is_file():
        step = _load_train_state(state_path, settings, model, opt, rng, predictor)
        if steps < step:
            raise ValueError(f"--steps {steps}: {out} is at step {step} already; resume with --steps >= {step} "
                             "(a larger one trains on), or use another --out")
        log(f"resumed from {state_path} at step {step}")
        evaluated = cut_log_after(log_path, step)
    else:
        evaluated = True
        if log_path.exists():
            log_path.unlink()
        if not resume:  # --no-resume: the old run's state and kept weights go with its log (not a start)
            start = Path(init_from).resolve() if init_from is not None else None
            for old in (state_path, *out.glob("weights_*.pt")):
                if old.resolve() != start:
                    old.unlink(missing_ok=True)
        if init_info is not None:
            load_into(model, init_weights)
            log(f"initialised from {init_info['path']} (step {init_info['step']})")

    def record(entry: dict) -> None:
        with open(log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    command = command if command is not None else shlex.join([sys.executable, *sys.argv])
    model.train()
    frames = arrays["frames"]
    t_last, loss_acc, pred_acc, lat_acc, n_acc = time.monotonic(), 0.0, 0.0, 0.0, 0
    metrics: dict[str, Any] = {}
    if eval_arrays is not None and not evaluated and step > 0 and (step % eval_every == 0 or step == steps):
        metrics = evaluate(model, eval_arrays, eval_episodes)  # killed between its checkpoint and its eval
        record({"step": step, "eval": metrics})
        model.train()
    while step < steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, lr, warmup_steps, half_life_steps)
        i0 = starts[rng.integers(len(starts), size=batch_size)]
        slots, loss, pred_loss, lat_loss = None, 0.0, 0.0, 0.0
        for j in range(seq_len):
            prev = frames[i0 + j - 1] if j and config.motion_weight else None
            if j and config.predict_weight:  # frame j predicted from frame j - 1's slots and the action taken
                pred = next_frame_loss(model, predictor, slots, arrays["action"][i0 + j - 1], frames[i0 + j],
                                       frames[i0 + j - 1])
                loss = loss + config.predict_weight * pred / (seq_len - 1)
                pred_loss += pred.item() / (seq_len - 1)
            prev_slots = slots
            loss_j, slots = model.loss(frames[i0 + j], slots, first=j == 0 and seq_len > 1, prev_frames=prev)
            loss = loss + loss_j / seq_len
            if j and config.latent_weight:  # frame j's slots predicted from frame j - 1's and the action taken
                actions = torch.as_tensor(arrays["action"][i0 + j - 1], device=model.device)
                lat = slot_prediction_loss(predictor(prev_slots, actions), slots)
                loss = loss + config.latent_weight * lat / (seq_len - 1)
                lat_loss += lat.item() / (seq_len - 1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip))
        opt.step()
        step += 1
        loss_acc, pred_acc, lat_acc, n_acc = loss_acc + loss.item(), pred_acc + pred_loss, lat_acc + lat_loss, n_acc + 1
        if step % log_every == 0 or step == steps:
            now = time.monotonic()
            entry = {"step": step, "loss": loss_acc / n_acc, "lr": opt.param_groups[0]["lr"],
                     "grad_norm": grad_norm, "step_s": (now - t_last) / n_acc,
                     **({"predict_loss": pred_acc / n_acc} if config.predict_weight else {}),
                     **({"latent_loss": lat_acc / n_acc} if config.latent_weight else {})}
            record(entry)
            log(f"step {step}/{steps} loss {entry['loss']:.5f} lr {entry['lr']:.2e} {entry['step_s']:.3f} s/step")
            t_last, loss_acc, pred_acc, lat_acc, n_acc = now, 0.0, 0.0, 0.0, 0
        if step % ckpt_every == 0 or step == steps:
            _save_train_state(state_path, model, opt, step, rng, settings, predictor)
        if keep_every and step % keep_every == 0:
            _save_weights(out / f"weights_{step:06d}.pt", model, step, settings, command)
        if eval_arrays is not None and (step % eval_every == 0 or step == steps):
            metrics = evaluate(model, eval_arrays, eval_episodes)
            record({"step": step, "eval": metrics})
            log(f"eval @ {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float)))
            t_last = time.monotonic()
    if eval_arrays is not None and not metrics:  # resumed after the last step: evaluate once more
        metrics = evaluate(model, eval_arrays, eval_episodes)
    metrics = {"step": step, **metrics}
    atomic.write_text(out / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    save_encoder(model, out, command=command, seed=seed, data_hash=meta["data_hash"], metrics=metrics,
                 extra={**({} if init_info is None else {"init_from": init_info}), **depth_encoding(meta)})
    return metrics


# ---------------------------------------------------------------------- CLI
def _config_from_args(preset: str, overrides: list[str]):
    from world_models.slot_encoder import SlotEncoderConfig

    fields = {f.name: f for f in dataclasses.fields(SlotEncoderConfig)}
    values: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"--set {item!r}: want KEY=VALUE with KEY one of {tuple(fields)}")
        if key == "carry_prior":
            raise ValueError(f"--set {item!r}: carry_prior is an inference setting, not trained with; give it "
                             "where the encoder is used (load_encoder(..., carry_prior=...), "
                             "benchmarks/slot_carry_iters.py --carry-prior)")
        try:
            values[key] = value if key == "device" else float(value) if key == "fg_threshold" else int(value)
        except ValueError:
            kind = "a number" if key == "fg_threshold" else "a whole number"
            raise ValueError(f"--set {item!r}: {key} takes {kind}") from None
    return SlotEncoderConfig.preset(preset, **values)


def summary_line(out: str | Path, metrics: dict, tracking_rounds: int) -> str:
    """One readable line for a finished training run (its metrics as :func:`train_slot_encoder` returns them;
    ``tracking_rounds``: the slot-attention rounds its evaluation tracked with)."""
    line = f"slot encoder: {out} (step {metrics.get('step')})"
    if "fg_ari_attn" in metrics:
        line += (f"; on {metrics.get('eval_episodes')} held-out episodes: FG-ARI {metrics['fg_ari_attn']:.3f} "
                 f"(attention masks) / {metrics['fg_ari_decoder']:.3f} (decoder), slot identity "
                 f"{metrics['identity_rate_attn']:.3f} / {metrics['identity_rate_decoder']:.3f} "
                 f"tracking with {tracking_rounds} slot-attention round{'s' * (tracking_rounds != 1)}, "
                 f"reconstruction MSE {metrics['eval_mse']:.4f}")
    return line + f"; metrics in {Path(out) / 'metrics.json'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m world_models.slot_pretrain", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="frames + segmentation from a random or object-play policy into one .npz")
    c.add_argument("--frames", type=int, required=True, help="number of frames to save")
    c.add_argument("--seed", type=int, default=0, help="seeds the env resets and the random actions")
    c.add_argument("--out", required=True, help="output .npz path")
    c.add_argument("--task", default="push3", choices=("push3", "reach3"))
    c.add_argument("--episode-len", type=int, default=40, help="frames per episode (reset frame included)")
    c.add_argument("--image-size", type=int, default=64, help="frame side in pixels")
    c.add_argument("--policy", default="random", choices=("random", "play"),
                   help="uniform random actions, or object play (pushes randomly chosen cubes about; default random)")
    c.add_argument("--depth", action="store_true",
                   help="RGB-D frames: a fourth channel with the camera's depth (for encoders with in_channels=4)")
    c.add_argument("--eps", type=float, default=None,
                   help="with --policy play: share of uniform random actions (default 0.2)")
    c.add_argument("--play-segment", type=float, default=None,
                   help="with --policy play: mean steps before a new cube and aim are drawn (default 20)")
    t = sub.add_parser("train", help="train the slot autoencoder (resumes from --out/train_state.pt)")
    t.add_argument("--data", required=True, help="training .npz from `collect`")
    t.add_argument("--eval-data", default=None, help="held-out .npz (another seed) for FG-ARI / identity")
    t.add_argument("--out", required=True, help="output directory")
    t.add_argument("--steps", type=int, required=True, help="total optimizer steps")
    t.add_argument("--preset", default="default", choices=("default", "tiny"))
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config field")
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=4e-4, help="peak learning rate")
    t.add_argument("--warmup-steps", type=int, default=500)
    t.add_argument("--half-life-steps", type=int, default=4000, help="learning-rate halving period after warmup")
    t.add_argument("--seq-len", type=int, default=1, help="consecutive frames per sample (temporal init)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--ckpt-every", type=int, default=250)
    t.add_argument("--eval-every", type=int, default=2000)
    t.add_argument("--no-resume", action="store_true", help="start over even if a train_state.pt exists")
    t.add_argument("--init-from", default=None, metavar="PATH",
                   help="start from another run's weights (run directory, train_state.pt or manifest.json)")
    t.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads; more than 1 helps only when that many cores are otherwise idle")
    t.add_argument("--keep-every", type=int, default=0, metavar="N",
                   help="also keep the weights every N steps as weights_<step>.pt (default 0: none)")
    t.add_argument("--summary", action="store_true",
                   help="end on one readable line instead of the metrics as JSON (they are in --out/metrics.json)")
    x = sub.add_parser("export", help="a verified encoder directory from kept weights or a train_state.pt")
    x.add_argument("--weights", required=True, help="weights_<step>.pt or train_state.pt of a training run")
    x.add_argument("--data", required=True, help="the run's training .npz (its data_hash is checked)")
    x.add_argument("--eval-data", default=None, help="held-out .npz for the manifest's metrics (default: none)")
    x.add_argument("--out", required=True, help="output directory (encoder.pt, manifest.json, metrics.json)")
    ks = sub.add_parser("keep-slots", help="an encoder with fewer slots: the same weights, some rows of its "
                        "learned slot initialisation")
    ks.add_argument("--encoder", required=True, help="encoder directory (its manifest is verified)")
    ks.add_argument("--slots", required=True, help="the slots to keep, comma-separated indices, e.g. 0,2,3,4,5")
    ks.add_argument("--out", required=True, help="output directory (encoder.pt, manifest.json)")
    ks.add_argument("--metrics", default=None, metavar="FILE",
                    help="a benchmarks/slot_pool_judgements.py result measured on the encoder these slots make: its "
                         "pooled means become the manifest's metrics (default: none)")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "keep-slots":
            try:
                slots = [int(x) for x in args.slots.split(",")]
            except ValueError:
                raise ValueError(f"--slots {args.slots!r}: comma-separated slot indices, e.g. 0,2,3,4,5") from None
            man = keep_slots(args.encoder, slots, args.out, metrics_file=args.metrics,
                             command=" ".join(["python -m world_models.slot_pretrain", *(argv or sys.argv[1:])]))
            print(json.dumps({"out": args.out, "sha256": man["sha256"], **man["kept_slots"]}))
            return 0
        if args.cmd == "collect":
            out = Path(args.out)
            if out.suffix != ".npz" or out.is_dir():
                raise ValueError(f"--out {args.out!r} must be a .npz file path")
            for flag, value in (("--eps", args.eps), ("--play-segment", args.play_segment)):
                if value is not None and args.policy != "play":
                    raise ValueError(f"{flag} {value} applies to object play only; add --policy play or drop it")
            args.eps = 0.2 if args.eps is None else args.eps
            args.play_segment = 20.0 if args.play_segment is None else args.play_segment
            if not 0.0 <= args.eps <= 1.0:
                raise ValueError(f"--eps {args.eps} is out of range; the share of random actions must be in [0, 1]")
            if not (np.isfinite(args.play_segment) and args.play_segment >= 1.0):
                raise ValueError(f"--play-segment {args.play_segment} is out of range; must be >= 1 step")
            meta = collect_frames(args.frames, args.seed, out, args.task, args.episode_len, image_size=args.image_size,
                                  policy=args.policy, eps=args.eps, play_segment=args.play_segment, depth=args.depth)
            print(json.dumps(meta))
            return 0
        if args.cmd == "export":
            if Path(args.out).is_file():
                raise ValueError(f"--out {args.out!r} is a file; want a directory")
            for flag, path in (("--data", args.data), ("--eval-data", args.eval_data)):
                if path is not None and not Path(path).is_file():
                    raise ValueError(f"{flag} {path!r} does not exist")
            print(json.dumps(export_encoder(args.weights, args.data, args.out, eval_data_path=args.eval_data)))
            return 0
        for flag, path in (("--data", args.data), ("--eval-data", args.eval_data)):
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{flag} {path!r} does not exist")
        if Path(args.out).is_file():
            raise ValueError(f"--out {args.out!r} is a file; want a directory")
        if args.threads < 1:
            raise ValueError(f"--threads {args.threads} is out of range; must be >= 1")
        import torch

        torch.set_num_threads(args.threads)
        config = _config_from_args(args.preset, args.set)
        metrics = train_slot_encoder(config, args.data, args.out, args.steps, args.batch_size, args.lr, args.seed,
                                     not args.no_resume, eval_data_path=args.eval_data,
                                     warmup_steps=args.warmup_steps, half_life_steps=args.half_life_steps,
                                     seq_len=args.seq_len, ckpt_every=args.ckpt_every, eval_every=args.eval_every,
                                     init_from=args.init_from, keep_every=args.keep_every)
        print(summary_line(args.out, metrics, config.tracking_iters) if args.summary else json.dumps(metrics))
        return 0
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
