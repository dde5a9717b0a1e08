"""The ``organs+atlas`` atlas grid: how a slice becomes an atlas entry, shared by the builder
(``training/organs_atlas.py``) and the localizer that matches against it
(``agent/localizers/organs/organs_atlas.py``): the body's box, resized to ``SIZE`` x ``SIZE``,
grey stored as ranks within the body, labels as ids with ``UNKNOWN`` where none was given."""

from __future__ import annotations

import numpy as np

SIZE = 64  # atlas grid (body box resized to SIZE x SIZE)
UNKNOWN = 255  # label value of pixels no label was given for (partially labelled patients)


def body_box(body: np.ndarray) -> tuple[int, int, int, int] | None:
    """(y0, y1, x0, x1) of the body; None under 50 px of body."""
    ys, xs = np.nonzero(body)
    if ys.size < 50:
        return None
    return int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1


def crop_resize(a: np.ndarray, box: tuple[int, int, int, int], nearest: bool) -> np.ndarray:
    """``a`` cut to ``box`` and resized to the grid (nearest for labels, bilinear for grey)."""
    from PIL import Image

    y0, y1, x0, x1 = box
    img = Image.fromarray(np.ascontiguousarray(a[y0:y1, x0:x1]))
    mode = Image.Resampling.NEAREST if nearest else Image.Resampling.BILINEAR
    return np.asarray(img.resize((SIZE, SIZE), mode))


def rank_image(grey: np.ndarray, body: np.ndarray) -> np.ndarray:
    """uint8 rank of each body pixel's grey among the body's (1-255; 0 outside the body)."""
    from scipy.stats import rankdata

    out = np.zeros(grey.shape, np.uint8)
    vals = grey[body].astype(np.float32)
    if vals.size:
        out[body] = np.clip(1 + 254 * (rankdata(vals) - 0.5) / vals.size, 1, 255).astype(np.uint8)
    return out
