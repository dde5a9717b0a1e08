"""Issue #22 round 4: a localization's uncertainty is weighed by the relation rule instead of
abstaining per structure (benchmarks/RESULTS.md, "Deciding on the relation")."""

from __future__ import annotations

import numpy as np

from radspatial.agent.localizers.organs import organs_atlas, organs_checks
from radspatial.agent.pipeline.agent import Agent
from radspatial.agent.pipeline.types import Found
from radspatial.questions.relative_position import verify_relation


def _at(x: float, y: float, u: float = 0.0, **details) -> Found:
    return Found((x, y), 0.9, "organs", {"uncertainty_px": u, **details} if u else details)


def test_relation_holds_only_beyond_margin_plus_both_uncertainties():
    # subject 40 px left of the reference; margin 10
    tight = verify_relation("left_of", _at(100, 50, 10), _at(140, 50, 15))
    assert tight.answer == 1 and "uncertainty 25.0 px" in tight.reason
    loose = verify_relation("left_of", _at(100, 50, 10), _at(140, 50, 25))
    assert loose.answer is None and "< margin 10 px + uncertainty 35.0 px" in loose.reason
    # the other axis and sign: the reference is above the subject by 60 px
    assert verify_relation("above", _at(0, 160, 20), _at(0, 100, 20)).answer == 0
    assert verify_relation("below", _at(0, 160, 20), _at(0, 100, 20)).answer == 1
    assert verify_relation("below", _at(0, 160, 30), _at(0, 100, 25)).answer is None
    # no uncertainty given (a mask, a read marker): the rule and its words as before
    plain = verify_relation("left_of", _at(100, 50), _at(105, 50))
    assert plain.answer is None and plain.reason.endswith("(< margin 10 px)")
    assert verify_relation("left_of", _at(100, 50), _at(140, 50)).reason == (
        "x(subject) - x(reference) = -40.0 px"
    )


def test_confidence_counts_only_the_separation_beyond_the_uncertainty():
    sure = verify_relation("left_of", _at(0, 0), _at(100, 0))
    unsure = verify_relation("left_of", _at(0, 0, 30), _at(100, 0, 50))
    assert sure.confidence == 0.9 and unsure.confidence < sure.confidence


class _Fixed:
    name = "fixed"

    def __init__(self, found):
        self.found = found

    def locate(self, image, refs, context):
        return list(self.found)


def test_a_doubted_localization_is_decided_on_by_relation_only():
    doubt = {"uncertain_reason": "atlas disagrees: centres 0.20 body radii apart (> 0.12)"}
    found = [_at(100, 100, 20), _at(300, 100, 30, **doubt)]
    image = np.zeros((400, 400, 3), np.uint8)
    rel = Agent(_Fixed(found)).answer(image, "Is the liver to the left of the spleen?")
    assert rel.answer == 1 and "uncertainty 50.0 px" in rel.trace["decision"]["reason"]
    # a rule that does not weigh uncertainty (distance) abstains with the localizer's words
    far = Agent(_Fixed(found + [_at(100, 300, 20)])).answer(
        image, "Is the liver closer to the spleen than to the stomach?"
    )
    assert far.answer is None and "atlas disagrees" in far.text
    # a hard reason stays an abstention for every rule
    hard = [_at(100, 100, 20), _at(300, 100, 30, abstain_reason="unstable: found in 2/4")]
    out = Agent(_Fixed(hard)).answer(image, "Is the liver to the left of the spleen?")
    assert out.answer is None and "found in 2/4" in out.text


def test_spread_of_the_copies_is_a_doubt_then_an_abstention():
    checks = organs_checks.Checks()
    assert organs_checks.assess(4, 0.1, checks) == (None, None)
    hard, doubt = organs_checks.assess(4, 0.3, checks)
    assert hard is None and "disagree by 0.30" in doubt
    hard, doubt = organs_checks.assess(4, 0.6, checks)
    assert "disagree by 0.60" in hard and doubt is None
    hard, doubt = organs_checks.assess(2, 0.0, checks)
    assert "found in 2/4" in hard and doubt is None


def test_atlas_distance_becomes_the_uncertainty():
    rules = organs_atlas.AtlasRules()
    extra = {"label_id": 5, "class": 5, "via": "name"}
    key = organs_atlas.UNCERTAINTY
    net = Found((50.0, 50.0), 0.9, "organs", {"checks": {}, key: 0.1})
    near = organs_atlas.combine(
        net, organs_atlas.AtlasFound((52.0, 50), 1, 0.05, 5), 50, rules, extra
    )
    assert near.details[key] == 0.1 and "uncertain_reason" not in near.details  # unchanged
    mid = organs_atlas.combine(
        net, organs_atlas.AtlasFound((60.0, 50), 1, 0.05, 5), 50, rules, extra
    )
    assert abs(mid.details[key] - 0.2) < 1e-9 and "abstain_reason" not in mid.details
    assert mid.details["uncertain_reason"].startswith("atlas disagrees: centres 0.20")
    alone = organs_atlas.combine(
        None, organs_atlas.AtlasFound((52.0, 50), 1, 0.05, 5), 50, rules, extra
    )
    assert alone.method == "atlas" and alone.details[key] == rules.floor


def test_open_questions_abstain_on_the_localizer_checks_too():
    """Before round 4 an open question (direction, laterality, counting) answered from a
    localization its own checks had rejected."""
    image = np.zeros((400, 400, 3), np.uint8)
    q = "Where is the liver relative to the spleen in this image: left, right, above or below?"
    fine = [_at(100, 100, 20), _at(300, 100, 30)]
    assert Agent(_Fixed(fine)).answer(image, q).answer == "left"
    for details in ({"abstain_reason": "unstable: x"}, {"uncertain_reason": "unstable: y"}):
        out = Agent(_Fixed([fine[0], _at(300, 100, 30, **details)])).answer(image, q)
        assert out.answer is None and "unstable" in out.text


def test_a_network_centre_under_the_score_floor_gives_way_to_the_atlas():
    from radspatial.agent.localizers.organs.organs import OrgansLocalizer

    loc = OrgansLocalizer(atlas=True)
    extra = {"label_id": 5, "class": 5, "via": "name"}
    weak = Found((50.0, 50.0), 0.3, "organs", {"checks": {}})
    atlas = organs_atlas.AtlasFound((60.0, 52.0), 1.0, 0.05, 5)
    used = loc._with_atlas(weak, atlas, 50.0, extra)
    assert used.method == "atlas" and used.xy == (60.0, 52.0)
    assert used.details["network"]["score"] == 0.3
    assert used.details[organs_atlas.UNCERTAINTY] == loc.atlas_rules.floor
    assert loc._with_atlas(weak, None, 50.0, extra) is weak  # no atlas opinion: as before
    scattered = organs_atlas.AtlasFound((60.0, 52.0), 1.0, 0.4, 5)
    assert loc._with_atlas(weak, scattered, 50.0, extra) is weak
    off = OrgansLocalizer(atlas=True, atlas_rules=organs_atlas.AtlasRules(weak_to_atlas=False))
    assert off._with_atlas(weak, atlas, 50.0, extra).xy == (50.0, 50.0)
    strong = Found((50.0, 50.0), 0.9, "organs", {"checks": {}})
    assert loc._with_atlas(strong, atlas, 50.0, extra).xy == (50.0, 50.0)
