"""Slot-encoder quality metrics in numpy: foreground ARI and temporal slot identity.

Both compare predicted masks with the simulator's segmentation (``sim.backends.base`` ids). The
foreground is the robot and the cubes: background and table pixels are left out (the white goal
square is painted on the table, so it is table in the segmentation). Predicted masks may be at a
lower resolution than the segmentation; they are upsampled by an integer factor (nearest), so every
segmentation pixel is scored and the ~5 px cubes are not thinned by downsampling.

Identity (:func:`identity_rate_from_masks`) is matched on masks, not slot vectors: slot vectors move
when an object moves, so their cosine says little about *which* object a slot holds, while the
segmentation says it exactly. Each slot is described by the share of every foreground object it
owns (argmax mask); slots at t and t+1 are paired by Hungarian matching on the shared object mass;
a transition counts as identity when every slot that owns an object (most of its pixels) in either
frame is paired with itself. Slots holding only background or table are ignored, and only objects
present in both frames count. Read it together with FG-ARI: an encoder that puts every object into
one slot keeps "identity" trivially.
"""

from __future__ import annotations

import numpy as np

from sim.backends.base import SEG_BACKGROUND, SEG_TABLE

IGNORE_IDS = (SEG_BACKGROUND, SEG_TABLE)


def upsample_masks(masks: np.ndarray, size: int) -> np.ndarray:
    """(B, K, h, w) -> (B, K, size, size) by nearest repetition; ``size`` must be a multiple of h and w."""
    masks = np.asarray(masks)
    h, w = masks.shape[-2:]
    if size % h or size % w:
        raise ValueError(f"mask resolution {h}x{w} does not divide the segmentation size {size}")
    return masks.repeat(size // h, axis=-2).repeat(size // w, axis=-1)


def _labels(true_seg: np.ndarray, pred_masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    true_seg = np.asarray(true_seg)
    pred_masks = np.asarray(pred_masks)
    if true_seg.ndim != 3 or pred_masks.ndim != 4 or len(true_seg) != len(pred_masks):
        raise ValueError(f"want true_seg (B, H, W) and pred_masks (B, K, h, w), got {true_seg.shape} and "
                         f"{pred_masks.shape}")
    if true_seg.shape[1] != true_seg.shape[2]:
        raise ValueError(f"segmentation must be square, got {true_seg.shape[1:]}")
    if pred_masks.shape[-2:] != true_seg.shape[1:]:
        pred_masks = upsample_masks(pred_masks, true_seg.shape[1])
    return true_seg, pred_masks.argmax(1)  # (B, H, W) each


def _comb2(x: np.ndarray) -> float:
    x = x.astype(np.float64)
    return float((x * (x - 1) / 2).sum())


def ari(true_labels: np.ndarray, pred_labels: np.ndarray) -> float:
    """Adjusted Rand Index of two flat labelings (Hubert & Arabie), from the contingency table."""
    _, t = np.unique(true_labels, return_inverse=True)
    _, p = np.unique(pred_labels, return_inverse=True)
    n = len(t)
    if n < 2:
        return 1.0
    table = np.zeros((t.max() + 1, p.max() + 1), np.int64)
    np.add.at(table, (t, p), 1)
    index = _comb2(table)
    sum_a, sum_b = _comb2(table.sum(1)), _comb2(table.sum(0))
    expected = sum_a * sum_b / (n * (n - 1) / 2)
    max_index = (sum_a + sum_b) / 2
    if max_index == expected:  # both labelings are one cluster (or all singletons): identical partitions
        return 1.0
    return (index - expected) / (max_index - expected)


def fg_ari(true_seg: np.ndarray, pred_masks: np.ndarray, ignore_ids: tuple[int, ...] = IGNORE_IDS,
           *, per_image: bool = False) -> float | np.ndarray:
    """Foreground ARI: mean over images of the ARI between segment ids and argmax slot, on foreground pixels.

    ``true_seg`` (B, H, W) int, ``pred_masks`` (B, K, h, w) float (any scores; argmax over K).
    Images without a foreground pixel are skipped (NaN in ``per_image``); NaN if none has one.
    """
    true_seg, pred = _labels(true_seg, pred_masks)
    scores = np.full(len(true_seg), np.nan)
    for b in range(len(true_seg)):
        fg = ~np.isin(true_seg[b], ignore_ids)
        if fg.any():
            scores[b] = ari(true_seg[b][fg], pred[b][fg])
    if per_image:
        return scores
    return float(np.nanmean(scores)) if np.isfinite(scores).any() else float("nan")


def object_shares(seg: np.ndarray, pred: np.ndarray, object_ids: np.ndarray, num_slots: int) -> np.ndarray:
    """(K, O) share of each object's pixels whose argmax slot is k; ``seg``/``pred`` (H, W)."""
    out = np.zeros((num_slots, len(object_ids)))
    for j, o in enumerate(object_ids):
        owners = pred[seg == o]
        out[:, j] = np.bincount(owners, minlength=num_slots)[:num_slots] / max(len(owners), 1)
    return out


def transition_is_identity(seg_t: np.ndarray, pred_t: np.ndarray, seg_n: np.ndarray, pred_n: np.ndarray,
                           num_slots: int, ignore_ids: tuple[int, ...] = IGNORE_IDS) -> bool | None:
    """Whether Hungarian matching of frame t's slots to frame t+1's is the identity (None: no shared object)."""
    from scipy.optimize import linear_sum_assignment

    ids_t, ids_n = np.unique(seg_t), np.unique(seg_n)
    objects = np.setdiff1d(np.intersect1d(ids_t, ids_n), ignore_ids)
    if len(objects) == 0:
        return None
    a_t = object_shares(seg_t, pred_t, objects, num_slots)  # (K, O)
    a_n = object_shares(seg_n, pred_n, objects, num_slots)
    shared = np.minimum(a_t[:, None, :], a_n[None, :, :]).sum(-1)  # (K, K): object mass slot i (t) and j (t+1) share
    rows, cols = linear_sum_assignment(shared, maximize=True)
    owners = set(a_t.argmax(0)) | set(a_n.argmax(0))  # the slot holding most of each object, in either frame
    match = dict(zip(rows.tolist(), cols.tolist()))
    return all(match[k] == k for k in owners)


def identity_rate_from_masks(seg: np.ndarray, masks: np.ndarray, ignore_ids: tuple[int, ...] = IGNORE_IDS) -> float:
    """Fraction of consecutive-frame transitions whose slot matching is the identity.

    ``seg`` (T, H, W) int and ``masks`` (T, K, h, w) float for one episode (or (B, T, ...) for B
    episodes of equal length). Transitions without a foreground object in both frames are skipped;
    NaN if none is left.
    """
    seg, masks = np.asarray(seg), np.asarray(masks)
    if seg.ndim == 3:
        seg, masks = seg[None], masks[None]
    if seg.ndim != 4 or masks.ndim != 5 or seg.shape[:2] != masks.shape[:2]:
        raise ValueError(f"want seg (B, T, H, W) and masks (B, T, K, h, w), got {seg.shape} and {masks.shape}")
    b, t = seg.shape[:2]
    flat_seg, pred = _labels(seg.reshape(b * t, *seg.shape[2:]), masks.reshape(b * t, *masks.shape[2:]))
    flat_seg, pred = flat_seg.reshape(seg.shape), pred.reshape(seg.shape)
    k = masks.shape[2]
    results = [transition_is_identity(flat_seg[i, j], pred[i, j], flat_seg[i, j + 1], pred[i, j + 1], k, ignore_ids)
               for i in range(b) for j in range(t - 1)]
    results = [r for r in results if r is not None]
    return float(np.mean(results)) if results else float("nan")


def identity_rate(prev_masks: np.ndarray, next_masks: np.ndarray, prev_seg: np.ndarray, next_seg: np.ndarray,
                  ignore_ids: tuple[int, ...] = IGNORE_IDS) -> float:
    """Identity rate over B independent transitions: masks (B, K, h, w) and segmentations (B, H, W) at t and t+1."""
    seg = np.stack([np.asarray(prev_seg), np.asarray(next_seg)], 1)  # (B, 2, H, W)
    masks = np.stack([np.asarray(prev_masks), np.asarray(next_masks)], 1)
    return identity_rate_from_masks(seg, masks, ignore_ids)


def owner_shares(seg: np.ndarray, masks: np.ndarray, object_ids: tuple[int, ...]) -> np.ndarray:
    """(B, T, K, O): the share of object o's pixels whose argmax slot is k, per frame (NaN where the
    object is not in the frame). ``seg`` (B, T, H, W) int, ``masks`` (B, T, K, h, w) float."""
    seg, masks = np.asarray(seg), np.asarray(masks)
    if seg.ndim != 4 or masks.ndim != 5 or seg.shape[:2] != masks.shape[:2]:
        raise ValueError(f"want seg (B, T, H, W) and masks (B, T, K, h, w), got {seg.shape} and {masks.shape}")
    b, t, k = masks.shape[:3]
    flat_seg, pred = _labels(seg.reshape(b * t, *seg.shape[2:]), masks.reshape(b * t, *masks.shape[2:]))
    out = np.full((b * t, k, len(object_ids)), np.nan)
    for j, o in enumerate(object_ids):
        here = flat_seg == o
        n = here.sum((1, 2))
        for slot in range(k):
            out[:, slot, j] = np.where(n > 0, ((pred == slot) & here).sum((1, 2)) / np.maximum(n, 1), np.nan)
    return out.reshape(b, t, k, len(object_ids))
