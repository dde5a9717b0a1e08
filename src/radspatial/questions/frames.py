"""The image frames and the relations read in them: the kernel every type and the evaluator
share (relative position, direction and laterality ask in these terms; the evaluator reads
frames and replies with them).

- relations in image terms (``RELATIONS``, with their generator wording, ``OPPOSITE``) and the
  one axes table (``AXES``: left/right along x, above/below along y);
- whether a relation holds in the shown image (``relation_holds``), in the patient's frame
  from standard-view points (``anatomical_holds``, MIRP's anatomical definition) or derived
  from a stored standard-view answer (``anatomical_from_standard``);
- which candidate pairs are far enough apart to ask about (``separated_pairs``, per profile);
- a relation stated in free text (``STATED_RE``, ``stated_terms``): what a question asks and
  a reply restates ("No, the liver is to the right of the stomach", ``eval/scoring.py``), and
  the generator wording of a MIRP question (``worded_relation``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

from radspatial.imaging.planes import DEFAULT_PLANE, plane_of
from radspatial.questions.records import Candidate

if TYPE_CHECKING:  # annotations only
    from radspatial.core.rules import QuestionRules

RELATIONS: dict[str, str] = {
    "above": "above",
    "below": "below",
    "left_of": "to the left of",
    "right_of": "to the right of",
}
OPPOSITE = {"above": "below", "below": "above", "left_of": "right_of", "right_of": "left_of"}


@dataclass(frozen=True)
class Axis:
    """One image axis a relation compares along: its two relations (smaller coordinate
    first), its index in (x, y) and its title in tables and figures."""

    name: str
    relations: tuple[str, str]
    index: int
    title: str


# the one axes table (eval's per-axis metrics, the report's tables and figures read it)
AXES: tuple[Axis, ...] = (
    Axis("left_right", ("left_of", "right_of"), 0, "Left/right (MIRP's axis)"),
    Axis("above_below", ("above", "below"), 1, "Above/below (our extension)"),
)
_AXIS = {relation: axis.index for axis in AXES for relation in axis.relations}

_WORDED_RE = re.compile(rf"\b({'|'.join(RELATIONS.values())})\b", re.IGNORECASE)
_WORDED = {words: relation for relation, words in RELATIONS.items()}


def worded_relation(question: str) -> str | None:
    """The relation whose generator wording ("to the left of") the question contains."""
    m = _WORDED_RE.search(question)
    return _WORDED[m.group(1).lower()] if m else None


# --- free text: the relation as a question or a reply states it (eval/scoring.py reads replies
# that restate it: "No, the liver is to the right of the stomach") ----------------------------

_SIDE = r"\b(?:(?:to|on|at|towards?)\s+the\s+)?{}(?:[\s-]+(?:hand\s+)?side)?\s+(?:of|than)\b"
STATED_RE = re.compile(
    r"(?P<above>\babove\b|\bhigher\s+(?:up\s+)?than\b|\bsuperiorly\b|\bcranially\b"
    r"|\b(?:superior|cranial)\s+(?:to|than|relative\s+to)\b)"
    r"|(?P<below>\bbelow\b|\bbeneath\b|\bunderneath\b|\blower\s+(?:down\s+)?than\b"
    r"|\binferiorly\b|\bcaudally\b|\b(?:inferior|caudal)\s+(?:to|than|relative\s+to)\b)"
    rf"|(?P<left>{_SIDE.format('left')})|(?P<right>{_SIDE.format('right')})",
    re.I,
)
STATED_OPPOSITE = {"above": "below", "below": "above", "left": "right", "right": "left"}


def _aliases(phrase: str) -> list[str]:
    refs = re.findall(r"\(([^()]*)\)", phrase)
    core = re.sub(r"\([^()]*\)", " ", phrase).strip(" ,.")
    core = re.sub(r"^(?:the|a|an)\s+", "", core, flags=re.I).strip()
    return [a.strip() for a in (core, *refs) if a.strip()]


def stated_terms(question: str) -> tuple[str, list[str], list[str]] | None:
    """("left", aliases of X, aliases of Y) for "Is X to the left of Y?" (markup removed),
    else None: what a reply restating the relation is read against."""
    asked = question.split("?")[0]
    m = STATED_RE.search(asked)
    if m is None or m.lastgroup is None:
        return None
    x = re.sub(r"^.*?\b(?:is|are)\s+", "", asked[: m.start()], count=1, flags=re.I | re.S)
    y = re.sub(r"\s+(?:in|on|within)\s+(?:this|the)\s+\w+\s*$", "", asked[m.end() :], flags=re.I)
    xs, ys = _aliases(x), _aliases(y)
    if not xs or not ys:
        return None
    # Distinctive words tell "number 52" from "number 1" and "red dot" from "blue dot".
    wx, wy = set(xs[0].lower().split()), set(ys[0].lower().split())
    xs += [w for w in xs[0].split() if w.lower() not in wy and w.lower() not in {"the", "of"}]
    ys += [w for w in ys[0].split() if w.lower() not in wx and w.lower() not in {"the", "of"}]
    return m.lastgroup, xs, ys


def relation_holds(relation: str, xy1: tuple[float, float], xy2: tuple[float, float]) -> bool:
    """Whether object 1 at ``xy1`` is ``relation`` object 2 at ``xy2`` (image coordinates)."""
    axis = _AXIS[relation]
    if relation in ("above", "left_of"):
        return xy1[axis] < xy2[axis]
    return xy1[axis] > xy2[axis]


def axis_of(relation: str) -> int:
    return _AXIS[relation]


def anatomical_holds(
    relation: str, xy1: tuple[float, float], xy2: tuple[float, float], plane: str = DEFAULT_PLANE
) -> bool:
    """Whether object 1 is ``relation`` object 2 in the patient's frame, from standard-view
    coordinates: left/right are the patient's (image right is patient left), above/below are
    anterior/posterior (image up in standard view). MIRP's anatomical definition (axial).

    Coronal: left/right the same, above/below superior/inferior (image up). Sagittal: "left
    of" reads anterior (image left in standard view, ``imaging/planes.py``), above superior:
    both as the standard view."""
    if _AXIS[relation] == 0 and plane_of(plane).sided:
        return relation_holds(OPPOSITE[relation], xy1, xy2)
    return relation_holds(relation, xy1, xy2)


def anatomical_from_standard(
    relation: str | None, standard: int | str | None, plane: str = DEFAULT_PLANE
) -> int | None:
    """The patient-frame answer from the standard-view answer (left/right swap, above/below
    keep; sagittal: both keep); for datasets that stored only the standard view."""
    if standard is None or relation not in _AXIS:
        return None
    keep = _AXIS[relation] == 1 or not plane_of(plane).sided
    return int(standard) if keep else 1 - int(standard)


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
    for p1, p2 in point_pairs(a, b):
        if p1 is None or p2 is None:
            continue
        d = p1[axis] - p2[axis]
        if abs(d) < margin:
            return False
        signs.append(d > 0)
    # within each frame, the markers order the same way as the centres
    return signs[0:2] == signs[2:4] if len(signs) == 4 else True


def apart_along(a: Candidate, b: Candidate, axis: int, rules: QuestionRules) -> bool:
    """The mirp profile's rule: the centres are ``rules.min_distance_px`` apart along the asked
    image axis in the shown image (MIRP's "at least 50 pixels apart"; every published item
    holds it along the asked axis) and ``rules.margin_px`` apart along it in the standard view,
    so the standard and anatomical answers do not hang on a few pixels either."""
    shown = abs(a.center_xy[axis] - b.center_xy[axis])
    standard = abs(a.center_xy_canonical[axis] - b.center_xy_canonical[axis])
    return shown >= rules.min_distance_px and standard >= rules.margin_px


def separated_pairs(
    cands: Sequence[Candidate], rules: QuestionRules
) -> Iterator[tuple[Candidate, Candidate, int]]:
    """(a, b, axis) for each pair and image axis the profile allows asking about (the same
    words asked of the standard image read the same image axis).

    strict: at least ``rules.min_distance_px`` apart and ``separated`` by ``rules.margin_px``
    along the axis; mirp: ``apart_along`` the axis (markers sit at the centres there)."""
    for a, b in combinations(cands, 2):  # every unordered pair, in order (questions.pairs)
        if rules.mirp:
            yield from ((a, b, axis) for axis in (0, 1) if apart_along(a, b, axis, rules))
        elif math.dist(a.center_xy, b.center_xy) >= rules.min_distance_px:
            yield from ((a, b, axis) for axis in (0, 1) if separated(a, b, axis, rules.margin_px))


def clearance(gap: float, margin: float, spare: float) -> tuple[str, float | None]:
    """The agent's rule for a separation read from localized centres: ``gap`` px must reach
    ``margin`` plus ``spare`` (what the localizations' uncertainty could close). Returns the
    separation needed, in words for the trace, and the confidence scale (1 from three margins
    beyond the uncertainty), or None for the scale when the gap falls short."""
    need = f"margin {margin:g} px" + (f" + uncertainty {spare:.1f} px" if spare else "")
    if gap < margin + spare:
        return need, None
    return need, min(1.0, (gap - spare) / (3 * margin))
