"""Question types: one module per type, one registry.

A question type turns what one slice shows (:class:`SliceFacts`) into one yes/no question with
a chosen answer (the generator balances answers by asking for yes or no), and words it for each
setup: RQ1 names only, RQ2 names with markers, RQ3 markers only. Relative position is MIRP's
type; orientation, symmetry, size, distance and count are the SPAR Level 3 probes posed as
questions (SPAR-VQA). Every type is binary and balanced, so its chance level is 50%.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from radspatial.core.registry import Registry
from radspatial.core.rules import QuestionRules
from radspatial.imaging.markers import marker_style

__all__ = ["QuestionRules"]  # re-exported: its home is core/rules.py

SPAR_VQA: tuple[str, ...] = ("orientation", "symmetry", "size", "distance", "count")
# open types: a word or a number as the answer (questions/open_common.py)
OPEN: tuple[str, ...] = ("laterality", "direction", "identification", "counting")


@dataclass(frozen=True)
class Candidate:
    """A structure in one slice. Coordinates: shown frame (after the variant) and standard
    radiological view (``*_canonical``: before rotation/flip; patient's right on image left)."""

    label_id: int
    name: str  # snake_case, e.g. kidney_left
    center_xy: tuple[float, float]  # centre of mass, shown frame
    center_xy_canonical: tuple[float, float]
    marker_xy: tuple[float, float] | None = None  # where a marker goes, shown frame
    area_px: float = 0.0  # output pixels (the same in every variant)
    marker_xy_canonical: tuple[float, float] | None = None  # the marker in standard view


@dataclass(frozen=True)
class SliceFacts:
    """What a question type may look at in one slice.

    ``candidates``: structures that can carry a marker (one component, large enough, unique).
    ``component_areas(label_id)``: areas (output px, largest first) of a label's 8-connected
    components in the rendered output-size label image; used by ``count``.
    """

    variant: str
    size: int
    candidates: tuple[Candidate, ...]
    present: tuple[Candidate, ...] = ()  # every named structure in the slice (any components)
    component_areas: Callable[[int], list[float]] | None = None


@dataclass(frozen=True)
class QuestionSpec:
    """What was asked, independent of how it is worded for a setup/marker.

    Three frames: ``answer`` for the shown image; ``answer_standard`` for the same words asked
    of the un-rotated, un-flipped radiological image; ``answer_anatomical`` in the patient's
    frame (MIRP's anatomical truth: "left" is the patient's left), None where a type has none.
    """

    question_type: str
    objects: tuple[Candidate, ...]
    relation: str
    answer: int | str  # 0/1; open types: the canonical text or integer
    answer_standard: int | str | None
    params: dict[str, Any] = field(default_factory=dict)  # e.g. {"n": 3} for count
    answer_anatomical: int | str | None = None

    @property
    def object1(self) -> Candidate | None:
        return self.objects[0] if self.objects else None

    @property
    def object2(self) -> Candidate | None:
        return self.objects[1] if len(self.objects) > 1 else None


@dataclass(frozen=True)
class Wording:
    """How each object is referred to in one setup: display names and/or marker references."""

    setup: str  # rq1 | rq2 | rq3
    marker: str  # none, or a marker style's name (numbers | letters | dots | ...)
    names: tuple[str, ...]  # display names ("left kidney")
    marks: tuple[str, ...]  # marker texts ("12", "BZ", "red"); empty for rq1

    def ref(self, k: int) -> str:
        """'the liver', 'the liver (12)', 'the number 12', 'the letters BZ', 'the red dot'."""
        if self.setup == "rq1":
            return f"the {self.names[k]}"
        if self.setup == "rq2":
            return f"the {self.names[k]} ({self.marks[k]})"
        return marker_ref(self.marker, self.marks[k])

    def verb(self, k: int) -> str:
        """'Are' before 'the letters BZ' (MIRP's wording), else 'Is' (any k: one marker type)."""
        return marker_style(self.marker).verb if self.setup == "rq3" else "Is"

    def thing(self, k: int) -> str:
        """A structure phrase: named, or 'the structure marked by the number 12' in RQ3."""
        if self.setup == "rq3":
            return f"the structure marked by {marker_ref(self.marker, self.marks[k])}"
        return self.ref(k)


def marker_ref(kind: str, text: str) -> str:
    """'the number 12', 'the letters BZ', 'the red dot': the marker style's phrase."""
    return marker_style(kind).ref(text)


class QuestionType(Protocol):
    name: str
    setups: tuple[str, ...]  # which of rq1/rq2/rq3 it can be asked in
    n_objects: int  # objects that carry markers (0 for orientation)
    chance: float  # accuracy of a random guess (0.5: binary, balanced)

    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        """The rotation/flip variant to show (most types keep the pair's ``default``)."""

    def propose(
        self, facts: SliceFacts, target: int, rng: np.random.Generator, rules: QuestionRules
    ) -> QuestionSpec | None:
        """One question whose shown-frame answer is ``target``, or None if the slice has none."""

    def text(self, spec: QuestionSpec, wording: Wording) -> str:
        """The question as asked."""


class KeepVariant:
    """Mixin: the question does not depend on which variant is shown."""

    def choose_variant(self, target: int, default: str, rng: np.random.Generator) -> str:
        return default


QUESTION_TYPES: Registry[QuestionType] = Registry(
    "question type",
    tuple(
        f"radspatial.questions.{m}"
        for m in (
            "count",
            "counting",
            "direction",
            "distance",
            "identification",
            "laterality",
            "orientation",
            "relative_position",
            "size",
        )
    ),
)


def register_question_type(qt: QuestionType) -> QuestionType:
    return QUESTION_TYPES.add(qt.name, qt)


def get_question_type(name: str) -> QuestionType:
    return QUESTION_TYPES.get(name)


def list_question_types() -> list[str]:
    return QUESTION_TYPES.names()


def chance_levels() -> dict[str, float | None]:
    """Chance per type; None where it depends on the item (identification: see its module)."""
    return {k: v.chance for k, v in QUESTION_TYPES.items()}


def answer_classes(name: str) -> tuple:
    """The answer classes an open type balances over (empty: binary, or not balanced)."""
    return tuple(getattr(get_question_type(name), "classes", ()))
