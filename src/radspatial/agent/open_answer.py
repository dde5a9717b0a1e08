"""The agent on the open question types: parse the wording, localize, answer a word or number.

- laterality ("On which side of the image is X: left or right?"): the side of the image's
  vertical midline that holds X's centre;
- direction ("Where is X relative to Y in this image: left, right, above or below?"): the
  axis of larger centre difference and its sign (the generator asks only clear cases);
- identification ("Which structure does the number 52 mark?"): the label under the marker,
  named from the label table (needs a localizer that reports ``label_id``: mask, unet);
- counting ("How many separate regions of X are visible in this image?"): the generator's region
  rule on the localizer's component areas.

Abstains (``abstain: <reason>``) when a reference is not found or the localizer gives no label
or areas. Geometry is in the shown frame: x to the right, y downward.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from radspatial.agent.types import Context, Found, Ref

_PATTERNS = {
    "laterality": re.compile(
        r"^on which side of the image (?:is|are) (?P<a>.+?)\s*:\s*left or right\s*\??$", re.I
    ),
    "direction": re.compile(
        r"^where (?:is|are) (?P<a>.+?) relative to (?P<b>.+?)(?: in this image)?\s*:"
        r"\s*left, right, above or below\s*\??$",
        re.I,
    ),
    "identification": re.compile(r"^which structure (?:does|do) (?P<a>.+?) mark\s*\??$", re.I),
    "counting": re.compile(
        r"^how many separate regions of (?P<a>.+?) are visible(?: in this image)?\s*\??$", re.I
    ),
}


@dataclass(frozen=True)
class OpenQuestion:
    kind: str
    refs: tuple[Ref, ...]
    question: str


def parse_open(text: str, *, from_prompt: bool = False) -> OpenQuestion | None:
    """The open question in ``text`` (a whole prompt with ``from_prompt``), or None."""
    from radspatial.agent.parse import _parse_ref, extract_question

    question = extract_question(text) if from_prompt else " ".join(text.split())
    for kind, pattern in _PATTERNS.items():
        m = pattern.match(question.strip())
        if m:
            roles = [g for g in ("a", "b") if m.groupdict().get(g)]
            refs = tuple(_parse_ref(m[g], question, g) for g in roles)
            return OpenQuestion(kind, refs, question)
    return None


def decide_open(
    q: OpenQuestion,
    found: list[Found | None],
    image: np.ndarray,
    context: Context,
    min_component_px: float,
) -> tuple[Any, str]:
    """(answer or None, reason)."""
    if any(f is None for f in found):
        return None, "a structure was not found"
    f = found[0]
    if q.kind == "laterality":
        mid = image.shape[1] / 2
        return ("left" if f.xy[0] < mid else "right"), f"centre x {f.xy[0]:.1f} vs midline {mid}"
    if q.kind == "direction":
        from radspatial.questions.direction import direction_of

        return direction_of(f.xy, found[1].xy), "axis of larger centre difference"
    if q.kind == "identification":
        from radspatial.core.labels import display_name

        label_id = f.details.get("label_id")
        name = (context.labels or {}).get(label_id) if label_id is not None else None
        if name is None:
            return None, "the localizer names no label under the marker"
        return display_name(name), f"label {label_id} under the marker"
    from radspatial.questions.count import count_regions

    areas = f.details.get("component_areas")
    if areas is None:
        return None, "the localizer gives no component areas"
    n = count_regions(areas, min_component_px)
    if n is None:
        return None, "a component is too close to the region threshold"
    return n, f"{n} components of >= {min_component_px} px"


def answer_open(agent: Any, image: np.ndarray, q: OpenQuestion, context: Context, trace: dict):
    """Localize and decide; returns (answer, text) and fills ``trace``."""
    from radspatial.core.labels import load_table

    t0 = time.perf_counter()
    if context.labels is None:
        context = Context(
            context.mask, load_table("totalsegmentator").names, context.ct_path, context.extra
        )
    found = agent.localizer.locate(image, list(q.refs), context)
    answer, reason = decide_open(q, found, image, context, agent.min_component_px)
    trace.update(
        parsed={"kind": q.kind, "refs": [r.to_json() for r in q.refs], "question": q.question},
        found=[None if f is None else f.to_json() for f in found],
        decision={"answer": answer, "reason": reason},
        timings_ms={"total_ms": round(1000 * (time.perf_counter() - t0), 3)},
    )
    return answer, (str(answer) if answer is not None else f"abstain: {reason}")
