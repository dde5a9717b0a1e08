"""Question types: one module per type, one registry.

A question type turns the structures visible in one slice into one question with a chosen
answer (the generator balances answers by asking for yes or no).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Candidate:
    """A structure eligible for questions in one slice."""

    label_id: int
    name: str  # snake_case, e.g. kidney_left
    center_xy: tuple[float, float]  # shown frame
    center_xy_canonical: tuple[float, float]


@dataclass(frozen=True)
class QuestionSpec:
    """What was asked, independent of how it is worded for a setup/marker."""

    question_type: str
    object1: Candidate
    object2: Candidate
    relation: str
    answer: int
    answer_canonical: int


@dataclass(frozen=True)
class QuestionRules:
    min_distance_px: float = 50.0
    margin_px: float = 10.0


class QuestionType(Protocol):
    name: str

    def propose(
        self,
        candidates: list[Candidate],
        target: int,
        rng: np.random.Generator,
        rules: QuestionRules,
    ) -> QuestionSpec | None:
        """One question whose shown-frame answer is ``target``, or None if the slice has none."""


_REGISTRY: dict[str, QuestionType] = {}


def register_question_type(qt: QuestionType) -> QuestionType:
    if qt.name in _REGISTRY:
        raise ValueError(f"question type {qt.name!r} registered twice")
    _REGISTRY[qt.name] = qt
    return qt


def get_question_type(name: str) -> QuestionType:
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown question type {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def list_question_types() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    from radspatial.questions import relative_position  # noqa: F401
