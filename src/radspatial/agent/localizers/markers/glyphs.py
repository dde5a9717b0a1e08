"""Reading dark glyph strings (numbers, letters) on a slice, for the ``markers`` localizer.

Dark components framed by white are grouped into strings; a string is cut into glyphs (its
components, and thin ink minima where glyphs touch) and every glyph is matched by normalised
cross-correlation against digits and capitals rendered with Pillow's default font (Aileron, which
our generator uses) and DejaVu Sans (matplotlib's package data). A small beam search picks the
cuts and the reading. Small images are read on a 2x upsampled copy (``for_text``).
"""

from __future__ import annotations

import importlib.util
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import ImageFont
from scipy import ndimage as ndi

from radspatial.imaging.markers import marker_style, marker_styles

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (x1, y1 exclusive)

_REF = 512  # pixel sizes below are for a 512 px image
_INK_MAX = 110  # every channel below this: glyph ink (coloured dots are never ink)
_CORE = 1 - _INK_MAX / 255  # the same threshold on the 0..1 ink scale
_BRIGHT_MIN = 180  # every channel at or above this: white box / blank page
_FRAME_OK = 0.8  # share of the frame 2 px around a glyph that must be white (or other glyphs)
_FEAT = 16  # glyphs are warped to _FEAT x _FEAT before matching
_FULL_WIDTH = 0.6  # glyphs at least this wide (w/h) fill the feature width; thinner keep it
_ASPECT_WEIGHT = 0.3  # score penalty per unit |log aspect mismatch|
_INK_CUT_COST = 0.1  # cutting through ink (touching glyphs) costs this much
_MIN_TEXT_SCORE = 0.55  # the requested text reads worse than this: not found
_MARGIN = 0.1  # summed glyph scores: a reading this far ahead of the next is unambiguous,
# and a requested text this far behind its region's best reading is not there
CHARS = string.digits + string.ascii_uppercase


def glyph_kinds() -> list[str]:
    """The marker styles read as glyph strings (numbers, letters), in style order."""
    return [s.name for s in marker_styles() if s.reader == "glyphs"]


def _allowed(kind: str) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(characters allowed first, allowed after, lengths) of a style: its ``glyphs``."""
    glyphs = marker_style(kind).glyphs
    if glyphs is None:
        raise ValueError(f"marker style {kind!r} is not read as glyphs")
    return _masks(*glyphs)


@cache
def _masks(first: str, rest: str, lengths: tuple[int, ...]):
    return np.array([c in first for c in CHARS]), np.array([c in rest for c in CHARS]), lengths


def text_regions(image: np.ndarray) -> list[Box]:
    """Boxes of dark strings on white (glyph-sized components grouped into lines)."""
    hi = np.maximum(np.maximum(image[..., 0], image[..., 1]), image[..., 2])
    lo = np.minimum(np.minimum(image[..., 0], image[..., 1]), image[..., 2])
    labels, _ = ndi.label(hi < _INK_MAX, structure=np.ones((3, 3), bool))
    scale = image.shape[1] / _REF
    hmin, hmax = max(3.0, 5 * scale), 16 * scale
    boxes = [(s[1].start, s[0].start, s[1].stop, s[0].stop) for s in ndi.find_objects(labels)]
    bright = lo >= _BRIGHT_MIN
    # ink that is no speck of noise (a neighbouring glyph, our box outline) may touch the frame
    # (not dark tissue: a glyph merged with it is no neighbour that frames a fragment, e.g. the
    # "3" of a "63" whose "6" touches fat where the box is too tight, at 256 px)
    extent = [max(b[2] - b[0], b[3] - b[1]) for b in boxes]
    solid = np.array([False] + [4 * scale <= e <= 4 * hmax for e in extent])
    parts = [
        b
        for b in boxes
        if (b[2] - b[0]) * (b[3] - b[1]) >= 4
        and b[3] - b[1] <= hmax
        and b[2] - b[0] <= 3.5 * hmax
        and _frame(bright, b) >= 0.5
        and _frame(bright, b, near=(labels, solid)) >= _FRAME_OK
    ]
    # a frame (our box outline on bright bone) encloses glyphs: not a glyph itself
    parts = [a for a in parts if not any(b != a and _inside(b, a) for b in parts)]
    groups = _group(parts)
    return [g for g in groups if hmin <= g[3] - g[1] <= hmax and _frame(bright, g) >= _FRAME_OK]


def _frame(
    bright: np.ndarray, box: Box, near: tuple[np.ndarray, np.ndarray] | None = None
) -> float:
    """Share of the rectangle 2 px outside ``box`` that is bright or, with ``near`` (labels,
    which labels count), next to such ink. Outside the image counts as bright: a marker clipped
    by (or touching) the border is framed by its box on the inner sides only."""
    x0, y0, x1, y1 = box[0] - 2, box[1] - 2, box[2] + 1, box[3] + 1
    ok = _crop(bright, x0, y0, x1 + 1, y1 + 1, True)
    if near is not None:
        labels, solid = near
        lab = _crop(labels, x0 - 1, y0 - 1, x1 + 2, y1 + 2, 0)
        ok = ok | ndi.maximum_filter(solid[lab], 3)[1:-1, 1:-1]
    return float(np.concatenate([ok[0], ok[-1], ok[1:-1, 0], ok[1:-1, -1]]).mean())


def _crop(a: np.ndarray, x0: int, y0: int, x1: int, y1: int, fill: Any) -> np.ndarray:
    """``a[y0:y1, x0:x1]`` with the part outside the image set to ``fill``."""
    h, w = a.shape
    out = np.full((y1 - y0, x1 - x0), fill, a.dtype)
    cy0, cx0, cy1, cx1 = max(y0, 0), max(x0, 0), min(y1, h), min(x1, w)
    if cy1 > cy0 and cx1 > cx0:
        out[cy0 - y0 : cy1 - y0, cx0 - x0 : cx1 - x0] = a[cy0:cy1, cx0:cx1]
    return out


def _inside(a: Box, b: Box) -> bool:
    return b[0] <= a[0] and b[1] <= a[1] and a[2] <= b[2] and a[3] <= b[3]


def _group(parts: list[Box]) -> list[Box]:
    """Components side by side on a line, or stacked pieces of one glyph -> one string box."""
    groups, i = list(parts), 0
    while i < len(groups):
        j = next((j for j in range(i + 1, len(groups)) if _joined(groups[i], groups[j])), None)
        if j is None:
            i += 1
            continue
        a, b = groups[i], groups.pop(j)  # merge, then look again from the merged box
        groups[i] = (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
    return groups


def _joined(a: Box, b: Box) -> bool:
    ha, hb = a[3] - a[1], b[3] - b[1]
    y_overlap = min(a[3], b[3]) - max(a[1], b[1])
    x_overlap = min(a[2], b[2]) - max(a[0], b[0])
    gap = max(b[0] - a[2], a[0] - b[2])
    similar = min(ha, hb) >= 0.5 * max(ha, hb) or gap <= 1  # no specks beside a glyph
    same_line = similar and y_overlap >= 0.5 * min(ha, hb) and gap <= 0.7 * max(ha, hb)
    stacked = x_overlap > 0 and y_overlap >= -2  # e.g. the bar of a "5" broken off its bowl
    return same_line or stacked


def _feature(crop: np.ndarray) -> tuple[np.ndarray, float]:
    """Ink crop (1 = black) -> zero-mean unit vector, and its log aspect ratio."""
    h, w = crop.shape
    rows, cols = _warp(h, w)
    v = (rows @ crop @ cols.T).ravel()
    v = v - v.mean()
    norm = float(np.linalg.norm(v))
    return (v / norm if norm > 0 else v), float(np.log((w + 1) / h))


@cache
def _warp(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Resampling + blur matrices taking an (h, w) crop to _FEAT x _FEAT (a thin "1" keeps its
    width instead of becoming a block)."""
    width = int(min(_FEAT, max(2, round(_FEAT * w / h / _FULL_WIDTH))))
    place = np.zeros((_FEAT, width))
    place[(_FEAT - width) // 2 :][:width] = np.eye(width)
    d = np.arange(_FEAT)[:, None] - np.arange(_FEAT)[None, :]
    blur = np.exp(-0.5 * d**2)
    blur /= blur.sum(1, keepdims=True)
    return blur @ _resample(h, _FEAT), blur @ place @ _resample(w, width)


def _resample(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) triangle-filter resampling (like Pillow's bilinear)."""
    scale = n_in / n_out
    centres = (np.arange(n_out) + 0.5) * scale - 0.5
    w = np.clip(1 - np.abs(np.arange(n_in)[None, :] - centres[:, None]) / max(1.0, scale), 0, None)
    return w / np.maximum(w.sum(1, keepdims=True), 1e-9)


@cache
def _font(name: str, px: int) -> ImageFont.FreeTypeFont:
    if name == "aileron":
        return ImageFont.load_default(size=px)
    spec = importlib.util.find_spec("matplotlib")  # its data only; matplotlib is not imported
    ttf = Path(spec.submodule_search_locations[0]) / "mpl-data/fonts/ttf/DejaVuSans.ttf"
    return ImageFont.truetype(str(ttf) if ttf.exists() else "DejaVuSans.ttf", px)


_FONTS = ("aileron", "dejavu")


def _mask(font: ImageFont.FreeTypeFont, ch: str) -> tuple[np.ndarray, int]:
    """Glyph ink (0..1) and the row of its top relative to the text origin."""
    m = font.getmask(ch, mode="L")
    ink = np.frombuffer(bytes(m), np.uint8).reshape(m.size[1], m.size[0]) / 255.0
    return ink, font.getbbox(ch)[1]


@cache
def _cap_ratio(name: str) -> float:
    """Core ink height of a capital per font px."""
    return float((_mask(_font(name, 100), "H")[0] > _CORE).any(1).sum()) / 100


@cache
def _bank(name: str, px: int) -> tuple[np.ndarray, np.ndarray]:
    """Features (36, D) and log aspects (36,) of every digit and capital at this size, each
    cropped like an observed glyph: its core columns, the capital line's rows joined with its
    own (a Q's tail)."""
    font = _font(name, px)
    h_ink, h_top = _mask(font, "H")
    h_rows = np.flatnonzero((h_ink > _CORE).any(1))
    line = (h_top + h_rows[0], h_top + h_rows[-1] + 1)
    feats = []
    for ch in CHARS:
        ink, top = _mask(font, ch)
        core = ink > (_CORE if (ink > _CORE).any() else 0.3)
        rows, cols = np.flatnonzero(core.any(1)), np.flatnonzero(core.any(0))
        y0, y1 = min(line[0], top + rows[0]), max(line[1], top + rows[-1] + 1)
        box = np.zeros((y1 - y0, cols[-1] + 1 - cols[0]))
        a, b = max(y0, top), min(y1, top + ink.shape[0])
        box[a - y0 : b - y0] = ink[a - top : b - top, cols[0] : cols[-1] + 1]
        feats.append(_feature(box))
    return np.stack([f for f, _ in feats]), np.array([a for _, a in feats])


@cache
def _banks(height: int) -> tuple[np.ndarray, np.ndarray]:
    """All templates for a glyph line ``height`` px tall: fonts x 3 sizes, stacked."""
    sizes = [(n, round(height / _cap_ratio(n)) + d) for n in _FONTS for d in (-1, 0, 1)]
    banks = [_bank(n, max(px, 6)) for n, px in sizes]
    return np.concatenate([f for f, _ in banks]), np.concatenate([a for _, a in banks])


def _glyph_scores(crop: np.ndarray) -> np.ndarray:
    """Best match of every character (``CHARS`` order) for one glyph crop, over fonts/sizes."""
    feat, aspect = _feature(crop)
    feats, aspects = _banks(crop.shape[0])
    scores = feats @ feat - _ASPECT_WEIGHT * np.abs(aspects - aspect)
    return scores.reshape(-1, len(CHARS)).max(0)


@dataclass
class _Slots:
    """A string cut into atoms (glyph components, or column pieces of touching glyphs), with
    the character scores of every run of consecutive atoms."""

    cuts: dict[int, float]  # atom boundary -> cost of a glyph boundary there
    scores: dict[tuple[int, int], np.ndarray]  # (first atom, last atom + 1) -> char scores
    width: int  # number of atoms


def _slots(ink: np.ndarray) -> _Slots:
    core = ink > _CORE
    labels, _ = ndi.label(core, structure=np.ones((3, 3), bool))
    # anti-aliased edge pixels belong to the nearest glyph component
    near = ndi.distance_transform_edt(~core, return_distances=False, return_indices=True)
    owner = labels[near[0], near[1]]
    h = ink.shape[0]
    atoms: list[tuple[int, int, int]] = []  # (label, first column, last column + 1)
    cuts = {0: 0.0}
    comps = ndi.find_objects(labels)
    for k in sorted(range(len(comps)), key=lambda k: comps[k][1].start + comps[k][1].stop):
        c0, c1 = comps[k][1].start, comps[k][1].stop
        pieces = _touching_cuts((labels[:, c0:c1] == k + 1).sum(0), h)
        for j, (p0, p1) in enumerate(zip([0, *pieces], [*pieces, c1 - c0], strict=True)):
            cuts[len(atoms)] = _INK_CUT_COST if j else 0.0
            atoms.append((k + 1, c0 + p0, c0 + p1))
    cuts[len(atoms)] = 0.0
    # the capital line: a Q's tail hangs below it and must not stretch its neighbours
    tall = [c[0] for c in comps if c[0].stop - c[0].start >= 0.6 * h]
    line = (min(r.start for r in tall), min(r.stop for r in tall)) if tall else (0, h)
    cols = np.arange(ink.shape[1])
    scores = {}
    for i in range(len(atoms)):
        mask = np.zeros_like(core)
        for j in range(i, len(atoms)):
            label, c0, c1 = atoms[j]
            mask |= (owner == label) & (cols >= c0) & (cols < c1)
            used = np.flatnonzero((core & mask).any(0))
            if used[-1] + 1 - used[0] > 1.6 * h:
                break
            rows = np.flatnonzero((core & mask).any(1))
            r0, r1 = min(line[0], rows[0]), max(line[1], rows[-1] + 1)
            crop = np.where(mask, ink, 0.0)[r0:r1, used[0] : used[-1] + 1]
            scores[(i, j + 1)] = _glyph_scores(crop)
    return _Slots(cuts, scores, len(atoms))


def _touching_cuts(cols: np.ndarray, h: int) -> list[int]:
    """Where a component wider than a glyph (touching glyphs) may be cut: at both ends of each
    run of thin, locally minimal columns, so a shared column can go to either glyph."""
    if len(cols) <= 0.8 * h:
        return []
    pad = np.concatenate([[cols.max()], cols, [cols.max()]])
    low = (cols <= 0.5 * cols.max()) & (cols <= pad[:-2]) & (cols <= pad[2:])
    low[:2] = low[-2:] = False
    edges = np.flatnonzero(np.diff(np.concatenate([[0], low.astype(np.int8), [0]])))
    return edges.tolist()  # starts and ends of the runs


def _decode(slots: _Slots, allowed: Sequence[np.ndarray], beam: int = 5) -> list[tuple[str, float]]:
    """Best readings with one glyph per ``allowed`` mask: (text, mean glyph score less cuts)."""
    states: dict[int, list[tuple[float, str]]] = {0: [(0.0, "")]}
    for ok in allowed:
        nxt: dict[int, list[tuple[float, str]]] = {}
        for (a, b), sc in slots.scores.items():
            if a in states:
                top = np.argsort(-np.where(ok, sc, -9))[: min(beam, int(ok.sum()))]
                cost = slots.cuts[b] if b != slots.width else 0.0
                for v, s in states[a]:
                    nxt.setdefault(b, []).extend(
                        (v + float(sc[i]) - cost, s + CHARS[i]) for i in top
                    )
        states = {b: sorted(c, reverse=True)[:beam] for b, c in nxt.items()}
    return [(s, v / len(allowed)) for v, s in states.get(slots.width, [])]


def _readings(slots: _Slots, kind: str) -> list[tuple[str, float]]:
    """Best readings of ``kind`` over all its lengths, best first."""
    first, rest, lengths = _allowed(kind)
    reads = [r for n in lengths for r in _decode(slots, [first] + [rest] * (n - 1))]
    return sorted(reads, key=lambda r: -r[1])[:5]


def _text_score(slots: _Slots, text: str) -> float:
    """Mean glyph score of ``text`` under its best cuts (-1 when it cannot be cut so)."""
    read = _decode(slots, [np.array(list(CHARS)) == c for c in text], beam=1)
    return read[0][1] if read else -1.0


def _ink(image: np.ndarray, box: Box) -> np.ndarray:
    x0, y0, x1, y1 = box
    return 1 - image[y0:y1, x0:x1].mean(-1) / 255.0


def _centre(box: Box) -> tuple[float, float]:
    return ((box[0] + box[2] - 1) / 2, (box[1] + box[3] - 1) / 2)


def _margin(text: str, score: float, readings: Sequence[tuple[str, float]]) -> float:
    """Lead of ``text`` over the best other reading, in summed glyph scores."""
    return (score - max((v for t, v in readings if t != text), default=-1.0)) * len(text)


def _confidence(score: float, margin: float) -> float:
    """From the match (0.5 -> 0, 0.85 -> 1), halved for a tie with another reading."""
    lead = np.clip(0.5 + margin / (2 * _MARGIN), 0.0, 1.0)
    return float(np.clip((score - 0.5) / 0.35, 0, 1) * lead)


_SMALL = 400  # narrower images: glyphs of a few px, read on a 2x upsampled copy
_SMALL_INK_GAIN = 1.4  # thin anti-aliased strokes never reach full black: deepen them


def _for_text(image: np.ndarray) -> tuple[np.ndarray, int]:
    """The image the text reader works on, and its scale factor (1, or 2 for small images)."""
    if image.shape[1] >= _SMALL:
        return image, 1
    from PIL import Image

    big = Image.fromarray(image).resize(
        (2 * image.shape[1], 2 * image.shape[0]), Image.Resampling.BICUBIC
    )
    deep = 255 - (255 - np.asarray(big, np.float32)) * _SMALL_INK_GAIN
    return np.clip(deep, 0, 255).astype(np.uint8), 2


def _down(box: Box, k: int) -> Box:
    return (box[0] // k, box[1] // k, -(-box[2] // k), -(-box[3] // k))


def _centre_k(box: Box, k: int) -> tuple[float, float]:
    """Centre of an upsampled box in the original image's pixel coordinates."""
    x, y = _centre(box)
    return ((x + 0.5) / k - 0.5, (y + 0.5) / k - 0.5)


def _valid(text: str, kind: str) -> bool:
    first, rest, lengths = _allowed(kind)
    idx = [CHARS.find(c) for c in text]
    return len(text) in lengths and all(
        i >= 0 and (rest if k else first)[i] for k, i in enumerate(idx)
    )
