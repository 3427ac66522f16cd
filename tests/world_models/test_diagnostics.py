"""world_models/diagnostics.py: which entity a slot stands for (the relevance table's rows)."""

from types import SimpleNamespace

import numpy as np
import torch

from sim.backends.base import SEG_OBJECT0, SEG_ROBOT
from world_models.diagnostics import _owners


class _Masks:
    """An encoder stand-in that returns fixed attention masks (the arithmetic under test is the owner vote)."""

    def __init__(self, masks: np.ndarray) -> None:
        self.masks = torch.as_tensor(masks)

    def encode_masks(self, frames, init_slots=None):
        return None, self.masks


def test_each_distractor_counts_towards_its_slot():
    seg = np.ones((4, 4), np.int32)  # table
    seg[0, :2] = SEG_ROBOT
    seg[1, :2] = SEG_OBJECT0  # the target
    seg[2, :2] = SEG_OBJECT0 + 1  # first distractor
    seg[3, :3] = SEG_OBJECT0 + 2  # second distractor
    masks = np.zeros((1, 5, 4, 4), np.float32)
    for k, row in enumerate(range(4)):
        masks[0, k, row] = 1.0  # slot k wins row k
    masks[0, 4, :, 3] = 2.0  # slot 4 wins the last column: table only
    obs_er = SimpleNamespace(_prev=np.zeros((1, 5, 8), np.float32))
    owners = _owners(_Masks(masks), obs_er, {"frame": np.zeros((4, 4, 3), np.uint8), "seg": seg})
    assert owners == ["robot", "target", "distractor", "distractor", None]
