"""Can the VLA's image trunk learn where the named block is? A localisation probe (issue 3).

The closed-loop diagnosis (vla_grasp_diagnosis.py) found the shipped policy closing its gripper
~15 cm from the block the instruction names, and its training-only auxiliary head placing that
block ~11 cm off at the first query — about what predicting the mean position gives. This probe
trains the *same* ``ConvTrunk`` architecture (front camera, FiLM on the instruction embedding)
from scratch with only a localisation loss: predict the named block's xy on the table from one
frame. Frames are every ``--stride``-th step before the block is lifted (so the answer must come
from pixels, not from the gripper's position), episodes split into train / held-out.

If the probe localises to ~1-2 cm on held-out scenes, the architecture can see the blocks and
the policy's failure lies in how the joint objective trains the trunk; if it cannot, the trunk
or the images are the bottleneck.

    python benchmarks/vla_vision_probe.py --data data/stack_mj --steps 1500
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.argtypes import existing, number, whole, writable_file  # noqa: E402


def load_frames(data_dir: str, stride: int, camera: str):
    from edge.training.vla.data import object_roles
    from sim.demos import iter_episodes

    imgs, xy, instr, ep_id, steps = [], [], [], [], []
    for i, ep in enumerate(iter_episodes(data_dir, successful_only=True)):
        roles = object_roles(ep["object_pos"])  # (T, 6): moved block, then its base
        lifted = np.flatnonzero(roles[:, 2] > roles[0, 2] + 0.01)
        end = int(lifted[0]) if len(lifted) else len(roles)
        t = np.arange(0, end, stride)
        imgs.append(ep[camera][t])
        xy.append(roles[t, :2])
        instr += [ep["instruction"]] * len(t)
        ep_id.append(np.full(len(t), i))
        steps.append(t)
    if not imgs:
        return np.zeros((0,)), np.zeros((0, 2), np.float32), [], np.zeros(0, int), np.zeros(0, int)
    return (np.concatenate(imgs), np.concatenate(xy).astype(np.float32), instr, np.concatenate(ep_id),
            np.concatenate(steps))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=existing("dir"), default="data/stack_mj", help="recorded demonstrations (edge data record)")
    ap.add_argument("--camera", default="front", choices=("front", "wrist"))
    ap.add_argument("--stride", type=whole(1), default=4)
    ap.add_argument("--holdout", type=number(0, 1, lo_open=True), default=0.2, help="fraction of episodes held out, below 1")
    ap.add_argument("--steps", type=whole(1), default=1500)
    ap.add_argument("--batch", type=whole(1), default=64)
    ap.add_argument("--lr", type=number(0, lo_open=True), default=1e-3)
    ap.add_argument("--seed", type=whole(0), default=0)
    ap.add_argument("--threads", type=whole(1), default=1)
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/vla_vision_probe.json")
    args = ap.parse_args(argv)
    if args.holdout >= 1:
        ap.error(f"--holdout {args.holdout}: must be below 1 (some episodes must train)")
    from sim.demos import read_meta

    try:
        cameras = read_meta(args.data).get("cameras")  # absent from datasets recorded before it was kept
    except (OSError, ValueError) as err:
        ap.error(f"--data {args.data}: {err}")
    if cameras is not None and args.camera not in cameras:
        ap.error(f"--camera {args.camera}: --data {args.data} was recorded with {', '.join(cameras)} only "
                 "(record the wrist camera with `edge data record --wrist`)")

    import torch
    from tqdm import tqdm

    from edge.telemetry import machine_info
    from edge.training.vla.data import random_shift
    from edge.vla.language import make_encoder
    from edge.vla.model import VLAConfig
    from edge.vla.vision import ConvTrunk

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    imgs, xy, instr, ep_id, t_step = load_frames(args.data, args.stride, args.camera)
    if not len(imgs):
        ap.error(f"--data {args.data}: no successful episodes there (record some with `edge data record`)")
    texts = sorted(set(instr))
    emb = torch.tensor(np.asarray(make_encoder("auto").encode(texts)), dtype=torch.float32)
    lang = torch.tensor([texts.index(s) for s in instr])
    rng = np.random.default_rng(args.seed)
    eps = np.unique(ep_id)
    held = set(rng.choice(eps, int(len(eps) * args.holdout), replace=False).tolist())
    if not held or len(held) == len(eps):
        ap.error(f"--holdout {args.holdout}: holds out {len(held)} of the {len(eps)} episodes in --data {args.data}; "
                 "both parts need at least one")
    test = np.isin(ep_id, list(held))
    tr_idx, te_idx = np.flatnonzero(~test), np.flatnonzero(test)
    mean, std = xy[tr_idx].mean(0), xy[tr_idx].std(0)
    y = torch.from_numpy((xy - mean) / std)
    cfg = VLAConfig()
    lang_proj = torch.nn.Sequential(torch.nn.Linear(emb.shape[1], cfg.d_lang), torch.nn.SiLU())
    trunk = ConvTrunk(imgs.shape[1:3], cfg.conv_channels, cfg.keypoints, cfg.d_lang, cfg.d_model)
    head = torch.nn.Linear(cfg.d_model, 2)
    params = [*lang_proj.parameters(), *trunk.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(args.seed)

    def predict(idx: np.ndarray, shift: int = 0) -> torch.Tensor:
        x = torch.from_numpy(imgs[idx])
        if shift:
            x = random_shift(x, shift, gen)
        return head(trunk(x, lang_proj(emb[lang[idx]])))

    def error_m(idx: np.ndarray) -> float:
        with torch.no_grad():
            p = torch.cat([predict(idx[i:i + 256]) for i in range(0, len(idx), 256)]).numpy() * std + mean
        return float(np.median(np.linalg.norm(p - xy[idx], axis=1)))

    t0 = time.perf_counter()
    curve = []
    for step in tqdm(range(1, args.steps + 1), desc="probe", unit="step", mininterval=2.0):
        idx = rng.choice(tr_idx, args.batch)
        loss = torch.nn.functional.mse_loss(predict(idx, 4), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % max(1, args.steps // 5) == 0:
            curve.append({"step": step, "loss": float(loss), "heldout_median_xy_error_m": error_m(te_idx[:512])})
    out = {
        "benchmark": "vla_vision_probe", "data": args.data, "camera": args.camera,
        "frames_train": int(len(tr_idx)), "frames_heldout": int(len(te_idx)),
        "episodes_heldout": len(held), "steps": args.steps,
        "mean_position_baseline_median_xy_error_m": float(np.median(np.linalg.norm(xy[te_idx] - mean, axis=1))),
        "train_median_xy_error_m": error_m(tr_idx[:1024]),
        "heldout_median_xy_error_m": error_m(te_idx),
        # the first frame of each held-out episode (arm at home): what the policy sees at its first query
        "heldout_first_frame_median_xy_error_m": error_m(te_idx[t_step[te_idx] == 0]),
        "curve": curve, "wall_s": round(time.perf_counter() - t0, 1),
        "command": " ".join(["python", *sys.argv]), "machine": machine_info(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("machine", "curve")}, indent=1))


if __name__ == "__main__":
    main()
