"""Deterministic geometry: decide each kind of question from what was found, or abstain.

Image coordinates: y grows downward, so "above" means a smaller y; "to the left of" a smaller x.
Relative position and distance need centres (any localizer); size needs areas (mask, unet,
totalsegmentator) and count component areas (mask, totalsegmentator); orientation is decided in
:mod:`radspatial.agent.orientation`. The rules are the generator's (``radspatial.questions``),
with the agent's own margins: it abstains where the generator would not have asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from radspatial.agent.types import Found
from radspatial.core.rules import MARGIN_PX, MIN_COMPONENT_PX, SIZE_TOLERANCE
from radspatial.questions.count import count_regions
from radspatial.questions.distance import distance_holds
from radspatial.questions.relative_position import axis_of, relation_holds
from radspatial.questions.size import size_holds


@dataclass(frozen=True)
class Decision:
    answer: int | None  # 1 yes, 0 no, None abstain
    reason: str
    rule: str
    dx: float | None = None  # subject minus reference, shown frame
    dy: float | None = None
    confidence: float = 0.0
    measured: dict[str, Any] = field(default_factory=dict)  # areas, distances, counts, ...

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 2)  # noqa: E731
        out = {
            "answer": self.answer,
            "reason": self.reason,
            "rule": self.rule,
            "dx": r(self.dx),
            "dy": r(self.dy),
            "confidence": round(self.confidence, 4),
        }
        if self.measured:
            out["measured"] = self.measured
        return out


def _missing(rule: str, roles: tuple[str, ...], found: list[Found | None]) -> Decision | None:
    gone = [role for role, f in zip(roles, found, strict=True) if f is None]
    return Decision(None, f"{' and '.join(gone)} not found", rule) if gone else None


_RULES = {
    "above": "yes iff y(subject) < y(reference)",
    "below": "yes iff y(subject) > y(reference)",
    "left_of": "yes iff x(subject) < x(reference)",
    "right_of": "yes iff x(subject) > x(reference)",
}


def verify(
    relation: str, subject: Found | None, reference: Found | None, *, margin: float = MARGIN_PX
) -> Decision:
    """Answer ``subject <relation> reference`` from the two centres.

    Abstains when a structure was not found or when the centres differ by less than ``margin``
    px along the asked axis (the answer would hang on a few pixels). Confidence is the lower
    localizer score, scaled down linearly while the separation is under three margins.
    """
    rule = _RULES[relation]
    missing = [n for n, f in (("subject", subject), ("reference", reference)) if f is None]
    if missing:
        return Decision(None, f"{' and '.join(missing)} not found", rule)
    dx = subject.xy[0] - reference.xy[0]
    dy = subject.xy[1] - reference.xy[1]
    along = abs(dx) if axis_of(relation) == 0 else abs(dy)
    axis = "x" if axis_of(relation) == 0 else "y"
    if along < margin:
        reason = f"centres differ by {along:.1f} px along {axis} (< margin {margin:g} px)"
        return Decision(None, reason, rule, dx, dy)
    answer = int(relation_holds(relation, subject.xy, reference.xy))
    confidence = min(subject.score, reference.score) * min(1.0, along / (3 * margin))
    reason = f"{axis}(subject) - {axis}(reference) = {(dx if axis == 'x' else dy):+.1f} px"
    return Decision(answer, reason, rule, dx, dy, confidence)


def verify_size(
    relation: str, first: Found | None, second: Found | None, *, tolerance: float = SIZE_TOLERANCE
) -> Decision:
    """``first`` larger/smaller than ``second`` by area; abstains within ``tolerance``."""
    rule = f"yes iff area(first) {'>' if relation == 'larger_than' else '<'} area(second)"
    if gone := _missing(rule, ("first", "second"), [first, second]):
        return gone
    assert first is not None and second is not None
    areas = [f.details.get("area_px") for f in (first, second)]
    if None in areas:
        return Decision(None, "the localizer gives no areas (use mask or unet)", rule)
    a1, a2 = float(areas[0]), float(areas[1])
    measured = {"area_px": [round(a1, 1), round(a2, 1)]}
    rel_gap = abs(a1 - a2) / max(a1, a2, 1e-9)
    if rel_gap < tolerance:
        reason = f"areas {a1:.0f} and {a2:.0f} px differ by {rel_gap:.1%} (< {tolerance:.0%})"
        return Decision(None, reason, rule, measured=measured)
    answer = int(size_holds(relation, a1, a2))
    confidence = min(first.score, second.score) * min(1.0, rel_gap / (3 * tolerance))
    reason = f"area(first) = {a1:.0f} px, area(second) = {a2:.0f} px"
    return Decision(answer, reason, rule, confidence=confidence, measured=measured)


def verify_distance(
    relation: str,
    anchor: Found | None,
    first: Found | None,
    second: Found | None,
    *,
    margin: float = MARGIN_PX,
) -> Decision:
    """Anchor closer to / farther from ``first`` than ``second`` (centre distances)."""
    rule = f"yes iff d(anchor, first) {'<' if relation == 'closer_to' else '>'} d(anchor, second)"
    if gone := _missing(rule, ("anchor", "first", "second"), [anchor, first, second]):
        return gone
    assert anchor is not None and first is not None and second is not None
    d1, d2 = math.dist(anchor.xy, first.xy), math.dist(anchor.xy, second.xy)
    measured = {"distance_px": [round(d1, 1), round(d2, 1)]}
    if abs(d1 - d2) < margin:
        reason = f"distances {d1:.1f} and {d2:.1f} px differ by < margin {margin:g} px"
        return Decision(None, reason, rule, measured=measured)
    answer = int(distance_holds(relation, d1, d2))
    score = min(anchor.score, first.score, second.score)
    confidence = score * min(1.0, abs(d1 - d2) / (3 * margin))
    reason = f"d(anchor, first) = {d1:.1f} px, d(anchor, second) = {d2:.1f} px"
    return Decision(answer, reason, rule, confidence=confidence, measured=measured)


def verify_count(
    n: int, found: Found | None, *, min_component_px: float = MIN_COMPONENT_PX
) -> Decision:
    """Whether the structure has exactly ``n`` regions of at least ``min_component_px`` px."""
    rule = f"yes iff regions of >= {min_component_px:g} px == {n}"
    if found is None:
        return Decision(None, "structure not found", rule)
    areas = found.details.get("component_areas")
    if areas is None:
        return Decision(None, "the localizer gives no components (use mask or unet)", rule)
    regions = count_regions([float(a) for a in areas], min_component_px)
    measured = {"component_areas_px": [round(float(a), 1) for a in areas[:12]]}
    if regions is None:
        reason = "a component is close to the region size threshold"
        return Decision(None, reason, rule, measured=measured)
    measured["regions"] = regions
    reason = f"{regions} region(s) of >= {min_component_px:g} px"
    return Decision(int(regions == n), reason, rule, confidence=found.score, measured=measured)
