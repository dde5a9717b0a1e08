"""Scores of the result rows whose answers are words, names or numbers (every kind but yes/no):
the reply read and graded by its question type (the judge may decide later,
``grading.judge``), in the three frames; and the one place outside questions/ that tells such
rows from yes/no ones (``is_open_row``).

Such a row holds answers, not a fake yes/no: ``expected``, ``expected_standard`` and
``expected_anatomical`` are the answers asked (a word, a name, a number), ``parsed`` the answer
the type's reader found in the reply (None: none), ``correct*`` the comparisons, ``kind`` the
answers' kind and its ``reading`` the image frame's ``Grade``: the reading's ``status`` and
``reason``, the ``source`` (``rules`` | ``judge`` | ``none``) and, in its ``metadata``, the
options a uniform guess picks from. Metrics count every row as right, wrong or without an
answer (``ResultRow.outcome``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from radspatial.core.answers import YES_NO, Grade
from radspatial.core.eval_item import EvalItem
from radspatial.core.records import ResultRow
from radspatial.questions import get_question_type


def is_open_row(row: ResultRow) -> bool:
    """Whether the row's answers are words, names or numbers (any kind but yes/no): what the
    open metrics (``grading.summary``) and the judge take."""
    return row.kind != YES_NO


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
    if graded is None:
        graded = Grade(None, "undecided", "no reply", None, "none")
    return {
        "expected": item.expected,
        "expected_standard": item.expected_standard,
        "expected_anatomical": item.expected_anatomical,
        "parsed": graded.value,
        "parsed_mirp": None,
        "correct": bool(graded.correct),
        "correct_standard": frame(item.expected_standard),
        "correct_anatomical": frame(item.expected_anatomical),
        "kind": qtype.answer_kind,
        "reading": _with_options(graded, options),
    }


def _with_options(grade: Grade, options: Any) -> Grade:
    """``grade`` with the item's options (what a uniform guess picks from) in its metadata."""
    return replace(grade, metadata={"options": list(options)}) if options else grade


def answer_text(kind: str, value: Any) -> str:
    """An answer as the report shows it: "yes"/"no" for yes/no, the word, name or number
    otherwise, "–" for none."""
    if value is None:
        return "–"
    if kind == YES_NO:
        return {1: "yes", 0: "no"}.get(value, "–")
    return str(value)
