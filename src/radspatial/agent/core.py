"""The agent: parse -> localize -> verify, with every step recorded in a trace.

agent = Agent("markers")
result = agent.answer(image, "Is the aorta (BZ) above the spleen (AA)?")
result.answer   # 1, 0 or None (abstain)
result.trace    # JSON-safe dict: parsed tuple, localizer, centres, dx/dy, rule, timings
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from radspatial.agent.orientation import body_centre, orientation_refs, verify_orientation
from radspatial.agent.types import (
    ROLES,
    Context,
    Found,
    Localizer,
    ParsedQuestion,
    ParseError,
    create_localizer,
)
from radspatial.agent.verify import (
    Decision,
    verify,
    verify_count,
    verify_distance,
    verify_size,
)
from radspatial.core.labels import load_table
from radspatial.core.rules import MARGIN_PX, MIN_COMPONENT_PX, SIZE_TOLERANCE

MAX_PIXELS = 4096 * 4096


@dataclass(frozen=True)
class AgentAnswer:
    answer: int | str | None  # 1 yes, 0 no, None abstain; open types: the word or number
    text: str  # "1", "0", or "abstain: <reason>"
    trace: dict[str, Any]


def load_image(data: bytes | str | Path | np.ndarray | Image.Image) -> np.ndarray:
    """RGB uint8 array from PNG/JPEG bytes, a path, a PIL image or an array.

    Refuses images over ``MAX_PIXELS`` before decoding them (decompression bombs).
    """
    if isinstance(data, np.ndarray):
        arr = data
    else:
        try:
            if isinstance(data, bytes):
                img = Image.open(io.BytesIO(data))
            elif isinstance(data, Image.Image):
                img = data
            else:
                img = Image.open(data)
        except Image.DecompressionBombError as exc:
            raise ValueError(f"image is over the limit ({exc})") from None
        except (OSError, SyntaxError) as exc:  # PIL's UnidentifiedImageError is an OSError
            raise ValueError(f"not a readable image ({exc})") from None
        if img.width * img.height > MAX_PIXELS:
            raise ValueError(f"image of {img.width} x {img.height} px is over the limit")
        arr = np.asarray(img.convert("RGB"))
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] < 3:
        raise ValueError(f"expected an RGB image, got an array of shape {arr.shape}")
    return np.ascontiguousarray(arr[:, :, :3].astype(np.uint8, copy=False))


class Agent:
    """``margin``: px for relative position and distance; ``size_tolerance``: relative area
    difference below which size questions abstain; ``min_component_px``: count's region size
    (the generator's default rule)."""

    def __init__(
        self,
        localizer: str | Localizer = "markers",
        *,
        margin: float = MARGIN_PX,
        size_tolerance: float = SIZE_TOLERANCE,
        min_component_px: float = MIN_COMPONENT_PX,
        **options: Any,
    ) -> None:
        self.localizer = (
            create_localizer(localizer, **options) if isinstance(localizer, str) else localizer
        )
        self.margin = margin
        self.size_tolerance = size_tolerance
        self.min_component_px = min_component_px

    def answer(
        self,
        image: bytes | str | Path | np.ndarray | Image.Image,
        question: str,
        *,
        context: Context | None = None,
        from_prompt: bool = False,
    ) -> AgentAnswer:
        from radspatial.agent.parse import parse_question

        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        trace: dict[str, Any] = {"question": question, "localizer": self.localizer.name}
        arr = load_image(image)
        trace["image_size"] = [int(arr.shape[1]), int(arr.shape[0])]
        from radspatial.agent.open_answer import answer_open, parse_open

        try:
            open_q = parse_open(question, from_prompt=from_prompt)
        except ParseError:
            open_q = None
        if open_q is not None:  # an open question: a word or a number (agent/open_answer.py)
            value, text = answer_open(self, arr, open_q, context or Context(), trace)
            return AgentAnswer(value, text, trace)
        try:
            names = (context.labels or {}).values() if context else ()
            parsed = parse_question(question, from_prompt=from_prompt, names=names)
        except ParseError as exc:
            timings["parse_ms"] = _ms(t0)
            trace.update(parsed=None, timings_ms=timings)
            decision = Decision(None, f"parse failure: {exc}", "none")
            trace["decision"] = decision.to_json()
            return AgentAnswer(None, f"abstain: {decision.reason}", trace)
        timings["parse_ms"] = _ms(t0)
        trace["parsed"] = parsed.to_json()
        t1 = time.perf_counter()
        context = context or Context()
        if parsed.kind == "orientation":
            decision = self._orientation(arr, context, trace)
            timings["localize_and_verify_ms"] = _ms(t1)
        else:
            found = self.localizer.locate(arr, list(parsed.refs), context)
            timings["localize_ms"] = _ms(t1)
            trace["found"] = [None if f is None else f.to_json() for f in found]
            t2 = time.perf_counter()
            decision = self._decide(parsed, found)
            timings["verify_ms"] = _ms(t2)
        timings["total_ms"] = _ms(t0)
        trace["decision"] = decision.to_json()
        trace["timings_ms"] = timings
        text = (
            str(decision.answer) if decision.answer is not None else f"abstain: {decision.reason}"
        )
        return AgentAnswer(decision.answer, text, trace)

    def _decide(self, parsed: ParsedQuestion, found: list[Found | None]) -> Decision:
        roles = ROLES.get(parsed.kind, ())
        for role, ref, f in zip(roles, parsed.refs, found, strict=False):
            floor = 0.0 if f is None else float(f.details.get("abstain_below", 0.0))
            if f is not None and f.score < floor:
                what = ref.name or ref.text or role
                reason = f"{role} ({what}) found with low confidence {f.score:.2f} < {floor:g}"
                return Decision(None, reason, "abstain on low localizer confidence")
        if parsed.kind == "size":
            return verify_size(parsed.relation, *found, tolerance=self.size_tolerance)
        if parsed.kind == "distance":
            return verify_distance(parsed.relation, *found, margin=self.margin)
        if parsed.kind == "count":
            n = parsed.params["n"]
            return verify_count(n, found[0], min_component_px=self.min_component_px)
        return verify(parsed.relation, found[0], found[1], margin=self.margin)

    def _orientation(self, image: np.ndarray, context: Context, trace: dict) -> Decision:
        names = context.labels or load_table("totalsegmentator").names
        pairs, spine = orientation_refs(names)
        flat = [r for _, left, right in pairs for r in (left, right)] + spine
        found = self.localizer.locate(image, flat, context) if flat else []
        n = 2 * len(pairs)
        bases = [b for b, _, _ in pairs]
        found_pairs = list(zip(bases, found[0:n:2], found[1:n:2], strict=True))
        found_spine = found[n:]
        trace["found"] = {
            ref.name: f.to_json() for ref, f in zip(flat, found, strict=True) if f is not None
        }
        return verify_orientation(found_pairs, found_spine, body_centre(image))


def _ms(since: float) -> float:
    return round(1000 * (time.perf_counter() - since), 3)


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
    roles = ROLES.get(parsed.get("kind", "relative_position"), ())
    found_list = result.trace.get("found")
    found_list = found_list if isinstance(found_list, list) else []
    pts = []
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
        _label(draw, (x + r + 2, y - r), f"{role}: {label} ({found['score']:.2f})", colour, font)
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
    verdict = {1: "YES", 0: "NO", None: "ABSTAIN"}[result.answer]
    _banner(draw, pil.width, 0, f"{verdict}: {decision.get('reason', '')}", font, top=True)
    question = str(result.trace.get("question", ""))
    _banner(draw, pil.width, pil.height, f"Q: {question}", font, top=False)
    return pil


def _label(draw: Any, xy: tuple[float, float], text: str, colour: str, font: Any) -> None:
    """Text on a dark plate, moved inside the image when it would be cut at a border."""
    w, h = draw.im.size
    x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
    tw, th = x1 - x0 + 6, y1 - y0 + 6
    x = min(max(xy[0], 0), max(w - tw, 0))
    y = min(max(xy[1], 0), max(h - th, 0))
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
