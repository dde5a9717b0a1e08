"""Whether the image decides an item: one rule for every question type and plane.

An item is *decidable from the image* when its answer is the same under every reading of the
image that the image itself cannot rule out. The one such reading here is the mirror: a slice
may be shown mirrored (MIRP's variants A1-A4), and where nothing in it tells the patient's sides
apart, a mirrored view is the same picture with every left/right structure in its partner's
place. So an item is decidable when

1. nothing it asks about has a side and its answer is not the view's handedness
   ("no sided structure"), or
2. its answer does not change when every structure with a side is read as its partner
   ("mirror-invariant"): in RQ1 (names) the partner's region where the slice shows it, else the
   same region under the partner's name (the question says the structure is there); where
   markers point at the regions (RQ2, RQ3) the regions stay and only names change, or
3. the slice shows a *handedness landmark* (:class:`Landmark`, ``data/landmarks.json`` or a
   user's table): a structure that lies on one side of the patient, visible, off the midline
   on its side and at a level where that is reliable ("landmark: liver, spleen").

Else it is not ("side-dependent, no landmark in slice"). A type that cannot re-read its answer
(a plugin without ``mirrored_answer``) leaves a side-dependent item *unknown* (None).

Planes: axial and coronal views have the patient's left/right along the image's x, so both
readings apply. A sagittal view has no left/right axis: its flip swaps front and back, which
the spine shows, so a question about the view's handedness is decidable there, and a sided
partner lies in another slice (its name can still be either side: identification is decided
only by mirror-invariance, since a landmark's side of the body is not in the image).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial import questions as q
from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.gates import file_text
from radspatial.core.textsafe import MAX_PROSE_CHARS
from radspatial.imaging.planes import plane_of
from radspatial.questions.records import Candidate

if TYPE_CHECKING:  # annotations only
    from radspatial.core.rules import QuestionRules
    from radspatial.questions import QuestionSpec, QuestionType, SliceFacts

REFERENCE_PX = 512  # landmark areas are px of a 512 px image (as core/rules' thresholds)
NAMED, MARKED = "named", "marked"  # RQ1 names the structures; RQ2/RQ3 markers point at them
MIRROR_INVARIANT = "mirror-invariant"
NO_SIDE = "no sided structure"
NO_LANDMARK = "side-dependent, no landmark in slice"
MARKERS_ONLY = "markers on a blank image: no anatomy to read"
SAGITTAL = "sagittal: a flip swaps front and back, which the spine shows"
_SIDES = ("left", "right")
_LEVELS = [f"C{i}" for i in range(1, 8)] + [f"T{i}" for i in range(1, 13)]
_LEVELS += [f"L{i}" for i in range(1, 6)] + ["S1"]
LEVELS: tuple[str, ...] = tuple(_LEVELS)  # vertebral levels, head to feet
SPINE = ("vertebrae", "sacrum", "spinal_cord")
MAX_LANDMARKS = 1000


@dataclass(frozen=True)
class Landmark:
    """One handedness landmark: ``structure`` lies on the patient's ``side``; it counts in a
    slice where it covers ``area`` px (of a 512 px image) and its centre lies ``offset`` body
    radii off the midline on that side, at a vertebral level within ``levels`` (None: any)."""

    structure: str
    side: str
    offset: float
    area: float
    levels: tuple[str, str] | None
    source: str


@dataclass(frozen=True)
class LandmarkTable:
    name: str
    landmarks: tuple[Landmark, ...]

    def of(self, structure: str) -> Landmark | None:
        return next((m for m in self.landmarks if m.structure == structure), None)


@dataclass(frozen=True)
class Body:
    """The body in one slice, standard view, output px: the midline's x (the spine's centre
    where the slice shows the spine, else the body's) and the body's radius (of a disc of
    its area)."""

    midline_x: float
    radius: float


@dataclass(frozen=True)
class Decidability:
    """``decidable``: True / False, None where unknown (items made before this rule, a type
    that cannot say); ``reason`` in words ("mirror-invariant", "landmark: liver, spleen")."""

    decidable: bool | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"decidable": self.decidable, "decidable_reason": self.reason}


@dataclass(frozen=True)
class SliceEvidence:
    """What the rule reads besides the question: every named structure of the slice
    (``facts.present``), the label table's names (which structures have a partner), the body
    and the landmark table."""

    facts: SliceFacts
    vocabulary: frozenset[str]
    body: Body | None
    landmarks: LandmarkTable
    rules: QuestionRules


# --- the landmark table: data, checked on reading ------------------------------------------------


@lru_cache(maxsize=8)
def landmark_table(spec: str | None = None) -> LandmarkTable:
    """:func:`load_landmarks`, read once per process and table (the generator's workers and the
    agent ask for it per slice)."""
    return load_landmarks(spec)


def load_landmarks(spec: str | Path | None = None) -> LandmarkTable:
    """The built-in table (None or "default") or a user's JSON file of the same shape."""
    if spec in (None, "default"):
        text = resources.files("radspatial.data").joinpath("landmarks.json").read_text()
        return parse_landmarks(json.loads(text), "landmarks.json (built in)")
    path = Path(spec)
    return parse_landmarks(read_json(path, want=dict), str(path))


def parse_landmarks(data: Mapping[str, Any], where: str) -> LandmarkTable:
    """A landmark table from its JSON object; every bad entry is a ``DataFileError`` naming
    ``where``, the entry and the field."""
    entries = data.get("landmarks")
    if not isinstance(entries, list) or not entries:
        raise DataFileError(f"{where}: 'landmarks' must be a non-empty list")
    if len(entries) > MAX_LANDMARKS:
        raise DataFileError(
            f"{where}: 'landmarks' holds {len(entries)} entries, at most {MAX_LANDMARKS} (a "
            "label table's sided structures are far fewer)"
        )
    seen: set[str] = set()
    out = []
    for k, entry in enumerate(entries):
        at = f"{where}: landmarks[{k}]"
        if not isinstance(entry, dict):
            raise DataFileError(f"{at}: must be an object")
        mark = _landmark(entry, at)
        if mark.structure in seen:
            raise DataFileError(f"{at}: {mark.structure!r} is listed twice")
        seen.add(mark.structure)
        out.append(mark)
    name = data.get("name")
    if name is not None and name != "":
        name = file_text(name, source=where, field="'name'", error=DataFileError)
    return LandmarkTable(name or where, tuple(out))


def _number(entry: dict, key: str, at: str, low: float, high: float) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        value = None
    if value is None or not math.isfinite(value) or not low <= value <= high:
        got = entry.get(key)
        raise DataFileError(f"{at}: {key!r} must be a number in [{low:g}, {high:g}], got {got!r}")
    return float(value)


def _landmark(entry: dict, at: str) -> Landmark:
    structure = entry.get("structure")
    if not isinstance(structure, str) or not structure.isidentifier() or len(structure) > 64:
        raise DataFileError(f"{at}: 'structure' must be a snake_case name, got {structure!r}")
    side = entry.get("side")
    if side not in _SIDES:
        raise DataFileError(f"{at}: 'side' must be 'left' or 'right', got {side!r}")
    levels = entry.get("levels")
    if levels is not None:
        bad = not isinstance(levels, list) or len(levels) != 2
        if bad or any(v not in _LEVELS for v in levels) or _rank(levels[0]) > _rank(levels[1]):
            raise DataFileError(
                f"{at}: 'levels' must be [from, to] vertebrae (C1..S1, head first) or null, "
                f"got {levels!r}"
            )
        levels = (levels[0], levels[1])
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise DataFileError(f"{at}: 'source' must say where the side comes from")
    file_text(source, source=at, field="'source'", limit=MAX_PROSE_CHARS, error=DataFileError)
    return Landmark(
        structure,
        side,
        _number(entry, "offset", at, 0.0, 2.0),
        _number(entry, "area", at, 0.0, REFERENCE_PX * REFERENCE_PX),
        levels,
        source,
    )


def _rank(level: str) -> int:
    return _LEVELS.index(level)


# --- the rule ------------------------------------------------------------------------------------


def other_side(name: str) -> str | None:
    """kidney_left -> kidney_right, rib_left_10 -> rib_right_10: the name with its one side
    word swapped (None: no side word, or more than one)."""
    words = name.split("_")
    sided = [k for k, w in enumerate(words) if w in _SIDES]
    if len(sided) != 1:
        return None
    k = sided[0]
    return "_".join([*words[:k], "right" if words[k] == "left" else "left", *words[k + 1 :]])


def partner_name(name: str, vocabulary: frozenset[str]) -> str | None:
    """:func:`other_side` where the label table has both sides, else None (a name whose other
    side the table lacks, e.g. the right lung's middle lobe, has no mirror twin)."""
    other = other_side(name)
    return other if other in vocabulary else None


def mirrored_objects(
    objects: Sequence[Candidate], evidence: SliceEvidence, reading: str
) -> tuple[Candidate, ...]:
    """Each object as a reader who took the view for its mirror image would read it: a sided
    structure becomes its partner (named: the partner's region where the slice shows it; else,
    and wherever a marker points at the region, the same region under the partner's name)."""
    present = {c.name: c for c in evidence.facts.present}
    out = []
    for obj in objects:
        other = partner_name(obj.name, evidence.vocabulary)
        if other is None:
            out.append(obj)
        elif reading == NAMED and other in present:
            out.append(present[other])
        else:
            out.append(replace(obj, name=other))
    return tuple(out)


def slice_level(present: Sequence[Candidate]) -> str | None:
    """The slice's vertebral level: its largest individually labelled vertebra (None where
    the vertebrae are one grouped structure or absent)."""
    named = [(c.area_px, c.name.removeprefix("vertebrae_").upper()) for c in present]
    levels = [(a, v) for a, v in named if v in _LEVELS]
    return max(levels)[1] if levels else None


def visible_landmarks(evidence: SliceEvidence) -> tuple[str, ...]:
    """The landmarks the slice shows (standard view): large enough, on their side of the
    midline by their offset, at a reliable level. None on a sagittal view (no left/right
    axis) or without a body."""
    facts, body = evidence.facts, evidence.body
    if body is None or not plane_of(facts.plane).sided or body.radius <= 0:
        return ()
    scale = (facts.size / REFERENCE_PX) ** 2
    level = slice_level(facts.present)
    out = []
    for c in facts.present:
        mark = evidence.landmarks.of(c.name)
        if mark is None or c.area_px < mark.area * scale:
            continue
        if level is not None and mark.levels is not None:
            low, high = (_rank(v) for v in mark.levels)
            if not low <= _rank(level) <= high:
                continue
        # standard view: the patient's right is the image's left (smaller x)
        towards = (body.midline_x - c.center_xy_canonical[0]) / body.radius
        if (towards if mark.side == "right" else -towards) >= mark.offset:
            out.append(c.name)
    return tuple(sorted(out))


def decide(
    qtype: QuestionType, spec: QuestionSpec, evidence: SliceEvidence, reading: str = NAMED
) -> Decidability:
    """Whether the image decides ``spec`` (module docstring), read by names (RQ1) or by
    markers (RQ2/RQ3)."""
    facts = evidence.facts
    if qtype.reads_handedness:
        if not plane_of(facts.plane).sided:
            return Decidability(True, SAGITTAL)
        alternative: Any = object()  # the view's handedness: the mirror reading always differs
    elif not any(partner_name(o.name, evidence.vocabulary) for o in spec.objects):
        return Decidability(True, NO_SIDE)
    else:
        objects = mirrored_objects(spec.objects, evidence, reading)
        seen = q.MirrorReading(objects, facts, evidence.rules)
        alternative = qtype.mirrored_answer(spec, seen)
        if alternative is not None and alternative == spec.answer:
            return Decidability(True, MIRROR_INVARIANT)
    if landmarks := visible_landmarks(evidence):
        return Decidability(True, landmark_reason(landmarks))
    if alternative is None:
        return Decidability(None, f"side-dependent; {qtype.name} cannot re-read its answer")
    return Decidability(False, NO_LANDMARK)


def landmark_reason(landmarks: Sequence[str]) -> str:
    """ "landmark: liver, spleen"; past ``MAX_PROSE_CHARS`` (a user's table, many landmarks in
    one slice) the first names and how many more, so every reason passes the reader's gate."""
    text, shown = "landmark: " + ", ".join(landmarks), list(landmarks)
    while len(text) > MAX_PROSE_CHARS:
        shown.pop()
        text = f"landmark: {', '.join(shown)} (+{len(landmarks) - len(shown)} more)"
    return text


def reading_of(setup: str) -> str:
    """How a setup's questions point at structures: RQ1 by name, the others by marker."""
    return NAMED if setup == "rq1" else MARKED
