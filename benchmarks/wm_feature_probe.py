"""Does the slot encoder's feature map carry the red cube's step, before slot attention pools it?

``wm_offline_slots.py --probe-updates`` reads the cube's step from the encoder's slots (at contact
R² 0.45 on push3's test episodes). This reads it from the frozen encoder's feature map instead (the
CNN, position embedding and MLP that slot attention attends over; (F, F, C) per frame), with the
same kind of reader: per feature cell a small conv net of [f_t, f_t+1 − f_t] gives a weight logit
and a step, and the softmax over cells weights the steps. Fitted to object-play episodes, read on
the scripted pusher's test episodes (``wm_contact_ceiling.py``'s episodes, replayed through the
camera), in the step probe's measures (:func:`wm_offline_slots.step_measures`).

Trunks (``--trunks``, each fitted on the same episodes with the same probe seed): ``frozen`` reads the
encoder's feature map as it is; ``finetune`` trains a copy of the encoder's trunk (CNN, position
embedding, feature MLP) together with the probe, from the encoder's weights, so the pixels may show
what the reconstruction-trained features do not keep.

    python benchmarks/wm_feature_probe.py --encoder world_models/checkpoints/slots_push3_v2 \\
        --train-episodes 500 --updates 3000 --out benchmarks/results/wm_feature_probe.json
"""

from __future__ import annotations

import argparse
import math
import copy
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import whole, writable_file
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render_episode(seed: int, actions: np.ndarray) -> np.ndarray:
    """(T+1, S, S, 3) uint8: push3's frames for ``seed`` replaying ``actions`` (default task settings)."""
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv

    env = ObjectTaskEnv(ObjectTaskConfig(task="push3"))
    try:
        frames = [env.reset(seed=seed)[0]["frame"]] + [env.step(int(a))[0]["frame"] for a in actions]
    finally:
        env.close()
    return np.stack(frames)


def collect(first_seed: int, n: int, play: bool, eps: float, segment: float, log=None) -> list[dict]:
    cc = _sibling("wm_contact_ceiling")
    out = []
    for i in range(n):
        s = first_seed + i
        e = (cc.collect_episode(s, eps, eps_min=eps, explorer="play", play_segment=segment) if play
             else cc.collect_episode(s, 0.5))
        out.append({"frames": render_episode(s, e["actions"]), "red": np.asarray(e["red"], np.float64)})
        if log is not None and (i + 1) % 100 == 0:
            log(f"  {i + 1}/{n} episodes")
    return out


TRUNKS = ("frozen", "finetune")


def features(encoder, frames, grad: bool = False):
    """(B, C, F, F): the encoder's feature map (what slot attention attends over); no gradient unless
    ``grad``."""
    import torch

    with torch.set_grad_enabled(grad):
        return encoder.features(encoder.prepare(frames)).permute(0, 3, 1, 2).contiguous()


def make_probe(channels: int, hidden: int = 32):
    from torch import nn

    class FeatureProbe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(2 * channels, hidden, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(), nn.Conv2d(hidden, 3, 1))

        def forward(self, f, f_next):
            import torch

            h = self.net(torch.cat([f, f_next - f], 1)).flatten(2)  # (B, 3, F²)
            return (torch.softmax(h[:, 0], -1)[:, None] * h[:, 1:]).sum(-1)

    return FeatureProbe()


def pairs(episodes: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frames at t, frames at t+1, the red cube's step in cm) over all acted steps."""
    a = np.concatenate([e["frames"][:-1] for e in episodes])
    b = np.concatenate([e["frames"][1:] for e in episodes])
    r = np.concatenate([np.diff(e["red"], axis=0) for e in episodes]).astype(np.float32) * 100.0
    return a, b, r


def fit(encoder, train: list[dict], val: list[dict], updates: int, batch: int = 64, seed: int = 0,
        lr: float = 1e-3, log=None, trunk: str = "frozen", trunk_lr: float = 1e-4):
    """The feature probe fitted to ``train`` (Adam, MSE on the step); the state with the lowest ``val``
    MSE, checked every 250 updates, is kept. ``trunk="finetune"`` also trains a copy of the encoder's
    trunk (learning rate ``trunk_lr``); ``encoder`` itself is never changed. Returns (probe, info,
    predict), ``predict(x, y)`` reading frame pairs with the kept state."""
    import torch

    if updates < 1 or not train or not val:
        raise ValueError(f"need updates >= 1 and training and validation episodes, got {updates}, {len(train)}, "
                         f"{len(val)}")
    if trunk not in TRUNKS:
        raise ValueError(f"trunk {trunk!r}: allowed {', '.join(TRUNKS)}")
    if not 0.0 < trunk_lr <= 1.0:
        raise ValueError(f"trunk_lr {trunk_lr!r}: need 0 < trunk_lr <= 1")
    torch.manual_seed(seed)
    a, b, r = pairs(train)
    va, vb, vr = pairs(val)
    probe = make_probe(encoder.cfg.cnn_channels_wide)
    groups = [{"params": list(probe.parameters()), "lr": lr}]
    tuned = trunk == "finetune"
    if tuned:
        encoder = copy.deepcopy(encoder).train()
        groups.append({"params": encoder.feature_parameters(), "lr": trunk_lr})
    opt = torch.optim.Adam(groups)
    rng = np.random.default_rng(seed)
    best, best_state, best_at = float("inf"), None, 0

    def predict(x, y) -> np.ndarray:
        with torch.no_grad():
            return np.concatenate([probe(features(encoder, x[i:i + 256]), features(encoder, y[i:i + 256])).numpy()
                                   for i in range(0, len(x), 256)])

    def state() -> dict:
        return copy.deepcopy({"probe": probe.state_dict(), "trunk": encoder.state_dict() if tuned else None})

    for u in range(1, updates + 1):
        idx = rng.integers(len(a), size=batch)
        f_a, f_b = features(encoder, a[idx], tuned), features(encoder, b[idx], tuned)
        loss = ((probe(f_a, f_b) - torch.as_tensor(r[idx])) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if u % 250 == 0 or u == updates:
            v = float(((predict(va, vb) - vr) ** 2).sum(-1).mean())
            if v < best:
                best, best_state, best_at = v, state(), u
            if log is not None:
                log(f"  [{trunk}] update {u}: val step MSE {v:.4f} cm² (best {best:.4f} at {best_at})")
    if best_state is None:
        raise ValueError("no finite validation loss")
    probe.load_state_dict(best_state["probe"])
    if tuned:
        encoder.load_state_dict(best_state["trunk"])
        encoder.eval()
    info = {"trunk": trunk, "updates": updates, "best_update": best_at, "val_mse_cm2": round(best, 5),
            "val_mse_zero_cm2": round(float((vr ** 2).sum(-1).mean()), 5), "train_transitions": len(a)}
    if tuned:
        info["trunk_lr"] = trunk_lr
    return probe.eval(), info, predict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", default="world_models/checkpoints/slots_push3_v2", help="a slot-encoder directory")
    ap.add_argument("--train-episodes", type=int, default=500, help="object-play episodes (the last 10 %% pick)")
    ap.add_argument("--test-episodes", type=int, default=200, help="scripted-pusher test episodes")
    ap.add_argument("--train-seed", type=int, default=830_000_000, help="first training episode's seed")
    ap.add_argument("--test-seed", type=int, default=840_000_000, help="first test episode's seed")
    ap.add_argument("--eps", type=float, default=0.2, help="object play: probability of a uniform random action")
    ap.add_argument("--play-segment", type=float, default=20.0, help="object play: mean steps per cube and aim")
    ap.add_argument("--updates", type=int, default=3000, help="probe updates")
    ap.add_argument("--seed", type=whole(0), default=0, help="the probe's torch and sampling seed")
    ap.add_argument("--trunks", nargs="+", default=["frozen"], choices=TRUNKS,
                    help="frozen: read the encoder's feature map as it is; finetune: train a copy of the "
                         "encoder's trunk with the probe (each fitted on the same episodes)")
    ap.add_argument("--trunk-lr", type=float, default=1e-4, help="finetune: the trunk's learning rate")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_feature_probe.json")
    args = ap.parse_args(argv)
    for key in ("train_episodes", "test_episodes", "updates"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} {getattr(args, key)}: must be >= 1")
    if args.train_episodes < 2:
        ap.error(f"--train-episodes {args.train_episodes}: need >= 2 (the last 10 % pick the checkpoint)")
    if not 0.0 < args.trunk_lr <= 1.0:
        ap.error(f"--trunk-lr {args.trunk_lr}: need 0 < lr <= 1")
    if len(set(args.trunks)) != len(args.trunks):
        ap.error(f"--trunks {' '.join(args.trunks)}: each trunk once")
    if not 0.0 <= args.eps <= 1.0:
        ap.error(f"--eps {args.eps}: need 0 <= eps <= 1")
    if not (math.isfinite(args.play_segment) and args.play_segment >= 1.0):
        ap.error(f"--play-segment {args.play_segment}: need a finite number of steps >= 1")
    if abs(args.train_seed - args.test_seed) < max(args.train_episodes, args.test_episodes):
        ap.error(f"--train-seed {args.train_seed} and --test-seed {args.test_seed}: the episode ranges overlap")
    if not Path(args.encoder).is_dir():
        ap.error(f"--encoder {args.encoder}: no such directory")
    import torch

    from world_models.slot_encoder import load_encoder

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        encoder, manifest = load_encoder(args.encoder)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        print(f"error: --encoder {args.encoder}: {e}", file=sys.stderr)
        return 2
    if encoder.cfg.in_channels != 3:
        print(f"error: --encoder {args.encoder}: reads RGB-D frames (in_channels={encoder.cfg.in_channels}); "
              "this probe collects RGB episodes: choose an RGB encoder", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    log(f"collecting {args.train_episodes} object-play + {args.test_episodes} test episodes")
    train = collect(args.train_seed, args.train_episodes, True, args.eps, args.play_segment, log)
    test = collect(args.test_seed, args.test_episodes, False, args.eps, args.play_segment, log)
    t_data = time.perf_counter() - t0
    k = max(1, min(len(train) - 1, int(round(0.9 * len(train)))))
    ofs = _sibling("wm_offline_slots")
    a, b, r = pairs(test)
    res = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine_info(), "git_revision": git_revision(), "torch": torch.__version__,
           "encoder": args.encoder, "encoder_sha256": manifest.get("sha256"), "data_s": round(t_data, 1),
           "train_episodes": len(train), "test_episodes": len(test), "test_transitions": len(a), "trunks": {}}
    for trunk in args.trunks:
        t1 = time.perf_counter()
        try:
            _, info, predict = fit(encoder, train[:k], train[k:], args.updates, seed=args.seed, log=log, trunk=trunk,
                                   trunk_lr=args.trunk_lr)
        except ValueError as e:  # a diverged fit; the trunks that finished are already written
            print(f"error: trunk {trunk}: {e} (diverged? try a lower --trunk-lr)", file=sys.stderr)
            return 1
        res["trunks"][trunk] = {"probe": info, "ceiling": ofs.step_measures(predict(a, b), r),
                                "no_change": ofs.step_measures(predict(a, a), r),
                                "fit_s": round(time.perf_counter() - t1, 1)}
        log(f"[{trunk}] ceiling {json.dumps(res['trunks'][trunk]['ceiling'])}")
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")  # after each trunk: a stop keeps what finished
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
