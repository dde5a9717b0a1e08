"""Issue #34 round 6: the agent's margin is px of a 512 px image, scaled to each image, so the
same slice and question get the same decision at 256, 512 and 1024 px (the localizations'
uncertainty already scales with the anatomy shown)."""

from __future__ import annotations

import numpy as np
import pytest

from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Context
from radspatial.core.rules import MARGIN_PX, MIN_COMPONENT_PX, QuestionRules

LEFT_OF = "Is the liver to the left of the spleen?"
RIGHT_OF = "Is the liver to the right of the spleen?"
SIDE = "On which side of the image is the liver: left or right?"


def test_the_margin_scales_with_the_images_larger_side_and_nothing_else_does():
    rules = QuestionRules()
    assert rules.at_image((256, 256, 3)).margin_px == pytest.approx(MARGIN_PX / 2)
    assert rules.at_image((768, 1024)).margin_px == pytest.approx(2 * MARGIN_PX)
    assert rules.at_image((512, 512)).margin_px == pytest.approx(MARGIN_PX)
    assert rules.at_image((256, 256), reference=256).margin_px == pytest.approx(MARGIN_PX)
    scaled = rules.at_image((256, 256))
    assert scaled.min_component_px == MIN_COMPONENT_PX  # defines the count answer: not scaled
    assert scaled.size_tolerance == rules.size_tolerance
    with pytest.raises(ValueError, match="reference image size"):
        rules.at_image((256, 256), reference=0)
    with pytest.raises(ValueError, match="reference image size"):
        Agent("mask", margin_reference=-1)


def _scene(flip: bool) -> tuple[np.ndarray, Context]:
    """512 px: the liver's centre 16 px left of the spleen's (both left of the midline by 36
    and 20 px); ``flip`` mirrors the image (the answers must flip with it)."""
    mask = np.zeros((512, 512), np.uint16)
    mask[150:210, 200:240] = 5  # liver, centre x 219.5
    mask[300:360, 216:256] = 1  # spleen, centre x 235.5
    if flip:
        mask = np.ascontiguousarray(mask[:, ::-1])
    return np.zeros((512, 512, 3), np.uint8), Context(mask=mask)


def _at(image: np.ndarray, context: Context, factor: float) -> tuple[np.ndarray, Context]:
    if factor < 1:
        step = round(1 / factor)
        mask = np.ascontiguousarray(context.mask[::step, ::step])
    else:
        mask = np.kron(context.mask, np.ones((int(factor), int(factor)), np.uint16))
    return np.zeros((*mask.shape, 3), np.uint8), Context(mask=mask)


@pytest.mark.parametrize("flip", [False, True])
def test_one_slice_gets_one_decision_at_every_size_and_a_mirror_flips_it(flip):
    image, context = _scene(flip)
    agent = Agent("mask")
    for factor in (0.5, 1, 2):
        img, ctx = _at(image, context, factor)
        left = agent.answer(img, LEFT_OF, context=ctx)
        assert left.answer == (0 if flip else 1), (factor, left.text)
        assert left.trace["margin_px"] == pytest.approx(MARGIN_PX * factor)
        assert agent.answer(img, RIGHT_OF, context=ctx).answer == (1 if flip else 0)
        side = agent.answer(img, SIDE, context=ctx)
        assert side.answer == ("right" if flip else "left"), (factor, side.text)


def test_the_fixed_margin_of_before_abstains_on_the_half_size_copy():
    """The rule before round 6 (``margin_reference=None``): 10 px of whatever image, so the
    256 px copy (centres 8 px apart) abstains where the 512 px original (16 px) answers."""
    image, context = _scene(False)
    fixed = Agent("mask", margin_reference=None)
    assert fixed.answer(image, LEFT_OF, context=context).answer == 1
    img, ctx = _at(image, context, 0.5)
    small = fixed.answer(img, LEFT_OF, context=ctx)
    assert small.answer is None and "margin 10 px" in small.text, small.text
    assert small.trace["margin_px"] == MARGIN_PX


def test_centres_closer_than_the_scaled_margin_still_abstain():
    """4 px apart at 256 px (8 px at 512): under 5 px there and 10 px here, at both sizes."""
    mask = np.zeros((512, 512), np.uint16)
    mask[150:210, 200:240] = 5
    mask[300:360, 208:248] = 1  # centre 8 px right of the liver's
    image, context = np.zeros((512, 512, 3), np.uint8), Context(mask=mask)
    agent = Agent("mask")
    for factor in (0.5, 1):
        img, ctx = _at(image, context, factor)
        result = agent.answer(img, LEFT_OF, context=ctx)
        assert result.answer is None and "centres differ by" in result.text, result.text
