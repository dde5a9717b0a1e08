"""Counting (open): "How many separate regions of the colon are visible in this image?".

The answer is an integer: the structure's regions by ``count``'s rule (8-connected components
of at least ``rules.min_component_px`` in the rendered slice; a structure with a component near
that threshold is skipped). Answer classes 1, 2 and 3 (structures with more regions are not
asked), each asked equally often, so a uniform guess among them scores 1/3. Counts do not change
with the view: all three frames agree. Names only (RQ1), as for ``count``.
"""

from __future__ import annotations

import numpy as np

from radspatial.questions import (
    KeepVariant,
    QuestionRules,
    QuestionSpec,
    SliceFacts,
    Wording,
    register_question_type,
)
from radspatial.questions.count import count_regions


class Counting(KeepVariant):
    name = "counting"
    setups = ("rq1",)
    n_objects = 1
    chance = 1 / 3
    classes = (1, 2, 3)

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
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
        c = options[int(rng.integers(len(options)))]
        return QuestionSpec(self.name, (c,), "counting", want, want, {}, want)

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        return f"How many separate regions of {wording.ref(0)} are visible in this image?"


register_question_type(Counting())
