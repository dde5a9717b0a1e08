"""Shared rules of the open (free-text answer) question types.

Open types answer with a word or a number instead of yes/no: ``laterality`` ("left"/"right"),
``direction`` ("left"/"right"/"above"/"below"), ``identification`` (a structure's display name)
and ``counting`` (an integer). Each declares ``classes`` (its answer classes; the generator asks
each class equally often) or none (identification: the answer is whatever the marker sits on).
The separation rules are relative position's: centres and markers at least the margin apart, in
the shown and the standard frame, ordered the same way (``separated``).

The agent matches an open type's ``pattern`` against the whole question (groups ``a`` and ``b``
are the structures), localizes them and asks the type's ``verify`` for the word or number; a
structure not found is an abstention. The open types are parsed before the others.
"""

from __future__ import annotations

import re
from abc import abstractmethod

from radspatial import questions as q
from radspatial.core.answers import CHOICE, Grade
from radspatial.imaging.markers import marker_style
from radspatial.questions.reading import open_grade
from radspatial.questions.records import ParsedQuestion, ParseError

SIDES: tuple[str, ...] = ("left", "right")
DIRECTIONS: tuple[str, ...] = ("left", "right", "above", "below")
# image direction word -> relative position relation (same meaning, image terms)
DIRECTION_RELATION = {"left": "left_of", "right": "right_of", "above": "above", "below": "below"}


def is_open(question_type: str | None) -> bool:
    """Whether the type answers with a word or a number (False for unknown names)."""
    if question_type is None or question_type not in q.QUESTION_TYPES:
        return False
    return q.QUESTION_TYPES.get(question_type).open_answer


def reasoning_type(question_type: str) -> str:
    """Subgroup of a type: an open type's own name; the binary ones are yes/no relations."""
    return question_type if is_open(question_type) else "yes/no relation"


class OpenType(q.KeepVariant):
    """Base of the open types: the agent's parse from ``pattern``; ``verify`` and the reply
    reader (``read_text``: the cleaned reply -> a ``Grade``) per type; chance a uniform guess
    among the ``classes`` (balanced; None without classes: per item)."""

    answer_kind = CHOICE
    parse_order = 10  # each pattern is anchored on the question's first words
    group = "open"
    pattern: re.Pattern[str]
    roles: tuple[str, ...] = ("structure",)  # the agent's trust checks name each by its role

    def __init__(self) -> None:
        self.chance = 1 / len(self.classes) if self.classes else None
        self.relations = (self.name,)

    def read_reply(self, reply: str | None, question: str | None = None) -> Grade:
        """The reply cleaned (``core.replies.clean_open``) and read by ``read_text``."""
        return open_grade(reply, question, self.read_text)

    @abstractmethod
    def read_text(self, text: str) -> Grade:
        """A cleaned reply -> its reading (``questions/reading.py`` has the parts); every open
        type says how it reads one, so a type without it is refused when it is made, not at
        eval time."""

    def parse(self, asked: q.Asked) -> ParsedQuestion | None:
        m = self.pattern.match(asked.question.strip())
        if not m:
            return None
        try:
            refs = tuple(asked.ref(m[g], g) for g in ("a", "b") if m.groupdict().get(g))
        except ParseError:  # not answerable as this type: the other types' readings follow
            return None
        return ParsedQuestion(refs, self.name, asked.question, self.name)

    def shown(self, answer: int | str) -> str:
        """The word or count as it is (a count of 1 is not "yes")."""
        return str(answer)


def subject_phrase(wording: q.Wording, k: int) -> tuple[str, str]:
    """('is', 'the liver'), ('is', 'the liver (12)'), ('are', 'the letters BZ') for object k."""
    if wording.setup == "rq3":
        style = marker_style(wording.marker)
        return ("are" if style.plural else "is"), style.ref(wording.marks[k])
    return "is", wording.ref(k)


def points(c: q.Candidate) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """(shown, standard) pairs of the centre and of the marker point."""
    out = [(c.center_xy, c.center_xy_canonical)]
    if c.marker_xy is not None and c.marker_xy_canonical is not None:
        out.append((c.marker_xy, c.marker_xy_canonical))
    return out
