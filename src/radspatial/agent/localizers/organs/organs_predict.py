"""How the organs network reads a slice: the test-time copies, their mean and votes.

The slice is made grey and resized as the training slices were rendered; the first
``variants`` re-oriented copies of :data:`organs_checks.VARIANT_ORDER` run as one batch (the
fast channels-last forward, :mod:`radspatial.nets.unet_fast`), each mapped back to the shown
frame; the mean softmax and its argmax, and each copy's argmax (the votes), go to the checks.
``merge_parts`` reads several classes as one (a composite's parts, an open pair's two sides).
"""

from __future__ import annotations

import numpy as np

from radspatial.agent.localizers.organs import organs_checks
from radspatial.nets import unet, unet_fast


def variant_probs(model: unet.UNetModel, image: np.ndarray, variants: int = 1):
    """(softmax of each re-oriented copy mapped back to the shown frame, (V, S, S, C) float
    tensor, class last; grey (S, S) 0-255) at the network's resolution. The image is resized
    with PIL's antialiased bilinear filter, as the training slices were rendered; the copies
    are the first ``variants`` of :data:`organs_checks.VARIANT_ORDER`, run as one batch
    (:func:`radspatial.nets.unet_fast.logits`: the same logits as the plain forward, faster)."""
    import torch
    from PIL import Image

    small = Image.fromarray(grey_u8(image))
    if small.size != (model.size, model.size):
        small = small.resize((model.size, model.size), Image.Resampling.BILINEAR)
    grey = np.asarray(small, np.float32)
    x = torch.from_numpy(grey / 255.0)[None, None] * 2 - 1
    ks = organs_checks.VARIANT_ORDER[:variants]
    batch = torch.cat([organs_checks.dihedral(x, k) for k in ks])
    with model._lock, torch.inference_mode():
        logits = unet_fast.logits(model.net, batch.to(model.device)).float().cpu()
    # class last (a view of the fast forward's channels-last logits), each copy mapped back
    # as a numpy view and copied once (by the stack; torch's flip / rot90 copies cost 5x
    # more): softmax and argmax over a contiguous class axis are 3-4x faster on a CPU
    last = logits.permute(0, 2, 3, 1).numpy()
    back = np.stack([undo_dihedral_last(last[i], k) for i, k in enumerate(ks)])
    return torch.softmax(torch.from_numpy(back), dim=-1), grey


def grey_u8(image: np.ndarray) -> np.ndarray:
    """The mean of the first 3 channels (or the grey image) rounded half up to uint8; for
    uint8 RGB in integers (``(2 * sum + 3) // 6 == floor(sum / 3 + 0.5)``: the same values,
    10x faster than the float mean)."""
    if image.ndim == 3 and image.dtype == np.uint8 and image.shape[2] >= 3:
        total = image[:, :, 0].astype(np.uint16) + image[:, :, 1] + image[:, :, 2]
        return ((2 * total + 3) // 6).astype(np.uint8)
    gray = image[:, :, :3].mean(axis=2) if image.ndim == 3 else image
    return np.clip(gray + 0.5, 0, 255).astype(np.uint8)


def undo_dihedral_last(a: np.ndarray, k: int) -> np.ndarray:
    """:func:`organs_checks.undo_dihedral` of a class-last (H, W, C) array, as a view."""
    y = a[:, ::-1] if k >= 4 else a
    return np.rot90(y, -(k % 4), axes=(0, 1))


def predict_small(
    model: unet.UNetModel, image: np.ndarray, variants: int = 1
) -> tuple[unet.Prediction, np.ndarray, np.ndarray]:
    """(mean softmax (C, S, S) over the re-oriented copies and its argmax, per-copy argmax
    (V, S, S), grey (S, S) 0-255), all at the network's resolution in the shown frame
    (:func:`variant_probs`)."""
    probs, grey = variant_probs(model, image, variants)
    votes = probs.numpy().argmax(axis=-1)  # numpy's last-axis argmax is faster than torch's
    mean = probs.mean(dim=0)
    labels = mean.numpy().argmax(axis=-1)
    return unet.Prediction(mean.permute(2, 0, 1).numpy(), labels), votes, grey


def merge_parts(
    pred: unet.Prediction, votes: np.ndarray, parts: tuple[int, ...]
) -> tuple[unet.Prediction, np.ndarray]:
    """``pred`` and ``votes`` with the classes ``parts`` as one, in ``parts[0]``: its
    probability the parts' sum, its pixels wherever any part wins."""
    probs = pred.probs.copy(order="K")  # in its memory's order (class last): 8x faster
    probs[parts[0]] = pred.probs[list(parts)].sum(axis=0)
    keep = parts[0]
    labels = np.where(_any_of(pred.labels, parts), keep, pred.labels)
    return unet.Prediction(probs, labels), np.where(_any_of(votes, parts), keep, votes)


def _any_of(ids: np.ndarray, classes: tuple[int, ...]) -> np.ndarray:
    """``np.isin(ids, classes)`` for a few classes, one comparison each (5x faster)."""
    hit = ids == classes[0]
    for c in classes[1:]:
        hit |= ids == c
    return hit
