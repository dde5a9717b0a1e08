"""How a results row (``core.records.ResultRow``) holds its grade, in memory and in files.

Every row holds its expected answer as an :class:`~radspatial.core.answers.Answer` (``kind``
and ``expected``) and one :class:`~radspatial.core.answers.Grade` per frame (``image``,
``standard``, ``anatomical``): the reply's reading (``read``, ``status``, ``reason``), whether
it is right in that frame (``correct``), who decided (``source``) and what else the grading
knows in its ``metadata`` (``options``: what a uniform guess picks from; ``judge``: the judge's
verdict). A row written with ``parsed`` and ``correct`` alone (yes/no) has the rules' reading
of them as its grade.

``results.jsonl`` keeps its columns (``expected*``, ``parsed``, ``correct*``) and adds the
grade: ``expected_answer`` and ``grades`` (one per frame) on every row, and on a row whose
grade says more than its columns the keys such rows always had: ``grade`` (``status``,
``reason``, ``source``), ``options`` and ``judge``. Rows written before (no ``grades``; older
still: ``answer_*`` columns and a ``rules`` object) are read here into the same record.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from radspatial.core.answers import SOURCES, STATUSES, Answer, Grade
from radspatial.core.datafiles import DataFileError

# (expected field, correct field, frame name): the three frames a row is graded in
FRAMES: tuple[tuple[str, str, str], ...] = (
    ("expected", "correct", "image"),
    ("expected_standard", "correct_standard", "standard"),
    ("expected_anatomical", "correct_anatomical", "anatomical"),
)
# the kind of a row written before rows named it whose grade said more than its columns (its
# question type's answers were words, names or numbers)
UNNAMED_KIND = "open"
GRADE_KEYS = ("grade", "options", "judge")  # what such a row writes beside its columns
ADDED_KEYS = ("expected_answer", "grades")  # what every row writes beside its columns


def column_grade(kind: str, parsed: Any, correct: bool) -> Grade:
    """The rules' reading of a row that has only its columns: one value read or none."""
    if parsed is None:
        return Grade(None, "invalid", "", correct, "rules")
    return Grade(Answer(kind, parsed), "answer", "", correct, "rules")


def frame_grade(grade: Grade, expected: Answer, correct: bool | None) -> Grade:
    """``grade`` (the image frame's) in another frame: its ``correct`` column where the row has
    one, else the reading compared with ``expected`` (rows written before the frames had
    columns)."""
    return grade.graded(expected) if correct is None else replace(grade, correct=correct)


def grade_keys(grade: Grade) -> dict[str, Any]:
    """``grade``, ``options`` and ``judge`` as such rows always wrote them."""
    out: dict[str, Any] = {
        "grade": {"status": grade.status, "reason": grade.reason, "source": grade.source}
    }
    if grade.metadata.get("options"):
        out["options"] = list(grade.metadata["options"])
    if grade.metadata.get("judge") is not None:
        out["judge"] = grade.metadata["judge"]
    return out


def graded_values(values: dict[str, Any], row: dict, where: str) -> dict[str, Any]:
    """A ``ResultRow``'s fields (``values``: the row's own) from a row whose grade says more
    than its columns (``grade`` or, older, ``answer_expected``): its answers as the words,
    names or numbers they are, its kind and its grade."""
    values = dict(values)
    if "answer_expected" in row:  # before answers had one model: expected 1, parsed the grade
        values["expected"] = row["answer_expected"]
        values["expected_standard"] = row.get("answer_standard")
        values["expected_anatomical"] = row.get("answer_anatomical")
        values["parsed"] = row.get("answer_read")
    for key in ("expected", "expected_standard", "expected_anatomical", "parsed"):
        value = values.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
            raise DataFileError(f"{where}: {key!r} must be a word, a number or null")
    if values.get("expected") is None:
        raise DataFileError(f"{where}: missing required field 'expected'")
    values["structures_asked"] = tuple(row.get("structures_asked") or ())
    values["kind"] = written_kind(row, where, UNNAMED_KIND)
    older = _older_grade(row, values, where)  # checked also where ``grades`` holds it
    values["reading"] = _written_grade(row, where) or older
    return values


def written_kind(row: dict, where: str, default: str) -> str:
    """The kind of the row's ``expected_answer`` (``default`` for a row written before)."""
    if row.get("expected_answer") is None:
        return default
    return Answer.from_json(row["expected_answer"], f"{where}: expected_answer").kind


def _written_grade(row: dict, where: str) -> Grade | None:
    grades = row.get("grades")
    if grades is None:
        return None
    if not isinstance(grades, dict) or "image" not in grades:
        raise DataFileError(f"{where}: 'grades' must be an object with the 'image' frame's grade")
    return Grade.from_json(grades["image"], f"{where}: grades: image")


def _older_grade(row: dict, values: dict[str, Any], where: str) -> Grade:
    """The grade of a row written before ``grades``: its ``grade`` object (or, older, ``rules``
    and ``grade_source``), ``options``, ``judge`` and its columns."""
    grade = row.get("grade")
    if grade is None:  # an older row: answer_* columns, the rules' object
        rules = row.get("rules") or {}
        grade = {
            "status": rules.get("status", "undecided"),
            "reason": rules.get("reason", ""),
            "source": row.get("grade_source", "rules"),
        }
    if not isinstance(grade, dict) or grade.get("source") not in SOURCES:
        raise DataFileError(f"{where}: 'grade' must be an object with a known source")
    if grade.get("status") not in STATUSES:
        raise DataFileError(f"{where}: unknown grade status {grade.get('status')!r}")
    options, judge = row.get("options"), row.get("judge")
    metadata = {"options": list(options)} if options is not None else {}
    metadata |= {"judge": judge} if judge is not None else {}
    parsed = values.get("parsed")
    return Grade(
        None if parsed is None else Answer(values["kind"], parsed),
        grade["status"],
        str(grade.get("reason") or ""),
        None if grade["source"] == "none" else bool(values.get("correct")),
        grade["source"],
        metadata,
    )
