"""SPAR-VQA's binary questions (Table 2's RelPos and Dist), yes/no with paraphrased stems.

- ``spar_relpos``: "Is the liver to the left of the spleen in this image?" and paraphrases;
  relative position's geometry and answers (``relative_position``: shown-frame centres, the
  separation rules), balanced yes/no, chance 50%.
- ``spar_dist``: "Is the liver closer to the aorta than to the spleen?" and paraphrases
  ("which distance is greater" asked as yes/no); distance's geometry and answers.

Each paraphrase is one the agent's parsers read as relative position / distance, so the agent
(and the mask oracle) answer these as they answer the original types. The anatomy prior is
theirs too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from radspatial import questions as q
from radspatial.questions.distance import RELATIONS as DISTANCE_RELATIONS
from radspatial.questions.distance import Distance
from radspatial.questions.relative_position import RELATIONS as RELPOS_RELATIONS
from radspatial.questions.relative_position import RelativePosition
from radspatial.questions.spar_common import GROUP, draw_phrasing, phrasing

RELPOS_STEMS = (
    "Is {a} {rel} {b} in this image?",
    "In this image, is {a} {rel} {b}?",
    "Does {a} lie {rel} {b} in this image?",
    "Is {a} located {rel} {b} in this image?",
)
DIST_STEMS = (
    "Is {a} {rel} {b} than {prep} {c}?",
    "In this image, is {a} {rel} {b} than {prep} {c}?",
    "Is {a} located {rel} {b} than {prep} {c}?",
)
_DIST_WORDS = {"closer_to": ("closer to", "nearer to"), "farther_from": ("farther from",)}


class _Paraphrased:
    """The base type's question, renamed, with the paraphrase drawn after it (``params``)."""

    name: str
    draw: Callable[[q.QuestionSpec, np.random.Generator], dict]  # each subclass: its paraphrase

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        spec = super().propose(facts, target, rng, rules)  # type: ignore[misc]
        if spec is None:
            return None
        return replace(spec, question_type=self.name, params=self.draw(spec, rng))


class SparRelpos(_Paraphrased, RelativePosition):
    name = "spar_relpos"
    setups = ("rq1",)
    relations = ()  # relative position's parser reads these questions
    mirp_type = False  # SPAR-VQA's, not MIRP's
    group, group_order = GROUP, 10

    def draw(self, spec: q.QuestionSpec, rng: np.random.Generator) -> dict:
        return {"phrasing": draw_phrasing(rng, RELPOS_STEMS)}

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        a, b = (f"the {n}" for n in wording.names)
        stem = RELPOS_STEMS[phrasing(spec) % len(RELPOS_STEMS)]
        return stem.format(a=a, rel=RELPOS_RELATIONS[spec.relation], b=b)


class SparDist(_Paraphrased, Distance):
    name = "spar_dist"
    setups = ("rq1",)
    relations = ()  # distance's parser reads these questions
    group, group_order = GROUP, 50

    def draw(self, spec: q.QuestionSpec, rng: np.random.Generator) -> dict:
        words = _DIST_WORDS[spec.relation]
        return {"phrasing": draw_phrasing(rng, DIST_STEMS), "word": int(rng.integers(len(words)))}

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        a, b, c = (f"the {n}" for n in wording.names)
        words = _DIST_WORDS.get(spec.relation, (DISTANCE_RELATIONS[spec.relation],))
        rel = words[int(spec.params.get("word", 0)) % len(words)]
        prep = "to" if spec.relation == "closer_to" else "from"
        stem = DIST_STEMS[phrasing(spec) % len(DIST_STEMS)]
        return stem.format(a=a, rel=rel, b=b, prep=prep, c=c)


for _qt in (SparRelpos(), SparDist()):
    q.register_question_type(_qt)
