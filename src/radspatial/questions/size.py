"""Size and bilateral symmetry: "Is the liver larger than the spleen in this image?" (SPAR-VQA).

Both compare the areas two structures cover in the slice (output pixels; the same in every
rotation/flip variant, so ``answer_standard == answer_anatomical == answer``). ``symmetry``
asks about the two sides of one paired structure ("Is the left kidney larger than the right
kidney?", the patient's sides as labelled); ``size`` about two different structures. A pair is
only asked about when the areas differ by at least ``rules.size_tolerance`` of the larger one,
so no answer hangs on a few pixels; "larger than" and "smaller than" are asked equally often.
"""

from __future__ import annotations

import numpy as np

from radspatial.core.labels import side_of
from radspatial.questions import (
    Candidate,
    KeepVariant,
    QuestionRules,
    QuestionSpec,
    SliceFacts,
    Wording,
    register_question_type,
)

RELATIONS = {"larger_than": "larger than", "smaller_than": "smaller than"}


def size_holds(relation: str, area1: float, area2: float) -> bool:
    """Whether object 1 (``area1``) is ``relation`` object 2 (``area2``)."""
    if relation == "larger_than":
        return area1 > area2
    if relation == "smaller_than":
        return area1 < area2
    raise ValueError(f"unknown size relation {relation!r}")


def sides_of_one(name1: str, name2: str) -> bool:
    """Whether the names are the left and right of one paired structure (kidney_left/right)."""
    s1, s2 = side_of(name1), side_of(name2)
    return bool(s1 and s2 and s1 != s2 and name1[: -len(s1)] == name2[: -len(s2)])


def clearly_different(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) >= tolerance * max(a, b) and a != b


class SizeComparison(KeepVariant):
    setups = ("rq1", "rq2", "rq3")
    n_objects = 2
    chance = 0.5

    def __init__(self, name: str, paired: bool) -> None:
        self.name = name
        self.paired = paired

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
        cands = facts.candidates
        options: list[tuple[Candidate, Candidate]] = [
            (a, b)
            for i, a in enumerate(cands)
            for b in cands[i + 1 :]
            if sides_of_one(a.name, b.name) == self.paired
            and clearly_different(a.area_px, b.area_px, rules.size_tolerance)
        ]
        if not options:
            return None
        a, b = options[int(rng.integers(len(options)))]
        relation = "larger_than" if rng.random() < 0.5 else "smaller_than"
        if size_holds(relation, a.area_px, b.area_px) != bool(target):
            a, b = b, a
        answer = int(size_holds(relation, a.area_px, b.area_px))
        return QuestionSpec(self.name, (a, b), relation, answer, answer, answer_anatomical=answer)

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        return f"Is {wording.thing(0)} {RELATIONS[spec.relation]} {wording.thing(1)} in this image?"


register_question_type(SizeComparison("size", paired=False))
register_question_type(SizeComparison("symmetry", paired=True))
