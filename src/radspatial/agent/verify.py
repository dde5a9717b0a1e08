"""Deterministic geometry: decide the relation from two centres, or abstain with the reason.

Image coordinates: y grows downward, so "above" means a smaller y; "to the left of" a smaller x.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from radspatial.agent.types import Found
from radspatial.questions.relative_position import axis_of, relation_holds


@dataclass(frozen=True)
class Decision:
    answer: int | None  # 1 yes, 0 no, None abstain
    reason: str
    rule: str
    dx: float | None = None  # subject minus reference, shown frame
    dy: float | None = None
    confidence: float = 0.0

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 2)  # noqa: E731
        return {
            "answer": self.answer,
            "reason": self.reason,
            "rule": self.rule,
            "dx": r(self.dx),
            "dy": r(self.dy),
            "confidence": round(self.confidence, 4),
        }


_RULES = {
    "above": "yes iff y(subject) < y(reference)",
    "below": "yes iff y(subject) > y(reference)",
    "left_of": "yes iff x(subject) < x(reference)",
    "right_of": "yes iff x(subject) > x(reference)",
}


def verify(
    relation: str, subject: Found | None, reference: Found | None, *, margin: float = 10.0
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
