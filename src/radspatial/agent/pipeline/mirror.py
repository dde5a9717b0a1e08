"""Answers that do not depend on which side is the patient's right (issue #34 round 4).

On a slice without asymmetric anatomy (pelvis, legs, often the neck) a left-right mirrored
view is the same picture: whether "the left femur" is the femur on the image's left or right
is not in the pixels, so the localizer marks each structure with a side as not trusted (a
reason starting :data:`SIDES_PREFIX`). With ``AtlasRules.mirror_sides`` (on) it also locates
the structure's counterpart on the other side (``details[MIRROR]``; where it is not found,
the structure reflected across the midline: ``organs_view.reflect``). The agent then decides the
question twice: as the network labelled the slice, and with *every* sided structure swapped
for its counterpart (the mirrored reading of the same image). Whichever reading is the
patient's, one of the two is it; when both pass every other check and give the same answer,
that answer holds either way ("Is the left femur below the left gluteus maximus?" in a view
where both femurs lie at one height). When they differ, or either abstains, the agent
abstains as before. Pure functions on ``Found`` records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from radspatial.questions import yes_no
from radspatial.questions.records import Decision, Found

SIDES_PREFIX = "sides not shown"  # a localizer's abstention: the slice hides the sides
MIRROR = "mirror"  # details key: the counterpart's Found (None: not found)
SAME_EITHER_WAY = (
    "the slice does not show the patient's right; the same answer with every side swapped"
)


def _trusted(f: Found | None) -> Found | None:
    """``f`` without its mirror and without the sides abstention (any other reason stays)."""
    if f is None:
        return None
    details = _without(f.details)
    if str(details.get("abstain_reason", "")).startswith(SIDES_PREFIX):
        details.pop("abstain_reason")
    return replace(f, details=details)


def split(
    found: Sequence[Found | None],
) -> tuple[list[Found | None], tuple[list[Found | None], list[Found | None]] | None]:
    """(what was found, its mirror key removed; the two readings, or None when no structure
    carries a mirror). Reading 0: the network's sides; reading 1: every sided structure
    replaced by its counterpart. Both without the sides abstention."""
    plain = [None if f is None else replace(f, details=_without(f.details)) for f in found]
    if not any(f is not None and MIRROR in f.details for f in found):
        return plain, None
    as_labelled = [_trusted(f) for f in found]
    swapped = [_trusted(f.details.get(MIRROR, f) if f is not None else None) for f in found]
    return plain, (as_labelled, swapped)


def _without(details: dict) -> dict:
    return {k: v for k, v in details.items() if k != MIRROR}


def decide(
    decision: Decision,
    readings: tuple[list[Found | None], list[Found | None]],
    judge: Callable[[list[Found | None]], Decision],
    shown: Callable[[int | str], str] = yes_no,
) -> tuple[Decision, dict]:
    """The answer both readings agree on, else ``decision`` (the sides abstention, saying why:
    :func:`why_not`); and the trace's record of both. ``judge``: the shared checks + the
    type's verify on one reading; ``shown``: the type's answer in words."""
    first, second = (judge(r) for r in readings)
    same = first.answer is not None and first.answer == second.answer
    record = {"readings": [first.to_json(), second.to_json()], "used": same}
    if not same:
        why = why_not(first, second, shown)
        return replace(decision, reason=f"{decision.reason} ({why})"), record
    return replace(first, reason=f"{first.reason} ({SAME_EITHER_WAY})"), record


def why_not(first: Decision, second: Decision, shown: Callable[[int | str], str] = yes_no) -> str:
    """Why the two readings give no answer, in words for the reason: the reading that
    abstained and its reason, or the two answers (``shown``: in the type's words) that
    differ."""
    for tag, d in (("as labelled", first), ("with every side swapped", second)):
        if d.answer is None:
            return f"{tag}: {d.reason}"
    return (
        f"the answer depends on the sides: {shown(first.answer)} as labelled, "
        f"{shown(second.answer)} with every side swapped"
    )
