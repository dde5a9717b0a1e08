"""Open replies read by their question type: ``normalize(reply, question_type, question)``.

Reading belongs to the question type (``QuestionType.read_reply``: ``questions/reading.py``
has the open kinds' parts, ``core/replies.py`` the cleaning every reader shares); this module
is the grading side's entry to it, with no knowledge of any type. The :class:`Grade` it returns
has ``status``:

- ``answer``: one value was read (a side, a direction word, a structure's snake_case name, an
  integer, a multiple-choice option);
- ``invalid``: the reply hedges ("probably left", "at least 2"), refuses ("cannot determine"),
  gives several different values ("left or right", "2 or 3", "above and to the left") or only
  negates ("not on the left"): scored wrong, as an invalid yes/no answer is;
- ``undecided``: nothing the rules know was found, or the reply answers in another frame ("the
  patient's left", "anterior"): the LLM judge (``grading.judge``) decides these.
"""

from __future__ import annotations

from typing import Any

from radspatial.core.answers import Grade
from radspatial.core.replies import clean_open
from radspatial.questions import get_question_type

Normalized = Grade  # the name this reading had before answers had one record
clean = clean_open  # the shared cleaning, under its earlier name here


def normalize(reply: str | None, question_type: str, question: str | None = None) -> Grade:
    """Read ``reply`` as an answer to a question of ``question_type`` (its own reader)."""
    return get_question_type(question_type).read_reply(reply, question)


def canonical(value: Any, question_type: str) -> Any:
    """The expected answer in the reader's terms (identification: its snake_case name)."""
    answer = get_question_type(question_type).canonical(value)
    return None if answer is None else answer.value


def rule_grade(norm: Grade, expected: Any, question_type: str) -> int | None:
    """1 correct, 0 incorrect, None invalid/undecided."""
    if norm.status != "answer" or expected is None:
        return None
    return int(norm.value == canonical(expected, question_type))
