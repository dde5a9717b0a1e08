"""Typed records for the rows of results.jsonl, and what the dataset's rows share with them.

The manifest's rows (``ManifestRow``, one generated question) are read in the question kernel
(``questions/manifest.py``: each type checks its own answers); ``eval.items`` reads them into
``EvalItem``; ``eval.runner`` writes one ``ResultRow`` per item and run to ``results.jsonl``
(its expected ``Answer`` and one ``Grade`` per frame: ``core/row_grades.py``), which the report
and the MIRP export read back.

``to_json`` gives exactly the keys and values written (files are written with sorted keys);
``from_json`` reads rows of every earlier version (``answer_canonical`` in a manifest and
``expected_canonical`` in results are the standard view) and raises ``DataFileError`` naming
the row and the field that is missing or of the wrong type. docs/format.md's field tables are
checked against ``RESULT_FIELDS`` and ``questions.manifest.MANIFEST_FIELDS``
(tests/test_records.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from radspatial.core.answers import YES_NO, Answer, Grade
from radspatial.core.datafiles import (
    DataFileError,
    answers01,
    check_fields,
    check_names,
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

# the question type of a row that names none (rows written before there were other types);
# the one place its name is spelled outside questions/ (``DEFAULT_TYPE`` everywhere else)
DEFAULT_TYPE = "relative_position"
RELPOS = DEFAULT_TYPE
STR, INT, NUM, BOOL, OBJ, LIST = (
    (str,),
    (int,),
    (float, int),
    (bool,),
    (dict,),
    (list,),
)  # JSON types
NAMED_FIELDS = ("setup", "marker", "question_type", "variant")  # they name folders and files
SETUPS: tuple[str, ...] = ("rq1", "rq2", "rq3", "as")  # MIRP's three setups + the blank ablation


def plain_json(value: Any) -> Any:
    """JSON form of a record value: tuples as lists, records as objects."""
    if isinstance(value, tuple):
        return [plain_json(v) for v in value]
    if hasattr(value, "to_json"):
        return value.to_json()
    return value


def check_setup(row: dict, where: str) -> None:
    """A row's ``setup`` is one of :data:`SETUPS` (a typo would make a group of its own)."""
    if row.get("setup") is not None and row["setup"] not in SETUPS:
        raise DataFileError(f"{where}: unknown setup {row['setup']!r} (one of {', '.join(SETUPS)})")


def known_fields(cls: type, row: dict) -> dict[str, Any]:
    """The row's values of ``cls``'s fields (absent ones left to the defaults)."""
    return {f.name: row[f.name] for f in fields(cls) if f.name in row}


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
        own = {
            f.name: plain_json(getattr(self, f.name)) for f in fields(self) if f.name in _COLUMNS
        }
        extra["expected_answer"] = self.answer.to_json()
        extra["grades"] = {frame: g.to_json() for frame, g in self.grades.items()}
        values = own | extra
        return {key: values[key] for group in groups for key in group}

    @classmethod
    def from_json(cls, row: dict, where: str = "result row") -> ResultRow:
        required = {"id": STR, "run": INT, "setup": STR, "marker": STR, "question": STR}
        optional: dict[str, tuple[type, ...]] = {"reply": STR, "error": STR, "image": STR}
        optional["prompt"] = STR
        optional |= {k: STR for k in _PLANE_GROUP} | {"decidable": BOOL}
        optional |= {"correct_standard": BOOL, "correct_anatomical": BOOL}
        check_fields(row, where, required | {"correct": BOOL}, optional)
        check_names(row, where, NAMED_FIELDS, ids=("id",))
        check_setup(row, where)
        own = {k: v for k, v in known_fields(cls, row).items() if k in _COLUMNS}
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
RESULT_FIELDS = tuple(f.name for f in fields(ResultRow) if f.name not in _RECORD_ONLY) + ADDED_KEYS
GRADED_RESULT_FIELDS = GRADE_KEYS  # what a row whose grade says more than its columns adds


def error_count(metrics: Mapping[str, Any]) -> int:
    """Failed calls of a run's ``metrics.json`` or ``run.json``: ``n_errors``, or ``errors`` in
    folders written before the two were one key."""
    value = metrics.get("n_errors", metrics.get("errors"))
    return int(value or 0)
