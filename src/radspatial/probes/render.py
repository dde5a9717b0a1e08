"""Drawing one probe sample: the organ crop (tiles shuffled for ``permutation``), or the whole
slice in the sample's rotation/flip variant with its dots."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

from radspatial.imaging.markers import DOT_COLORS, Mark, draw_marks
from radspatial.imaging.slices import Variant
from radspatial.probes.tasks import CROP_TASKS, GRID, MASKED, Plan, Rules

COLOURS = {**DOT_COLORS, "green": (0, 200, 0), "yellow": (255, 230, 0)}


CONTEXTS: tuple[str, ...] = ("keep", "remove")


def crop_square(
    gray: np.ndarray, labels: np.ndarray, label_id: int, crop: int, context: str = "keep"
) -> np.ndarray:
    """The label's bounding box in ``gray``, padded (black) to a square, resized to ``crop``;
    ``context="remove"`` blacks out every pixel outside the label first."""
    inside = labels == label_id
    if context == "remove":
        gray = np.where(inside, gray, 0).astype(gray.dtype)
    ys, xs = np.nonzero(inside)
    h, w = int(ys.max() - ys.min()) + 1, int(xs.max() - xs.min()) + 1
    side = max(h, w)
    y0, x0 = int(ys.min()) - (side - h) // 2, int(xs.min()) - (side - w) // 2
    canvas = np.zeros((side, side), np.uint8)
    sy, sx = max(y0, 0), max(x0, 0)
    ey, ex = min(y0 + side, gray.shape[0]), min(x0 + side, gray.shape[1])
    canvas[sy - y0 : ey - y0, sx - x0 : ex - x0] = gray[sy:ey, sx:ex]
    img = Image.fromarray(canvas).resize((crop, crop), Image.Resampling.BILINEAR)
    return np.asarray(img)


def shuffle_tiles(img: np.ndarray, perm: Sequence[int], grid: int = GRID) -> np.ndarray:
    """Tile ``perm[i]`` of ``img`` (row-major grid) placed at position i."""
    t = img.shape[0] // grid
    tiles = [
        img[r * t : (r + 1) * t, c * t : (c + 1) * t] for r in range(grid) for c in range(grid)
    ]
    out = np.empty_like(img)
    for i, src in enumerate(perm):
        r, c = divmod(i, grid)
        out[r * t : (r + 1) * t, c * t : (c + 1) * t] = tiles[src]
    return out


def _rgb(gray: np.ndarray) -> np.ndarray:
    return np.repeat(gray[:, :, None], 3, axis=2)


def render_plan(
    plan: Plan, gray: np.ndarray, labels: np.ndarray | None, rules: Rules
) -> np.ndarray:
    if plan.task in CROP_TASKS:
        assert labels is not None
        img = crop_square(gray, labels, plan.label_ids[0], rules.crop, rules.context)
        return _rgb(shuffle_tiles(img, plan.perm) if plan.perm else img)
    rgb = _rgb(gray)
    if plan.task in MASKED:  # the pair's mask in the blue channel, grey in red and green
        assert labels is not None
        rgb[:, :, 2] = np.where(np.isin(labels, plan.label_ids), 255, 0)
    shown = Variant(plan.variant).apply_image(rgb)
    if not plan.dots:
        return shown
    # dots are already clamped and rounded (Rules.drawn): draw_marks keeps them where they are
    marks = [Mark("dots", d.colour, d.xy) for d in plan.dots]
    return draw_marks(shown, marks, colors=COLOURS)
