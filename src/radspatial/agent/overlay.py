"""The agent's answer drawn on its image (``radspatial agent --overlay``): each found
structure outlined with the centre used, the verdict on top and the question at the bottom. It
reads only the answer's trace, so any localizer's answer draws the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from radspatial.agent.pipeline.agent import AgentAnswer, load_image, verdict
from radspatial.questions import QUESTION_TYPES, get_question_type


def draw_overlay(image: np.ndarray, result: AgentAnswer) -> Image.Image:
    """The image with what was found and the decision drawn on it: each found structure
    outlined (its box) with a cross at the centre used, labels on a dark plate kept inside the
    image, the verdict on top and the question at the bottom."""
    from PIL import ImageDraw, ImageFont

    pil = Image.fromarray(load_image(image))
    draw = ImageDraw.Draw(pil)
    font = ImageFont.load_default(size=max(10, pil.width // 40))
    colours = ("#ffb000", "#00c0ff", "#ff40ff")
    parsed = result.trace.get("parsed") or {}
    kind = parsed.get("kind")  # none after a parse failure: nothing was found either
    roles = get_question_type(kind).roles if kind in QUESTION_TYPES else ()
    found_list = result.trace.get("found")
    found_list = found_list if isinstance(found_list, list) else []
    pts: list[tuple[float, float]] = []
    labels: list[tuple[tuple[float, float], int, str, str]] = []
    for role, found, colour in zip(roles, found_list, colours, strict=False):
        if found is None:
            continue
        x, y = found["xy"]
        pts.append((x, y))
        r = max(6, pil.width // 60)
        box = (found.get("details") or {}).get("bbox")
        if box and len(box) == 4:
            draw.rectangle(tuple(box), outline=colour, width=2)
        draw.line((x - r, y, x + r, y), fill=colour, width=3)
        draw.line((x, y - r, x, y + r), fill=colour, width=3)
        ref = parsed.get(role) or {}
        label = ref.get("name") or ref.get("text") or role
        labels.append(((x, y), r, f"{role}: {label} ({found['score']:.2f})", colour))
    for (x, y), r, text, colour in labels:  # after every point is known: none gets covered
        others = [p for p in pts if p != (x, y)]
        _label(draw, (x + r + 2, y - r), text, colour, font, avoid=others, anchor=(x, y, r))
    for p in pts[1:]:
        draw.line([pts[0], p], fill="#ffffff", width=1)
    decision = result.trace.get("decision") or {}
    measured = decision.get("measured") or {}
    if measured.get("body_centre"):  # orientation: the two measured directions
        cx, cy = measured["body_centre"]
        length = pil.width / 5
        for key, colour, tag in (("patient_left", colours[0], "L"), ("posterior", colours[1], "P")):
            if measured.get(key):
                ux, uy = measured[key]
                end = (cx + length * ux, cy + length * uy)
                draw.line([(cx, cy), end], fill=colour, width=3)
                _label(draw, (end[0] + 3, end[1] + 3), tag, colour, font)
    shown = verdict(result).upper()
    _banner(draw, pil.width, 0, f"{shown}: {decision.get('reason', '')}", font, top=True)
    question = str(result.trace.get("question", ""))
    _banner(draw, pil.width, pil.height, f"Q: {question}", font, top=False)
    return pil


def _label(
    draw: Any,
    xy: tuple[float, float],
    text: str,
    colour: str,
    font: Any,
    *,
    avoid: Sequence[tuple[float, float]] = (),
    anchor: tuple[float, float, int] | None = None,
) -> None:
    """Text on a dark plate, moved inside the image when it would be cut at a border; with
    ``anchor`` (x, y, r), the first plate place around it (right/left, above/below) that covers
    none of the ``avoid`` points (the markers and centres found), else the first."""
    w, h = draw.im.size
    x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
    tw, th = x1 - x0 + 6, y1 - y0 + 6
    places = [xy]
    if anchor is not None:
        ax, ay, r = anchor
        places += [(ax - r - 2 - tw, ay - r), (ax + r + 2, ay + r - th), (ax - r - 2 - tw, ay + r)]

    def inside(p: tuple[float, float]) -> tuple[float, float]:
        return min(max(p[0], 0), max(w - tw, 0)), min(max(p[1], 0), max(h - th, 0))

    def covers(p: tuple[float, float]) -> bool:
        pad = 8
        return any(p[0] - pad <= u <= p[0] + tw + pad and p[1] - pad <= v <= p[1] + th + pad
                   for u, v in avoid)  # fmt: skip

    x, y = next((q for q in map(inside, places) if not covers(q)), inside(xy))
    draw.rectangle((x, y, x + tw, y + th), fill="black")
    draw.text((x + 3 - x0, y + 3 - y0), text, fill=colour, font=font)


def _banner(draw: Any, width: int, y: int, text: str, font: Any, *, top: bool) -> None:
    """One or more lines of white text on black across the image (wrapped to fit)."""
    words, lines, line = text.split(), [], ""
    for word in words:
        trial = f"{line} {word}".strip()
        if line and draw.textlength(trial, font=font) > width - 8:
            lines.append(line)
            line = word
        else:
            line = trial
    lines.append(line)
    step = font.size + 4
    height = step * len(lines) + 4
    y0 = y if top else y - height
    draw.rectangle((0, y0, width, y0 + height), fill="black")
    for k, text_line in enumerate(lines):
        draw.text((4, y0 + 2 + k * step), text_line, fill="white", font=font)
