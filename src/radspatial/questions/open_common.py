"""Shared rules of the open (free-text answer) question types.

Open types answer with a word or a number instead of yes/no: ``laterality`` ("left"/"right"),
``direction`` ("left"/"right"/"above"/"below"), ``identification`` (a structure's display name)
and ``counting`` (an integer). Each declares ``classes`` (its answer classes; the generator asks
each class equally often) or none (identification: the answer is whatever the marker sits on).
The separation rules are relative position's: centres and markers at least the margin apart, in
the shown and the standard frame, ordered the same way (``separated``).
"""

from __future__ import annotations

from radspatial.imaging.markers import marker_style
from radspatial.questions import Candidate, Wording

OPEN_TYPES: tuple[str, ...] = ("laterality", "direction", "identification", "counting")
# reasoning type of every question type, for subgroups (the binary ones are yes/no relations)
REASONING: dict[str, str] = {
    "laterality": "laterality",
    "direction": "direction",
    "identification": "identification",
    "counting": "counting",
}
SIDES: tuple[str, ...] = ("left", "right")
DIRECTIONS: tuple[str, ...] = ("left", "right", "above", "below")
# image direction word -> relative position relation (same meaning, image terms)
DIRECTION_RELATION = {"left": "left_of", "right": "right_of", "above": "above", "below": "below"}


def reasoning_type(question_type: str) -> str:
    return REASONING.get(question_type, "yes/no relation")


def is_open(question_type: str | None) -> bool:
    return question_type in OPEN_TYPES


def subject_phrase(wording: Wording, k: int) -> tuple[str, str]:
    """('is', 'the liver'), ('is', 'the liver (12)'), ('are', 'the letters BZ') for object k."""
    if wording.setup == "rq3":
        style = marker_style(wording.marker)
        return ("are" if style.plural else "is"), style.ref(wording.marks[k])
    return "is", wording.ref(k)


def points(c: Candidate) -> list[tuple[tuple[float, float], tuple[float, float]] | None]:
    """(shown, standard) pairs of the centre and of the marker point."""
    out = [(c.center_xy, c.center_xy_canonical)]
    if c.marker_xy is not None and c.marker_xy_canonical is not None:
        out.append((c.marker_xy, c.marker_xy_canonical))
    return out
