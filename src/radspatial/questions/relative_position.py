"""Relative position: "Is the {structure 1} {above|below|to the left of|to the right of} the {2}?".

Three frames, as MIRP defines them:

- ``answer`` (image): the words read on the shown image. "above" means a smaller y (y grows
  downward), "to the left of" a smaller x.
- ``answer_standard``: the same words read on the un-rotated, un-flipped image in standard
  radiological view (patient's right on the image left, anterior up).
- ``answer_anatomical`` (patient frame, MIRP's ``RQ3-1_calculate_results_anatomy.py``): "A to
  the left of B" is true when A lies on the *patient's* left, which in standard view is the image
  right (a larger x); above/below reads anterior/posterior, which equals the standard view.

Which pairs are asked depends on the rule profile (``core/rules.py``). mirp: the two centres
are at least 50 px apart along the asked axis (the markers sit at the centres). strict: the
centres are far enough apart and differ by at least a margin along the asked axis in both the
shown and the standard frame, and the markers drawn at the structures' interior points (not
always the centres: a concave structure's centre of mass can lie outside it) order the same way
with the same margin, so a marker-only question never contradicts or blurs the named one.

The agent parses the generator's wordings and free paraphrases ("located to the right of", "on
the left side of", "higher than", "beneath", "Does the aorta lie above the IVC"); relations are
image terms. "superior to" / "inferior to" read as above / below (in an axial slice the only
reading possible in the image); "anterior to", "posterior to", "medial/lateral to", "in front
of", "behind" and "the patient's left/right" are refused: their image direction depends on the
display orientation. It answers from the two centres, abstaining within ``rules.margin_px``.
The anatomy prior answers in the patient's frame from typical (atlas) centres; the
standard-view reader from the item's own standard-view centres.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from radspatial import questions as q
from radspatial.core.rules import MARGIN_PX
from radspatial.imaging.markers import marker_style
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.questions.frames import (
    OPPOSITE,
    RELATIONS,
    anatomical_holds,
    axis_of,
    clearance,
    relation_holds,
    separated,  # noqa: F401 - bench/consistency reads it here
    separated_pairs,
)
from radspatial.questions.records import Decision, Found, ParsedQuestion, ParseError, Scene

# --- wordings: the agent's parse patterns (relations in image terms) ----------------------------

_SIDE_REL = (
    r"(?:(?:to|on|at)\s+(?:the\s+)?)?{s}(?:[\s-]+(?:hand[\s-]+)?side)?\s+of"
    r"|(?:more|further|farther)\s+(?:to\s+the\s+)?{s}\s+than"
)
_RELATION_PATTERNS = {
    "left_of": _SIDE_REL.format(s="left"),
    "right_of": _SIDE_REL.format(s="right"),
    "above": r"above|higher(?:\s+up)?\s+than|further\s+up\s+than|over|superior\s+to",
    "below": r"below|lower(?:\s+down)?\s+than|further\s+down\s+than|underneath|under|beneath"
    r"|inferior\s+to",
}
RELATION_RE = re.compile(
    "|".join(rf"\b(?P<{k}>{p})\b" for k, p in _RELATION_PATTERNS.items()), re.IGNORECASE
)
_ANATOMICAL_RE = re.compile(
    r"\b(?:(?:anterior|posterior|medial|lateral|ventral|dorsal|cranial|caudal)(?:ly)?\s+to"
    r"|in\s+front\s+of|behind|patient'?s\s+(?:left|right))\b",
    re.IGNORECASE,
)
_VERB_TAIL_RE = re.compile(
    r"(?:\s+(?:is|are|be|to|does|lie|lies|lying|sit|sits|sitting|located|positioned|situated"
    r"|placed|found|seen|shown|displayed|depicted|visible|appear|appears|appearing|seem|seems"
    r"|really|actually|directly|entirely|completely|mostly|clearly|also|still|slightly|somewhat"
    r"|further|farther))+\s*$",
    re.IGNORECASE,
)


# the generator's own words (MIRP files carry no relation field: it is read from these)
class RelativePosition(q.KeepVariant):
    name = "relative_position"
    n_objects = 2
    chance = 0.5
    mirp_type = True  # MIRP's own type: its files, protocol, AS images and statistics
    example = q.Example(("aorta", "spleen"), ("below", "above"))  # MIRP's example
    relations = tuple(RELATIONS)
    roles = ("subject", "reference")
    parse_order = 90  # last: what no other type claims is read as a relation, or refused
    relation_words = RELATION_RE  # a prompt's question without "Q:" is the sentence with these
    weighs_uncertainty = True  # verify_relation: margin + both localizations' uncertainty

    def blank_question(self, kind: str, text1: str, relation: str, text2: str) -> str:
        """An AS item's question (two markers on a blank image): ``marker_question``."""
        return marker_question(kind, text1, relation, text2)

    def propose(
        self, facts: q.SliceFacts, target: int, rng: np.random.Generator, rules: q.QuestionRules
    ) -> q.QuestionSpec | None:
        options = list(separated_pairs(facts.candidates, rules))
        if not options:
            return None
        a, b, axis = q.pick(options, rng)
        if rng.random() < 0.5:
            a, b = b, a
        first_is_smaller = a.center_xy[axis] < b.center_xy[axis]
        smaller_rel = "left_of" if axis == 0 else "above"
        relation = smaller_rel if first_is_smaller == bool(target) else OPPOSITE[smaller_rel]
        answer = int(relation_holds(relation, a.center_xy, b.center_xy))
        assert answer == target
        std_a, std_b = a.center_xy_canonical, b.center_xy_canonical
        standard = int(relation_holds(relation, std_a, std_b))
        anatomical = int(anatomical_holds(relation, std_a, std_b, facts.plane))
        return q.QuestionSpec(
            self.name, (a, b), relation, answer, standard, answer_anatomical=anatomical
        )

    def mirrored_answer(self, spec: q.QuestionSpec, seen: q.MirrorReading) -> Any:
        a, b = seen.objects
        return int(relation_holds(spec.relation, a.center_xy, b.center_xy))

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        if wording.setup == "rq3":
            t1, t2 = wording.marks
            return marker_question(wording.marker, t1, spec.relation, t2)
        n1, n2 = wording.names
        r1, r2 = (wording.named(0), wording.named(1)) if wording.marks else ("", "")
        return named_question(n1, spec.relation, n2, r1, r2)

    def parse(self, asked: q.Asked) -> ParsedQuestion:
        rest = asked.body
        if m := _ANATOMICAL_RE.search(rest):
            raise ParseError(
                f"{m.group(0)!r} is an anatomical direction, not an image relation "
                f"(above/below/left of/right of): {asked.question!r}"
            )
        found = list(RELATION_RE.finditer(rest))
        if not found:
            raise ParseError(
                f"no spatial relation (above/below/left of/right of) in {asked.question!r}"
            )
        if len(found) > 1:
            words = ", ".join(repr(f.group(0)) for f in found)
            raise ParseError(f"more than one relation ({words}) in {asked.question!r}")
        rel = found[0]
        assert rel.lastgroup is not None
        subject = asked.ref(_VERB_TAIL_RE.sub("", rest[: rel.start()]), "first")
        reference = asked.ref(rest[rel.end() :], "second")
        same_marker = subject.marker and (subject.marker, subject.text) == (
            reference.marker,
            reference.text,
        )
        if same_marker or (subject.name and subject.name == reference.name):
            raise ParseError(f"both sides are the same structure in {asked.question!r}")
        return ParsedQuestion((subject, reference), rel.lastgroup, asked.question)

    def verify(self, parsed: ParsedQuestion, found: list[Found | None], scene: Scene) -> Decision:
        return verify_relation(parsed.relation, found[0], found[1], margin=scene.rules.margin_px)

    def prior(self, given: q.PriorInput) -> int | None:
        rel = given.meta.get("relation")
        plane = given.meta.get("plane") or DEFAULT_PLANE
        c1, c2 = given.centres(2, guess_side=plane != "sagittal")  # sagittal: no side axis
        if not rel:
            return None
        if given.reader == "standard-view":
            seen = given.meta.get("center1_canonical"), given.meta.get("center2_canonical")
            if seen[0] and seen[1]:  # the oracle: this item's own standard-view centres
                return int(relation_holds(rel, tuple(seen[0]), tuple(seen[1])))
            if c1 and c2 and c1 != c2:
                return int(relation_holds(rel, c1, c2))
            return None
        offset = given.offset(1, 2)  # where the pair lies when seen together (coronal, sagittal)
        if offset is not None and rel in RELATIONS and offset[axis_of(rel)] != 0:
            return int(anatomical_holds(rel, offset, (0.0, 0.0), plane))
        if c1 and c2 and c1 != c2:
            return int(anatomical_holds(rel, c1, c2, plane))
        return None


q.register_question_type(RelativePosition())

_RULES = {
    "above": "yes iff y(subject) < y(reference)",
    "below": "yes iff y(subject) > y(reference)",
    "left_of": "yes iff x(subject) < x(reference)",
    "right_of": "yes iff x(subject) > x(reference)",
}


def verify_relation(
    relation: str, subject: Found | None, reference: Found | None, *, margin: float = MARGIN_PX
) -> Decision:
    """Answer ``subject <relation> reference`` from the two centres.

    Abstains when a structure was not found or when the centres differ by less than ``margin``
    px along the asked axis (the answer would hang on a few pixels) plus the two localizations'
    ``uncertainty_px`` (how far each true centre may lie from the one found: the answer must
    hold wherever in those discs the centres are). Confidence is the lower localizer score,
    scaled down linearly while the separation beyond the uncertainty is under three margins.
    """
    rule = _RULES[relation]
    missing = [n for n, f in (("subject", subject), ("reference", reference)) if f is None]
    if missing:
        return Decision(None, f"{' and '.join(missing)} not found", rule)
    assert subject is not None and reference is not None
    dx = subject.xy[0] - reference.xy[0]
    dy = subject.xy[1] - reference.xy[1]
    along = abs(dx) if axis_of(relation) == 0 else abs(dy)
    axis = "x" if axis_of(relation) == 0 else "y"
    spare = subject.uncertainty_px + reference.uncertainty_px
    need, scale = clearance(along, margin, spare)
    if scale is None:
        reason = f"centres differ by {along:.1f} px along {axis} (< {need})"
        return Decision(None, reason, rule, dx, dy)
    answer = int(relation_holds(relation, subject.xy, reference.xy))
    confidence = min(subject.score, reference.score) * scale
    reason = f"{axis}(subject) - {axis}(reference) = {(dx if axis == 'x' else dy):+.1f} px"
    if spare:
        reason += f" (beyond margin {margin:g} + uncertainty {spare:.1f} px)"
    return Decision(answer, reason, rule, dx, dy, confidence)


def named_question(name1: str, relation: str, name2: str, ref1: str = "", ref2: str = "") -> str:
    """RQ1/RQ2 wording: "Is the aorta (BZ) above the spleen (AA)?" (refs optional)."""
    r1 = f" ({ref1})" if ref1 else ""
    r2 = f" ({ref2})" if ref2 else ""
    return f"Is the {name1}{r1} {RELATIONS[relation]} the {name2}{r2}?"


def marker_question(kind: str, text1: str, relation: str, text2: str) -> str:
    """RQ3/AS wording, as in the published MIRP files.

    numbers: "Is the number 52 above the number 1?"; letters: "Are the letters BZ above the
    letters AA?"; dots: "Is the red dot above the blue dot?".
    """
    verb = marker_style(kind).verb
    ref1, ref2 = q.marker_ref(kind, text1), q.marker_ref(kind, text2)
    return f"{verb} {ref1} {RELATIONS[relation]} {ref2}?"
