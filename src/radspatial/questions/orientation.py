"""Orientation: "Ignoring any rotation, is this image mirrored ... ?" (SPAR-VQA).

The answer is whether the shown variant includes the horizontal flip (MIRP codes ``A1..A4``):
a mirror image stays a mirror image under any rotation, so the question has one answer per image
and cannot be read off the position of a single organ. The generator chooses the variant from
the wanted answer (yes: a flipped variant, no: an unflipped one, rotation at random), so answers
are balanced and every rotation occurs with both answers. In standard view the answer is no.
"""

from __future__ import annotations

import numpy as np

from radspatial.imaging.slices import Variant
from radspatial.questions import (
    QuestionRules,
    QuestionSpec,
    SliceFacts,
    Wording,
    register_question_type,
)

QUESTION = (
    "Ignoring any rotation, is this image mirrored (flipped left to right) compared with the "
    "standard radiological view?"
)
RELATION = "mirrored"


class Orientation:
    name = "orientation"
    setups = ("rq1",)
    n_objects = 0
    chance = 0.5

    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        return ("A" if target else "B") + str(int(rng.integers(4)) + 1)

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
        answer = int(Variant(facts.variant).flip)
        if answer != target:
            return None
        return QuestionSpec(self.name, (), RELATION, answer, 0)

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        return QUESTION


register_question_type(Orientation())
