"""The evaluator's item: one question on one image with its expected answers in the three
frames. ``eval/items.py`` reads items from a dataset folder; grading and the runner read them
(a record below both, so that grading needs nothing of ``eval/``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from radspatial.core.records import DEFAULT_TYPE


@dataclass(frozen=True)
class EvalItem:
    id: str
    setup: str  # rq1 | rq2 | rq3 | as
    marker: str  # none | numbers | letters | dots
    image: Path
    question: str
    expected: int | str  # answer in the shown image (open types: canonical text or integer)
    expected_standard: int | str | None = None  # same words, un-rotated/un-flipped view
    expected_anatomical: int | str | None = None  # patient's frame (MIRP): patient's left
    relation: str | None = None
    transform: str | None = None
    object1: str | None = None  # snake_case structure name, when known
    object2: str | None = None
    variant: str = "normal"  # anatomy variant of the case (normal, situs_inversus, blank, ...)
    question_type: str = DEFAULT_TYPE  # or a SPAR-VQA type (orientation, size, ...)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pair(self) -> str | None:
        if not (self.object1 and self.object2):
            return None
        return " / ".join(sorted((self.object1, self.object2)))
