"""The patient's body in a slice, and where a region lies in it: image functions shared by the
generator's decidability (``bench/decidable.py``), the ``organs`` localizer and its training
(``training/organs_data.py``), so the three read one body.

The body is the largest connected region brighter than air, its holes filled (the lungs lie
inside it; an arm apart from the trunk and the table are left out).
"""

from __future__ import annotations

import numpy as np

BODY_HU = -500.0  # air / body threshold in HU (air ~-1000, fat -100, lung -850: a filled hole)
BODY_GREY = 12.0  # 8-bit grey above which a pixel is body (air is 0-13 at any window tried)


def body_mask(inside: np.ndarray, *, eight: bool = True) -> np.ndarray:
    """The largest connected region of ``inside`` with its holes filled; ``eight``: pixels
    touching at a corner connect (else only along an edge)."""
    from scipy import ndimage

    structure = np.ones((3, 3), bool) if eight else None
    comp, n = ndimage.label(inside, structure=structure)
    if n == 0:
        return np.zeros_like(inside, bool)
    sizes = np.bincount(comp.ravel())[1:]
    return ndimage.binary_fill_holes(comp == int(np.argmax(sizes)) + 1)


def body_of(gray: np.ndarray) -> np.ndarray:
    """The body of an 8-bit grey slice."""
    return body_mask(gray > BODY_GREY)


def body_radius(body: np.ndarray) -> float:
    """Radius (px) of the disc with the body's area."""
    return float(np.sqrt(max(body.sum(), 1) / np.pi))


def region_stats(region: np.ndarray, body: np.ndarray) -> tuple[float, float]:
    """(area / body area, distance of the region's centroid from the body's / body radius)."""
    area = float(body.sum())
    ys, xs = np.nonzero(region)
    by, bx = np.nonzero(body)
    radius = float(np.sqrt(area / np.pi))
    d = float(np.hypot(xs.mean() - bx.mean(), ys.mean() - by.mean())) if xs.size else 0.0
    return float(xs.size) / area, d / radius
