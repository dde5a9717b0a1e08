"""Issue 35: one agent pipeline for every kind of question. A yes/no question and each open kind
(side, direction, count, name) go through the same steps: the localizer's confidence floor and
the shared trust checks apply to all of them, and the trace records the same steps."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from radspatial.agent.localizers.mask.mask_localizer import MaskLocalizer
from radspatial.agent.pipeline import trust
from radspatial.agent.pipeline.agent import Agent, verdict
from radspatial.agent.pipeline.types import LOCALIZERS, Context
from radspatial.grading.normalize import normalize

# label ids of TotalSegmentator's table: 1 spleen, 5 liver (the context gives no labels: the
# agent's default table names what the number 5 marks)
QUESTIONS = {  # question -> the answer when the localization is trusted
    "Is the liver to the left of the spleen?": 1,
    "Is the number of separate regions of the liver in this image exactly 1?": 1,
    "On which side of the image is the liver: left or right?": "left",
    "Where is the liver relative to the spleen in this image: left, right, above or below?": "left",
    "How many separate regions of the liver are visible in this image?": 1,
    "Which structure does the number 5 mark?": "liver",
}
KINDS = (
    "relative_position",
    "count",
    "laterality",
    "direction",
    "counting",
    "identification",
)
NAME = "test-floor"
STEPS = {
    "question",
    "localizer",
    "image_size",
    "margin_px",
    "parsed",
    "found",
    "checks",
    "decision",
}


class FloorLocalizer:
    """The mask localizer's finds with a set confidence under a floor (as ``organs`` reports
    its own: ``details["abstain_below"]``)."""

    name = NAME

    def __init__(self, score: float = 0.2, floor: float = 0.5) -> None:
        self.mask, self.score, self.floor = MaskLocalizer(), score, floor

    def locate(self, image, refs, context):
        found = self.mask.locate(image, refs, context)
        details = {"abstain_below": self.floor}
        return [f and replace(f, score=self.score, details={**f.details, **details}) for f in found]


@pytest.fixture(scope="module")
def scene() -> tuple[np.ndarray, Context]:
    mask = np.zeros((200, 200), np.uint16)
    mask[60:140, 20:70] = 5  # liver: left half of the image, one region
    mask[80:120, 140:170] = 1  # spleen: right half
    return np.zeros((200, 200, 3), np.uint8), Context(mask=mask)


@pytest.fixture(scope="module")
def registered():
    LOCALIZERS.add(NAME, FloorLocalizer)  # a real registered localizer, built by its name
    yield NAME
    LOCALIZERS.remove(NAME)


@pytest.mark.parametrize("score", [0.2, 0.49])
def test_every_kind_abstains_under_the_localizers_floor(registered, scene, score):
    image, context = scene
    agent = Agent(registered, score=score, floor=0.5)
    for (question, _), kind in zip(QUESTIONS.items(), KINDS, strict=True):
        result = agent.answer(image, question, context=context)
        assert result.trace["parsed"]["kind"] == kind, question
        assert result.answer is None, (question, result.trace["decision"])
        assert result.text.endswith(f"found with low confidence {score:.2f} < 0.5"), result.text
        assert result.trace["decision"]["rule"] == trust.LOW_CONFIDENCE
        assert verdict(result) == "abstain"


def test_every_kind_answers_the_same_localization_above_the_floor(registered, scene):
    image, context = scene
    agent = Agent(registered, score=0.5, floor=0.5)  # at the floor: trusted
    shown = {}
    for (question, expected), kind in zip(QUESTIONS.items(), KINDS, strict=True):
        result = agent.answer(image, question, context=context)
        assert result.answer == expected, (question, result.trace["decision"])
        assert result.text == str(expected)
        shown[kind] = verdict(result)
    # the type words the answer: a yes/no 1 is "yes", a count of 1 is "1"
    assert shown == {
        "relative_position": "yes",
        "count": "yes",
        "laterality": "left",
        "direction": "left",
        "counting": "1",
        "identification": "liver",
    }


def test_the_trace_has_the_same_steps_for_every_kind(registered, scene):
    image, context = scene
    for score in (0.2, 0.9):
        agent = Agent(registered, score=score)
        traces = [agent.answer(image, q, context=context).trace for q in QUESTIONS]
        for trace in traces:
            assert set(trace) == STEPS | {"timings_ms"}
            assert set(trace["timings_ms"]) == {"parse_ms", "localize_ms", "verify_ms", "total_ms"}
            checks = trace["checks"]
            roles = [
                k for k in trace["parsed"] if k not in ("kind", "relation", "params", "question")
            ]
            assert [c["role"] for c in checks] == roles and len(trace["found"]) == len(roles)
            assert all(c["score"] == score and c["floor"] == 0.5 for c in checks)
            assert all((c["failed"] is None) == (score >= 0.5) for c in checks)
        # the two-structure questions, yes/no and open, name the same roles
        assert traces[0]["parsed"].keys() == traces[3]["parsed"].keys()


def test_a_structure_not_found_is_the_same_abstention_for_every_kind(scene):
    image, context = scene
    agent = Agent("mask")
    empty = replace(context, mask=np.zeros_like(context.mask))
    for question in QUESTIONS:
        result = agent.answer(image, question, context=empty)
        assert result.answer is None and result.text.startswith("abstain: "), question
        assert result.text.endswith("not found"), result.text
        assert all(c["failed"] == trust.NOT_FOUND for c in result.trace["checks"])


def test_the_localizers_own_reasons_apply_to_every_kind(scene):
    """A hard reason abstains on every kind; a doubt only where the rule does not weigh the
    localization's uncertainty (relative position does)."""
    image, context = scene

    class Doubting(FloorLocalizer):
        def __init__(self, key: str) -> None:
            super().__init__(score=0.9)
            self.key = key

        def locate(self, image, refs, context):
            found = super().locate(image, refs, context)
            return [f and replace(f, details={**f.details, self.key: "unstable"}) for f in found]

    for key, kept in (("abstain_reason", ()), ("uncertain_reason", ("relative_position",))):
        agent = Agent(Doubting(key))
        for question, kind in zip(QUESTIONS, KINDS, strict=True):
            result = agent.answer(image, question, context=context)
            if kind in kept:
                assert result.answer == QUESTIONS[question], result.trace["decision"]
            else:
                assert result.answer is None and result.text.endswith(" unstable"), result.text
                assert result.trace["decision"]["rule"] == trust.NOT_TRUSTED


def test_a_parse_failure_keeps_the_trace_shape():
    result = Agent("mask").answer(np.zeros((8, 8, 3), np.uint8), "What is this?")
    assert result.answer is None and result.text.startswith("abstain: parse failure")
    assert result.trace["parsed"] is None and {"decision", "timings_ms"} <= set(result.trace)


def test_an_abstention_naming_a_structure_is_no_answer_to_the_grader(registered, scene):
    """The shared checks name the structure ("structure (kidney_left) found with low
    confidence"): the open types' reply reader must not take its words for an answer."""
    image, context = scene
    agent = Agent(registered, score=0.2)
    left = replace(context, labels={5: "kidney_left", 1: "inferior_vena_cava"})
    for question, kind in zip(QUESTIONS, KINDS, strict=True):
        result = agent.answer(image, question.replace("liver", "left kidney"), context=left)
        assert result.answer is None and result.text.startswith("abstain: "), result.text
        assert "kidney_left" in result.text or kind == "identification"  # a marker: "(5)"
        if kind in ("laterality", "direction", "counting", "identification"):
            read = normalize(result.text, kind)
            assert (read.value, read.status) == (None, "invalid"), (kind, read)
