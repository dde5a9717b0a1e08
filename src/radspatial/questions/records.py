"""The records of one question as the agent answers it: parse -> localize -> verify.

``Ref`` (a structure and/or marker named in the question), ``ParsedQuestion`` (what a type's
``parse`` returns), ``Found`` (where a localizer found a Ref), ``Decision`` (a type's
``verify``), ``Context`` (what a localizer may use besides the image) and ``Scene`` (what
``verify`` may use). They live below the agent, with the question types that make and read
them; ``agent/pipeline/types.py`` re-exports them for localizers.

Image coordinates: (x, y) in pixels of the image as shown, x to the right, y downward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from radspatial.core.labels import side_of
from radspatial.core.rules import QuestionRules


class ParseError(ValueError):
    """The question could not be parsed into one known kind of binary spatial question."""


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
class Ref:
    """One side of the question: a named structure and/or a marker reference.

    Examples: "the aorta (BZ)" -> Ref(name="aorta", marker="letters", text="BZ");
    "the number 52" -> Ref(name=None, marker="numbers", text="52");
    "the red dot" -> Ref(name=None, marker="dots", text="red"); "the left kidney" ->
    Ref(name="kidney_left").
    """

    name: str | None = None  # snake_case structure name (TotalSegmentator style), if named
    marker: str | None = None  # numbers | letters | dots, if a marker is referenced
    text: str | None = None  # "52", "BZ", "red" / "blue"
    phrase: str = ""  # the words of the question this came from

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "marker": self.marker, "text": self.text, "phrase": self.phrase}


@dataclass(frozen=True)
class ParsedQuestion:
    """One parsed question. ``refs`` in order: relative position and size (subject, reference),
    distance (anchor, first, second), count (the structure), orientation (none)."""

    refs: tuple[Ref, ...]
    relation: str  # one of the type's ``relations``
    question: str
    kind: str = "relative_position"
    params: dict[str, Any] = field(default_factory=dict)  # count: {"n": 3}

    @property
    def subject(self) -> Ref | None:
        return self.refs[0] if self.refs else None

    @property
    def reference(self) -> Ref | None:
        return self.refs[1] if len(self.refs) > 1 else None

    def to_json(self, roles: Sequence[str] = ()) -> dict[str, Any]:
        """The trace's record; ``roles`` (the type's) name the refs."""
        out: dict[str, Any] = {"kind": self.kind, "relation": self.relation}
        out.update({role: ref.to_json() for role, ref in zip(roles, self.refs, strict=False)})
        if self.params:
            out["params"] = self.params
        out["question"] = self.question
        return out


@dataclass(frozen=True)
class Found:
    """Where a localizer found one Ref."""

    xy: tuple[float, float]  # centre used for the decision (shown frame)
    score: float  # confidence in [0, 1]
    method: str  # e.g. "dot-color", "glyph-match", "mask-centroid", "unet"
    details: dict[str, Any] = field(default_factory=dict)  # bbox, read text, area, ...

    @property
    def uncertainty_px(self) -> float:
        """How far (shown px) the true centre may lie from ``xy``, as the localizer's evidence
        says (``details["uncertainty_px"]``; 0 when it gives none: a mask or a read marker)."""
        return float(self.details.get("uncertainty_px") or 0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "xy": [round(float(v), 2) for v in self.xy],
            "score": round(float(self.score), 4),
            "method": self.method,
            "details": self.details,
        }


@dataclass(frozen=True)
class Decision:
    """A question type's answer from what was found: 1 yes, 0 no (an open type: the word or
    number), None abstain; ``reason`` and ``rule`` say why, for the trace."""

    answer: int | str | None
    reason: str
    rule: str
    dx: float | None = None  # subject minus reference, shown frame
    dy: float | None = None
    confidence: float = 0.0
    measured: dict[str, Any] = field(default_factory=dict)  # areas, distances, counts, ...

    @classmethod
    def not_found(
        cls, rule: str, roles: Sequence[str], found: Sequence[Found | None]
    ) -> Decision | None:
        """An abstention naming the roles whose structure was not found, else None."""
        gone = [role for role, f in zip(roles, found, strict=True) if f is None]
        return cls(None, f"{' and '.join(gone)} not found", rule) if gone else None

    def to_json(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 2)  # noqa: E731
        out = {
            "answer": self.answer,
            "reason": self.reason,
            "rule": self.rule,
            "dx": r(self.dx),
            "dy": r(self.dy),
            "confidence": round(self.confidence, 4),
        }
        if self.measured:
            out["measured"] = self.measured
        return out


@dataclass(frozen=True)
class Context:
    """What a localizer may use besides the image (all optional)."""

    mask: np.ndarray | None = None  # label image in the shown frame (uint16), e.g. --export-masks
    labels: dict[int, str] | None = None  # label id -> snake_case name for ``mask``
    ct_path: str | None = None  # the CT volume, for 3D localizers (TotalSegmentator)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scene:
    """What a question type's ``verify`` may use besides the found refs: the image as shown,
    the localizer's context and the agent's thresholds."""

    image: np.ndarray
    context: Context
    rules: QuestionRules


@dataclass(frozen=True)
class Example:
    """A type's fixed in-context example, worded by ``eval/prompts.py`` like the real question
    (same setup and marker type) from these parts."""

    names: tuple[str, ...] = ()  # display names of the structures it asks about
    relations: tuple[str, str] = ("", "")  # binary: the relation asked for the answer (0, 1)
    params: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"n": 2} for count
    answers: tuple = ()  # open: the answers, one picked per item by a hash of its id
    first_mark: int = 0  # the first of the example markers it uses
    question: str = ""  # a fixed question instead, the same in every setup (orientation)


@dataclass(frozen=True)
class PriorInput:
    """What a reader that does not look at the image knows of one item (models/baselines.py).

    ``reader``: "anatomy-prior" recites typical anatomy (``atlas``: structure -> standard-view
    centre in [0, 1] of the image); "standard-view" reads the item's own standard-view centres
    (``meta``'s ``center1_canonical``/``center2_canonical``, px of an image ``width`` wide).
    ``meta``: the request's item fields (``relation``, ``object1``..``object3`` names, ...).
    ``pairs``: (a, b) -> typical centre(a) - centre(b) on slices showing both (empty: unknown).
    """

    reader: str
    meta: Mapping[str, Any]
    atlas: Mapping[str, tuple[float, float]]
    width: float = 512.0
    pairs: Mapping[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def offset(self, k1: int, k2: int) -> tuple[float, float] | None:
        """Typical standard-view centre(object k1) - centre(object k2) where both are seen
        together (``pairs``), None if the pair was never seen together."""
        a, b = self.meta.get(f"object{k1}"), self.meta.get(f"object{k2}")
        return self.pairs.get((a, b)) if a and b else None

    def centres(self, n: int, *, guess_side: bool) -> list[tuple[float, float] | None]:
        """Atlas centres of object1..objectN (None where unknown); with ``guess_side`` a sided
        name missing from the atlas sits in the middle of its side (patient's left: image
        right in standard view)."""
        out = []
        for k in range(1, n + 1):
            name = self.meta.get(f"object{k}")
            centre = self.atlas.get(name) if name else None
            if centre is None and name and guess_side and (side := side_of(name)):
                centre = (0.7, 0.5) if side == "left" else (0.3, 0.5)
            out.append(centre)
        return out
