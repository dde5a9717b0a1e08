"""One answer model for every question type: an :class:`Answer` and its :class:`Grade`.

An answer has a ``kind`` and a ``value``: ``yes/no`` (1 or 0), ``choice`` (one of the type's
classes: a side, a direction, a multiple-choice option), ``count`` (an integer) and ``name`` (a
structure's snake_case name). A question type declares its kind (``questions.QuestionType.
answer_kind``) and reads replies into answers of it; a new type may declare a kind of its own
(any plain name), nothing here branches on kinds.

A :class:`Grade` says how one reply was scored: the answer read from it (None where none was),
the reading's ``status`` (``answer``: one value read; ``invalid``: a hedge, refusal or several
values, scored wrong; ``undecided``: the rules found nothing they know, the judge may decide),
whether it is ``correct`` (None: not graded) and who graded it (``source``: ``rules``, ``judge``
or ``none``); its ``metadata`` holds what else the grading knows: the options a uniform guess
picks from (``options``), the judge's verdict (``judge``). Both are frozen records with
``to_json``/``from_json``; a results row (``core.records.ResultRow``) holds one grade per frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from radspatial.core.datafiles import DataFileError

YES_NO, CHOICE, COUNT, NAME = "yes/no", "choice", "count", "name"
KINDS: tuple[str, ...] = (YES_NO, CHOICE, COUNT, NAME)  # the built-in types' kinds
STATUSES: tuple[str, ...] = ("answer", "invalid", "undecided")
SOURCES: tuple[str, ...] = ("rules", "judge", "none")
Value = int | str


def _check_value(value: Any, where: str) -> Value:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DataFileError(f"{where}: an answer's value must be a string or an integer")
    return value


@dataclass(frozen=True)
class Answer:
    """One answer: its kind and its canonical value (``1``, ``"left"``, ``3``, ``"liver"``)."""

    kind: str
    value: Value

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value}

    @classmethod
    def from_json(cls, data: Any, where: str = "answer") -> Answer:
        if not isinstance(data, dict) or set(data) != {"kind", "value"}:
            raise DataFileError(f"{where}: an answer is {{'kind': ..., 'value': ...}}")
        if not isinstance(data["kind"], str) or not data["kind"]:
            raise DataFileError(f"{where}: an answer's kind must be a name")
        return cls(data["kind"], _check_value(data["value"], where))


@dataclass(frozen=True)
class Grade:
    """How one reply was scored (see the module docstring)."""

    read: Answer | None  # what the reply says, in the type's canonical form
    status: str  # answer | invalid | undecided
    reason: str = ""
    correct: bool | None = None  # None: not graded (undecided, no judge)
    source: str = "rules"  # rules | judge | none
    # options (a uniform guess's choices), judge (the verdict), ...; not part of the hash
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def value(self) -> Value | None:
        """The value read (None where the reply gave none)."""
        return None if self.read is None else self.read.value

    @property
    def answered(self) -> bool:
        """Whether the reply counts as an answer: graded right, or (graded wrong) one value was
        read, or the judge's verdict was not "invalid". Metrics count the others as invalid."""
        if self.correct:
            return True
        if self.source == "judge":
            return (self.metadata.get("judge") or {}).get("verdict") != "invalid"
        return self.status == "answer"

    @property
    def outcome(self) -> int | None:
        """1 right, 0 wrong, None no answer (``answered``), as metrics count it."""
        return (1 if self.correct else 0) if self.answered else None

    def graded(self, expected: Answer | None) -> Grade:
        """This reading compared with ``expected``: correct where one value was read (and equals
        it), wrong where the reply is invalid, ungraded where undecided or nothing is expected."""
        if expected is None or self.status == "undecided":
            return replace(self, correct=None, source="none")
        return replace(self, correct=self.status == "answer" and self.read == expected)

    def to_json(self) -> dict[str, Any]:
        """The grade as written (``metadata`` only where it holds something)."""
        read = None if self.read is None else self.read.to_json()
        out = {
            "read": read,
            "status": self.status,
            "reason": self.reason,
            "correct": self.correct,
            "source": self.source,
        }
        return out | ({"metadata": dict(self.metadata)} if self.metadata else {})

    @classmethod
    def from_json(cls, data: Any, where: str = "grade") -> Grade:
        if not isinstance(data, dict):
            raise DataFileError(f"{where}: a grade must be an object")
        status, source = data.get("status"), data.get("source", "rules")
        if status not in STATUSES or source not in SOURCES:
            raise DataFileError(f"{where}: unknown grade status {status!r} or source {source!r}")
        correct = data.get("correct")
        if correct is not None and not isinstance(correct, bool):
            raise DataFileError(f"{where}: a grade's 'correct' must be true, false or null")
        read, metadata = data.get("read"), data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DataFileError(f"{where}: a grade's 'metadata' must be an object")
        return cls(
            None if read is None else Answer.from_json(read, f"{where}: read"),
            status,
            str(data.get("reason") or ""),
            correct,
            source,
            metadata,
        )
