"""The generated dataset's rows: one ``ManifestRow`` per question, a line of
``manifest.jsonl`` (docs/format.md), with the structures it names (``ObjectRow``), its slice
(``SliceRow``) and source CT (``SourceRow``).

``bench.generate`` builds them, ``bench.dataset`` writes them (and the MIRP files), ``eval.items``,
the exports and the report read them back. A row's answers are checked by its question type
(``check_answer``): a manifest row is read here, in the question kernel, because only the types
know their answers. ``to_json`` gives exactly the keys and values written; ``from_json`` reads
rows of every earlier version (``answer_canonical`` is the standard view) and raises
``DataFileError`` naming the row and the field. docs/format.md's field table is checked against
``MANIFEST_FIELDS`` (tests/test_records.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from radspatial.core.datafiles import (
    DataFileError,
    check_fields,
    check_names,
    check_reason,
    read_json_lines,
)
from radspatial.core.records import (
    BOOL,
    INT,
    NAMED_FIELDS,
    NUM,
    OBJ,
    RELPOS,
    STR,
    check_setup,
    known_fields,
    plain_json,
)
from radspatial.questions import check_answer

Point = tuple[float, float]
MAX_COORD_PX = 1e5  # any pixel coordinate beyond this (4096 px images at most) is garbage


def _point(row: dict, key: str, where: str) -> Point | None:
    value = row.get(key)
    if value is None:
        return None
    ok = isinstance(value, list | tuple) and len(value) == 2
    if not ok or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        raise DataFileError(f"{where}: {key!r} must be [x, y] or null, got {value!r}")
    if not all(math.isfinite(v) and abs(v) <= MAX_COORD_PX for v in value):
        raise DataFileError(f"{where}: {key!r} must be finite pixel coordinates, got {value!r}")
    return (value[0], value[1])


@dataclass(frozen=True)
class ObjectRow:
    """A structure a question names: ``object1``..``object3`` of a manifest row. On the blank
    (AS) images only the marker is known: no name, no anatomy, no standard view."""

    name: str | None = None  # snake_case, after grouping ("kidney_left")
    display_name: str | None = None  # "left kidney"
    label_id: int | None = None
    marker_text: str | None = None  # "52", "BZ", "red"; None for rq1
    center_xy: Point | None = None  # shown frame
    center_xy_canonical: Point | None = None  # standard view
    marker_xy: Point | None = None  # where the marker is drawn, shown frame
    marker_xy_canonical: Point | None = None  # the same point, standard view (not on AS)
    marker_inside: bool | None = None  # centre of mass inside the structure (not on AS)
    area_px: float | None = None  # output px

    _ABSENT_IF_NONE = ("marker_xy_canonical", "marker_inside")  # the AS rows never had them

    def to_json(self) -> dict[str, Any]:
        out = {f.name: plain_json(getattr(self, f.name)) for f in fields(self)}
        for key in self._ABSENT_IF_NONE:
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_json(cls, row: dict, where: str) -> ObjectRow:
        check_fields(
            row,
            where,
            {},
            {
                "name": STR,
                "display_name": STR,
                "label_id": INT,
                "marker_text": STR,
                "marker_inside": BOOL,
                "area_px": NUM,
            },
        )
        points = ("center_xy", "center_xy_canonical", "marker_xy", "marker_xy_canonical")
        values = known_fields(cls, row) | {k: _point(row, k, where) for k in points}
        return cls(**values)


class _Flat:
    """JSON in and out of a record of plain fields; ``_TYPES``: field -> allowed types."""

    _TYPES: ClassVar[dict[str, tuple[type, ...]]] = {}

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, row: dict, where: str) -> Any:
        check_fields(row, where, {}, cls._TYPES)
        return cls(**known_fields(cls, row))


@dataclass(frozen=True)
class SliceRow(_Flat):
    """MIRP's per-slice fields (``slice`` of a manifest row; the blank AS images have none)."""

    base_name: str | None = None  # "{case}_slice{z:03d}[_{type}]"
    classes_count: int | None = None  # structures in the slice
    multiple_components_same_label: bool | None = None

    _TYPES = {"base_name": STR, "classes_count": INT, "multiple_components_same_label": BOOL}


@dataclass(frozen=True)
class SourceRow(_Flat):
    """Where a question's slice comes from (``source`` of a manifest row; null on AS)."""

    case_id: str | None = None
    ct: str | None = None  # paths as given to generate
    seg: str | None = None
    ct_sha256: str | None = None
    seg_sha256: str | None = None
    slice_index: int | None = None  # canonical RAS index along the plane's normal (axial: z)
    z_mm: float | None = None  # the slice's world position (mm) along that normal

    _TYPES = {k: STR for k in ("case_id", "ct", "seg", "ct_sha256", "seg_sha256")} | {
        "slice_index": INT,
        "z_mm": NUM,
    }


# what eval needs of every manifest row, and the types of the rest (None allowed)
_MANIFEST_REQUIRED = {"id": STR, "setup": STR, "marker": STR, "image": STR, "question": STR}
_MANIFEST_OPTIONAL = {
    "mask": STR,
    "object1": OBJ,
    "object2": OBJ,
    "object3": OBJ,
    "source": OBJ,
    "relation": STR,
    "transform": STR,
    "variant": STR,
    "question_type": STR,
    "transform_name": STR,
    "slice": OBJ,
    "params": OBJ,
    "modality": STR,
    "plane": STR,
    "group": STR,
    "group_twin": STR,
    "decidable": BOOL,
    "decidable_reason": STR,
}


@dataclass(frozen=True)
class ManifestRow:
    """One generated question, as one line of ``manifest.jsonl`` (docs/format.md)."""

    id: str  # "{setup}/{marker}/{base_name}/q{k}"
    setup: str  # rq1 | rq2 | rq3 | as
    marker: str  # none | numbers | letters | dots
    image: str  # PNG path relative to the dataset root
    question: str
    answer: int | str  # shown image; 0/1, or the open types' word/name/integer
    answer_standard: int | str | None = None  # standard view (None on AS)
    answer_anatomical: int | str | None = None  # patient's frame (None on AS, orientation)
    relation: str | None = None
    question_type: str = RELPOS
    transform: str | None = None  # variant code A1..B4 (None on AS)
    transform_name: str | None = None
    variant: str = "normal"  # anatomy variant of the case; "blank" on AS
    modality: str | None = None  # the dataset's modality when not CT ("MR"); absent on CT
    object1: ObjectRow | None = None
    object2: ObjectRow | None = None
    object3: ObjectRow | None = None  # distance only; absent otherwise
    params: dict[str, Any] | None = None  # a type's parameters (count); absent when none
    slice: SliceRow | None = None  # absent on AS
    source: SourceRow | None = None
    mask: str | None = None  # with --export-masks; absent otherwise
    plane: str | None = None  # coronal | sagittal (imaging/planes.py); absent: axial
    group: str | None = None  # consistency group id (generate --consistency); absent otherwise
    group_twin: str | None = None  # the group asking the same pair the other way round
    # whether the image decides the answer (questions/decidability.py); None: unknown (a row
    # made before the rule, or a type that cannot say); the reason in words
    decidable: bool | None = None
    decidable_reason: str | None = None
    # read from a row written before the three frames had names (no answer_anatomical key):
    # eval derives the anatomical answer of relative position from the standard view
    legacy_frames: bool = field(default=False, compare=False)

    _ABSENT_IF_NONE: ClassVar[tuple[str, ...]] = ("object3", "params", "slice", "mask", "plane")
    _ABSENT_IF_NONE += ("group", "group_twin", "modality", "decidable", "decidable_reason")

    @property
    def objects(self) -> tuple[ObjectRow, ...]:
        return tuple(o for o in (self.object1, self.object2, self.object3) if o is not None)

    def to_json(self) -> dict[str, Any]:
        out = {key: plain_json(getattr(self, key)) for key in MANIFEST_FIELDS}
        for key in self._ABSENT_IF_NONE:
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_json(cls, row: dict, where: str = "manifest row") -> ManifestRow:
        check_fields(row, where, _MANIFEST_REQUIRED, _MANIFEST_OPTIONAL)
        check_names(row, where, NAMED_FIELDS, ids=("id",))
        check_setup(row, where)
        check_reason(row.get("decidable_reason"), where)
        raw_type = row.get("question_type")
        answers = {"answer": check_answer(row.get("answer"), raw_type, where)}
        for key in ("answer_standard", "answer_anatomical", "answer_canonical"):
            if row.get(key) is not None:
                answers[key] = check_answer(row[key], raw_type, where, key)
        standard = "answer_standard" if "answer_standard" in row else "answer_canonical"
        parts: dict[str, Any] = {}
        for key in ("object1", "object2", "object3"):
            if row.get(key) is not None:
                parts[key] = ObjectRow.from_json(row[key], f"{where}: {key}")
        if row.get("slice") is not None:
            parts["slice"] = SliceRow.from_json(row["slice"], f"{where}: slice")
        if row.get("source") is not None:
            parts["source"] = SourceRow.from_json(row["source"], f"{where}: source")
        return cls(
            **{
                **known_fields(cls, row),
                **parts,
                "answer": answers["answer"],
                "answer_standard": answers.get(standard),
                "answer_anatomical": answers.get("answer_anatomical"),
                "question_type": raw_type or RELPOS,
                "variant": row.get("variant") or "normal",
                "legacy_frames": "answer_anatomical" not in row,
            }
        )


def read_manifest(path: Path) -> list[tuple[str, ManifestRow]]:
    """``(where, row)`` per line of a ``manifest.jsonl``; ``where`` is ``"<path>: line <n>"``."""
    return [(where, ManifestRow.from_json(row, where)) for where, row in read_json_lines(path)]


MANIFEST_FIELDS = tuple(f.name for f in fields(ManifestRow) if f.name != "legacy_frames")
OBJECT_FIELDS = tuple(f.name for f in fields(ObjectRow))
