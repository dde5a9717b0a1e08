"""Finding our own generator's text markers by their exact look, at any image size.

The glyph reader (``agent/localizers/markers/glyphs.py``) needs dark glyphs framed by white. Below
about 360 px the generator's fonts stop shrinking (Pillow's 8 px floor) while MIRP's boxes keep
shrinking with the image, so glyphs touch the box edge (256 px: 10 px of ink in an 11 px box) or
spill over it (below 224 px) and merge with dark tissue; the reader then finds no string. This
module asks the generator instead: it draws the requested marker exactly as ``radspatial generate``
does for this image width (``imaging.markers.draw_text`` in each of ``LOOKS``: both rule
profiles' geometries and our bare text, so the font size, box and padding follow the image size
by the generator's own rule, not a per-size table) and looks for it by masked normalised
cross-correlation. Only the pixels the
marker covers are compared (its box, and ink that spills onto the slice), so the tissue around
it does not matter.

A match counts only where the requested text fits the spot better than every other text of its
style drawn there (a "86" asked where "88" is drawn is not found) and clears ``NCC_MIN``.
``read_by_look_first`` says where this search replaces the glyph reader (glyphs not framed at
this width); elsewhere it only runs when the glyph reader finds nothing. Images drawn by other
tools (MIRP's own font) do not clear ``NCC_MIN``; the glyph reader reads them.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from itertools import product
from typing import Any

import numpy as np

from radspatial.agent.pipeline.types import Found
from radspatial.imaging.markers import (
    GEOMETRIES,
    STRICT_GEOMETRY,
    Mark,
    draw_text,
    marker_style,
    text_box_size,
)

NCC_MIN = 0.97  # the requested marker must correlate this well somewhere (the generator's own
# PNG: 1.000; a neighbouring text in the other profile's box reached 0.93)
LEAD_MIN = 0.001  # ... and fit that spot better than every other text of its style (at 256 px
# "DH" and "OH" differ by a few pixels: 1.000 vs 0.997 on the generator's own PNG)
_LEAD_FULL = 0.05  # a lead this large: full confidence; none: half
FIT_RATIO_MIN = 3.0  # a tie on the covered pixels, broken by the partly covered ones by this much
_BG = (40, 215)  # two backgrounds: pixels that differ between them are not the marker's
# the looks searched: each rule profile's boxes, and our text without its outlined box (the
# blank-page ablation draws bare text on white, which a box without outline matches)
LOOKS = {**GEOMETRIES, "strict_bare": replace(STRICT_GEOMETRY, name="strict_bare", outline=False)}


@cache
def _renders(text: str, size: int, geometry: str) -> tuple[np.ndarray, np.ndarray, tuple]:
    """``text``'s marker as the generator draws it on a ``size`` px wide image, on each of the
    two backgrounds ``_BG`` (grey, with a margin for ink that spills out), and its box centre."""
    from PIL import Image, ImageDraw

    g = LOOKS[geometry]
    w, h = text_box_size(text, size, g)
    m = max(w, h) + 8 * len(text)  # room for ink that spills out of the box (8 px font floor)
    cx, cy = m + w // 2, m + h // 2
    renders = []
    for bg in _BG:
        pil = Image.new("RGB", (w + 2 * m, h + 2 * m), (bg, bg, bg))
        draw_text(ImageDraw.Draw(pil), Mark("numbers", text, (cx, cy)), size,
                  boxed=True, colors={}, geometry=g)  # fmt: skip
        renders.append(np.asarray(pil, np.float32).mean(-1))
    return renders[0], renders[1], (cx - w // 2 + (w - 1) / 2, cy - h // 2 + (h - 1) / 2)


@cache
def _template(text: str, size: int, geometry: str) -> tuple[np.ndarray, np.ndarray, tuple]:
    """(gray values, mask of the pixels the marker covers, (dx, dy) of the box centre from the
    template's top-left) of ``text`` as the generator draws it on a ``size`` px wide image."""
    dark, light, (cx, cy) = _renders(text, size, geometry)
    mask = dark == light
    ys, xs = np.nonzero(mask)
    y0, x0 = ys.min(), xs.min()
    crop = (slice(y0, ys.max() + 1), slice(x0, xs.max() + 1))
    return dark[crop], mask[crop], (cx - x0, cy - y0)


def _ncc_map(gray: np.ndarray, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Masked normalised cross-correlation of the template at every top-left position."""
    from scipy.signal import fftconvolve  # ~1 s to import: not on the way to any --help

    m = mask.astype(np.float32)
    n = float(m.sum())
    t = np.where(mask, values - values[mask].mean(), 0.0).astype(np.float32)
    t_norm = float(np.sqrt((t**2).sum()))
    if gray.shape[0] < m.shape[0] or gray.shape[1] < m.shape[1] or t_norm == 0:
        return np.zeros((0, 0), np.float32)
    flip = (slice(None, None, -1), slice(None, None, -1))
    num = fftconvolve(gray, t[flip], mode="valid")
    s1 = fftconvolve(gray, m[flip], mode="valid")
    s2 = fftconvolve(gray * gray, m[flip], mode="valid")
    var = np.maximum(s2 - s1 * s1 / n, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ncc = np.where(var > 1e-3 * n, num / (np.sqrt(var) * t_norm), 0.0)
    return ncc.astype(np.float32)


@cache
def framed(text: str, size: int) -> bool:
    """Whether the generator leaves white around ``text``'s glyphs at this image width in every
    rule profile (what the glyph reader needs): False where its ink touches or spills over the
    box edge (MIRP's boxes below about 300 px, a wide pair such as "WM" up to 768 px)."""
    for geometry, g in GEOMETRIES.items():
        if g.box_w_per_char is None:
            continue  # a box sized from the text and its padding always frames it
        values = _template(text, size, geometry)[0]
        w, h = text_box_size(text, size, g)
        if values.shape != (h, w):
            return False  # ink spills out of the box
        ink = values < 128
        if ink[0].any() or ink[-1].any() or ink[:, 0].any() or ink[:, -1].any():
            return False  # ink on the box's edge
    return True


def read_by_look_first(kind: str, text: str, size: int) -> bool:
    """Whether to look for the generator's drawing of ``text`` before reading glyphs: where the
    text is not ``framed`` at this width, or where the generator's font is at Pillow's 8 px
    floor in some profile (its boxes then shrink under the glyphs, most texts are not framed,
    and the glyph reader reads fragments of them: the "T" of an "AT" whose "A" touches dark
    tissue, read as "IT")."""
    return not framed(text, size) or _font_floored(size)


@cache
def _font_floored(size: int) -> bool:
    from radspatial.imaging.markers import _font

    return any(_font(size, g.font_px).size > round(g.font_px * size / 512) for g in LOOKS.values())


@cache
def style_texts(kind: str) -> tuple[str, ...]:
    """Every text a glyph style can show (numbers: 1-999, letters: AA-ZZ)."""
    first, rest, lengths = marker_style(kind).glyphs or ("", "", ())
    return tuple(
        a + "".join(b) for n in lengths for a in first for b in product(rest, repeat=n - 1)
    )


def locate_rendered(image: np.ndarray, kind: str, text: str) -> Found | None:
    """Where the generator's marker ``text`` of glyph style ``kind`` is drawn on ``image``
    (RGB uint8), or None. ``details``: the geometry, the NCC, the runner-up text and its NCC."""
    gray = image.astype(np.float32).mean(-1)
    size = image.shape[1]
    best = _best_look(gray, kind, text, size)
    if best is None:
        return None
    score, geometry, xy, ncc, (rival_ncc, rival) = best
    conf = float(np.clip((score - NCC_MIN) / (1 - NCC_MIN), 0, 1))
    conf *= float(np.clip(0.5 + (score - rival_ncc) / (2 * _LEAD_FULL), 0, 1))
    details: dict[str, Any] = {"read": text, "geometry": geometry, "ncc": round(score, 4)}
    details["runner_up"] = [rival, round(rival_ncc, 4)]
    _, mask, (dx, dy) = _template(text, size, geometry)
    h, w = mask.shape
    tw, th = text_box_size(text, size, LOOKS[geometry])
    x0, y0 = xy[0] - (tw - 1) / 2, xy[1] - (th - 1) / 2
    details["bbox"] = [round(x0), round(y0), round(x0) + tw, round(y0) + th]
    again = _second_peak(ncc, (round(xy[0] - dx), round(xy[1] - dy)), (w, h))
    if again is not None and again[0] >= max(NCC_MIN, score - _LEAD_FULL):
        conf *= 0.5  # the requested text seems to appear twice
        details["also_at"] = [[again[1][0] + dx, again[1][1] + dy], round(again[0], 4)]
    return Found(xy=(float(xy[0]), float(xy[1])), score=conf, method="marker-template",
                 details=details)  # fmt: skip


def _best_look(gray: np.ndarray, kind: str, text: str, size: int):
    """(NCC, look, centre, NCC map, (runner-up NCC, text)) of the first look, best peak first,
    whose peak reaches ``NCC_MIN`` and where ``text`` fits its spot better than every other
    text of the style drawn in that look; None if no look does. (Each look against itself: a
    look whose mask is a small part of another's, MIRP's 4 px box at 128 px, would tie texts
    that the larger look tells apart.)"""
    peaks = []
    for geometry in LOOKS:
        values, mask, (dx, dy) = _template(text, size, geometry)
        ncc = _ncc_map(gray, values, mask)
        if ncc.size:
            y, x = np.unravel_index(int(np.argmax(ncc)), ncc.shape)
            peaks.append((float(ncc[y, x]), geometry, (x + dx, y + dy), ncc))
    for score, geometry, xy, ncc in sorted(peaks, key=lambda p: -p[0]):
        if score < NCC_MIN:
            break
        (rival_ncc, rival), longer = _runner_up(gray, kind, text, size, geometry, xy)
        if score - longer[0] < LEAD_MIN:
            continue  # a longer text fits as well: ``text`` is a fragment of it
        if score - rival_ncc >= LEAD_MIN:
            return score, geometry, xy, ncc, (rival_ncc, rival)
        if _fit_ratio(gray, kind, text, size, geometry, xy) >= FIT_RATIO_MIN:
            return score, geometry, xy, ncc, (score, rival)  # a tie the partial pixels break
    return None  # not there, or another text fits the spot as well


def _fit_ratio(gray: np.ndarray, kind: str, text: str, size: int, geometry: str, xy) -> float:
    """How much better ``text`` explains the spot than the best other text of its style and
    length, counting the pixels its ink only partly covers (the masked NCC leaves them out):
    each drawn pixel is ``marker part + background share x tissue``, the tissue fitted as one
    grey level per text over the pixels any text covers; the rivals' best residual over
    ``text``'s (large: clearly ``text``; about 1: a tie)."""
    texts, part, share, (cx, cy) = _cover_stack(kind, len(text), size, geometry)
    h, w = share.shape[1:]
    x0, y0 = round(xy[0] - cx), round(xy[1] - cy)
    big = np.pad(gray, max(h, w), mode="edge")
    o = big[y0 + max(h, w) :, x0 + max(h, w) :][:h, :w].astype(np.float64)
    used = (share < 1).any(0)
    o, part, share = o[used], part[:, used], share[:, used]
    tissue = (share * (o - part)).sum(1) / np.maximum((share * share).sum(1), 1e-9)
    res = ((o - part - share * tissue[:, None]) ** 2).sum(1)
    k = texts.index(text)
    own, res[k] = res[k], np.inf
    return float(res.min() / max(own, 1e-6))


@cache
def _cover_stack(kind: str, n_chars: int, size: int, geometry: str):
    """Every text of the style with ``n_chars`` characters as (texts, marker part (T, H, W),
    background share (T, H, W), centre), on one grid aligned by box centres: a drawn pixel is
    ``part + share x background`` (share 1, part 0 where the marker is not)."""
    texts = [t for t in style_texts(kind) if len(t) == n_chars]
    rend = [_renders(t, size, geometry) for t in texts]
    cx, cy = max(c[0] for *_, c in rend), max(c[1] for *_, c in rend)
    w = int(np.ceil(max(cx + d.shape[1] - c[0] for d, _, c in rend)))
    h = int(np.ceil(max(cy + d.shape[0] - c[1] for d, _, c in rend)))
    part, share = np.zeros((len(texts), h, w)), np.ones((len(texts), h, w))
    for k, (dark, light, c) in enumerate(rend):
        x0, y0 = round(cx - c[0]), round(cy - c[1])
        sl = (k, slice(y0, y0 + dark.shape[0]), slice(x0, x0 + dark.shape[1]))
        share[sl] = (light - dark) / (_BG[1] - _BG[0])
        part[sl] = dark - share[sl] * _BG[0]
    return texts, part, share, (cx, cy)


def _runner_up(
    gray: np.ndarray, kind: str, text: str, size: int, geometry: str, xy: tuple
) -> tuple[tuple[float, str], tuple[float, str]]:
    """The other texts of the style that best fit near the spot (box centre within a glyph's
    width across and a quarter glyph down of ``xy``): (NCC, text) of the best with ``text``'s
    length, and of the best longer one. Longer texts and offsets catch fragments: the "3" of
    a "36" fits the "3" alone as well as "36" fits the pair. (A shorter text that fits as well
    is a fragment of ``text``: no rival.)"""
    from numpy.lib.stride_tricks import sliding_window_view

    from radspatial.imaging.markers import _font

    glyph = _font(size, LOOKS[geometry].font_px).size
    rx, ry = glyph, max(1, glyph // 4)
    best = {True: (-1.0, ""), False: (-1.0, "")}
    for n_chars in sorted({len(t) for t in style_texts(kind) if len(t) >= len(text)}):
        texts, values, masks, (cx, cy) = _stack(kind, n_chars, size, geometry)
        h, w = masks.shape[1:]
        x0, y0 = round(xy[0] - cx) - rx, round(xy[1] - cy) - ry
        pad = max(h, w) + rx + ry
        big = np.pad(gray, pad, mode="edge").astype(np.float64)
        region = big[y0 + pad : y0 + pad + h + 2 * ry, x0 + pad : x0 + pad + w + 2 * rx]
        wins = sliding_window_view(region, (h, w)).reshape(-1, h * w)  # (offsets, pixels)
        m, mv = masks.reshape(len(texts), -1), values.reshape(len(texts), -1)
        n, sb, sbb = m.sum(1), mv.sum(1), (mv * mv).sum(1)  # mv is 0 outside the mask
        sa, saa, sab = wins @ m.T, (wins * wins) @ m.T, wins @ mv.T  # (offsets, texts)
        with np.errstate(divide="ignore", invalid="ignore"):
            ncc = (sab - sa * sb / n) / np.sqrt((saa - sa * sa / n) * (sbb - sb * sb / n))
        ncc = np.where(np.isfinite(ncc), ncc, -1.0).max(0)
        if text in texts:
            ncc[texts.index(text)] = -1.0
        k, same = int(np.argmax(ncc)), n_chars == len(text)
        if ncc[k] > best[same][0]:
            best[same] = (float(ncc[k]), texts[k])
    return best[True], best[False]


@cache
def _stack(kind: str, n_chars: int, size: int, geometry: str):
    """Every text of the style with ``n_chars`` characters, as templates on one grid aligned
    by their box centres: (texts, values (T, H, W) zero outside the masks, masks, centre)."""
    texts = [t for t in style_texts(kind) if len(t) == n_chars]
    temps = [_template(t, size, geometry) for t in texts]
    cx = max(c[0] for _, _, c in temps)
    cy = max(c[1] for _, _, c in temps)
    w = int(np.ceil(max(cx + m.shape[1] - c[0] for _, m, c in temps)))
    h = int(np.ceil(max(cy + m.shape[0] - c[1] for _, m, c in temps)))
    values = np.zeros((len(temps), h, w), np.float64)
    masks = np.zeros((len(temps), h, w), np.float64)
    for k, (v, m, c) in enumerate(temps):
        x0, y0 = round(cx - c[0]), round(cy - c[1])
        sl = (k, slice(y0, y0 + m.shape[0]), slice(x0, x0 + m.shape[1]))
        values[sl], masks[sl] = np.where(m, v, 0.0), m
    return texts, values, masks, (cx, cy)


def _second_peak(ncc: np.ndarray, at: tuple[int, int], wh: tuple[int, int]):
    """(value, (x, y)) of the best position at least a template away from ``at``."""
    far = ncc.copy()
    x, y = at
    w, h = wh
    far[max(0, y - h) : y + h + 1, max(0, x - w) : x + w + 1] = -1
    if far.size == 0 or far.max() < 0:
        return None
    y2, x2 = np.unravel_index(int(np.argmax(far)), far.shape)
    return float(far[y2, x2]), (int(x2), int(y2))
