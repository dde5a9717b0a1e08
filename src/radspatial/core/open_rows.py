"""The open part of a results row (``core.records.ResultRow``): how an open answer was graded.

An open question type's row holds the answers asked (``expected*``) and read (``parsed``) as
the words, names or numbers they are; :class:`OpenGrade` adds how the reply was graded (the
rules' reading ``status`` and ``reason``, the ``source``: ``rules``, ``judge`` or ``none``),
the options a uniform guess picks from and the judge's verdict. Metrics count such a row as
right, wrong, or no answer (``ResultRow.outcome`` and ``ResultRow.scored``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from radspatial.core.datafiles import DataFileError


@dataclass(frozen=True)
class OpenGrade:
    """What a result row of an open question type adds: how its reply was graded (``grade``:
    the rules' reading ``status`` and ``reason``, and who graded, ``source``), the options a
    uniform guess picks from (identification) and, with ``--judge``, the judge's verdict. The
    row's ``expected*`` are the answers asked and ``parsed`` the answer the rules read."""

    status: str = "undecided"  # the rules' reading: answer | invalid | undecided
    reason: str = ""
    source: str = "none"  # rules | judge | none
    options: tuple[str, ...] | None = None  # identification: the slice's structures
    judge: dict[str, Any] | None = None  # with --judge: the verdict on this row

    def to_json(self) -> dict[str, Any]:
        grade = {"status": self.status, "reason": self.reason, "source": self.source}
        return {
            "grade": grade,
            "options": None if self.options is None else list(self.options),
            "judge": self.judge,
        }

    @classmethod
    def from_json(cls, row: dict, where: str) -> OpenGrade:
        """From a row's ``grade`` object, or from the columns open rows had before answers had
        one model (``rules``, ``grade_source``)."""
        grade = row.get("grade")
        if grade is None:  # an older row: answer_* columns, the rules' object
            rules = row.get("rules") or {}
            grade = {
                "status": rules.get("status", "undecided"),
                "reason": rules.get("reason", ""),
                "source": row.get("grade_source", "rules"),
            }
        if not isinstance(grade, dict) or grade.get("source") not in ("rules", "judge", "none"):
            raise DataFileError(f"{where}: 'grade' must be an object with a known source")
        if grade.get("status") not in ("answer", "invalid", "undecided"):
            raise DataFileError(f"{where}: unknown grade status {grade.get('status')!r}")
        options = row.get("options")
        return cls(
            grade["status"],
            str(grade.get("reason") or ""),
            grade["source"],
            None if options is None else tuple(options),
            row.get("judge"),
        )

    def answered(self, correct: bool) -> bool:
        """Whether the row's reply counts as an answer (``outcome`` not None)."""
        if correct:
            return True
        if self.source == "judge":
            return (self.judge or {}).get("verdict") != "invalid"
        return self.status == "answer"


def open_values(values: dict[str, Any], row: dict, where: str) -> dict[str, Any]:
    """A ``ResultRow``'s fields from an open row (``values``: the row's own fields); rows
    written before answers had one model kept the answers in ``answer_expected``,
    ``answer_standard``, ``answer_anatomical`` and ``answer_read`` (with ``expected`` 1 and
    ``parsed`` the grade): read as the answers they are."""
    values = dict(values)
    values.pop("open", None)
    if "answer_expected" in row:
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
    values["open"] = OpenGrade.from_json(row, where)
    return values
