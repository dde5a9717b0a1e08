"""The ``organs`` training loss: Dice + cross-entropy that skips unknown pixels.

Partially labelled volumes (``organs_data``: dcmqi_ct3 labels only liver, spine and stomach)
mark the rest of the body 255 (unknown). Cross-entropy ignores those pixels; the soft Dice is
computed over the batch (as MONAI's ``DiceCELoss(batch=True)``) on the known pixels only.
"""

from __future__ import annotations

from typing import Any

UNKNOWN = 255


def masked_dice_ce(logits: Any, target: Any, smooth: float = 1e-5) -> Any:
    """``logits`` (B, C, H, W), ``target`` (B, 1, H, W) class indices or :data:`UNKNOWN`."""
    import torch
    import torch.nn.functional as F

    y = target[:, 0].long()
    known = y != UNKNOWN
    ce = F.cross_entropy(logits, y, ignore_index=UNKNOWN)
    probs = torch.softmax(logits.float(), dim=1) * known[:, None]
    onehot = F.one_hot(torch.where(known, y, 0), logits.shape[1]).permute(0, 3, 1, 2)
    onehot = onehot * known[:, None]
    dims = (0, 2, 3)
    inter = (probs * onehot).sum(dims)
    denom = probs.sum(dims) + onehot.sum(dims)
    dice = 1 - (2 * inter + smooth) / (denom + smooth)
    return ce + dice.mean()
