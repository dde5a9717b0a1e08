"""The agent: one pipeline for every kind of question, with every step recorded in a trace.

agent = Agent("markers")
result = agent.answer(image, "Is the aorta (BZ) above the spleen (AA)?")
result.answer   # 1, 0 or None (abstain); "left", "liver", 2 for a choice, name or count
result.trace    # JSON-safe dict: parsed tuple, localizer, found, checks, decision, timings

parse -> the type's ``to_locate`` -> locate -> the shared trust checks (``agent/pipeline/trust.py``:
refusal, structures found, the localizer's confidence floor and its own reasons) -> the type's
``verify``. The question's type (``radspatial.questions``) parses it, says what to localize,
decides from what was found and words the answer; the agent never asks what kind of answer a
question wants.
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from radspatial.agent.pipeline import mirror, trust
from radspatial.agent.pipeline.types import (
    Context,
    Decision,
    Localizer,
    ParsedQuestion,
    ParseError,
    Ref,
    Scene,
    create_localizer,
)
from radspatial.core.labels import load_table, side_of
from radspatial.core.rules import (
    MARGIN_PX,
    MIN_COMPONENT_PX,
    REFERENCE_PX,
    SIZE_TOLERANCE,
    QuestionRules,
    checked_reference,
)
from radspatial.questions import QUESTION_TYPES, get_question_type
from radspatial.questions.ask import parse_question

MAX_PIXELS = 4096 * 4096
# the first localization's abstentions a second model may answer: what was found (or not)
# was not trusted; never the question's own rules (a relation too close to call is asked once)
SECOND_OPINION_ON = (trust.NOT_FOUND, trust.LOW_CONFIDENCE, trust.NOT_TRUSTED)
STEP_KEYS = ("localizer", "found", "margin_px", "checks", "sides")
# a second model's answer stands only where the first's own pixels (trusted or not) of each
# structure without a side lie within this share of the image's larger side (+ both
# uncertainties) of the second's: two models that place the liver apart cannot both be right
AGREE_TOLERANCE = 0.1
Located = tuple[Sequence[Ref], list]  # what one localizer was asked and what it found


@dataclass(frozen=True)
class AgentAnswer:
    answer: int | str | None  # None abstains; else the type's answer (1/0, a word, a count)
    text: str  # "1", "0", or "abstain: <reason>"
    trace: dict[str, Any]


def load_image(data: bytes | str | Path | np.ndarray | Image.Image) -> np.ndarray:
    """RGB uint8 array from PNG/JPEG bytes, a path, a PIL image or an array.

    Refuses images over ``MAX_PIXELS`` before decoding them (decompression bombs).
    """
    if isinstance(data, np.ndarray):
        arr = data
    else:
        try:
            if isinstance(data, bytes):
                img = Image.open(io.BytesIO(data))
            elif isinstance(data, Image.Image):
                img = data
            else:
                img = Image.open(data)
            if img.width * img.height > MAX_PIXELS:
                raise ValueError(f"image of {img.width} x {img.height} px is over the limit")
            arr = np.asarray(img.convert("RGB"))  # decodes here: a truncated file fails here
        except Image.DecompressionBombError as exc:
            raise ValueError(f"image is over the limit ({exc})") from None
        except (OSError, SyntaxError) as exc:  # PIL's UnidentifiedImageError is an OSError
            raise ValueError(f"not a readable image ({exc})") from None
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] < 3:
        raise ValueError(f"expected an RGB image, got an array of shape {arr.shape}")
    return np.ascontiguousarray(arr[:, :, :3].astype(np.uint8, copy=False))


class Agent:
    """``margin``: px for relative position, direction, distance and laterality, given at a
    ``margin_reference`` px image and scaled to each image's larger side (None: px of every
    image as given, the rule before #34 round 6); ``size_tolerance``: relative area difference
    below which size questions abstain; ``min_component_px``: count's region size in px of the
    image (the generator's default rule)."""

    def __init__(
        self,
        localizer: str | Localizer = "markers",
        *,
        margin: float = MARGIN_PX,
        size_tolerance: float = SIZE_TOLERANCE,
        min_component_px: float = MIN_COMPONENT_PX,
        margin_reference: float | None = REFERENCE_PX,
        agree_tolerance: float | None = AGREE_TOLERANCE,
        **options: Any,
    ) -> None:
        self.localizer = (
            create_localizer(localizer, **options) if isinstance(localizer, str) else localizer
        )
        self.rules = QuestionRules(
            margin_px=margin, size_tolerance=size_tolerance, min_component_px=min_component_px
        )
        self.margin_reference = (
            None if margin_reference is None else checked_reference(margin_reference)
        )
        self.agree_tolerance = agree_tolerance

    @property
    def margin(self) -> float:
        return self.rules.margin_px

    @property
    def size_tolerance(self) -> float:
        return self.rules.size_tolerance

    @property
    def min_component_px(self) -> float:
        return self.rules.min_component_px

    def answer(
        self,
        image: bytes | str | Path | np.ndarray | Image.Image,
        question: str,
        *,
        context: Context | None = None,
        from_prompt: bool = False,
    ) -> AgentAnswer:
        """One pipeline for every kind of question (yes/no, choice, count, name): parse -> the
        type's ``to_locate`` -> locate -> the shared trust checks (``agent/pipeline/trust.py``) ->
        the type's ``verify``. The trace holds every step, the same steps for every kind."""
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        trace: dict[str, Any] = {"question": question, "localizer": self.localizer.name}
        arr = load_image(image)
        trace["image_size"] = [int(arr.shape[1]), int(arr.shape[0])]
        try:
            names = (context.labels or {}).values() if context else ()
            parsed = parse_question(question, from_prompt=from_prompt, names=names)
        except ParseError as exc:
            timings["parse_ms"] = _ms(t0)
            trace["parsed"] = None
            decision = Decision(None, f"parse failure: {exc}", "none")
        else:
            timings["parse_ms"] = _ms(t0)
            context = _with_labels(context)
            decision, first = self._run(parsed, arr, context, trace, timings, self.localizer)
            decision = self._second_opinion(parsed, arr, context, (trace, timings, first), decision)
        timings["total_ms"] = _ms(t0)
        trace["decision"] = decision.to_json()
        trace["timings_ms"] = timings
        return AgentAnswer(decision.answer, _text(decision), trace)

    def _run(
        self,
        parsed: ParsedQuestion,
        image: np.ndarray,
        context: Context,
        trace: dict[str, Any],
        timings: dict[str, float],
        localizer: Localizer,
    ) -> tuple[Decision, Located]:
        """The steps after parsing with ``localizer``: its decision and what it located; fills
        ``trace`` (parsed, found, checks) and ``timings``."""
        qtype = get_question_type(parsed.kind)
        trace["parsed"] = parsed.to_json(qtype.roles)
        trace["localizer"] = localizer.name
        t1 = time.perf_counter()
        refs = qtype.to_locate(parsed, context)
        refused = trust.refusal(localizer, refs, context) if refs else None
        found = [] if refused or not refs else localizer.locate(image, refs, context)
        found, readings = mirror.split(found)
        timings["localize_ms"] = _ms(t1)
        trace["found"] = qtype.found_json(refs, found) if found else []
        t2 = time.perf_counter()
        rules = self.rules
        if self.margin_reference is not None:
            rules = rules.at_image(image.shape, self.margin_reference)
        trace["margin_px"] = round(rules.margin_px, 3)
        scene = Scene(image, context, rules)

        def judge(seen: list) -> tuple[Decision, list]:
            decision, checks = trust.check_found(qtype, refs, seen)
            return decision or qtype.verify(parsed, seen, scene), checks

        if refused:  # the image was not looked at: nothing to check
            decision, trace["checks"] = Decision(None, refused, trust.REFUSED), []
        else:
            decision, trace["checks"] = judge(found)
        if readings is not None and decision.answer is None:
            decision, trace["sides"] = mirror.decide(
                decision, readings, lambda r: judge(r)[0], qtype.shown
            )
        decision = trust.with_fallback_notes(decision, found)
        timings["verify_ms"] = _ms(t2)
        return decision, (refs, found)

    def _second_opinion(
        self,
        parsed: ParsedQuestion,
        image: np.ndarray,
        context: Context,
        record: tuple[dict[str, Any], dict[str, float], Located],
        decision: Decision,
    ) -> Decision:
        """The localizer's second model (its ``second_opinion``: ``auto``'s with ``second=``,
        e.g. the shipped organs model of the levels the first never saw in real texture) where
        the first abstained for want of a localization it trusts (:data:`SECOND_OPINION_ON`).
        Its answer is used when it gives one and the two models agree (:func:`disagreement`),
        its steps then the trace's and the first's kept under ``first``; else the first's
        decision stands and the second's steps are kept under ``second``."""
        second = getattr(self.localizer, "second_opinion", None)
        if second is None or decision.answer is not None or decision.rule not in SECOND_OPINION_ON:
            return decision
        trace, timings, first = record
        steps: dict[str, Any] = {}
        spent: dict[str, float] = {}
        again, kept = self._run(parsed, image, context, steps, spent, second)
        timings["second_ms"] = round(spent["localize_ms"] + spent["verify_ms"], 3)
        steps.pop("parsed", None)
        if again.answer is not None and self.agree_tolerance is not None:
            apart = disagreement(first, kept, image.shape, self.agree_tolerance)
            if apart:
                again = Decision(None, apart, trust.NOT_TRUSTED)
        if again.answer is None:
            trace["second"] = {**steps, "decision": again.to_json()}
            return decision
        first_steps = {k: trace.pop(k) for k in STEP_KEYS if k in trace}
        trace["first"] = {**first_steps, "decision": decision.to_json()}
        trace.update(steps)
        note = f"answered by {second.name}; the first model abstained: {decision.reason}"
        return replace(again, reason=f"{again.reason} ({note})")


def disagreement(
    first: Located, second: Located, shape: tuple[int, ...], tolerance: float
) -> str | None:
    """Why the second model's localizations are not trusted: a structure without a side that
    the first model's network also found (its own pixels, any score) lies further from the
    second's than ``tolerance`` x the image's larger side + both uncertainties; else None.
    ``first`` / ``second``: (refs, found) of each model's run."""
    refs, found_a = first
    _, found_b = second
    base = tolerance * max(shape[:2])
    for ref, a, b in zip(refs, found_a, found_b, strict=False):
        name = (ref.name or "").lower()
        if a is None or b is None or a.details.get("area_px") is None or side_of(name):
            continue  # the first's centre without pixels of its own (atlas, reflected): no say
        limit = base + a.uncertainty_px + b.uncertainty_px
        apart = float(np.hypot(a.xy[0] - b.xy[0], a.xy[1] - b.xy[1]))
        if apart > limit:
            return (
                f"the two models disagree on where the {name or 'structure'} is: "
                f"{apart:.0f} px apart (> {limit:.0f})"
            )
    return None


def _with_labels(context: Context | None) -> Context:
    """The context, its label table defaulting to TotalSegmentator's (to name what a marker
    marks; the mask localizer and orientation read the same default)."""
    context = context or Context()
    if context.labels is not None:
        return context
    return replace(context, labels=load_table("totalsegmentator").names)


def _text(decision: Decision) -> str:
    if decision.answer is None:
        return f"abstain: {decision.reason}"
    return str(decision.answer)


def verdict(result: AgentAnswer) -> str:
    """The answer as a person reads it: ``abstain``, else in its question type's words
    (``QuestionType.shown``: yes/no for a yes/no question, the word or count of the others:
    "left", "liver", "2"; a count of 1 is not "yes")."""
    if result.answer is None:
        return "abstain"
    kind = (result.trace.get("parsed") or {}).get("kind")
    return (
        get_question_type(kind).shown(result.answer)
        if kind in QUESTION_TYPES
        else str(result.answer)
    )


def _ms(since: float) -> float:
    return round(1000 * (time.perf_counter() - since), 3)
