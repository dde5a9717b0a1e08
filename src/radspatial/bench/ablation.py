"""The blank-image ablation (AS): white images with two random markers and no anatomy.

As in MIRP, item k uses the same two positions and relation for every marker type; only the
marker texts differ (each style's ``blank_texts``). Answers are exactly balanced (item k
answers yes iff k is even, then the order is shuffled).

Placement by rule profile: strict keeps markers two marker extents (~36 px) from the border
and asks along an axis with ``margin_px``; mirp places them anywhere from
``MIRP_AS_BORDER_PX`` (as MIRP's published items) to the border, but never so close that the
widest marker would be cut (the whole marker stays visible, so the recorded centre is the drawn
one), and asks along an axis where they are ``min_distance_px`` apart.
"""

from __future__ import annotations

import math

import numpy as np

from radspatial.core.rules import MIRP_AS_BORDER_PX, QuestionRules
from radspatial.imaging.markers import (
    Mark,
    draw_marks,
    marker_extent,
    marker_geometry,
    marker_half_extent,
    marker_style,
)
from radspatial.questions import get_question_type, mirp_type_name
from radspatial.questions.frames import OPPOSITE, relation_holds


def _bounds(size: int, markers: tuple[str, ...], rules: QuestionRules) -> tuple[tuple, tuple]:
    """((lo_x, hi_x), (lo_y, hi_y)): where a marker centre may go (hi exclusive)."""
    if not rules.mirp:
        lo = math.ceil(2 * marker_extent(size))
        return (lo, size - lo), (lo, size - lo)
    geometry, border = marker_geometry("mirp"), MIRP_AS_BORDER_PX * size / 512
    widest = {"numbers": "888", "letters": "WW"}
    halves = [marker_half_extent(m, widest.get(m, "W"), size, geometry) for m in markers]
    lo = [math.ceil(max(border, *(h[ax] for h in halves))) for ax in (0, 1)]
    return (lo[0], size - lo[0]), (lo[1], size - lo[1])


def _positions(rng: np.random.Generator, size: int, rules: QuestionRules, markers: tuple[str, ...]):
    (lo, hi), (lo_y, hi_y) = _bounds(size, markers, rules)
    need = rules.min_distance_px if rules.mirp else rules.margin_px
    # mirp: min_distance_px along one axis; strict: Euclidean, so along the diagonal
    room = max(hi - lo, hi_y - lo_y) if rules.mirp else min(hi - lo, hi_y - lo_y) * math.sqrt(2)
    if room < max(rules.min_distance_px, need) + math.sqrt(2):
        raise ValueError(
            f"a {size} px blank image cannot hold two markers {rules.min_distance_px:g} px apart "
            "(use a larger --size or a smaller --min-distance)"
        )
    for _ in range(100_000):
        if rules.mirp:
            p1, p2 = ((float(rng.integers(lo, hi)), float(rng.integers(lo_y, hi_y))) for _ in "ab")
        else:
            p1, p2 = (tuple(float(v) for v in rng.integers(lo, hi, size=2)) for _ in "ab")
            if math.dist(p1, p2) < rules.min_distance_px:
                continue
        axes = [ax for ax in (0, 1) if abs(p1[ax] - p2[ax]) >= need]
        if axes:
            return p1, p2, axes[int(rng.integers(len(axes)))]
    raise ValueError(f"could not place two markers on a {size} px blank image")


def generate_ablation(
    rng: np.random.Generator, count: int, markers: tuple[str, ...], size: int, rules: QuestionRules
):
    """Yield ``(index, marker, png_rgb, row_fields)`` for ``count`` items per marker type.

    The questions are relative position's (MIRP's type), worded by it through the registry."""
    asked = get_question_type(mirp_type_name())  # what MIRP asks of its blank images
    geometry = marker_geometry(rules.profile)
    targets = np.array([1, 0] * (count // 2))
    rng.shuffle(targets)
    for k in range(count):
        p1, p2, axis = _positions(rng, size, rules, markers)
        smaller = "left_of" if axis == 0 else "above"
        first_smaller = p1[axis] < p2[axis]
        relation = smaller if first_smaller == bool(targets[k]) else OPPOSITE[smaller]
        answer = int(relation_holds(relation, p1, p2))
        for marker in markers:
            t1, t2 = marker_style(marker).blank_texts(rng)
            blank = np.full((size, size, 3), 255, np.uint8)
            marks = [Mark(marker, t1, p1), Mark(marker, t2, p2)]
            img = draw_marks(blank, marks, boxed=False, geometry=geometry)
            fields = {
                "question": asked.blank_question(marker, t1, relation, t2),
                "answer": answer,
                "relation": relation,
                "object1": {"marker_text": t1, "center_xy": list(p1), "marker_xy": list(p1)},
                "object2": {"marker_text": t2, "center_xy": list(p2), "marker_xy": list(p2)},
            }
            yield k, marker, img, fields
