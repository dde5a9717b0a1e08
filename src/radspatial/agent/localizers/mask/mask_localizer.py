"""The ``mask`` localizer: centroids from a label image in the shown frame.

The oracle that validates datasets (``radspatial generate --export-masks``) and checks other
localizers. Named refs map to label ids through the label table; a marker style whose text names
the label (numbers, letters: ``MarkerStyle.label_of``) gives the id directly; a dot is found by
colour, and the structure under it is used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from radspatial.agent.pipeline.types import Context, Found, Ref, register_localizer
from radspatial.core.labels import load_table
from radspatial.imaging.markers import marker_label, marker_mask_label, marker_reader

_DOTS = ("red", "blue", "green")
_EIGHT = np.ones((3, 3), bool)
# a dot this close to a label's centre of mass marks that label (the exported mask is the
# shown image's; its centre can differ from the generator's by resampling, about a pixel)
COM_TOLERANCE_PX = 3.0


def find_dot(image: np.ndarray, colour: str, tol: int = 40) -> tuple[float, float] | None:
    """Centre of the pixels close to pure red/blue/green (ours; MIRP's red and blue are too)."""
    hi, lo = 255 - tol, tol
    channel = {"red": 0, "green": 1, "blue": 2}[colour]
    close = np.ones(image.shape[:2], bool)
    for k in range(3):
        close &= image[:, :, k] >= hi if k == channel else image[:, :, k] <= lo
    if np.count_nonzero(close) < 4:
        return None
    blobs, n = ndimage.label(close)
    biggest = int(np.argmax(np.bincount(blobs.ravel())[1:])) + 1  # the dot, not stray pixels
    ys, xs = np.nonzero(blobs == biggest)
    return float(xs.mean()), float(ys.mean())


def _label_under(mask: np.ndarray, xy: tuple[float, float], radius: int = 4) -> int | None:
    """The label a dot marks: the one whose centre of mass is the dot (MIRP's rules put it
    there, and for a concave structure that point can lie on a neighbour), else the label at
    its centre, else the commonest label within ``radius`` px (at small image sizes the
    resampled label can miss the exact centre of a thin structure), else the nearest centre."""
    nearest = _nearest_centroid(mask, xy)
    if nearest is None:
        return None
    label, distance = nearest
    if distance <= COM_TOLERANCE_PX:
        return label
    x, y = int(round(xy[0])), int(round(xy[1]))
    if mask[y, x]:
        return int(mask[y, x])
    patch = mask[max(0, y - radius) : y + radius + 1, max(0, x - radius) : x + radius + 1]
    values = patch[patch > 0]
    if values.size:
        return int(np.bincount(values).argmax())
    return label


def _nearest_centroid(mask: np.ndarray, xy: tuple[float, float]) -> tuple[int, float] | None:
    """The label whose centre of mass is nearest ``xy``, and its distance in px (None for an
    empty mask): MIRP's rules put a marker at the centre of mass, which lies outside a concave
    structure (an aorta's arch, a curved colon)."""
    ids = np.unique(mask[mask > 0])
    if not ids.size:
        return None
    centres = ndimage.center_of_mass(np.ones_like(mask), mask, ids)  # (y, x) per label
    d = [np.hypot(cx - xy[0], cy - xy[1]) for cy, cx in centres]
    best = int(np.argmin(d))
    return int(ids[best]), float(d[best])


class MaskLocalizer:
    name = "mask"
    reads_truth = True  # an oracle: the true label image (Request.truth)
    thread_safe = True  # keeps no state between calls

    def _label_id(self, ref: Ref, image: np.ndarray, mask: np.ndarray, names: dict[int, str]):
        by_text = marker_label(ref.marker, ref.text)
        if by_text and by_text[0] is not None:
            return by_text
        drawn_from = marker_mask_label(ref.marker)  # contour, box: read against the mask
        if drawn_from is not None and ref.text in _DOTS:
            return drawn_from(image, mask, ref.text), "outline-then-mask"
        if marker_reader(ref.marker) == "colour" and ref.text in _DOTS:
            xy = find_dot(image, ref.text)
            if xy is None:
                return None, "dot-not-found"
            return _label_under(mask, xy), "dot-then-mask"
        if ref.name:
            ids = [i for i, n in names.items() if n == ref.name]
            return (ids[0] if ids else None), "name"
        return None, "no-reference"

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        if context.mask is None:
            raise ValueError("the mask localizer needs a label image (generate --export-masks)")
        mask = context.mask
        names = context.labels or load_table("totalsegmentator").names
        out: list[Found | None] = []
        for ref in refs:
            label_id, how = self._label_id(ref, image, mask, names)
            if label_id is None:
                out.append(None)
                continue
            out.append(_found(mask, int(label_id), how))
        return out


def _found(mask: np.ndarray, label_id: int, how: str) -> Found | None:
    """Centroid, area and component areas (8-connected, largest first) of one label."""
    hit = mask == label_id
    ys, xs = np.nonzero(hit)
    if xs.size == 0:
        return None
    box = hit[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
    comp, _ = ndimage.label(box, structure=_EIGHT)
    areas = sorted((int(a) for a in np.bincount(comp.ravel())[1:]), reverse=True)
    details = {"label_id": label_id, "via": how, "area_px": int(xs.size), "component_areas": areas}
    return Found((float(xs.mean()), float(ys.mean())), 1.0, "mask-centroid", details)


@register_localizer("mask")
def _mask(**_: object) -> MaskLocalizer:
    return MaskLocalizer()
