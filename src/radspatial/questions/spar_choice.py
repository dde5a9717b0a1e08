"""SPAR-VQA's multi-class questions (Table 2's Orient, Symm, Size), multiple choice.

- ``spar_orient`` (5 classes, chance 20%): how the shown image relates to the standard
  radiological view: as is (``B1``), rotated 90 degrees counter-clockwise (``B2``), 180
  (``B3``), 90 clockwise (``B4``), or mirrored (any ``A`` variant; a mirror image stays one
  under rotation). The MIRP codes rotate counter-clockwise as seen on screen
  (``imaging/slices.py``). The generator shows the variant of the wanted class, so the classes
  are balanced. Standard view: ``standard``.
- ``spar_symm`` (3 classes, chance 33.3%): which side of one paired structure (kidneys first,
  any labelled left/right pair) covers the larger area in the slice: ``left`` / ``right`` (the
  patient's sides, as labelled) when the areas differ by at least 1.5 x ``rules.size_tolerance``
  of the larger one, ``equal`` when they differ by less than ``rules.size_tolerance``; pairs in
  between are not asked.
- ``spar_size`` (4 classes, chance 25%): which bin the fraction of the image's area one
  structure covers falls in (``SIZE_EDGES``: under 0.25%, 0.25-1%, 1-2.5%, over 2.5%: about
  the quartiles of every labelled structure's fraction in patient A's 112 slices, measured
  0.14% / 0.62% / 1.6%); a structure within 10% (relative) of an edge is not asked.

Areas are the whole label's pixels at the output size (every component), the same in every
variant. None of these has an agent rule (the agent abstains) or an anatomy prior.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.imaging.slices import Variant
from radspatial.questions.size import sides_of_one
from radspatial.questions.spar_common import ChoiceType, Option, draw_phrasing

ORIENT_VARIANTS = {"standard": "B1", "rotated_90_ccw": "B2", "rotated_180": "B3"}
ORIENT_VARIANTS["rotated_90_cw"] = "B4"
SIZE_EDGES: tuple[float, ...] = (0.0025, 0.01, 0.025)
EDGE_GAP = 0.10  # relative distance to a bin edge below which size is not asked


def orientation_class(code: str) -> str:
    """The 5-class orientation of a MIRP variant code."""
    v = Variant(code)
    if v.flip:
        return "mirrored"
    return {0: "standard", 1: "rotated_90_ccw", 2: "rotated_180", 3: "rotated_90_cw"}[
        v.quarter_turns
    ]


class SparOrient(ChoiceType):
    name = "spar_orient"
    n_objects = 0
    group_order = 20
    options = (
        Option("standard", "as in the standard radiological view (not rotated, not mirrored)",
               (r"standard", r"not rotated", r"unrotated", r"no rotation", r"original")),
        Option("rotated_90_ccw", "rotated 90 degrees counter-clockwise",
               (r"counter[\s-]?clockwise", r"anti[\s-]?clockwise")),
        Option("rotated_180", "rotated 180 degrees", (r"180", r"upside[\s-]down")),
        Option("rotated_90_cw", "rotated 90 degrees clockwise", (r"(?<![a-z-])clockwise",)),
        Option("mirrored", "mirrored left to right (and possibly rotated)",
               (r"mirror(?:ed)?", r"flipped", r"reflected")),
    )  # fmt: skip
    stems = (
        "How is this image shown compared with the standard radiological view?",
        "Compared with the standard radiological view, how has this image been transformed?",
        "Which transformation of the standard radiological view does this image show?",
    )
    example = q.Example(answers=("C", "E"))
    reads_handedness = True  # "mirrored" vs a rotation: the view's handedness

    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        want = self.options[target].value
        if want == "mirrored":
            return "A" + str(int(rng.integers(4)) + 1)
        return ORIENT_VARIANTS[want]

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        answer = orientation_class(facts.variant)
        if answer != self.options[target].value:
            return None
        params = {"phrasing": draw_phrasing(rng, self.stems)}
        return q.QuestionSpec(self.name, (), "orientation", answer, "standard", params)


class SparSymm(ChoiceType):
    name = "spar_symm"
    n_objects = 2
    group_order = 30
    options = (
        Option("left", "{a} is larger", (r"left",)),
        Option("right", "{b} is larger", (r"right",)),
        Option("equal", "they cover about the same area (within 10%)",
               (r"(?:the )?same", r"equal(?:ly)?", r"similar", r"neither", r"symmetric(?:al)?")),
    )  # fmt: skip
    stems = (
        "Which covers the larger area in this image, {a} or {b}?",
        "In this image, is {a} or {b} larger?",
        "Comparing {a} and {b} in this image, which one is bigger?",
    )
    example = q.Example(("left kidney", "right kidney"), answers=("A", "C"))

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        want = self.options[target].value
        options = []
        for a, b in q.pairs(facts.present or facts.candidates):
            if not sides_of_one(a.name, b.name):
                continue
            left, right = (a, b) if a.name.endswith("left") else (b, a)
            if symmetry_class(left.area_px, right.area_px, rules.size_tolerance) == want:
                options.append((left, right))
        if not options:
            return None
        kidneys = [p for p in options if p[0].name.startswith("kidney")]
        left, right = q.pick(kidneys or options, rng)
        params = {"phrasing": draw_phrasing(rng, self.stems)}
        return q.QuestionSpec(self.name, (left, right), "symmetry", want, want, params, want)

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        return symmetry_class(
            seen.objects[0].area_px, seen.objects[1].area_px, seen.rules.size_tolerance
        )


def symmetry_class(left: float, right: float, tolerance: float) -> str | None:
    """``equal`` within ``tolerance`` of the larger area, ``left``/``right`` beyond 1.5 x it,
    None in between (or when both are empty)."""
    big = max(left, right)
    if big <= 0:
        return None
    gap = abs(left - right) / big
    if gap < tolerance:
        return "equal"
    if gap >= 1.5 * tolerance:
        return "left" if left > right else "right"
    return None


def size_class(fraction: float) -> str | None:
    """The bin of an area fraction, None within ``EDGE_GAP`` (relative) of an edge."""
    if any(abs(fraction - e) < EDGE_GAP * e for e in SIZE_EDGES):
        return None
    return SparSize.options[int(np.searchsorted(SIZE_EDGES, fraction))].value


class SparSize(ChoiceType):
    name = "spar_size"
    n_objects = 1
    group_order = 40
    options = (
        Option("under_0.25", "under 0.25%", (r"under 0[.,]25 ?%", r"below 0[.,]25 ?%")),
        Option("0.25_to_1", "0.25% to 1%", (r"0[.,]25 ?% to 1 ?%", r"0[.,]25 ?- ?1 ?%")),
        Option("1_to_2.5", "1% to 2.5%", (r"1 ?% to 2[.,]5 ?%", r"1 ?- ?2[.,]5 ?%")),
        Option("over_2.5", "over 2.5%", (r"over 2[.,]5 ?%", r"above 2[.,]5 ?%")),
    )
    stems = (
        "What fraction of the image's area does {a} occupy in this image?",
        "How much of this image's area is covered by {a}?",
        "Which share of the whole image does {a} take up?",
    )
    example = q.Example(("spleen",), answers=("B", "C"))

    def number_value(self, percent: float) -> str | None:
        return SparSize.options[int(np.searchsorted(SIZE_EDGES, percent / 100))].value

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        want = self.options[target].value
        area = facts.size * facts.size
        options = [c for c in facts.present if size_class(c.area_px / area) == want]
        if not options:
            return None
        c = q.pick(options, rng)
        params = {"phrasing": draw_phrasing(rng, self.stems), "fraction": c.area_px / area}
        return q.QuestionSpec(self.name, (c,), "size_fraction", want, want, params, want)

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        return size_class(seen.objects[0].area_px / (seen.facts.size * seen.facts.size))


for _qt in (SparOrient(), SparSymm(), SparSize()):
    q.register_question_type(_qt)
