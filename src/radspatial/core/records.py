"""Typed records for the rows that cross stage boundaries: manifest.jsonl and results.jsonl.

``bench.generate`` builds one ``ManifestRow`` per question (the structures it names as
``ObjectRow``, its slice and source CT as ``SliceRow`` and ``SourceRow``); ``bench.dataset``
writes them to ``manifest.jsonl`` and the MIRP files; ``eval.items`` reads them back into
``EvalItem``; ``eval.runner`` writes one ``ResultRow`` per item and run to ``results.jsonl``
(its expected ``Answer`` and one ``Grade`` per frame: ``core/row_grades.py``), which the report
and the MIRP export read back.

``to_json`` gives exactly the keys and values written (files are written with sorted keys);
``from_json`` reads rows of every earlier version (``answer_canonical`` in a manifest and
``expected_canonical`` in results are the standard view) and raises ``DataFileError`` naming
the row and the field that is missing or of the wrong type. docs/format.md's field tables are
checked against ``MANIFEST_FIELDS`` and ``RESULT_FIELDS`` (tests/test_records.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from radspatial.core.answers import YES_NO, Answer, Grade
from radspatial.core.datafiles import (
    DataFileError,
    answers01,
    check_fields,
    check_names,
    check_reason,
    read_json_lines,
)
from radspatial.core.row_grades import (
    ADDED_KEYS,
    FRAMES,
    GRADE_KEYS,
    column_grade,
    frame_grade,
    grade_keys,
    graded_values,
    written_kind,
)

Point = tuple[float, float]
# the question type of a row that names none (rows written before there were other types);
# the one place its name is spelled outside questions/ (``DEFAULT_TYPE`` everywhere else)
DEFAULT_TYPE = "relative_position"
RELPOS = DEFAULT_TYPE
_STR, _INT, _NUM, _BOOL, _OBJ, _LIST = (str,), (int,), (float, int), (bool,), (dict,), (list,)
SETUPS: tuple[str, ...] = ("rq1", "rq2", "rq3", "as")  # MIRP's three setups + the blank ablation
MAX_COORD_PX = 1e5  # any pixel coordinate beyond this (4096 px images at most) is garbage


def _plain(value: Any) -> Any:
    """JSON form of a record value: tuples as lists, records as objects."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "to_json"):
        return value.to_json()
    return value


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


def _check_setup(row: dict, where: str) -> None:
    """A row's ``setup`` is one of :data:`SETUPS` (a typo would make a group of its own)."""
    if row.get("setup") is not None and row["setup"] not in SETUPS:
        raise DataFileError(f"{where}: unknown setup {row['setup']!r} (one of {', '.join(SETUPS)})")


def _known(cls: type, row: dict) -> dict[str, Any]:
    """The row's values of ``cls``'s fields (absent ones left to the defaults)."""
    return {f.name: row[f.name] for f in fields(cls) if f.name in row}


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
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
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
                "name": _STR,
                "display_name": _STR,
                "label_id": _INT,
                "marker_text": _STR,
                "marker_inside": _BOOL,
                "area_px": _NUM,
            },
        )
        points = ("center_xy", "center_xy_canonical", "marker_xy", "marker_xy_canonical")
        values = _known(cls, row) | {k: _point(row, k, where) for k in points}
        return cls(**values)


class _Flat:
    """JSON in and out of a record of plain fields; ``_TYPES``: field -> allowed types."""

    _TYPES: ClassVar[dict[str, tuple[type, ...]]] = {}

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, row: dict, where: str) -> Any:
        check_fields(row, where, {}, cls._TYPES)
        return cls(**_known(cls, row))


@dataclass(frozen=True)
class SliceRow(_Flat):
    """MIRP's per-slice fields (``slice`` of a manifest row; the blank AS images have none)."""

    base_name: str | None = None  # "{case}_slice{z:03d}[_{type}]"
    classes_count: int | None = None  # structures in the slice
    multiple_components_same_label: bool | None = None

    _TYPES = {"base_name": _STR, "classes_count": _INT, "multiple_components_same_label": _BOOL}


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

    _TYPES = {k: _STR for k in ("case_id", "ct", "seg", "ct_sha256", "seg_sha256")} | {
        "slice_index": _INT,
        "z_mm": _NUM,
    }


# what eval needs of every manifest row, and the types of the rest (None allowed)
_MANIFEST_REQUIRED = {"id": _STR, "setup": _STR, "marker": _STR, "image": _STR, "question": _STR}
_MANIFEST_OPTIONAL = {
    "mask": _STR,
    "object1": _OBJ,
    "object2": _OBJ,
    "object3": _OBJ,
    "source": _OBJ,
    "relation": _STR,
    "transform": _STR,
    "variant": _STR,
    "question_type": _STR,
    "transform_name": _STR,
    "slice": _OBJ,
    "params": _OBJ,
    "modality": _STR,
    "plane": _STR,
    "group": _STR,
    "group_twin": _STR,
    "decidable": _BOOL,
    "decidable_reason": _STR,
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
        out = {key: _plain(getattr(self, key)) for key in MANIFEST_FIELDS}
        for key in self._ABSENT_IF_NONE:
            if out[key] is None:
                del out[key]
        return out

    @classmethod
    def from_json(cls, row: dict, where: str = "manifest row") -> ManifestRow:
        from radspatial.questions import check_answer  # each type checks its own answers

        check_fields(row, where, _MANIFEST_REQUIRED, _MANIFEST_OPTIONAL)
        check_names(row, where, _NAMED, ids=("id",))
        _check_setup(row, where)
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
                **_known(cls, row),
                **parts,
                "answer": answers["answer"],
                "answer_standard": answers.get(standard),
                "answer_anatomical": answers.get("answer_anatomical"),
                "question_type": raw_type or RELPOS,
                "variant": row.get("variant") or "normal",
                "legacy_frames": "answer_anatomical" not in row,
            }
        )


_NAMED = ("setup", "marker", "question_type", "variant")  # they name folders and files


def read_manifest(path: Path) -> list[tuple[str, ManifestRow]]:
    """``(where, row)`` per line of a ``manifest.jsonl``; ``where`` is ``"<path>: line <n>"``."""
    return [(where, ManifestRow.from_json(row, where)) for where, row in read_json_lines(path)]


@dataclass(frozen=True)
class ResultRow:
    """One item in one run: a line of ``results.jsonl`` (docs/format.md). Its expected answer
    is an ``Answer`` (``answer``: ``kind`` and ``expected``) and its grade one ``Grade`` per
    frame (``grades``; ``core/row_grades.py``)."""

    id: str
    run: int
    setup: str
    marker: str
    question: str
    expected: int | str  # the answer in the shown image: 0/1, or a word, a name or a number
    correct: bool
    question_type: str = RELPOS
    relation: str | None = None
    transform: str | None = None
    variant: str | None = None
    pair: str | None = None  # "a / b", the two structures sorted
    expected_standard: int | str | None = None
    expected_anatomical: int | str | None = None
    image: str | None = None
    prompt: str | None = None
    reply: str | None = None
    parsed: int | str | None = None  # the answer read from the reply (None: none)
    parsed_mirp: int | None = None  # MIRP's own parser on the reply
    correct_standard: bool | None = None
    correct_anatomical: bool | None = None
    latency_s: float | None = None
    error: str | None = None
    structures_asked: tuple[str, ...] = ()
    region: str | None = None
    modality: str | None = None
    plane: str | None = None  # the item's plane; absent: axial
    group: str | None = None  # the item's consistency group and its twin; absent: none
    group_twin: str | None = None
    decidable: bool | None = None  # the image decides the item (absent: unknown, older rows)
    kind: str = YES_NO  # the kind of the answers (core/answers.py)
    # the image frame's grade where it says more than ``parsed`` and ``correct`` (how the reply
    # was read, who graded, options, the judge's verdict); None: the rules' reading of them
    reading: Grade | None = None
    # a row from before the frames had names: the frame metrics derive the anatomical answer
    legacy_frames: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.reading is not None and bool(self.reading.correct) != self.correct:
            raise ValueError(f"result row {self.id!r}: 'correct' differs from its grade's")

    @property
    def answer(self) -> Answer:
        """The expected answer in the shown image."""
        return Answer(self.kind, self.expected)

    @property
    def grade(self) -> Grade:
        """The reply's grade in the shown image."""
        if self.reading is not None:
            return self.reading
        return column_grade(self.kind, self.parsed, self.correct)

    @property
    def grades(self) -> dict[str, Grade]:
        """Frame (``image``, ``standard``, ``anatomical``) -> the reply's grade in it, for the
        frames the row has an answer in."""
        out = {}
        for expected, _, frame in FRAMES:
            if (grade := self.grade_in(expected)) is not None:
                out[frame] = grade
        return out

    def grade_in(self, target: str) -> Grade | None:
        """The reply's grade against ``target`` (an ``expected*`` field), None where the row
        has no answer in that frame."""
        asked = getattr(self, target)
        if asked is None:
            return None
        if target == "expected":
            return self.grade
        return frame_grade(self.grade, Answer(self.kind, asked), getattr(self, _CORRECT[target]))

    @property
    def answered(self) -> bool:
        """Whether the reply counts as an answer (``Grade.answered``); metrics count the others
        as invalid."""
        return self.grade.answered

    @property
    def outcome(self) -> int | None:
        """1 right, 0 wrong, None no answer (``answered``), as metrics count the row."""
        return self.grade.outcome

    def scored(self, target: str = "expected") -> tuple[int, int | None] | None:
        """``(1, outcome)`` in the frame of ``target`` (an ``expected*`` field), as accuracy
        counts the row; None where the row has no answer in that frame."""
        grade = self.grade_in(target)
        return None if grade is None else (1, grade.outcome)

    def said(self, target: str = "expected") -> tuple[Any, Any] | None:
        """``(answer asked, answer read)`` in the frame of ``target``, None where the row has no
        answer in it (what the yes/no rates count)."""
        asked = getattr(self, target)
        return None if asked is None else (asked, self.parsed)

    def to_json(self) -> dict[str, Any]:
        """The row as written: the columns in the order they always had (a row with a
        ``reading`` adds ``options`` before the subgroup fields and ``grade`` and ``judge``
        after them), then ``expected_answer`` and ``grades``."""
        head: tuple[str, ...] = ("id", "run", "setup", "marker", "question", "question_type")
        head += ("relation", "transform", "variant", "pair", "expected", "expected_standard")
        scores = ("parsed", "parsed_mirp", "correct", "correct_standard", "correct_anatomical")
        groups: list[tuple[str, ...]] = [head + ("expected_anatomical",)]
        extra = grade_keys(self.reading) if self.reading is not None else {}
        groups += [("image", "prompt", "reply"), scores + ("latency_s", "error")]
        groups += [k for k in [("options",)] if k[0] in extra]
        groups.append(("structures_asked", "region", "modality"))
        groups += [(k,) for k in ("grade", "judge") if k in extra]
        groups += [tuple(k for k in _PLANE_GROUP if getattr(self, k) is not None), ADDED_KEYS]
        own = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name in _COLUMNS}
        extra["expected_answer"] = self.answer.to_json()
        extra["grades"] = {frame: g.to_json() for frame, g in self.grades.items()}
        values = own | extra
        return {key: values[key] for group in groups for key in group}

    @classmethod
    def from_json(cls, row: dict, where: str = "result row") -> ResultRow:
        required = {"id": _STR, "run": _INT, "setup": _STR, "marker": _STR, "question": _STR}
        optional: dict[str, tuple[type, ...]] = {"reply": _STR, "error": _STR, "image": _STR}
        optional["prompt"] = _STR
        optional |= {k: _STR for k in _PLANE_GROUP} | {"decidable": _BOOL}
        optional |= {"correct_standard": _BOOL, "correct_anatomical": _BOOL}
        check_fields(row, where, required | {"correct": _BOOL}, optional)
        check_names(row, where, _NAMED, ids=("id",))
        _check_setup(row, where)
        own = {k: v for k, v in _known(cls, row).items() if k in _COLUMNS}
        if "grade" in row or "answer_expected" in row:  # its grade says more than its columns
            return cls(**graded_values(own, row, where))
        frames = ("expected_standard", "expected_anatomical", "parsed", "parsed_mirp")
        values = own | answers01(row, where, ("expected",), frames)
        values["kind"] = written_kind(row, where, YES_NO)
        if "expected_standard" not in row and "expected_canonical" in row:
            old = answers01(row, where, (), ("expected_canonical",))  # runs before named frames
            values["expected_standard"] = old.get("expected_canonical")
            values["legacy_frames"] = "expected_anatomical" not in row
        values["structures_asked"] = tuple(row.get("structures_asked") or ())
        return cls(**values)


# written only when set (older rows: never)
_PLANE_GROUP = ("plane", "group", "group_twin", "decidable")
# the fields written as they are (the others: ``expected_answer``, ``grades``, ``grade``)
_RECORD_ONLY = ("kind", "reading", "legacy_frames")
_COLUMNS = frozenset(f.name for f in fields(ResultRow)) - set(_RECORD_ONLY)
_CORRECT = {expected: correct for expected, correct, _ in FRAMES}


def read_results(path: Path) -> list[ResultRow]:
    """The rows of a ``results.jsonl``."""
    from radspatial.core.io import read_jsonl_where

    return [ResultRow.from_json(row, where) for where, row in read_jsonl_where(path)]


# the fields each file's rows may carry, in the order written (docs/format.md documents each)
MANIFEST_FIELDS = tuple(f.name for f in fields(ManifestRow) if f.name != "legacy_frames")
OBJECT_FIELDS = tuple(f.name for f in fields(ObjectRow))
RESULT_FIELDS = tuple(f.name for f in fields(ResultRow) if f.name not in _RECORD_ONLY) + ADDED_KEYS
GRADED_RESULT_FIELDS = GRADE_KEYS  # what a row whose grade says more than its columns adds


def error_count(metrics: Mapping[str, Any]) -> int:
    """Failed calls of a run's ``metrics.json`` or ``run.json``: ``n_errors``, or ``errors`` in
    folders written before the two were one key."""
    value = metrics.get("n_errors", metrics.get("errors"))
    return int(value or 0)
