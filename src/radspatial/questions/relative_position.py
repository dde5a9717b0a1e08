"""Relative position: "Is the {structure 1} {above|below|to the left of|to the right of} the {2}?".

Three frames, as MIRP defines them:

- ``answer`` (image): the words read on the shown image. "above" means a smaller y (y grows
  downward), "to the left of" a smaller x.
- ``answer_standard``: the same words read on the un-rotated, un-flipped image in standard
  radiological view (patient's right on the image left, anterior up).
- ``answer_anatomical`` (patient frame, MIRP's ``RQ3-1_calculate_results_anatomy.py``): "A to
  the left of B" is true when A lies on the *patient's* left, which in standard view is the image
  right (a larger x); above/below reads anterior/posterior, which equals the standard view.

A pair is asked about only when the two centres are far enough apart and differ by at least a
margin along the asked axis in both the shown and the standard frame, and the markers drawn at
the structures' interior points (not always the centres: a concave structure's centre of mass
can lie outside it) order the same way with the same margin, so a marker-only question never
contradicts or blurs the named one.
"""

from __future__ import annotations

import math

import numpy as np

from radspatial.imaging.markers import marker_style
from radspatial.questions import (
    Candidate,
    KeepVariant,
    QuestionRules,
    QuestionSpec,
    SliceFacts,
    Wording,
    marker_ref,
    register_question_type,
)

RELATIONS: dict[str, str] = {
    "above": "above",
    "below": "below",
    "left_of": "to the left of",
    "right_of": "to the right of",
}
OPPOSITE = {"above": "below", "below": "above", "left_of": "right_of", "right_of": "left_of"}
_AXIS = {"above": 1, "below": 1, "left_of": 0, "right_of": 0}


def relation_holds(relation: str, xy1: tuple[float, float], xy2: tuple[float, float]) -> bool:
    """Whether object 1 at ``xy1`` is ``relation`` object 2 at ``xy2`` (image coordinates)."""
    axis = _AXIS[relation]
    if relation in ("above", "left_of"):
        return xy1[axis] < xy2[axis]
    return xy1[axis] > xy2[axis]


def axis_of(relation: str) -> int:
    return _AXIS[relation]


def anatomical_holds(relation: str, xy1: tuple[float, float], xy2: tuple[float, float]) -> bool:
    """Whether object 1 is ``relation`` object 2 in the patient's frame, from standard-view
    coordinates: left/right are the patient's (image right is patient left), above/below are
    anterior/posterior (image up in standard view). MIRP's anatomical definition."""
    if _AXIS[relation] == 0:
        return relation_holds(OPPOSITE[relation], xy1, xy2)
    return relation_holds(relation, xy1, xy2)


def anatomical_from_standard(relation: str | None, standard: int | None) -> int | None:
    """The patient-frame answer from the standard-view answer (left/right swap, above/below
    keep); for datasets that stored only the standard view."""
    if standard is None or relation not in _AXIS:
        return None
    return int(standard) if _AXIS[relation] == 1 else 1 - int(standard)


def point_pairs(a: Candidate, b: Candidate) -> list[tuple]:
    """The points two structures are compared by: centres (shown, standard), then markers
    (shown, standard); a marker point may be None."""
    return [
        (a.center_xy, b.center_xy),
        (a.center_xy_canonical, b.center_xy_canonical),
        (a.marker_xy, b.marker_xy),
        (a.marker_xy_canonical, b.marker_xy_canonical),
    ]


def separated(a: Candidate, b: Candidate, axis: int, margin: float) -> bool:
    """Centres and marker points differ by >= ``margin`` along ``axis`` in the shown and the
    standard frame, and in the same order (markers agree with the centres)."""
    signs = []
    for p, q in point_pairs(a, b):
        if p is None or q is None:
            continue
        d = p[axis] - q[axis]
        if abs(d) < margin:
            return False
        signs.append(d > 0)
    # within each frame, the markers order the same way as the centres
    return signs[0:2] == signs[2:4] if len(signs) == 4 else True


class RelativePosition(KeepVariant):
    name = "relative_position"
    setups = ("rq1", "rq2", "rq3")
    n_objects = 2
    chance = 0.5

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
        candidates = facts.candidates
        options: list[tuple[Candidate, Candidate, int]] = []
        for i, a in enumerate(candidates):
            for b in candidates[i + 1 :]:
                if math.dist(a.center_xy, b.center_xy) < rules.min_distance_px:
                    continue
                for axis in (0, 1):
                    # The same words asked of the standard image read the same image axis.
                    if separated(a, b, axis, rules.margin_px):
                        options.append((a, b, axis))
        if not options:
            return None
        a, b, axis = options[int(rng.integers(len(options)))]
        if rng.random() < 0.5:
            a, b = b, a
        first_is_smaller = a.center_xy[axis] < b.center_xy[axis]
        smaller_rel = "left_of" if axis == 0 else "above"
        relation = smaller_rel if first_is_smaller == bool(target) else OPPOSITE[smaller_rel]
        answer = int(relation_holds(relation, a.center_xy, b.center_xy))
        assert answer == target
        std_a, std_b = a.center_xy_canonical, b.center_xy_canonical
        standard = int(relation_holds(relation, std_a, std_b))
        anatomical = int(anatomical_holds(relation, std_a, std_b))
        return QuestionSpec(
            self.name, (a, b), relation, answer, standard, answer_anatomical=anatomical
        )

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        if wording.setup == "rq3":
            t1, t2 = wording.marks
            return marker_question(wording.marker, t1, spec.relation, t2)
        n1, n2 = wording.names
        r1, r2 = wording.marks or ("", "")
        return named_question(n1, spec.relation, n2, r1, r2)


register_question_type(RelativePosition())


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
    ref1, ref2 = marker_ref(kind, text1), marker_ref(kind, text2)
    return f"{verb} {ref1} {RELATIONS[relation]} {ref2}?"
