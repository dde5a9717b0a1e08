"""Marker styles and their drawing: numbers and letters in small white boxes, coloured dots.

A marker style is one :class:`MarkerStyle` in ``MARKER_STYLES``: everything style-specific (its
texts, how a question refers to one, the in-context example, the parser's patterns, the text ->
label map, its MIRP json field, how it is drawn and which reader the agent needs) in one
object. The built-in styles are defined side by side in ``imaging/marker_styles.py``; every other
module asks the registry. Adding one::

    register_marker_style(MarkerStyle(name="codes", phrase="the code {}", ...))

Markers are drawn after the rotation/flip, so text is always upright. Sizes scale with the image
(defined at 512 px, like MIRP's images).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from radspatial.core.registry import Registry

if TYPE_CHECKING:
    from PIL import ImageDraw, ImageFont

# MIRP's three styles: the default set, in output order (generation, CLI, API)
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
    kind: str  # a marker style's name: numbers | letters | dots | ...
    text: str  # "52", "BZ", or a DOT_COLORS key
    xy: tuple[float, float]  # centre, shown frame
    # the marked structure's pixels (bool, shown frame) for a style that draws from them
    # (``MarkerStyle.needs_region``: contour, box); None elsewhere and on blank (AS) pages
    region: np.ndarray | None = field(default=None, compare=False, repr=False)


# draw(draw, mark, size, boxed=..., colors=..., geometry=...): one mark on a Pillow canvas of
# width ``size`` (``geometry``: the rule profile's MarkerGeometry)
Drawer = Callable[..., None]


def _mirp_text(label_id: int | None, text: str, blank: bool) -> tuple[str, Any]:
    return "gray", text


@dataclass(frozen=True)
class MarkerStyle:
    """One marker style: everything that differs between numbers, letters and dots.

    Generation: ``texts(label_ids, colours)`` gives each object's marker text (``colours`` is
    the slice plan's random per-object colour draw, red/blue/green); ``blank_texts(rng)`` the
    two texts of a blank-image (AS) item. Wording: ``phrase`` refers to one marker ("the number
    {}"), ``plural`` picks the verb ("Are the letters BZ ...", "do the letters BZ mark");
    ``examples`` are the in-context example's marks (first, second, third object). Parsing
    (``agent/pipeline/parse``): ``reference`` matches a marker-only phrase without its article
    (group 1: the text), ``token`` a bare text after "marker"/"label", ``classify(text, strict)``
    returns the canonical text or None (``strict``: a parenthetical, "kidney (lt)" is no marker);
    ``nouns`` are the words naming it before its text (a digit after them is no answer).
    Localizing: ``label_of(text)`` is the label id the text names (None: not deterministic or
    a bad text; ``how`` names that lookup in traces); ``reader`` is how the agent reads it from
    pixels ("glyphs": dark text matched against ``glyphs`` = (first characters, later
    characters, lengths) from digits and capitals; "colour": red/blue/green discs; "none": the
    markers localizer has no reader and abstains). ``mirp(label id, text, blank)`` is its MIRP
    json field (key suffix, value); ``draw`` draws one mark. Styles beyond MIRP's
    (``imaging/marker_prompts.py``): ``named`` words the mark in an RQ2 parenthetical ("{}":
    "the liver (red)"; "outlined in {}"), ``needs_region`` hands ``draw`` the structure's pixels
    (``Mark.region``), ``mask_label(image, label image, text)`` is the label the mark points
    at, for the mask oracle (None: found by colour or text).
    """

    name: str
    phrase: str
    examples: tuple[str, ...]
    texts: Callable[[Sequence[int], Sequence[str]], tuple[str, ...]]
    blank_texts: Callable[[np.random.Generator], tuple[str, str]]
    reference: str
    token: str
    classify: Callable[[str, bool], str | None]
    plural: bool = False
    nouns: tuple[str, ...] = ()
    label_of: Callable[[str], int | None] | None = None
    how: str = ""
    reader: str = "glyphs"
    glyphs: tuple[str, str, tuple[int, ...]] | None = None
    mirp: Callable[[int | None, str, bool], tuple[str, Any]] = _mirp_text
    draw: Drawer | None = None  # None: text in a white box (``draw_text``)
    named: str = "{}"
    needs_region: bool = False
    mask_label: Callable[[np.ndarray, np.ndarray, str], int | None] | None = None

    def ref(self, text: str) -> str:
        """'the number 12', 'the letters BZ', 'the red dot'."""
        return self.phrase.format(text)

    @property
    def verb(self) -> str:
        """'Are' before 'the letters BZ' (MIRP's wording), else 'Is'."""
        return "Are" if self.plural else "Is"


MARKER_STYLES: Registry[MarkerStyle] = Registry(
    "marker style", ("radspatial.imaging.marker_styles", "radspatial.imaging.marker_prompts")
)


def register_marker_style(style: MarkerStyle) -> MarkerStyle:
    """Add a style; its name is a manifest value and a folder suffix (``image_<name>``)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", style.name) or style.name == "none":
        raise ValueError(
            f"marker style name must be lower-case letters/digits/_, not 'none': {style.name!r}"
        )
    if style.reader not in ("glyphs", "colour", "none") or (style.reader == "glyphs") != bool(
        style.glyphs
    ):
        raise ValueError(
            f"marker style {style.name!r}: reader 'glyphs' needs glyphs, 'colour'/'none' none"
        )
    return MARKER_STYLES.add(style.name, style)


def marker_style(name: str) -> MarkerStyle:
    return MARKER_STYLES.get(name)


def marker_styles() -> tuple[MarkerStyle, ...]:
    """Every registered style: MIRP's three in ``MARKER_TYPES`` order, then the others by name."""
    names = MARKER_STYLES.names()
    order = [n for n in MARKER_TYPES if n in names] + [n for n in names if n not in MARKER_TYPES]
    return tuple(MARKER_STYLES.get(n) for n in order)


def marker_names() -> tuple[str, ...]:
    return tuple(s.name for s in marker_styles())


def marker_label(marker: str | None, text: str | None) -> tuple[int | None, str] | None:
    """(label id, how) a marker reference names by its text: ("numbers", "52") -> (52,
    "marker-number"); the id is None for a text the style cannot map ("numbers", "x"). None
    where the text names no label (no marker or text, dots, an unknown style)."""
    if not marker or not text or marker not in MARKER_STYLES:
        return None
    style = MARKER_STYLES.get(marker)
    return None if style.label_of is None else (style.label_of(text), style.how)


def marker_reader(marker: str | None) -> str | None:
    """How the agent reads a marker style from pixels ("glyphs", "colour"); None: no style."""
    return MARKER_STYLES.get(marker).reader if marker and marker in MARKER_STYLES else None


def marker_mask_label(marker: str | None) -> Callable[..., int | None] | None:
    """How the mask oracle reads a style drawn from the structure (contour, box); None else."""
    return MARKER_STYLES.get(marker).mask_label if marker and marker in MARKER_STYLES else None


def marker_nouns() -> frozenset[str]:
    """Words that name a marker before its text ("number", "dot"), over every style."""
    return frozenset(w for s in marker_styles() for w in s.nouns)


# --- drawing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MarkerGeometry:
    """How markers are drawn, in px of a 512 px image (scaled with the image).

    ``strict``: our outlined, rounded boxes sized from the font, dots inside a white ring.
    ``mirp``: MIRP's published look, measured on its PNGs (tests/test_marker_geometry.py):
    square white boxes without outline, 14 px tall and ``6 + 8 px`` per character (14 x 14 for
    "1", 22 x 14 for "52"), glyphs 9 px tall, pure red/blue discs 17 px across, no ring.
    """

    name: str
    font_px: float = _FONT_PX
    pad_x: float = _PAD_X
    pad_y: float = _PAD_Y
    dot_radius: float = _DOT_RADIUS
    dot_ring: float = _DOT_RING
    outline: bool = True  # a rounded box with a 1 px black outline
    box_h: float | None = None  # None: the text's height plus padding
    box_w_per_char: float | None = None  # None: the text's width plus padding

    def box(self, text: str, size: int) -> tuple[int, int]:
        if self.box_w_per_char is not None and self.box_h is not None:
            w = 2 * self.pad_x + self.box_w_per_char * len(text)
            return _scaled(w, size), _scaled(self.box_h, size)
        left, top, right, bottom = _font(size, self.font_px).getbbox(text)
        return (  # FreeType's box is in whole pixels (Pillow's annotation says float)
            int(right - left) + 2 * _scaled(self.pad_x, size),
            int(bottom - top) + 2 * _scaled(self.pad_y, size),
        )


STRICT_GEOMETRY = MarkerGeometry("strict")
MIRP_GEOMETRY = MarkerGeometry(
    "mirp",
    font_px=12,
    pad_x=3,
    pad_y=0,
    dot_radius=8,
    dot_ring=0,
    outline=False,
    box_h=14,
    box_w_per_char=8,
)
GEOMETRIES = {g.name: g for g in (STRICT_GEOMETRY, MIRP_GEOMETRY)}


def marker_geometry(profile: str) -> MarkerGeometry:
    """The drawing geometry of a rule profile (``core.rules.RULE_PROFILES``)."""
    return GEOMETRIES[profile]


@cache
def _font(size: int, px: float = _FONT_PX) -> ImageFont.FreeTypeFont:
    from PIL import ImageFont

    font = ImageFont.load_default(size=max(8, round(px * size / _REF)))
    if not isinstance(font, ImageFont.FreeTypeFont):  # Pillow built without FreeType
        raise RuntimeError("Pillow has no FreeType support: marker text cannot be sized")
    return font


def _scaled(v: float, size: int) -> int:
    return max(1, round(v * size / _REF))


def text_box_size(
    text: str, size: int, geometry: MarkerGeometry = STRICT_GEOMETRY
) -> tuple[int, int]:
    """Width and height of a text marker's box, in px."""
    return geometry.box(text, size)


def marker_area(size: int, geometry: MarkerGeometry = STRICT_GEOMETRY) -> float:
    """Nominal marker area used for eligibility: the largest box (three digits) at this size."""
    w, h = text_box_size("888", size, geometry)
    return float(w * h)


def marker_extent(size: int, geometry: MarkerGeometry = STRICT_GEOMETRY) -> float:
    """Half the diagonal of the largest marker: two markers closer than twice this overlap."""
    w, h = text_box_size("888", size, geometry)
    return 0.5 * float(np.hypot(w, h))


def dot_extent(size: int, geometry: MarkerGeometry = STRICT_GEOMETRY) -> int:
    """Outer radius of a drawn dot (disc plus white ring, if any), in px."""
    ring = _scaled(geometry.dot_ring, size) if geometry.dot_ring else 0
    return _scaled(geometry.dot_radius, size) + ring


def drawn_area(kind: str, text: str, size: int, geometry: MarkerGeometry) -> float:
    """Area in px of the marker ``text`` of style ``kind`` as drawn: its box, or its disc."""
    if marker_style(kind).draw is not None:  # a dot, or a drawing about its point (a dot's size)
        return float(np.pi * dot_extent(size, geometry) ** 2)
    w, h = text_box_size(text, size, geometry)
    return float(w * h)


def marker_half_extent(
    kind: str, text: str, size: int, geometry: MarkerGeometry
) -> tuple[float, float]:
    """Half width and half height of the drawn marker (what ``draw_marks`` keeps inside)."""
    if marker_style(kind).draw is not None:
        r = float(dot_extent(size, geometry))
        return r, r
    w, h = text_box_size(text, size, geometry)
    return w / 2, h / 2


def _clamp_center(xy: tuple[float, float], half: tuple[float, float], size: int) -> tuple[int, int]:
    x = min(max(xy[0], half[0]), size - 1 - half[0])
    y = min(max(xy[1], half[1]), size - 1 - half[1])
    return round(x), round(y)


def draw_text(
    draw: ImageDraw.ImageDraw,
    mark: Mark,
    size: int,
    *,
    boxed: bool,
    colors: Mapping,
    geometry: MarkerGeometry = STRICT_GEOMETRY,
) -> None:
    """Black text, centred on the mark, in a white box (``boxed``) or bare."""
    w, h = text_box_size(mark.text, size, geometry)
    cx, cy = _clamp_center(mark.xy, (w / 2, h / 2), size)
    if boxed:
        box = (cx - w // 2, cy - h // 2, cx - w // 2 + w, cy - h // 2 + h)
        if geometry.outline:
            draw.rounded_rectangle(box, radius=_scaled(4, size), fill="white", outline="black")
        else:  # MIRP's: a plain square box, w x h px exactly
            draw.rectangle((box[0], box[1], box[2] - 1, box[3] - 1), fill="white")
    draw.text((cx, cy), mark.text, fill="black", font=_font(size, geometry.font_px), anchor="mm")


def draw_dot(
    draw: ImageDraw.ImageDraw,
    mark: Mark,
    size: int,
    *,
    boxed: bool,
    colors: Mapping[str, tuple[int, int, int]],
    geometry: MarkerGeometry = STRICT_GEOMETRY,
) -> None:
    """A disc of colour ``colors[mark.text]``, inside a white ring where the geometry has one."""
    if mark.text not in colors:
        raise ValueError(f"dot colour must be one of {', '.join(colors)}, not {mark.text!r}")
    r = _scaled(geometry.dot_radius, size)
    ring = _scaled(geometry.dot_ring, size) if geometry.dot_ring else 0
    cx, cy = _clamp_center(mark.xy, (r + ring, r + ring), size)
    if ring:
        draw.ellipse((cx - r - ring, cy - r - ring, cx + r + ring, cy + r + ring), fill="white")
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colors[mark.text])


def draw_marks(
    image: np.ndarray,
    marks: Sequence[Mark],
    *,
    boxed: bool = True,
    colors: Mapping[str, tuple[int, int, int]] = DOT_COLORS,
    geometry: MarkerGeometry = STRICT_GEOMETRY,
) -> np.ndarray:
    """Draw markers on an RGB uint8 image (H, W, 3); returns a new array.

    ``boxed=False`` draws bare black text (MIRP's blank-image ablation style); ``colors`` names
    the dot colours (the SPAR probes use a four-colour palette); ``geometry`` is the rule
    profile's look (``marker_geometry``).
    """
    from PIL import Image, ImageDraw

    size = image.shape[1]
    pil = Image.fromarray(image, "RGB")
    draw = ImageDraw.Draw(pil)
    for mark in marks:
        if mark.kind not in MARKER_STYLES:
            raise ValueError(f"unknown marker type {mark.kind!r}; expected one of {marker_names()}")
        drawer = marker_style(mark.kind).draw or draw_text
        drawer(draw, mark, size, boxed=boxed, colors=colors, geometry=geometry)
    return np.asarray(pil)
