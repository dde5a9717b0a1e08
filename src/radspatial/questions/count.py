"""Count: "Is the number of separate regions of the colon in this image exactly 3?" (SPAR-VQA).

Regions are 8-connected components of the structure's label in the rendered (output size)
slice of at least ``rules.min_component_px`` px; a structure with a component between a quarter
of that and that size is skipped (its count would hang on a speck). The slice first draws a
count class (1, 2, 3+) among those present, then a structure, so questions are not dominated by
single-region organs. Yes asks the true count, no asks one more or one fewer (never 0). Counts
do not change under rotation or flip, so ``answer_standard == answer_anatomical == answer``.
Names only (RQ1): a marker sits on one region and would not say which regions belong to the
structure.
"""

from __future__ import annotations

import numpy as np

from radspatial.questions import (
    Candidate,
    KeepVariant,
    QuestionRules,
    QuestionSpec,
    SliceFacts,
    Wording,
    register_question_type,
)

RELATION = "count"


def count_regions(areas: list[float], min_px: float) -> int | None:
    """Regions of at least ``min_px``, or None if a component is too close to the threshold."""
    if any(min_px / 4 <= a < min_px for a in areas):
        return None
    return sum(a >= min_px for a in areas)


class Count(KeepVariant):
    name = "count"
    setups = ("rq1",)
    n_objects = 1
    chance = 0.5

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
        if facts.component_areas is None:
            return None
        by_class: dict[int, list[tuple[Candidate, int]]] = {}
        for c in facts.present:
            n = count_regions(facts.component_areas(c.label_id), rules.min_component_px)
            if n:
                by_class.setdefault(min(n, 3), []).append((c, n))
        if not by_class:
            return None
        group = by_class[sorted(by_class)[int(rng.integers(len(by_class)))]]
        c, n = group[int(rng.integers(len(group)))]
        wrong = n + 1 if n == 1 or rng.random() < 0.5 else n - 1
        asked = n if target else wrong
        answer = int(asked == n)
        return QuestionSpec(
            self.name, (c,), RELATION, answer, answer, {"n": asked, "regions": n}, answer
        )

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        return (
            f"Is the number of separate regions of {wording.ref(0)} in this image exactly "
            f"{spec.params['n']}?"
        )


register_question_type(Count())
