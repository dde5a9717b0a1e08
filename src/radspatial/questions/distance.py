"""Distance: "Is the liver closer to the aorta than to the spleen?" (SPAR-VQA).

Three structures: an anchor and two others. Distances are between centres of mass for the named
wording and between marker points for the marker wording; a triple is only used when both
readings agree and the two distances differ by at least ``rules.margin_px`` and
``rules.size_tolerance`` of the larger, with every pair at least ``rules.min_distance_px`` apart.
Distances do not change under rotation or flip, so
``answer_standard == answer_anatomical == answer``. "closer to" and "farther from" are asked
equally often.

The agent reads "Is the {A} closer to|nearer to|farther from|further (away) from the {B} than
(to|from) the {C}?" and answers from the three centres, abstaining when the two distances differ
by less than ``rules.margin_px``. The anatomy prior compares typical (atlas) centres.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.rules import MARGIN_PX
from radspatial.questions.frames import clearance
from radspatial.questions.records import Decision, Found, ParsedQuestion, Scene

RELATIONS = {"closer_to": "closer to", "farther_from": "farther from"}
_DISTANCE_RE = re.compile(
    r"\s+(?:(?P<closer_to>(?:closer|nearer)\s+to)|(?P<farther_from>(?:farther|further)"
    r"(?:\s+away)?\s+from))\s+(?P<first>.+?)\s+than\s+(?:(?:to|from)\s+)?(?P<second>.+)$",
    re.IGNORECASE,
)
_TRIES = 400


def distance_holds(relation: str, d_first: float, d_second: float) -> bool:
    """Whether the anchor is ``relation`` the first other structure than the second one."""
    if relation == "closer_to":
        return d_first < d_second
    if relation == "farther_from":
        return d_first > d_second
    raise ValueError(f"unknown distance relation {relation!r}")


def separated(d1: float, d2: float, rules: q.QuestionRules) -> bool:
    gap = abs(d1 - d2)
    return gap >= rules.margin_px and gap >= rules.size_tolerance * max(d1, d2)


def _usable(a: q.Candidate, b: q.Candidate, c: q.Candidate, rules: q.QuestionRules) -> bool:
    cs = [x.center_xy for x in (a, b, c)]
    if min(math.dist(p1, p2) for p1, p2 in q.pairs(cs)) < rules.min_distance_px:
        return False
    d1, d2 = math.dist(cs[0], cs[1]), math.dist(cs[0], cs[2])
    ms = [x.marker_xy or x.center_xy for x in (a, b, c)]
    m1, m2 = math.dist(ms[0], ms[1]), math.dist(ms[0], ms[2])
    return separated(d1, d2, rules) and separated(m1, m2, rules) and (d1 < d2) == (m1 < m2)


class Distance(q.KeepVariant):
    name = "distance"
    n_objects = 3
    chance = 0.5
    example = q.Example(("aorta", "spleen", "liver"), ("farther_from", "closer_to"))
    relations = tuple(RELATIONS)
    roles = ("anchor", "first", "second")
    parse_order = 40
    group, group_order = "spar-binary", 40

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        cands = facts.candidates
        if len(cands) < 3:
            return None
        for _ in range(_TRIES):  # random triples: cheap, and a slice with one is rarely missed
            a, b, c = (cands[int(i)] for i in rng.choice(len(cands), 3, replace=False))
            if _usable(a, b, c, rules):
                break
        else:
            return None
        relation = "closer_to" if rng.random() < 0.5 else "farther_from"
        d_b, d_c = math.dist(a.center_xy, b.center_xy), math.dist(a.center_xy, c.center_xy)
        if distance_holds(relation, d_b, d_c) != bool(target):
            b, c = c, b
            d_b, d_c = d_c, d_b
        answer = int(distance_holds(relation, d_b, d_c))
        spec = q.QuestionSpec(self.name, (a, b, c), relation, answer, answer)
        return replace(spec, answer_anatomical=answer)

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        a, b, c = seen.objects
        d_b, d_c = math.dist(a.center_xy, b.center_xy), math.dist(a.center_xy, c.center_xy)
        return int(distance_holds(spec.relation, d_b, d_c))

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        rel = RELATIONS[spec.relation]
        than = "than to" if spec.relation == "closer_to" else "than from"
        w = wording
        return f"{w.verb(0)} {w.ref(0)} {rel} {w.ref(1)} {than} {w.ref(2)}?"

    def parse(self, asked: q.Asked) -> ParsedQuestion | None:
        if not (m := _DISTANCE_RE.search(plain := asked.plain)):
            return None
        relation = "closer_to" if m["closer_to"] else "farther_from"
        refs = (
            asked.ref(asked.strip_verb(plain[: m.start()]), "anchor"),
            asked.ref(m["first"], "first"),
            asked.ref(m["second"], "second"),
        )
        asked.distinct(refs)
        return ParsedQuestion(refs, relation, asked.question, "distance")

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        anchor, first, second = found
        return verify_distance(parsed.relation, anchor, first, second, margin=scene.rules.margin_px)

    def prior(self, given: q.PriorInput) -> int | None:
        rel = given.meta.get("relation")
        c1, c2, c3 = given.centres(3, guess_side=True)
        if rel and c1 and c2 and c3:
            return int(distance_holds(rel, math.dist(c1, c2), math.dist(c1, c3)))
        return None


q.register_question_type(Distance())


def verify_distance(
    relation: str,
    anchor: Found | None,
    first: Found | None,
    second: Found | None,
    *,
    margin: float = MARGIN_PX,
) -> Decision:
    """Anchor closer to / farther from ``first`` than ``second`` (centre distances), answered
    only when the two distances differ by the margin plus what the localizations' uncertainty
    could change their difference by (twice the anchor's, once each other's)."""
    rule = f"yes iff d(anchor, first) {'<' if relation == 'closer_to' else '>'} d(anchor, second)"
    if gone := Decision.not_found(rule, ("anchor", "first", "second"), [anchor, first, second]):
        return gone
    assert anchor is not None and first is not None and second is not None
    d1, d2 = math.dist(anchor.xy, first.xy), math.dist(anchor.xy, second.xy)
    measured = {"distance_px": [round(d1, 1), round(d2, 1)]}
    spare = 2 * anchor.uncertainty_px + first.uncertainty_px + second.uncertainty_px
    need, scale = clearance(abs(d1 - d2), margin, spare)
    if scale is None:
        reason = f"distances {d1:.1f} and {d2:.1f} px differ by < {need}"
        return Decision(None, reason, rule, measured=measured)
    answer = int(distance_holds(relation, d1, d2))
    confidence = min(anchor.score, first.score, second.score) * scale
    reason = f"d(anchor, first) = {d1:.1f} px, d(anchor, second) = {d2:.1f} px"
    return Decision(answer, reason, rule, confidence=confidence, measured=measured)
