"""Measure drawn markers on a PNG: a text marker's white box and glyph height, a dot's diameter
and colour, found near a known centre.

The same code measures MIRP's published images and ours (tests/test_marker_geometry.py,
``benchmarks/compare_mirp_stats.py``), so the two are compared like for like.

    >>> measure_dot(image, (272, 277), (255, 0, 0)).diameter  # doctest: +SKIP
    17
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

_WINDOW = 24  # px around the centre searched for the marker
_INK = 200  # a glyph pixel: R+G+B below this


@dataclass(frozen=True)
class BoxMeasure:
    width: int  # the white box, px
    height: int
    glyph_height: int  # the dark text inside it, px
    outlined: bool | None  # a pure black 1 px frame around the white (None: black all around)


@dataclass(frozen=True)
class DotMeasure:
    diameter: int  # px across (the larger of width and height)
    area: int  # px of exactly the dot colour
    ringed: bool | None  # a white ring right outside the disc (None: white all around)


def _window(image: np.ndarray, xy: tuple[float, float]) -> tuple[np.ndarray, int, int]:
    x, y = round(xy[0]), round(xy[1])
    x0, y0 = max(0, x - _WINDOW), max(0, y - _WINDOW)
    return image[y0 : y + _WINDOW + 1, x0 : x + _WINDOW + 1].astype(int), x - x0, y - y0


def measure_box(image: np.ndarray, xy: tuple[float, float]) -> BoxMeasure | None:
    """The white box of a text marker centred near ``xy`` (shown frame), or None where none is
    clean (the box merges with bright anatomy around it: an unmeasurable item)."""
    win, cx, cy = _window(image, xy)
    white = np.all(win >= 250, axis=2)
    lab, _ = ndimage.label(white)
    near = lab[max(0, cy - 3) : cy + 4, max(0, cx - 3) : cx + 4]
    ids, counts = np.unique(near[near > 0], return_counts=True)
    if not len(ids):
        return None
    comp = lab == ids[np.argmax(counts)]
    ys, xs = np.nonzero(comp)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    if max(y1 - y0, x1 - x0) > 40 or min(y0, x0) == 0 or y1 >= win.shape[0] or x1 >= win.shape[1]:
        return None
    if ndimage.binary_fill_holes(comp[y0:y1, x0:x1]).mean() < 0.9:
        return None  # not a rectangle: the box merged with bright tissue beside it
    ink = win[y0:y1, x0:x1].sum(axis=2) < _INK
    rows = np.nonzero(ink.any(axis=1))[0]
    if not len(rows):
        return None
    if min(y0, x0) < 2 or y1 + 1 >= win.shape[0] or x1 + 1 >= win.shape[1]:
        return None

    def black(d: int) -> float:  # share of pure black pixels on the frame d px outside
        ring = np.concatenate(
            [win[y0 - d, x0:x1], win[y1 - 1 + d, x0:x1], win[y0:y1, x0 - d], win[y0:y1, x1 - 1 + d]]
        )
        return float((ring.sum(axis=1) == 0).mean())

    outlined = None if black(2) > 0.5 else black(1) > 0.6  # None: dark all around
    return BoxMeasure(int(x1 - x0), int(y1 - y0), int(rows.max() - rows.min() + 1), outlined)


def measure_dot(
    image: np.ndarray, xy: tuple[float, float], colour: tuple[int, int, int]
) -> DotMeasure | None:
    """The disc of exactly ``colour`` nearest ``xy``, or None where there is none."""
    win, cx, cy = _window(image, xy)
    mask = np.all(win == colour, axis=2)
    lab, n = ndimage.label(mask)
    if n == 0:
        return None
    sizes = ndimage.sum(mask, lab, range(1, n + 1))
    k = int(np.argmax(sizes)) + 1
    ys, xs = np.nonzero(lab == k)
    diameter = int(max(xs.max() - xs.min(), ys.max() - ys.min()) + 1)
    disc = lab == k
    near = ndimage.binary_dilation(disc, iterations=1) & ~disc
    beyond = ndimage.binary_dilation(disc, iterations=4) & ~ndimage.binary_dilation(
        disc, iterations=3
    )

    def white(ring: np.ndarray) -> float:
        return float(np.all(win[ring] >= 250, axis=1).mean())

    ringed = None if white(beyond) > 0.5 else white(near) > 0.9  # None: white all around
    return DotMeasure(diameter, int(len(xs)), ringed)
