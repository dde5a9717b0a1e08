"""Size and bilateral symmetry: "Is the liver larger than the spleen in this image?" (SPAR-VQA).

Both compare the areas two structures cover in the slice (output pixels; the same in every
rotation/flip variant, so ``answer_standard == answer_anatomical == answer``). ``symmetry``
asks about the two sides of one paired structure ("Is the left kidney larger than the right
kidney?", the patient's sides as labelled); ``size`` about two different structures. A pair is
only asked about when the areas differ by at least ``rules.size_tolerance`` of the larger one,
so no answer hangs on a few pixels; "larger than" and "smaller than" are asked equally often.

The agent reads "Is the {1} larger|bigger|greater|smaller (in size|area) than the {2}?" ("the
structure marked by the number 12" is a marker reference) as ``size`` for both types, and
answers from the areas a localizer measures (mask, unet, totalsegmentator), abstaining within
``rules.size_tolerance``. The atlas holds no areas: no anatomy prior.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.labels import side_of
from radspatial.core.rules import SIZE_TOLERANCE
from radspatial.questions.records import Decision, Found, ParsedQuestion, Scene

RELATIONS = {"larger_than": "larger than", "smaller_than": "smaller than"}
_SIZE_RE = re.compile(
    r"\s+(?:(?P<larger_than>larger|bigger|greater)|(?P<smaller_than>smaller))"
    r"(?:\s+in\s+(?:size|area))?\s+than\s+",
    re.IGNORECASE,
)


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


class SizeComparison(q.KeepVariant):
    n_objects = 2
    chance = 0.5
    parse_order = 50
    group = "spar-binary"

    def __init__(self, name: str, paired: bool, example: tuple[str, str], group_order: int) -> None:
        self.name = name
        self.paired = paired
        self.group_order = group_order
        self.example = q.Example(example, ("smaller_than", "larger_than"))
        # one wording for both: the agent parses them as "size" (symmetry parses nothing)
        self.relations = () if paired else tuple(RELATIONS)
        self.roles = () if paired else ("subject", "reference")

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        options = [
            (a, b)
            for a, b in q.pairs(facts.candidates)
            if sides_of_one(a.name, b.name) == self.paired
            and clearly_different(a.area_px, b.area_px, rules.size_tolerance)
        ]
        if not options:
            return None
        a, b = q.pick(options, rng)
        relation = "larger_than" if rng.random() < 0.5 else "smaller_than"
        if size_holds(relation, a.area_px, b.area_px) != bool(target):
            a, b = b, a
        answer = int(size_holds(relation, a.area_px, b.area_px))
        return q.QuestionSpec(self.name, (a, b), relation, answer, answer, answer_anatomical=answer)

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        a, b = seen.objects
        return int(size_holds(spec.relation, a.area_px, b.area_px))

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        return f"Is {wording.thing(0)} {RELATIONS[spec.relation]} {wording.thing(1)} in this image?"

    def parse(self, asked: q.Asked) -> ParsedQuestion | None:
        if self.paired or not (m := _SIZE_RE.search(plain := asked.plain)):
            return None
        relation = "larger_than" if m["larger_than"] else "smaller_than"
        refs = (
            asked.ref(asked.strip_verb(plain[: m.start()]), "first"),
            asked.ref(plain[m.end() :], "second"),
        )
        asked.distinct(refs)
        return ParsedQuestion(refs, relation, asked.question, "size")

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        first, second = found
        return verify_size(parsed.relation, first, second, tolerance=scene.rules.size_tolerance)


q.register_question_type(SizeComparison("size", False, ("liver", "spleen"), group_order=30))
q.register_question_type(
    SizeComparison("symmetry", True, ("left kidney", "right kidney"), group_order=20)
)


def verify_size(
    relation: str, first: Found | None, second: Found | None, *, tolerance: float = SIZE_TOLERANCE
) -> Decision:
    """``first`` larger/smaller than ``second`` by area; abstains within ``tolerance``."""
    rule = f"yes iff area(first) {'>' if relation == 'larger_than' else '<'} area(second)"
    if gone := Decision.not_found(rule, ("first", "second"), [first, second]):
        return gone
    assert first is not None and second is not None
    areas = [f.details.get("area_px") for f in (first, second)]
    if areas[0] is None or areas[1] is None:
        why = "no areas (a localizer without them, or a centre from the atlas)"
        return Decision(None, why, rule)
    a1, a2 = float(areas[0]), float(areas[1])
    measured = {"area_px": [round(a1, 1), round(a2, 1)]}
    rel_gap = abs(a1 - a2) / max(a1, a2, 1e-9)
    if rel_gap < tolerance:
        reason = f"areas {a1:.0f} and {a2:.0f} px differ by {rel_gap:.1%} (< {tolerance:.0%})"
        return Decision(None, reason, rule, measured=measured)
    answer = int(size_holds(relation, a1, a2))
    confidence = min(first.score, second.score) * min(1.0, rel_gap / (3 * tolerance))
    reason = f"area(first) = {a1:.0f} px, area(second) = {a2:.0f} px"
    return Decision(answer, reason, rule, confidence=confidence, measured=measured)
