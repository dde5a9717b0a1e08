"""Issue 47 round 6: a second model asked where the first's localization is not trusted.

The agent asks its localizer's ``second_opinion`` only when the first abstained for want of a
trusted localization (not found, low confidence, not trusted), never on the question's own rule
(a relation too close to call); the trace says which model answered and keeps the other's steps.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from radspatial.agent.localizers.mask.mask_localizer import MaskLocalizer
from radspatial.agent.localizers.organs import organs
from radspatial.agent.pipeline import trust
from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Context

QUESTION = "Is the liver to the left of the spleen?"


class Blind:
    """A first model that finds what the mask holds but trusts none of it (as ``organs`` does
    off its levels), asking ``second`` where it abstains."""

    name = "first"

    def __init__(self, second, reason: str | None = "not seen in real texture") -> None:
        self.mask, self.reason, self.second_opinion = MaskLocalizer(), reason, second
        self.calls = 0

    def locate(self, image, refs, context):
        self.calls += 1
        found = self.mask.locate(image, refs, context)
        if self.reason is None:
            return found
        return [f and replace(f, details={**f.details, "abstain_reason": self.reason}) for f in found]


class Counting(MaskLocalizer):
    name = "second"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def locate(self, image, refs, context):
        self.calls += 1
        return super().locate(image, refs, context)


def scene(liver_x: int, spleen_x: int) -> tuple[np.ndarray, Context]:
    """Liver and spleen at columns ``liver_x`` / ``spleen_x`` (left-right asymmetric)."""
    mask = np.zeros((200, 200), np.uint16)
    mask[60:140, liver_x : liver_x + 30] = 5
    mask[80:120, spleen_x : spleen_x + 20] = 1
    return np.zeros((200, 200, 3), np.uint8), Context(mask=mask)


@pytest.mark.parametrize(("liver_x", "spleen_x", "truth"), [(20, 150, 1), (150, 20, 0)])
def test_the_second_model_answers_where_the_first_does_not_trust_its_localization(
    liver_x, spleen_x, truth
):
    image, context = scene(liver_x, spleen_x)
    second = Counting()
    result = Agent(Blind(second)).answer(image, QUESTION, context=context)
    assert result.answer == truth  # a flip of the image would flip it: the second's reading
    assert second.calls == 1
    trace = result.trace
    assert trace["localizer"] == "second" and trace["first"]["localizer"] == "first"
    assert trace["first"]["decision"]["rule"] == trust.NOT_TRUSTED
    assert "not seen in real texture" in trace["first"]["decision"]["reason"]
    assert "second model second" in trace["decision"]["reason"]
    assert "abstain_reason" not in trace["found"][0]["details"] and "second" not in trace
    assert trace["first"]["found"][0]["details"]["abstain_reason"]
    assert trace["timings_ms"]["second_ms"] >= 0


def test_the_question_s_own_rule_is_never_asked_twice():
    """The first trusts both and the relation is within the margin: no second opinion."""
    image, context = scene(90, 95)  # both centres at x = 104.5
    second = Counting()
    result = Agent(Blind(second, reason=None)).answer(image, QUESTION, context=context)
    assert result.answer is None and result.trace["decision"]["rule"] not in (
        trust.NOT_FOUND,
        trust.LOW_CONFIDENCE,
        trust.NOT_TRUSTED,
    )
    assert second.calls == 0 and "first" not in result.trace and "second" not in result.trace


def test_an_answer_of_the_first_is_final():
    image, context = scene(20, 150)
    second = Counting()
    assert Agent(Blind(second, reason=None)).answer(image, QUESTION, context=context).answer == 1
    assert second.calls == 0


def test_both_abstaining_keeps_the_first_decision_and_the_second_s_steps():
    image, context = scene(20, 150)
    empty = replace(context, mask=np.zeros_like(context.mask))
    second = Counting()
    result = Agent(Blind(second)).answer(image, QUESTION, context=empty)
    assert result.answer is None and result.text.endswith("not found")
    assert result.trace["localizer"] == "first"
    assert result.trace["second"]["localizer"] == "second"
    assert result.trace["second"]["decision"]["rule"] == trust.NOT_FOUND
    assert "first" not in result.trace


def test_auto_takes_a_second_model_folder_and_never_one_by_default_with_the_user_s(tmp_path):
    shipped = organs.shipped_model_dir()
    auto = organs.AutoLocalizer(second=shipped)
    assert auto.second_opinion is not None
    assert auto.second_opinion.organs.model_dir == shipped
    assert auto.second_opinion.second_opinion is None  # one level only
    assert auto.second_opinion.name == f"auto (second model: {shipped.name})"
    assert organs.AutoLocalizer(second=False).second_opinion is None
    # a user's own first model: no shipped second unless asked
    assert organs.AutoLocalizer(model_dir=shipped).second_opinion is None
    expected = organs.shipped_second_dir()
    default = organs.AutoLocalizer().second_opinion
    assert (default is None) == (expected is None)
    with pytest.raises(FileNotFoundError, match="config.json"):  # named, before torch
        organs.AutoLocalizer(second=tmp_path)


def test_the_command_line_names_the_second_model_or_none(tmp_path, capsys):
    """``radspatial agent --second-model``: a folder is asked where the first abstains (the
    trace keeps its steps); ``none`` asks none; with another localizer it is refused."""
    import json

    from PIL import Image

    from radspatial.cli import main

    image = tmp_path / "blank.png"
    Image.new("RGB", (64, 64)).save(image)  # nothing to look at: both models find nothing
    argv = ["agent", "--image", str(image), "--question", QUESTION]
    shipped = str(organs.shipped_model_dir())
    for second, asked in ((shipped, True), ("none", False)):
        trace = tmp_path / f"{asked}.json"
        assert main([*argv, "--second-model", second, "--trace", str(trace)]) == 0
        assert "abstain" in capsys.readouterr().out
        written = json.loads(trace.read_text())
        assert ("second" in written) is asked
        if asked:
            assert written["second"]["localizer"] == "auto (second model: organs)"
    assert main([*argv, "--localizer", "markers", "--second-model", shipped]) == 2
    assert "--second-model needs --localizer auto" in capsys.readouterr().err
