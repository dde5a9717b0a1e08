"""Scores of the open question types' result rows: the reply read and graded by its question
type (the judge may decide later, ``grading.judge``), in the three frames.

An open row holds answers, not a fake yes/no: ``expected``, ``expected_standard`` and
``expected_anatomical`` are the answers asked (a word, a name, a number), ``parsed`` the answer
the type's reader found in the reply (None: none), ``correct*`` the comparisons, and its
``OpenGrade`` (``core.records``) how it was graded: the reading's ``status`` and ``reason``
and the ``source`` (``rules`` | ``judge`` | ``none``). Metrics count an open row as right,
wrong or without an answer (``ResultRow.outcome``).
"""

from __future__ import annotations

from typing import Any

from radspatial.core.eval_item import EvalItem
from radspatial.core.records import OpenGrade
from radspatial.questions import get_question_type


def open_scores(item: EvalItem, reply: str | None) -> dict[str, Any]:
    """The scoring fields of a ``ResultRow`` for an open item; ``reply`` None: no answer."""
    qtype = get_question_type(item.question_type)
    read = qtype.read_reply(reply, item.question) if reply is not None else None

    def frame(expected: Any) -> bool | None:
        if expected is None or read is None:
            return None
        return read.graded(qtype.canonical(expected)).correct is True

    options = (item.extra.get("params") or {}).get("options")
    graded = read.graded(qtype.canonical(item.expected)) if read is not None else None
    decided = graded is not None and graded.correct is not None
    return {
        "expected": item.expected,
        "expected_standard": item.expected_standard,
        "expected_anatomical": item.expected_anatomical,
        "parsed": read.value if read is not None else None,
        "parsed_mirp": None,
        "correct": bool(graded and graded.correct),
        "correct_standard": frame(item.expected_standard),
        "correct_anatomical": frame(item.expected_anatomical),
        "open": OpenGrade(
            status=read.status if read is not None else "undecided",
            reason=read.reason if read is not None else "no reply",
            source="rules" if decided else "none",
            options=tuple(options) if options else None,
        ),
    }
