"""Visual prompts beyond MIRP's markers: ``contour``, ``box`` and ``point`` (MIS-Ground's mask,
box and point prompts), each one ``MarkerStyle``.

Like dots, each object gets a colour (red, blue, green for a third) drawn at random per slice,
so the words name no structure. What is drawn differs:

- ``contour``: the structure's outline (its boundary pixels, drawn inward); RQ3 and AS "Is the
  red outline above the blue outline?", RQ2 "Is the liver (outlined in red) above the spleen
  (outlined in blue)?"; on a blank (AS) page, with no structure, a circle outline;
- ``box``: the structure's bounding box; RQ3/AS "the red box", RQ2 "the liver (in the red
  box)"; on a blank page a square;
- ``point``: a small disc (a third of a dot's radius, no ring) on the structure's marker point
  (as dots: the centre of mass, or the nearest inside point); RQ3/AS "the red point marker"
  ("red point" alone is a dot's wording), RQ2 "the liver (at the red point)".

The mask oracle (``agent:mask``) reads contour and box back from the label image
(``mask_label``: the label whose boundary is drawn, the label whose bounding box is drawn) and
the point by colour, like a dot. The agent's ``markers`` reader has no reader for outlines and
boxes (``reader="none"``: it abstains); it reads a point as a dot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypedDict

import numpy as np

from radspatial.imaging.markers import (
    DOT_ORDER,
    MarkerGeometry,
    MarkerStyle,
    _clamp_center,
    _scaled,
    dot_extent,
    register_marker_style,
)

_COLOURS = "(red|blue|green)"
_LINE_PX = 3  # outline and box line width at 512 px


def _colour_texts(label_ids: Sequence[int], colours: Sequence[str]) -> tuple[str, ...]:
    return tuple(colours)


def _colour_blank(rng: np.random.Generator) -> tuple[str, str]:
    return ("red", "blue") if rng.random() < 0.5 else ("blue", "red")


def _classifier(pattern: str):
    """A style's ``classify``: a colour, or its RQ2 parenthetical ("outlined in red") -> the
    colour (a bare colour token is a dot's first: dots come before these in the registry)."""
    import re

    compiled = re.compile(rf"^(?:{pattern}|{_COLOURS})$", re.IGNORECASE)

    def classify(text: str, strict: bool) -> str | None:
        m = compiled.match(text.strip())
        return next(g for g in m.groups() if g).lower() if m else None

    return classify


def _line(size: int) -> int:
    return _scaled(_LINE_PX, size)


def _edge(region: np.ndarray, width: int) -> np.ndarray:
    """The region's boundary, ``width`` px inward (what ``contour`` draws)."""
    from scipy import ndimage

    inner = ndimage.binary_erosion(region, iterations=width, border_value=0)
    return region & ~inner


def _bbox(region: np.ndarray) -> tuple[int, int, int, int] | None:
    ys, xs = np.nonzero(region)
    if xs.size == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


def _draw_contour(draw, mark, size: int, *, boxed: bool, colors: Mapping, geometry: MarkerGeometry):
    """The structure's outline; a circle outline about the point on a blank page (or where the
    region has no pixel at this size: never an invisible mark)."""
    colour = colors[mark.text]
    if mark.region is None or not mark.region.any():
        r = dot_extent(size, geometry)
        cx, cy = _clamp_center(mark.xy, (r, r), size)
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline=colour, width=_line(size))
        return
    ys, xs = np.nonzero(_edge(mark.region, _line(size)))
    draw.point(list(zip(xs.tolist(), ys.tolist(), strict=True)), fill=colour)


def _draw_box(draw, mark, size: int, *, boxed: bool, colors: Mapping, geometry: MarkerGeometry):
    """The structure's bounding box; a square about the point on a blank page."""
    colour = colors[mark.text]
    box = None if mark.region is None else _bbox(mark.region)
    if box is None:
        r = dot_extent(size, geometry)
        cx, cy = _clamp_center(mark.xy, (r, r), size)
        box = (cx - r, cy - r, cx + r, cy + r)
    draw.rectangle(box, outline=colour, width=_line(size))


def _draw_point(draw, mark, size: int, *, boxed: bool, colors: Mapping, geometry: MarkerGeometry):
    """A small disc (no ring), a third of a dot's radius, at least 1 px."""
    r = max(1, round(dot_extent(size, geometry) / 3))
    cx, cy = _clamp_center(mark.xy, (r, r), size)
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colors[mark.text])


def _pure(image: np.ndarray, colour: str, tol: int = 40) -> np.ndarray:
    channel = {"red": 0, "green": 1, "blue": 2}[colour]
    close = np.ones(image.shape[:2], bool)
    for k in range(3):
        close &= image[:, :, k] >= 255 - tol if k == channel else image[:, :, k] <= tol
    return close


def _contour_label(image: np.ndarray, mask: np.ndarray, text: str) -> int | None:
    """The label most of whose drawn boundary is this colour (another outline may cover some)."""
    drawn = _pure(image, text)
    if mask.shape != drawn.shape or not drawn.any():
        return None
    width = _line(mask.shape[1])
    best, score = None, 0.0
    for label in np.unique(mask[drawn & (mask > 0)]):
        edge = _edge(mask == label, width)
        hit = np.count_nonzero(drawn & edge) / max(1, int(np.count_nonzero(edge)))
        if hit > score:
            best, score = int(label), hit
    return best if score >= 0.5 else None


def _box_label(image: np.ndarray, mask: np.ndarray, text: str) -> int | None:
    """The label whose bounding box is the drawn box (the best overlap of the two boxes)."""
    drawn = _bbox(_pure(image, text))
    if drawn is None or mask.shape != image.shape[:2]:
        return None

    def area(b: tuple[int, int, int, int]) -> int:
        return max(0, b[2] - b[0] + 1) * max(0, b[3] - b[1] + 1)

    best, score = None, 0.0
    for label in np.unique(mask[mask > 0]):
        own = _bbox(mask == label)
        if own is None:  # never: the label is in the mask
            continue
        inter = (max(own[0], drawn[0]), max(own[1], drawn[1]))  # top-left
        inter4 = (*inter, min(own[2], drawn[2]), min(own[3], drawn[3]))  # and bottom-right
        iou = area(inter4) / (area(own) + area(drawn) - area(inter4))
        if iou > score:
            best, score = int(label), iou
    return best if score >= 0.8 else None


class _Common(TypedDict):
    """The MarkerStyle fields every colour-named style shares."""

    examples: tuple[str, ...]
    texts: Callable[[Sequence[int], Sequence[str]], tuple[str, ...]]
    blank_texts: Callable[[np.random.Generator], tuple[str, str]]
    token: str


_COMMON: _Common = {
    "examples": DOT_ORDER,
    "texts": _colour_texts,
    "blank_texts": _colour_blank,
    "token": "red|blue|green",
}


def _region_style(
    name: str, noun: str, named: str, classify: str, draw: Callable, mask_label: Callable
) -> MarkerStyle:
    """A style drawn around the structure's region, named by its colour ("the red {noun}")."""
    return register_marker_style(
        MarkerStyle(
            name=name,
            phrase=f"the {{}} {noun}",
            named=named,
            reference=rf"{_COLOURS}\s+{noun}",
            classify=_classifier(classify),
            nouns=(noun,),
            reader="none",
            draw=draw,
            needs_region=True,
            mask_label=mask_label,
            **_COMMON,
        )
    )


CONTOUR = _region_style(
    "contour", "outline", "outlined in {}", rf"outlined\s+in\s+{_COLOURS}", _draw_contour,
    _contour_label,
)  # fmt: skip
BOX = _region_style(
    "box", "box", "in the {} box", rf"in\s+the\s+{_COLOURS}\s+box", _draw_box, _box_label
)

POINT = register_marker_style(
    MarkerStyle(
        name="point",
        phrase="the {} point marker",
        named="at the {} point",
        reference=rf"{_COLOURS}\s+point\s+marker",
        classify=_classifier(rf"at\s+the\s+{_COLOURS}\s+point"),
        reader="colour",
        draw=_draw_point,
        **_COMMON,
    )
)
