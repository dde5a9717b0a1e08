"""Scores of the open question types' result rows: the reply graded by the rules (the judge may
decide later, ``grading.judge``), in the three frames.

Open rows keep the result-row schema of the yes/no types so every metric applies unchanged:
``expected`` is 1 and ``parsed`` is the grade (1 correct, 0 incorrect, None invalid or
undecided), so accuracy and invalid rate mean what they mean for yes/no. What was asked and
read lives beside it, in the row's ``OpenGrade`` (``core.records``): ``answer_expected`` (the
canonical answer, shown image), ``answer_standard``/``answer_anatomical`` (the other frames),
``answer_read`` (the normalized reply), ``grade_source`` (``rules`` | ``judge`` | ``none``) and
``rules`` (the normalizer's status and reason).
"""

from __future__ import annotations

from typing import Any

from radspatial.core.answers import Grade
from radspatial.core.records import OpenGrade
from radspatial.eval.items import EvalItem
from radspatial.grading.normalize import canonical, normalize, rule_grade


def _rules_json(norm: Grade) -> dict[str, Any]:
    """The rules' reading as the row's ``rules`` object: value, status and reason."""
    return {"value": norm.value, "status": norm.status, "reason": norm.reason}


def open_scores(item: EvalItem, reply: str | None) -> dict[str, Any]:
    """The scoring fields of a ``ResultRow`` for an open item; ``reply`` None: no answer."""
    qtype = item.question_type
    norm = normalize(reply, qtype, item.question) if reply is not None else None
    grade = rule_grade(norm, item.expected, qtype) if norm else None

    def frame(expected: Any) -> bool | None:
        if expected is None or norm is None:
            return None
        return norm.status == "answer" and norm.value == canonical(expected, qtype)

    options = (item.extra.get("params") or {}).get("options")
    decided = grade is not None or (norm is not None and norm.status == "invalid")
    return {
        "expected": 1,
        "expected_standard": None,
        "expected_anatomical": None,
        "parsed": grade,
        "parsed_mirp": None,
        "correct": grade == 1,
        "correct_standard": frame(item.expected_standard),
        "correct_anatomical": frame(item.expected_anatomical),
        "open": OpenGrade(
            answer_expected=item.expected,
            answer_standard=item.expected_standard,
            answer_anatomical=item.expected_anatomical,
            answer_read=norm.value if norm else None,
            rules=_rules_json(norm) if norm else None,
            grade_source="rules" if decided else "none",
            options=tuple(options) if options else None,
        ),
    }
