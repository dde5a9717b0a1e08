"""Relative position: "Is the {structure 1} {above|below|to the left of|to the right of} the {2}?".

Answers come from centres of mass in image terms: "above" means a smaller y (y grows downward),
"to the left of" a smaller x. A question is only asked when the two centres are far enough apart
and differ by at least a margin along the asked axis in BOTH the shown and the canonical frame,
so neither ``answer`` nor ``answer_canonical`` hangs on a pixel.
"""

from __future__ import annotations

import math

import numpy as np

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
                    shown = abs(a.center_xy[axis] - b.center_xy[axis])
                    # The same words asked of the canonical image read the same image axis.
                    canon = abs(a.center_xy_canonical[axis] - b.center_xy_canonical[axis])
                    if shown >= rules.margin_px and canon >= rules.margin_px:
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
        canonical = int(relation_holds(relation, a.center_xy_canonical, b.center_xy_canonical))
        return QuestionSpec(self.name, (a, b), relation, answer, canonical)

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
    verb = "Are" if kind == "letters" else "Is"
    ref1, ref2 = marker_ref(kind, text1), marker_ref(kind, text2)
    return f"{verb} {ref1} {RELATIONS[relation]} {ref2}?"
