"""What the slot encoder's reconstruction loss weighs as foreground, for several neighbourhood windows
and colour thresholds: per (window, threshold), the share of the robot's cells in the loss foreground by
how much of the robot the camera sees, and the same share for the cubes and for the table (the table's
cells being foreground spreads the extra weight over the background). One more row per threshold counts
the cells whose colour changed since the previous frame (what ``motion_weight`` weighs). No encoder is
involved: the masks depend on the frames, window and threshold only (``slot_encoder.foreground_mask``,
at the reconstruction resolution).

    python benchmarks/fg_window_coverage.py --data gpu_slots/data/data_eval.npz --windows 9 13 17 25 \\
        --thresholds 0.15 0.1 0.07 --out benchmarks/results/fg_window_coverage.json

``--data`` is a frame file from ``python -m world_models.slot_pretrain collect`` (with segmentation).
Writes JSON (machine, command, versions).
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


def coverage(frames: np.ndarray, seg: np.ndarray, res: int, window: int | None, threshold: float = 0.15) -> dict:
    """One (window, threshold)'s report from frames (E, T, S, S, 3) uint8 and seg (E, T, S, S);
    ``window`` None: the cells that changed since the previous frame instead."""
    from benchmarks.slot_owners import ROBOT_BINS, _mean, cells_foreground
    from sim.backends.base import SEG_OBJECT0, SEG_ROBOT, SEG_TABLE

    def share(ids: tuple[int, ...]) -> np.ndarray:
        return cells_foreground(frames, seg, res, window or 9, ids, threshold, moving=window is None)

    robot = share((SEG_ROBOT,))
    cubes = share(tuple(int(i) for i in np.unique(seg) if i >= SEG_OBJECT0))
    table = share((SEG_TABLE,))
    pixels = (seg == SEG_ROBOT).sum((-1, -2))
    bins = [{"pixels": [lo, hi], **_mean(robot[(pixels >= lo) & (pixels < hi)])} for lo, hi in ROBOT_BINS]
    return {"window": window if window is not None else "moving", "threshold": threshold,
            "robot_cells_in_foreground_by_visible_pixels": bins,
            "robot_cells_in_foreground": _mean(robot), "cube_cells_in_foreground": _mean(cubes),
            "table_cells_in_foreground": _mean(table)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="frames from `python -m world_models.slot_pretrain collect`")
    ap.add_argument("--windows", type=int, nargs="+", default=[9, 13, 17, 25],
                    help="odd neighbourhood sides, in cells of the reconstruction target")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.15],
                    help="colour thresholds (summed absolute difference over channels, frames in [0, 1]; the loss uses 0.15)")
    ap.add_argument("--res", type=int, default=32, help="side of the reconstruction target (the encoder's decoder_res)")
    ap.add_argument("--episodes", type=int, default=40, help="episodes read (the first N of the commonest length)")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/fg_window_coverage.json")
    args = ap.parse_args(argv)
    for w in args.windows:
        if w < 3 or w % 2 == 0:
            ap.error(f"--windows {w}: each window must be an odd number >= 3")
    for th in args.thresholds:
        if not 0.0 < th < 3.0:
            ap.error(f"--thresholds {th}: each threshold must be in (0, 3)")
    if args.res < 4:
        ap.error(f"--res {args.res}: must be >= 4")
    if args.episodes < 1:
        ap.error(f"--episodes {args.episodes}: must be >= 1")
    if not Path(args.data).is_file():
        ap.error(f"--data {args.data}: " + ("a directory; give the frames' .npz file" if Path(args.data).is_dir()
                                            else "no such file"))
    import torch

    from world_models.slot_pretrain import episode_index, load_dataset

    torch.set_num_threads(1)
    try:
        arrays, meta = load_dataset(args.data)
    except (OSError, ValueError, KeyError, EOFError) as e:
        print(f"error: --data {args.data}: not a frames file from `python -m world_models.slot_pretrain collect` "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    size = arrays["frames"].shape[1]
    if size % args.res:
        print(f"error: --res {args.res} must divide the frames' size {size}", file=sys.stderr)
        return 2
    idx = episode_index(arrays["episode"], args.episodes)
    frames, seg = arrays["frames"][idx][..., :3], arrays["seg"][idx].astype(np.int32)  # colour (of RGB-D too)
    rows = [coverage(frames, seg, args.res, w, th) for th in args.thresholds for w in [*args.windows, None]]
    from sim.backends.base import SEG_ROBOT, SEG_TABLE

    robot_px = (seg == SEG_ROBOT).sum((-1, -2))
    large = ((robot_px >= 200) & (robot_px < 400))[..., None, None] & (seg == SEG_ROBOT)
    colours = {"robot_200_400_pixels": frames[large].mean(0).round(1).tolist() if large.any() else None,
               "table": frames[seg == SEG_TABLE].mean(0).round(1).tolist()}
    print(f"mean colour (of 255): robot with 200-400 pixels {colours['robot_200_400_pixels']}, "
          f"table {colours['table']}")
    for r in rows:
        by = ", ".join(f"{b['pixels'][0]}-{b['pixels'][1]}: {b['mean']}" for b in
                       r["robot_cells_in_foreground_by_visible_pixels"])
        print(f"window {r['window']} threshold {r['threshold']:g}: robot {r['robot_cells_in_foreground']['mean']} ({by}); "
              f"cubes {r['cube_cells_in_foreground']['mean']}; table {r['table_cells_in_foreground']['mean']}")
    res = {"benchmark": "fg_window_coverage", "machine": machine_info(), "command": " ".join(["python", *sys.argv]),
           "torch": torch.__version__, "numpy": np.__version__, "data": args.data, "data_hash": meta.get("data_hash"),
           "res": args.res, "episodes": len(idx), "frames_per_episode": int(idx.shape[1]), "mean_colour_of_255": colours, "windows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
