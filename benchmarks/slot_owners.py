"""Which slot holds which object while a slot encoder tracks: per object, each slot's share of its
pixels (argmax of the attention masks), how often each slot holds the largest share, and for the robot how
that depends on how much of it the camera sees and how often its owner changes between frames.

    python benchmarks/slot_owners.py --encoder world_models/checkpoints/slots_push3_v2 \\
        --data gpu_slots/data/data_eval.npz --out benchmarks/results/slot_owners_v2.json

``--data`` is a frame file from ``python -m world_models.slot_pretrain collect`` (uniform-random
policy, 40-frame episodes, with segmentation); the episodes are tracked as at run time (the first
frame encoded twice, every later frame from the previous frame's slots; an RGB encoder reads the
colour channels of RGB-D frames). Per robot-size bin it also
gives the share of the robot's cells (at the encoder's reconstruction resolution) that the
reconstruction loss weighs as foreground (``slot_encoder.foreground_mask`` with the encoder's
``fg_window`` and ``fg_threshold``), overall and split by
whether the robot's main slot holds it. ``--picture PNG`` draws frames with 200–400 robot pixels:
the frame, each pixel's slot (the argmax of the attention masks; the robot's main slot in magenta,
slot 0 in grey) and the robot's segmentation. Writes JSON (machine, command, versions).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from edge.argtypes import writable_file
from edge.telemetry import machine_info

ROBOT_BINS = ((1, 50), (50, 100), (100, 200), (200, 400), (400, 100_000))  # visible robot pixels at 64²


def cells_foreground(frames: np.ndarray, seg: np.ndarray, res: int, window: int = 9,
                     ids: tuple[int, ...] | None = None, threshold: float = 0.15,
                     moving: bool = False) -> np.ndarray:
    """(E, T): the share of an object's cells at ``res``² (the cells more than half that object) that
    the reconstruction loss weighs as foreground (``slot_encoder.foreground_mask`` with ``window`` and
    ``threshold``); NaN where no cell is. ``ids``: the segmentation ids that make the object (default:
    the robot). ``moving``: instead, the share whose colour changed since the episode's previous
    frame by more than ``threshold`` (what ``motion_weight`` weighs; NaN on first frames).
    frames (E, T, S, S, C) uint8 (C: 3, or 4 with depth, as the encoder reads them), seg (E, T, S, S)."""
    import torch
    import torch.nn.functional as F

    from sim.backends.base import SEG_ROBOT
    from world_models.slot_encoder import foreground_mask

    e, t = seg.shape[:2]
    x = torch.as_tensor(frames.reshape(e * t, *frames.shape[2:])).permute(0, 3, 1, 2).float() / 255.0
    target = F.interpolate(x, size=(res, res), mode="area") if x.shape[-1] != res else x
    obj = np.isin(seg.reshape(e * t, 1, *seg.shape[2:]), ids or (SEG_ROBOT,)).astype(np.float32)
    cells = (F.interpolate(torch.as_tensor(obj), size=(res, res), mode="area") > 0.5)[:, 0]
    if moving:
        diff = target.view(e, t, *target.shape[1:])
        changed = torch.zeros(e, t, *target.shape[2:], dtype=torch.bool)
        changed[:, 1:] = (diff[:, 1:] - diff[:, :-1]).abs().sum(2) > threshold
        fg = changed.view(e * t, *target.shape[2:])
        cells = cells.view(e, t, *cells.shape[1:]).clone()
        cells[:, 0] = False  # no previous frame
        cells = cells.view(e * t, *cells.shape[2:])
    else:
        fg = foreground_mask(target, window, threshold)[:, 0]
    n = cells.sum((1, 2)).numpy()
    share = np.where(n > 0, (fg & cells).sum((1, 2)).numpy() / np.maximum(n, 1), np.nan)
    return share.reshape(e, t)


def robot_foreground(frames: np.ndarray, seg: np.ndarray, res: int, window: int = 9) -> np.ndarray:
    """(E, T): :func:`cells_foreground` of the robot."""
    return cells_foreground(frames, seg, res, window)


def _mean(x: np.ndarray) -> dict:
    """Mean of the finite values and how many there are (a frame without a robot cell at the
    reconstruction resolution has none)."""
    x = x[np.isfinite(x)]
    return {"mean": round(float(x.mean()), 3) if len(x) else None, "frames": int(len(x))}


def summarise(seg: np.ndarray, masks: np.ndarray, fg_share: np.ndarray | None = None) -> dict:
    """The report (see the module docstring) from seg (E, T, H, W) and masks (E, T, K, h, w);
    ``fg_share`` (E, T) from :func:`robot_foreground` adds the loss-foreground columns."""
    from sim.backends.base import SEG_OBJECT0, SEG_ROBOT, SEG_TABLE
    from world_models.slot_metrics import owner_shares

    names = {SEG_ROBOT: "robot", SEG_TABLE: "table", SEG_OBJECT0: "cube0", SEG_OBJECT0 + 1: "cube1",
             SEG_OBJECT0 + 2: "cube2"}
    ids = tuple(i for i in names if (seg == i).any())
    shares = owner_shares(seg, masks, ids)  # (E, T, K, O)
    k = masks.shape[2]
    out: dict = {"objects": {}}
    for j, o in enumerate(ids):
        sh = shares[..., j]
        present = np.isfinite(sh[..., 0])
        owner = np.where(present, np.nan_to_num(sh, nan=-1.0).argmax(-1), -1)
        out["objects"][names[o]] = {
            "frames": int(present.sum()),
            "mean_share_per_slot": [round(float(x), 3) for x in sh[present].mean(0)],
            "frames_owned_per_slot": np.bincount(owner[present], minlength=k).tolist(),
            "mean_top_share": round(float(sh[present].max(-1).mean()), 3)}
        both = present[:, 1:] & present[:, :-1]
        changes = both & (owner[:, 1:] != owner[:, :-1])
        out["objects"][names[o]].update(transitions=int(both.sum()), owner_changes=int(changes.sum()))
    if SEG_ROBOT in ids:
        j = ids.index(SEG_ROBOT)
        sh = shares[..., j]
        pixels = (seg == SEG_ROBOT).sum((-1, -2))
        present = pixels > 0
        owner = np.where(present, np.nan_to_num(sh, nan=-1.0).argmax(-1), -1)
        main = int(np.bincount(owner[present], minlength=k).argmax())  # the slot that holds it most often
        rows = []
        for lo, hi in ROBOT_BINS:
            sel = (pixels >= lo) & (pixels < hi)
            if sel.any():
                row = {"pixels": [lo, hi], "frames": int(sel.sum()),
                       "share_of_frames_owned_by_another_slot": round(float(np.mean(owner[sel] != main)), 3)}
                if fg_share is not None:
                    row["robot_cells_in_loss_foreground"] = {
                        "all": _mean(fg_share[sel]), "main_slot_owns": _mean(fg_share[sel & (owner == main)]),
                        "another_owns": _mean(fg_share[sel & (owner != main)])}
                rows.append(row)
        out["robot_by_visible_pixels"] = {"main_slot": main, "bins": rows}
    return out


def draw(path: str, frames: np.ndarray, seg: np.ndarray, masks: np.ndarray, main_slot: int | None,
         rows: int = 4, scale: int = 4) -> dict:
    """Write the ``--picture`` PNG: up to ``rows`` frames with 200-400 robot pixels, evenly spaced
    among them; each row the frame, each pixel's slot and the robot's mask. Returns where they are
    from (episode and step indices into the tracked episodes)."""
    import matplotlib.image

    from sim.backends.base import SEG_ROBOT

    pixels = (seg == SEG_ROBOT).sum((-1, -2))
    e_i, t_i = np.nonzero((pixels >= 200) & (pixels < 400))
    pick = np.linspace(0, len(e_i) - 1, min(rows, len(e_i))).round().astype(int) if len(e_i) else []
    k, s = masks.shape[2], frames.shape[2]
    palette = np.array([[200, 200, 200], [230, 25, 75], [60, 180, 75], [0, 130, 200], [255, 225, 25], [245, 130, 48],
                        [70, 240, 240], [0, 0, 128], [128, 128, 0], [170, 110, 40]], np.uint8)
    colours = np.stack([palette[i % len(palette)] for i in range(k)])
    if main_slot is not None and 0 <= main_slot < k:
        colours[main_slot] = (255, 0, 255)
    tiles = []
    for j in pick:
        e, t = int(e_i[j]), int(t_i[j])
        owner = masks[e, t].argmax(0)
        up = s // owner.shape[-1]
        owners = np.kron(colours[owner], np.ones((up, up, 1), np.uint8))
        robot = np.repeat(((seg[e, t] == SEG_ROBOT) * 255).astype(np.uint8)[..., None], 3, -1)
        tiles.append(np.concatenate([frames[e, t], owners, robot], 1))
    out = {"path": path, "frames": [[int(e_i[j]), int(t_i[j])] for j in pick]}
    if not tiles:
        return {**out, "note": "no frame with 200-400 robot pixels; nothing drawn"}
    img = np.concatenate(tiles, 0)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    matplotlib.image.imsave(path, np.kron(img, np.ones((scale, scale, 1), np.uint8)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", required=True, help="a slot-encoder directory (its manifest is verified)")
    ap.add_argument("--data", required=True, help="frames from `python -m world_models.slot_pretrain collect`")
    ap.add_argument("--episodes", type=int, default=40, help="episodes read (the first N of the commonest length)")
    ap.add_argument("--carry-iters", type=int, default=1,
                    help="tracking rounds (1..10); overrides the encoder's own (1 is what the world models use)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/slot_owners.json")
    ap.add_argument("--picture", default=None, metavar="PNG",
                    help="also draw up to 4 frames with 200-400 robot pixels: frame, owner slots, robot mask")
    args = ap.parse_args(argv)
    if args.picture is not None:
        pic = Path(args.picture)
        if pic.suffix.lower() != ".png" or pic.is_dir():
            ap.error(f"--picture {args.picture}: must be a .png file path")
        if any(p.exists() and not p.is_dir() for p in pic.parents):
            ap.error(f"--picture {args.picture}: a folder on its path is a file")
    if args.episodes < 1:
        ap.error(f"--episodes {args.episodes}: must be >= 1")
    if not 1 <= args.carry_iters <= 10:
        ap.error(f"--carry-iters {args.carry_iters}: must be in 1..10")
    for flag, path in (("--encoder", args.encoder), ("--data", args.data)):
        if not Path(path).exists():
            ap.error(f"{flag} {path}: no such file or directory")
    import torch

    from world_models.slot_encoder import load_encoder
    from world_models.slot_pretrain import episode_index, load_dataset, track_masks

    torch.set_num_threads(1)
    try:
        model, manifest = load_encoder(args.encoder, carry_iters=args.carry_iters)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        said = str(e)  # the loader's message may name the path itself: say it once
        print(f"error: --encoder: {said}" if args.encoder in said else f"error: --encoder {args.encoder}: {said}",
              file=sys.stderr)
        return 2
    try:
        arrays, meta = load_dataset(args.data)
    except (OSError, ValueError, KeyError, EOFError) as e:
        print(f"error: --data {args.data}: not a frames file from `python -m world_models.slot_pretrain collect` "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    if arrays["frames"].shape[1] != model.cfg.image_size:
        print(f"error: --data {args.data} holds {arrays['frames'].shape[1]}² frames but --encoder {args.encoder} "
              f"reads {model.cfg.image_size}²; collect frames at the encoder's size", file=sys.stderr)
        return 2
    c = model.cfg.in_channels
    if arrays["frames"].shape[-1] < c:
        print(f"error: --data {args.data} holds RGB frames but --encoder {args.encoder} reads RGB-D "
              f"(in_channels={c}); collect with --depth", file=sys.stderr)
        return 2
    idx = episode_index(arrays["episode"], args.episodes)
    frames = arrays["frames"][idx][..., :c]  # an RGB encoder reads an RGB-D file's colour channels
    masks = track_masks(model, frames, decode=False)[0]
    seg = arrays["seg"][idx].astype(np.int32)
    fg_share = cells_foreground(frames, seg, model.cfg.decoder_res, model.cfg.fg_window,
                                threshold=model.cfg.fg_threshold)
    res = {"benchmark": "slot_owners", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "torch": torch.__version__, "encoder": args.encoder, "encoder_sha256": manifest.get("sha256"),
           "carry_iters": args.carry_iters, "data": args.data, "data_hash": meta.get("data_hash"),
           "episodes": len(idx), "frames_per_episode": int(idx.shape[1]),
           **summarise(seg, masks, fg_share)}
    if args.picture is not None:
        res["picture"] = draw(args.picture, frames[..., :3], seg, masks,
                              res.get("robot_by_visible_pixels", {}).get("main_slot"))
    for name, o in res["objects"].items():
        print(f"{name}: share per slot {o['mean_share_per_slot']}, frames owned {o['frames_owned_per_slot']}, "
              f"owner changes {o['owner_changes']} of {o['transitions']}")
    for row in res.get("robot_by_visible_pixels", {}).get("bins", []):
        fg = row.get("robot_cells_in_loss_foreground")
        print(f"robot pixels {row['pixels']}: {row['frames']} frames, owned by another slot than its main one in "
              f"{row['share_of_frames_owned_by_another_slot']:.0%}"
              + ("" if fg is None else "; robot cells in the loss foreground " + ", ".join(
                  f"{k} {v['mean']} ({v['frames']} frames)" for k, v in fg.items())))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
