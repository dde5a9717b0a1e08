"""Count: "Is the number of separate regions of the colon in this image exactly 3?" (SPAR-VQA).

Regions are 8-connected components of the structure's label in the rendered (output size)
slice of at least ``rules.min_component_px`` px; a structure with a component between a quarter
of that and that size is skipped (its count would hang on a speck). The slice first draws a
count class (1, 2, 3+) among those present, then a structure, so questions are not dominated by
single-region organs. Yes asks the true count, no asks one more or one fewer (never 0). Counts
do not change under rotation or flip, so ``answer_standard == answer_anatomical == answer``.
Names only (RQ1): a marker sits on one region and would not say which regions belong to the
structure.

The agent reads "Is the number of separate regions of the {X} (in this image) exactly {n}?",
"Does the {X} appear as exactly {n} separate regions?" and "Are there exactly {n} separate
regions of the {X}?" (regions, components, parts or pieces; n as digits or one..ten), and
counts the components a localizer measures (mask, totalsegmentator) by the same rule. The
atlas holds no counts: no anatomy prior.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.rules import MIN_COMPONENT_PX
from radspatial.questions.records import Decision, Found, ParsedQuestion, ParseError, Scene

RELATION = "count"
_REGIONS = r"(?:separate\s+|distinct\s+|disconnected\s+)?(?:regions?|components?|parts?|pieces?)"
_N = r"(?P<n>\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_COUNT_RES = (
    re.compile(rf"^the\s+number\s+of\s+{_REGIONS}\s+of\s+(?P<x>.+?)\s+exactly\s+{_N}$", re.I),
    re.compile(
        rf"^(?P<x>.+?)\s+(?:appear|appears|seen|shown)\s+as\s+exactly\s+{_N}\s+{_REGIONS}$", re.I
    ),
    re.compile(rf"^there\s+exactly\s+{_N}\s+{_REGIONS}\s+of\s+(?P<x>.+)$", re.I),
)
_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def regions_seen(seen: q.MirrorReading) -> int | None:
    """The regions of the first object the mirror reading sees (None: no areas to count)."""
    areas = seen.facts.component_areas
    if areas is None:
        return None
    return count_regions(areas(seen.objects[0].label_id), seen.rules.min_component_px)


def count_regions(areas: list[float], min_px: float) -> int | None:
    """Regions of at least ``min_px``, or None if a component is too close to the threshold."""
    if any(min_px / 4 <= a < min_px for a in areas):
        return None
    return sum(a >= min_px for a in areas)


def found_regions(found: Found, min_px: float) -> tuple[int | None, str, dict[str, Any]]:
    """(regions, why not, measured) of a localization: its components counted by
    :func:`count_regions`; None with the reason when it has none (a localizer without them, a
    centre from the atlas), a component is near the threshold, or the localizer's re-oriented
    copies (``details["component_areas_copies"]``) do not all count the same."""
    areas = found.details.get("component_areas")
    if areas is None:
        return None, "no components (a localizer without them, or a centre from the atlas)", {}
    measured: dict[str, Any] = {"component_areas_px": [round(float(a), 1) for a in areas[:12]]}
    regions = count_regions([float(a) for a in areas], min_px)
    if regions is None:
        return None, "a component is close to the region size threshold", measured
    copies = found.details.get("component_areas_copies") or []
    counts = [count_regions([float(a) for a in c], min_px) for c in copies]
    if counts:
        measured["regions_per_copy"] = counts
    if any(n != regions for n in counts):
        return None, f"re-oriented copies count {counts}, not all {regions}", measured
    return regions, "", measured


class Count(q.KeepVariant):
    name = "count"
    setups = ("rq1",)
    n_objects = 1
    chance = 0.5
    # "exactly 2?" with answer 0 too: no image is shown with the example
    example = q.Example(("colon",), (RELATION, RELATION), {"n": 2})
    relations = (RELATION,)
    roles = ("structure",)
    parse_order = 30
    group, group_order = "spar-binary", 50

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        if facts.component_areas is None:
            return None
        by_class: dict[int, list[tuple[q.Candidate, int]]] = {}
        for c in facts.present:
            n = count_regions(facts.component_areas(c.label_id), rules.min_component_px)
            if n:
                by_class.setdefault(min(n, 3), []).append((c, n))
        if not by_class:
            return None
        group = by_class[q.pick(sorted(by_class), rng)]
        c, n = q.pick(group, rng)
        wrong = n + 1 if n == 1 or rng.random() < 0.5 else n - 1
        asked = n if target else wrong
        answer = int(asked == n)
        return q.QuestionSpec(
            self.name, (c,), RELATION, answer, answer, {"n": asked, "regions": n}, answer
        )

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        n = regions_seen(seen)
        return None if n is None else int(spec.params["n"] == n)

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        return (
            f"Is the number of separate regions of {wording.ref(0)} in this image exactly "
            f"{spec.params['n']}?"
        )

    def parse(self, asked: q.Asked) -> ParsedQuestion | None:
        for pattern in _COUNT_RES:
            if m := pattern.match(asked.plain):
                n = int(m["n"]) if m["n"].isdigit() else _WORDS.index(m["n"].lower()) + 1
                if n < 1:
                    raise ParseError(f"a count must be at least 1 in {asked.question!r}")
                ref = asked.ref(m["x"], "counted")
                return ParsedQuestion((ref,), RELATION, asked.question, self.name, {"n": n})
        return None

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        n = parsed.params["n"]
        return verify_count(n, found[0], min_component_px=scene.rules.min_component_px)


q.register_question_type(Count())


def verify_count(
    n: int, found: Found | None, *, min_component_px: float = MIN_COMPONENT_PX
) -> Decision:
    """Whether the structure has exactly ``n`` regions of at least ``min_component_px`` px."""
    rule = f"yes iff regions of >= {min_component_px:g} px == {n}"
    if found is None:
        return Decision(None, "structure not found", rule)
    regions, why, measured = found_regions(found, min_component_px)
    if regions is None:
        return Decision(None, why, rule, measured=measured)
    measured["regions"] = regions
    reason = f"{regions} region(s) of >= {min_component_px:g} px"
    return Decision(int(regions == n), reason, rule, confidence=found.score, measured=measured)
