"""Direction (open): "Where is the spleen relative to the liver in this image: left, right,
above or below?".

The answer names the one image axis along which the two structures are clearly apart: along it
the centres and the markers differ by at least ``rules.margin_px`` and by at least
``DOMINANCE`` times their difference along the other axis, in the shown and the standard frame,
in the same order (relative position's ``separated`` rule plus dominance, so "left" never hides
a "mostly above"). Frames as for relative position: ``answer_standard`` the same words on the
standard-view image, ``answer_anatomical`` the patient's frame (``anatomical_holds``: left/right
are the patient's sides, above/below anterior/posterior). Balanced over the four answers
(chance 25%).

The agent answers the axis of larger centre difference and its sign when both hold across the
margin and the two localizations' uncertainty (the generator asks only clear cases; a
localization may not be one). The anatomy prior answers the typical patient-frame direction
(left/right the patient's, above/below anterior/posterior); the standard-view reader the
direction between the item's own standard-view centres.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.answers import Grade
from radspatial.questions.frames import anatomical_holds, clearance, point_pairs, separated_pairs
from radspatial.questions.open_common import (
    DIRECTION_RELATION,
    DIRECTIONS,
    OpenType,
    subject_phrase,
)
from radspatial.questions.reading import DIRECTION_WORDS, read_words
from radspatial.questions.records import Decision, Found, ParsedQuestion, Scene

DOMINANCE = 2.0


def direction_of(xy1: tuple[float, float], xy2: tuple[float, float]) -> str:
    """Where ``xy1`` lies relative to ``xy2`` along the axis of larger difference (image)."""
    dx, dy = xy1[0] - xy2[0], xy1[1] - xy2[1]
    if abs(dx) >= abs(dy):
        return "left" if dx < 0 else "right"
    return "above" if dy < 0 else "below"


def _dominant(a: q.Candidate, b: q.Candidate, axis: int) -> bool:
    for p1, p2 in point_pairs(a, b):
        if p1 is None or p2 is None:
            continue
        if abs(p1[axis] - p2[axis]) < DOMINANCE * abs(p1[1 - axis] - p2[1 - axis]):
            return False
    return True


def anatomical_direction(std1: tuple[float, float], std2: tuple[float, float]) -> str:
    """The direction word that is true in the patient's frame, from standard-view centres."""
    word = direction_of(std1, std2)
    rel = DIRECTION_RELATION[word]
    if anatomical_holds(rel, std1, std2):
        return word
    return {"left": "right", "right": "left"}[word]


class Direction(OpenType):
    name = "direction"
    n_objects = 2
    group_order = 20
    roles = ("subject", "reference")
    classes = DIRECTIONS
    example = q.Example(("aorta", "spleen"), answers=DIRECTIONS)
    pattern = re.compile(
        r"^where (?:is|are) (?P<a>.+?) relative to (?P<b>.+?)(?: in this image)?\s*:"
        r"\s*left, right, above or below\s*\??$",
        re.I,
    )

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        want = DIRECTIONS[target]
        options = [
            (x, y)
            for a, b, axis in separated_pairs(facts.candidates, rules)
            if _dominant(a, b, axis)
            for x, y in ((a, b), (b, a))
            if direction_of(x.center_xy, y.center_xy) == want
        ]
        if not options:
            return None
        a, b = q.pick(options, rng)
        standard = direction_of(a.center_xy_canonical, b.center_xy_canonical)
        anatomical = anatomical_direction(a.center_xy_canonical, b.center_xy_canonical)
        return q.QuestionSpec(
            self.name, (a, b), "direction", want, standard, answer_anatomical=anatomical
        )

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        a, b = seen.objects
        return direction_of(a.center_xy, b.center_xy)

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        verb, first = subject_phrase(wording, 0)
        _, second = subject_phrase(wording, 1)
        return (
            f"Where {verb} {first} relative to {second} in this image: left, right, above or below?"
        )

    def read_text(self, text: str) -> Grade:
        """A direction word or a synonym ("up", "beneath", "to the left")."""
        return read_words(text, DIRECTION_WORDS, "direction", self.answer_kind)

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        f1, f2 = found
        assert f1 is not None and f2 is not None
        return verify_direction(f1, f2, scene.rules.margin_px)

    def prior(self, given: q.PriorInput) -> str | None:
        if given.reader == "standard-view":
            s1, s2 = given.meta.get("center1_canonical"), given.meta.get("center2_canonical")
            return direction_of(tuple(s1), tuple(s2)) if s1 and s2 else None
        c1, c2 = given.centres(2, guess_side=False)
        return anatomical_direction(c1, c2) if c1 and c2 and c1 != c2 else None


q.register_question_type(Direction())


def verify_direction(f1: Found, f2: Found, margin: float) -> Decision:
    """The axis of larger centre difference and its sign, answered only when both hold
    wherever the true centres lie within the two localizations' uncertainty (and the
    difference along it is at least the margin), as relative position's rule."""
    rule = "the axis of larger centre difference, and its sign"
    dx, dy = f1.xy[0] - f2.xy[0], f1.xy[1] - f2.xy[1]
    main, other = max(abs(dx), abs(dy)), min(abs(dx), abs(dy))
    spare = f1.uncertainty_px + f2.uncertainty_px
    need, scale = clearance(main, margin, spare)
    if scale is None:
        return Decision(None, f"centres differ by {main:.1f} px (< {need})", rule, dx, dy)
    if main - spare <= other + spare:
        why = (
            f"the axes differ by {main - other:.1f} px, within twice the uncertainty {spare:.1f} px"
        )
        return Decision(None, why, rule, dx, dy)
    confidence = min(f1.score, f2.score) * scale
    word = direction_of(f1.xy, f2.xy)
    return Decision(
        word, f"centres differ by {main:.1f} px (beyond {need})", rule, dx, dy, confidence
    )
