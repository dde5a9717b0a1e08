"""The ``markers`` localizer: finds the drawn markers (dots, numbers, letters) on a slice.

Dots: pure red / blue / green discs, found by colour (ours have a white ring, MIRP's have none).
Text: dark glyphs on white (our outlined boxes, MIRP's plain boxes, the blank ablation page).
Dark components framed by white are grouped into strings; a string is cut into glyphs (its
components, and thin ink minima where glyphs touch) and every glyph is matched by normalised
cross-correlation against digits and capitals rendered with Pillow's default font (Aileron, which
our generator uses) and DejaVu Sans (matplotlib's package data). MIRP's Arial-like font is
neither; per-glyph matching tolerates that. A small beam search picks the cuts and the reading.
Where the generator's glyphs touch their box (MIRP's boxes below about 360 px), or the reader
finds nothing, the marker is looked for as the generator draws it
(``agent/localizers/markers/marker_templates``).

    >>> loc = create_localizer("markers")
    >>> loc.locate(image, [Ref(marker="numbers", text="52")], Context())[0].xy
    (272.5, 276.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from scipy import ndimage as ndi

# the text reader's parts (glyphs.py is this localizer's own helper module)
from radspatial.agent.localizers.markers.glyphs import (
    _MARGIN,
    _MIN_TEXT_SCORE,
    _REF,
    Box,
    _centre,
    _centre_k,
    _confidence,
    _down,
    _for_text,
    _ink,
    _margin,
    _readings,
    _Slots,
    _slots,
    _text_score,
    _valid,
    glyph_kinds,
    text_regions,
)
from radspatial.agent.localizers.markers.marker_templates import locate_rendered, read_by_look_first
from radspatial.agent.pipeline.types import Context, Found, Ref, register_localizer
from radspatial.imaging.markers import marker_reader

_DOT_RADIUS = 7.5  # ours 7, MIRP's 8


@dataclass(frozen=True)
class ReadMarker:
    """One marker seen in the image."""

    kind: str  # the marker style: numbers | letters | dots | ...
    text: str  # "52", "BZ", "red"
    xy: tuple[float, float]  # centre: ink box centre for text, disc centroid for dots
    bbox: Box
    score: float  # confidence in [0, 1]
    candidates: tuple[tuple[str, float], ...] = ()  # best readings and match scores (text)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "xy": [round(float(v), 2) for v in self.xy],
            "bbox": list(self.bbox),
            "score": round(float(self.score), 4),
            "candidates": [[t, round(float(s), 4)] for t, s in self.candidates],
        }


def find_dots(image: np.ndarray) -> list[ReadMarker]:
    """Every red, blue or green disc, best first, scored by roundness and size."""
    r, g, b = (image[..., k] for k in range(3))
    expected = np.pi * (_DOT_RADIUS * image.shape[1] / _REF) ** 2
    masks = {
        "red": (r >= 150) & (g <= 90) & (b <= 90),
        "blue": (b >= 150) & (r <= 90) & (g <= 90),
        "green": (g >= 150) & (r <= 90) & (b <= 90),
    }
    found: list[ReadMarker] = []
    for colour, mask in masks.items():
        labels, _ = ndi.label(mask)
        for i, sl in enumerate(ndi.find_objects(labels), start=1):
            comp = labels[sl] == i
            area = float(comp.sum())
            if area < 0.15 * expected:
                continue
            radii = (comp.shape[0] - 1) / 2, (comp.shape[1] - 1) / 2
            fill = area / (np.pi * max(radii[0] * radii[1], 0.25))  # ~1 for a pixel disc
            size = min(area / expected, expected / area)
            roundness = np.clip(1 - 2 * max(abs(1 - fill) - 0.15, 0), 0, 1)  # PIL's discs: ~0.85
            # a disc a few px across is far from the continuous one: compare it with the disc
            # the generator draws in that box (at 128 px a dot is 5 px across)
            drawn = area / _pil_disc_area(*comp.shape)
            roundness = max(roundness, np.clip(1 - 2 * max(abs(1 - drawn) - 0.1, 0), 0, 1))
            score = float(roundness * np.clip(1.5 * size, 0, 1))
            ys, xs = np.nonzero(comp)
            xy = (float(xs.mean() + sl[1].start), float(ys.mean() + sl[0].start))
            bbox = (sl[1].start, sl[0].start, sl[1].stop, sl[0].stop)
            found.append(ReadMarker("dots", colour, xy, bbox, score))
    return sorted(found, key=lambda m: -m.score)


@cache
def _pil_disc_area(h: int, w: int) -> float:
    """Pixels of the disc Pillow draws filling an h x w box (``draw_dot``'s ellipse)."""
    from PIL import Image, ImageDraw

    pil = Image.new("L", (w, h))
    ImageDraw.Draw(pil).ellipse((0, 0, w - 1, h - 1), fill=255)
    return max(float((np.asarray(pil) > 0).sum()), 1.0)


@register_localizer("markers")
class MarkerLocalizer:
    """Dots by colour, numbers and letters by glyph matching (no model, CPU only)."""

    name = "markers"
    thread_safe = True  # reads its templates only: one instance serves parallel requests

    def read_all(self, image: np.ndarray) -> list[ReadMarker]:
        """Every marker visible: dots, then each dark string read as each glyph style (numbers,
        letters), the best reading kept."""
        image = _rgb(image)
        out = find_dots(image)
        text_image, k = _for_text(image)
        for box in text_regions(text_image):
            slots = _slots(_ink(text_image, box))
            reads = [(kind, _readings(slots, kind)) for kind in glyph_kinds()]
            kind, top = max(reads, key=lambda kr: kr[1][0][1] if kr[1] else -9.0)
            if top and top[0][1] >= _MIN_TEXT_SCORE:
                conf = _confidence(top[0][1], _margin(top[0][0], top[0][1], top))
                small = _down(box, k)
                out.append(ReadMarker(kind, top[0][0], _centre_k(box, k), small, conf, tuple(top)))
        return out

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        image = _rgb(image)
        regions: list[tuple[Box, _Slots]] | None = None
        out: list[Found | None] = []
        for ref in refs:
            text = (ref.text or "").strip().upper()
            if marker_reader(ref.marker) == "colour" and text in ("RED", "BLUE", "GREEN"):
                out.append(_locate_dot(image, text.lower()))
            elif marker_reader(ref.marker) == "glyphs" and _valid(text, ref.marker):
                if regions is None:
                    text_image, k = _for_text(image)
                    boxes = text_regions(text_image)
                    regions = [(box, _slots(_ink(text_image, box))) for box in boxes]
                first = read_by_look_first(ref.marker, text, image.shape[1])
                found = locate_rendered(image, ref.marker, text) if first else None
                if found is None:
                    found = _glyphs_found(regions, ref.marker, text, k, image.shape, first)
                if found is None and not first:  # e.g. a box merged with bright bone
                    found = locate_rendered(image, ref.marker, text)
                out.append(found)
            else:
                out.append(None)
        return out


def _glyphs_found(
    regions: list[tuple[Box, _Slots]], kind: str, text: str, k: int, shape: tuple, first: bool
) -> Found | None:
    """The glyph reader's ``text`` in the image's own pixels. Where the generator's look goes
    ``first`` (glyphs touching their box: the glyph reader reads fragments there, a "6" of a
    "68" on dark tissue) only a reading cut by the image's edge counts: the look cannot match a
    clipped marker, and the generator keeps its own markers inside the image."""
    found = _locate_text(regions, kind, text)
    if found is None:
        return None
    if k > 1:  # back to the image's own pixels
        box = found.details["bbox"]
        details = {**found.details, "bbox": list(_down(tuple(box), k))}
        found = Found(_centre_k(tuple(box), k), found.score, found.method, details)
    x0, y0, x1, y1 = found.details["bbox"]
    if first and min(x0, y0) > 1 and x1 < shape[1] - 1 and y1 < shape[0] - 1:
        return None
    return found


def _rgb(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=-1)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] < 3:
        raise ValueError(f"markers localizer wants RGB uint8 (H, W, 3), not {image.shape}")
    return image[..., :3]


def _locate_dot(image: np.ndarray, colour: str) -> Found | None:
    dots = [d for d in find_dots(image) if d.text == colour and d.score > 0.2]
    if not dots:
        return None
    best, score = dots[0], dots[0].score
    details: dict[str, Any] = {"bbox": list(best.bbox), "read": colour}
    if len(dots) > 1:  # two discs of the requested colour: which one is meant?
        score *= 0.5 if dots[1].score > best.score - 0.2 else 0.8
        details["candidates"] = [d.to_json() for d in dots[:3]]
    return Found(xy=best.xy, score=float(score), method="dot-color", details=details)


def _locate_text(regions: list[tuple[Box, _Slots]], kind: str, text: str) -> Found | None:
    scored = sorted(((_text_score(s, text), k) for k, (_, s) in enumerate(regions)), reverse=True)
    if not scored or scored[0][0] < _MIN_TEXT_SCORE:
        return None
    score, k = scored[0]
    box, slots = regions[k]
    top = _readings(slots, kind)
    margin = _margin(text, score, top)
    if margin <= -_MARGIN:
        return None  # that region clearly reads as something else
    conf = _confidence(score, margin)
    details: dict[str, Any] = {"bbox": list(box), "read": top[0][0] if top else text}
    details["match"] = round(score, 4)
    if margin < _MARGIN:
        details["candidates"] = [[t, round(float(v), 4)] for t, v in top]
    twin = [v for v, _ in scored[1:2] if v >= _MIN_TEXT_SCORE and (score - v) * len(text) < _MARGIN]
    if twin:  # the requested text seems to appear twice
        conf *= 0.5
        details["also_at"] = [list(_centre(regions[scored[1][1]][0])), round(twin[0], 4)]
    return Found(xy=_centre(box), score=conf, method="glyph-match", details=details)
