"""The ``mask`` localizer: centroids from a label image in the shown frame.

The oracle that validates datasets (``radspatial generate --export-masks``) and checks other
localizers. Named refs map to label ids through the label table; number and letter markers give
the id directly; a dot is found by colour, and the structure under it is used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from radspatial.agent.types import Context, Found, Ref, register_localizer
from radspatial.labels import letter_to_id, load_table

_DOTS = ("red", "blue")


def find_dot(image: np.ndarray, colour: str, tol: int = 40) -> tuple[float, float] | None:
    """Centre of the pixels close to pure red/blue (our dots; MIRP's use the same colours)."""
    r, g, b = image[:, :, 0], image[:, :, 1], image[:, :, 2]
    hi, lo = 255 - tol, tol
    if colour == "red":
        close = (r >= hi) & (g <= lo) & (b <= lo)
    else:
        close = (b >= hi) & (r <= lo) & (g <= lo)
    if np.count_nonzero(close) < 4:
        return None
    blobs, n = ndimage.label(close)
    biggest = int(np.argmax(np.bincount(blobs.ravel())[1:])) + 1  # the dot, not stray pixels
    ys, xs = np.nonzero(blobs == biggest)
    return float(xs.mean()), float(ys.mean())


class MaskLocalizer:
    name = "mask"

    def _label_id(self, ref: Ref, image: np.ndarray, mask: np.ndarray, names: dict[int, str]):
        if ref.marker == "numbers" and ref.text and ref.text.isdigit():
            return int(ref.text), "marker-number"
        if ref.marker == "letters" and ref.text:
            return letter_to_id(ref.text), "marker-letters"
        if ref.marker == "dots" and ref.text in _DOTS:
            xy = find_dot(image, ref.text)
            if xy is None:
                return None, "dot-not-found"
            under = int(mask[int(round(xy[1])), int(round(xy[0]))])
            return (under or None), "dot-then-mask"
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
            ys, xs = np.nonzero(mask == label_id)
            if xs.size == 0:
                out.append(None)
                continue
            out.append(
                Found(
                    xy=(float(xs.mean()), float(ys.mean())),
                    score=1.0,
                    method="mask-centroid",
                    details={"label_id": int(label_id), "via": how, "area_px": int(xs.size)},
                )
            )
        return out


@register_localizer("mask")
def _mask(**_: object) -> MaskLocalizer:
    return MaskLocalizer()
