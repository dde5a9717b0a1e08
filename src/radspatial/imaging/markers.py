"""Drawing MIRP-style markers: numbers and letters in small white boxes, red and blue dots.

Markers are drawn after the rotation/flip, so text is always upright. Sizes scale with the image
(defined at 512 px, like MIRP's images).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MARKER_TYPES: tuple[str, ...] = ("numbers", "letters", "dots")
DOT_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0),
    "blue": (0, 0, 255),
    "green": (0, 255, 0),  # only for questions about three structures (distance)
}
DOT_ORDER: tuple[str, ...] = ("red", "blue", "green")

_REF = 512  # sizes below are for a 512 px image
_FONT_PX = 13
_PAD_X, _PAD_Y = 4, 3
_DOT_RADIUS = 7
_DOT_RING = 2


@dataclass(frozen=True)
class Mark:
    kind: str  # numbers | letters | dots
    text: str  # "52", "BZ", or a DOT_COLORS key
    xy: tuple[float, float]  # centre, shown frame


@cache
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=max(8, round(_FONT_PX * size / _REF)))


def _scaled(v: float, size: int) -> int:
    return max(1, round(v * size / _REF))


def text_box_size(text: str, size: int) -> tuple[int, int]:
    """Width and height of a text marker's box, in px."""
    left, top, right, bottom = _font(size).getbbox(text)
    return (right - left + 2 * _scaled(_PAD_X, size), bottom - top + 2 * _scaled(_PAD_Y, size))


def marker_area(size: int) -> float:
    """Nominal marker area used for eligibility: the largest box (three digits) at this size."""
    w, h = text_box_size("888", size)
    return float(w * h)


def marker_extent(size: int) -> float:
    """Half the diagonal of the largest marker: two markers closer than twice this overlap."""
    w, h = text_box_size("888", size)
    return 0.5 * float(np.hypot(w, h))


def dot_extent(size: int) -> int:
    """Outer radius of a drawn dot (disc plus white ring), in px."""
    return _scaled(_DOT_RADIUS, size) + _scaled(_DOT_RING, size)


def _clamp_center(xy: tuple[float, float], half: tuple[float, float], size: int) -> tuple[int, int]:
    x = min(max(xy[0], half[0]), size - 1 - half[0])
    y = min(max(xy[1], half[1]), size - 1 - half[1])
    return round(x), round(y)


def draw_marks(
    image: np.ndarray,
    marks: Sequence[Mark],
    *,
    boxed: bool = True,
    colors: Mapping[str, tuple[int, int, int]] = DOT_COLORS,
) -> np.ndarray:
    """Draw markers on an RGB uint8 image (H, W, 3); returns a new array.

    ``boxed=False`` draws bare black text (MIRP's blank-image ablation style); ``colors`` names
    the dot colours (the SPAR probes use a four-colour palette).
    """
    size = image.shape[1]
    pil = Image.fromarray(image, "RGB")
    draw = ImageDraw.Draw(pil)
    for mark in marks:
        if mark.kind == "dots":
            if mark.text not in colors:
                raise ValueError(
                    f"dot colour must be one of {', '.join(colors)}, not {mark.text!r}"
                )
            r = _scaled(_DOT_RADIUS, size)
            ring = _scaled(_DOT_RING, size)
            cx, cy = _clamp_center(mark.xy, (r + ring, r + ring), size)
            draw.ellipse((cx - r - ring, cy - r - ring, cx + r + ring, cy + r + ring), fill="white")
            draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colors[mark.text])
        elif mark.kind in ("numbers", "letters"):
            w, h = text_box_size(mark.text, size)
            cx, cy = _clamp_center(mark.xy, (w / 2, h / 2), size)
            if boxed:
                box = (cx - w // 2, cy - h // 2, cx - w // 2 + w, cy - h // 2 + h)
                draw.rounded_rectangle(box, radius=_scaled(4, size), fill="white", outline="black")
            draw.text((cx, cy), mark.text, fill="black", font=_font(size), anchor="mm")
        else:
            raise ValueError(f"unknown marker type {mark.kind!r}; expected one of {MARKER_TYPES}")
    return np.asarray(pil)
