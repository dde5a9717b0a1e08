"""Counting (open): "How many separate regions of the colon are visible in this image?".

The answer is an integer: the structure's regions by ``count``'s rule (8-connected components
of at least ``rules.min_component_px`` in the rendered slice; a structure with a component near
that threshold is skipped). Answer classes 1, 2 and 3 (structures with more regions are not
asked), each asked equally often, so a uniform guess among them scores 1/3. Counts do not change
with the view: all three frames agree. Names only (RQ1), as for ``count``.

The agent applies the same region rule to the component areas a localizer measures (mask,
totalsegmentator). The anatomy prior has nothing to go on (a pick at random).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.answers import COUNT, Answer, Grade
from radspatial.core.datafiles import DataFileError
from radspatial.questions.count import count_regions, found_regions, regions_seen
from radspatial.questions.open_common import OpenType
from radspatial.questions.reading import read_count
from radspatial.questions.records import Decision, Found, ParsedQuestion, Scene


class Counting(OpenType):
    name = "counting"
    setups = ("rq1",)
    n_objects = 1
    group_order = 40
    answer_kind = COUNT
    classes = (1, 2, 3)
    example = q.Example(("colon",), answers=(2,))
    pattern = re.compile(
        r"^how many separate regions of (?P<a>.+?) are visible(?: in this image)?\s*\??$", re.I
    )

    def check_answer(self, value: Any, where: str, key: str = "answer") -> int:
        """Any count >= 0 (earlier datasets and other tools count past the classes)."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DataFileError(f"{where}: {key!r} must be an integer >= 0, got {value!r}")
        return value

    def read_text(self, text: str) -> Grade:
        """An integer in digits or words ("two", "a single region")."""
        return read_count(text, self.answer_kind)

    def canonical(self, value: Any) -> Answer | None:
        return None if value is None else Answer(self.answer_kind, int(value))

    def accepted_forms(self, expected: Any) -> str:
        """The count as a word ("two" for 2)."""
        words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
        return words[int(expected)] if 0 <= int(expected) < len(words) else str(expected)

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        if facts.component_areas is None:
            return None
        want = self.classes[target]
        options = [
            c
            for c in facts.present
            if count_regions(facts.component_areas(c.label_id), rules.min_component_px) == want
        ]
        if not options:
            return None
        c = q.pick(options, rng)
        return q.QuestionSpec(self.name, (c,), "counting", want, want, {}, want)

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        return regions_seen(seen)

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        return f"How many separate regions of {wording.ref(0)} are visible in this image?"

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        (f,) = found
        assert f is not None
        min_px = scene.rules.min_component_px
        n, why, measured = found_regions(f, min_px)
        if n is None:
            return Decision(None, why, "", measured=measured)
        return Decision(n, f"{n} components of >= {min_px} px", "", measured=measured)


q.register_question_type(Counting())
