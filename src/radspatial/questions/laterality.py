"""Laterality (open): "On which side of the image is the spleen: left or right?".

The answer is the half of the shown image that holds the structure: its centre and its marker
point lie at least ``rules.margin_px`` from the vertical midline, on the same side, in the shown
and in the standard frame (so no answer hangs on a pixel and the marker never contradicts the
centre). Three frames: ``answer`` in the shown image, ``answer_standard`` the side in the
un-rotated, un-flipped image, ``answer_anatomical`` the patient's side (relative position's
``anatomical_holds`` against the midline: the patient's left is the image right in standard
view). Balanced over the two answers; chance 50%.

The agent answers the side of the image's vertical midline that holds the structure's centre.
The anatomy prior answers the side of the patient the structure typically lies on; the
standard-view reader the side of the item's own standard-view centre.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.answers import Grade
from radspatial.questions.frames import anatomical_holds, clearance
from radspatial.questions.open_common import SIDES, OpenType, points, subject_phrase
from radspatial.questions.reading import SIDE_WORDS, read_words
from radspatial.questions.records import Decision, Found, ParsedQuestion, Scene


def side_in(x: float, size: float) -> str:
    return "left" if x < size / 2 else "right"


def _clear(xy: tuple[float, float], size: int, margin: float) -> bool:
    return abs(xy[0] - size / 2) >= margin


class Laterality(OpenType):
    name = "laterality"
    n_objects = 1
    group_order = 10
    classes = SIDES
    example = q.Example(("aorta",), answers=("left", "right"))
    pattern = re.compile(
        r"^on which side of the image (?:is|are) (?P<a>.+?)\s*:\s*left or right\s*\??$", re.I
    )

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        want = SIDES[target]
        size, margin = facts.size, rules.margin_px
        options = []
        for c in facts.candidates:
            pts = points(c)
            if not all(_clear(p, size, margin) for pair in pts for p in pair):
                continue
            shown = {side_in(s[0], size) for s, _ in pts}
            standard = {side_in(t[0], size) for _, t in pts}
            if len(shown) == 1 and len(standard) == 1 and shown == {want}:
                options.append(c)
        if not options:
            return None
        c = q.pick(options, rng)
        side = side_in(c.center_xy_canonical[0], size)
        mid = (size / 2, size / 2)
        anatomical = "left" if anatomical_holds("left_of", c.center_xy_canonical, mid) else "right"
        return q.QuestionSpec(
            self.name, (c,), "laterality", want, side, answer_anatomical=anatomical
        )

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        return side_in(seen.objects[0].center_xy[0], seen.facts.size)

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        verb, ref = subject_phrase(wording, 0)
        return f"On which side of the image {verb} {ref}: left or right?"

    def read_text(self, text: str) -> Grade:
        """A side ("left", "on the right", a lone "L"); the patient's side is undecided."""
        return read_words(text, SIDE_WORDS, "side", self.answer_kind)

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        """The side of the midline that holds the centre, answered only when it holds across
        the margin and the localization's uncertainty (as relative position's rule)."""
        (f,) = found
        assert f is not None
        mid, margin, spare = scene.image.shape[1] / 2, scene.rules.margin_px, f.uncertainty_px
        rule = "the half of the image that holds the centre"
        gap = f.xy[0] - mid
        need, scale = clearance(abs(gap), margin, spare)
        if scale is None:
            reason = f"centre {abs(gap):.1f} px from the midline (< {need})"
            return Decision(None, reason, rule)
        confidence = f.score * scale
        reason = f"centre x {f.xy[0]:.1f} vs midline {mid:g} (beyond {need})"
        return Decision("left" if gap < 0 else "right", reason, rule, confidence=confidence)

    def prior(self, given: q.PriorInput) -> str | None:
        if given.reader == "standard-view":
            s1 = given.meta.get("center1_canonical")
            return side_in(s1[0], given.width) if s1 else None
        (c1,) = given.centres(1, guess_side=False)
        return ("left" if c1[0] > 0.5 else "right") if c1 else None  # patient's left: image right


q.register_question_type(Laterality())
