"""Session 18 (issue #47): on a slice that hides the sides, the atlas checks a sided structure
against the place of either member of its pair.

Where the image does not show the patient's right, the atlas's own left-right orientation is a
guess too, so "the right autochthon" is checked against where a right *or* a left one lies
(``AtlasRules.atlas_either_side``); where the sides are shown, only against its own place. A
structure far from both places is still doubted or vetoed, and the two readings of the mirror
rule still decide whether the question's answer depends on the sides.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from radspatial.agent.localizers.organs import organs, organs_atlas
from radspatial.agent.pipeline import mirror
from radspatial.agent.pipeline.types import Found
from radspatial.questions.records import Decision

RIGHT, LEFT = 87, 86  # autochthon_right / _left (TotalSegmentator v2 ids)
RADIUS = 40.0  # body radius, 128 px frame


def atlas_at(places: dict[int, tuple[float, float]]):
    """``organs_atlas.fuse`` as an atlas holding each label id at one place."""

    def fuse(match, folder, label_id):
        xy = places.get(int(label_id))
        return None if xy is None else organs_atlas.AtlasFound(xy, 1.0, 0.05, 5)

    return fuse


def localizer(either: bool = True) -> organs.OrgansLocalizer:
    loc = organs.OrgansLocalizer(atlas=True)
    loc.atlas_rules = replace(loc.atlas_rules, atlas_either_side=either)
    return loc


MATCH = SimpleNamespace(body_radius=RADIUS, view_confirmed=True, score=0.9, sides=False)
# the network's right autochthon at column 80: the atlas (its orientation a guess) puts the
# right one at column 68 (0.3 body radii away: a doubt) and the left one at column 82
NET = Found((80.0, 90.0), 0.9, "organs", {})
PLACES = {RIGHT: (68.0, 90.0), LEFT: (82.0, 90.0)}


@pytest.mark.parametrize("either", [True, False])
def test_a_structure_whose_sides_are_open_fits_either_member_s_place(monkeypatch, either):
    monkeypatch.setattr(organs_atlas, "fuse", atlas_at(PLACES))
    out = localizer(either)._pair_atlas(NET, MATCH, (RIGHT, LEFT), 39, "name")
    distance = out.details["atlas"]["distance_body_radii"]
    if either:  # the left one's place: 2 px away, no doubt
        assert distance == pytest.approx(2.0 / RADIUS, abs=1e-3)
        assert "uncertain_reason" not in out.details and "abstain_reason" not in out.details
    else:  # its own place only (it is not vetoed there): 12 px = 0.3 body radii, doubted
        assert distance == pytest.approx(12.0 / RADIUS, abs=1e-3)
        assert out.details["uncertain_reason"].startswith("atlas disagrees")
    assert out.xy == NET.xy  # the network's centre either way; only the check changes


def test_far_from_both_places_is_still_vetoed(monkeypatch):
    places = {RIGHT: (10.0, 20.0), LEFT: (118.0, 20.0)}  # both 70+ px from the network's
    monkeypatch.setattr(organs_atlas, "fuse", atlas_at(places))
    out = localizer()._pair_atlas(NET, MATCH, (RIGHT, LEFT), 39, "name")
    assert out.details["abstain_reason"].startswith("atlas disagrees")


def test_a_doubt_on_both_sides_keeps_the_nearer_place(monkeypatch):
    places = {RIGHT: (80.0, 110.0), LEFT: (80.0, 100.0)}  # 20 px and 10 px: both > 0.12 radii
    monkeypatch.setattr(organs_atlas, "fuse", atlas_at(places))
    out = localizer()._pair_atlas(NET, MATCH, (RIGHT, LEFT), 39, "name")
    assert out.details["atlas"]["distance_body_radii"] == pytest.approx(0.25, abs=1e-3)
    assert out.details["uncertain_reason"].startswith("atlas disagrees")


class Model:
    """The two autochthons and the vertebrae, as ``organs``' model names them."""

    classes = [(0, "background"), (26, "vertebrae"), (LEFT, "autochthon_left"),
               (RIGHT, "autochthon_right")]  # fmt: skip

    def class_of(self, label_id):
        return next((k for k, (i, _) in enumerate(self.classes) if i == label_id), None)

    def id_of_name(self, name):
        return next((i for i, n in self.classes if n == name), None)


@pytest.mark.parametrize("sides", [False, True])
def test_only_a_slice_that_hides_the_sides_lets_the_counterpart_s_place_count(monkeypatch, sides):
    """``_structure``: the network's right autochthon lies where the atlas puts the left one.
    Sides hidden: it fits (and abstains only for the sides); sides shown (by the liver, say):
    the atlas's own orientation holds and its place 0.3 body radii off is a doubt."""
    monkeypatch.setattr(organs_atlas, "fuse", atlas_at(PLACES))
    loc = localizer()
    loc.atlas_rules = replace(loc.atlas_rules, mirror_sides=False, side_consistent=False)
    monkeypatch.setattr(loc, "_one", lambda *a, **k: NET)
    match = replace_ns(MATCH, sides=sides, sides_from=("liver",) if sides else (), midline=None)
    f = loc._structure((Model(), None, None, None, match), RIGHT, "name")
    distance = f.details["atlas"]["distance_body_radii"]
    if sides:
        assert distance == pytest.approx(0.3, abs=1e-3)
        assert f.details["uncertain_reason"].startswith("atlas disagrees")
    else:
        assert f.details["abstain_reason"].startswith("sides not shown")
        assert distance < organs_atlas.AtlasRules().agree
        assert "uncertain_reason" not in f.details


def replace_ns(ns: SimpleNamespace, **change) -> SimpleNamespace:
    return SimpleNamespace(**{**vars(ns), **change})


def test_the_reason_says_why_the_two_readings_give_no_answer():
    """The mirror rule's abstention names the reading that failed, or the two answers."""
    sides = Decision(None, "subject (femur_left) sides not shown", "abstain: not trusted")
    yes = Decision(1, "y(subject) > y(reference)", "yes iff")
    no = Decision(0, "y(subject) < y(reference)", "yes iff")
    close = Decision(None, "centres differ by 3 px (< margin 10 px)", "too close")
    answers = iter([yes, no])
    out, record = mirror.decide(sides, ([None], [None]), lambda r: next(answers))
    assert out.answer is None and out.rule == sides.rule and not record["used"]
    assert "depends on the sides: yes as labelled, no with every side swapped" in out.reason
    answers = iter([yes, close])
    out, _ = mirror.decide(sides, ([None], [None]), lambda r: next(answers))
    assert out.reason.startswith(sides.reason)
    assert "with every side swapped: centres differ by 3 px" in out.reason
    answers = iter([yes, yes])
    out, record = mirror.decide(sides, ([None], [None]), lambda r: next(answers))
    assert out.answer == 1 and record["used"] and mirror.SAME_EITHER_WAY in out.reason


def test_the_rule_is_on_by_default():
    assert organs_atlas.AtlasRules().atlas_either_side
    assert np.isfinite(organs_atlas.AtlasRules().max_apart)


def ellipse(width: int, depth: int, size: int = 128) -> np.ndarray:
    yy, xx = np.mgrid[:size, :size]
    return ((xx - 70) / width) ** 2 + ((yy - 60) / depth) ** 2 <= 1.0


@pytest.mark.parametrize(
    ("body", "axis"),
    [
        (ellipse(50, 30), (0.0, 1.0)),  # wider than deep: front-back runs down the image
        (ellipse(30, 50), (1.0, 0.0)),  # a quarter-turned view: front-back across it
        (ellipse(40, 38), None),  # too round to tell
        (np.zeros((128, 128), bool), None),  # no body
    ],
)
def test_the_outline_s_short_axis_is_the_midline_where_no_spine_shows(body, axis):
    """Below the sacrum no spine fixes the midline; a transverse slice is wider than deep, so
    the body outline's short axis is the front-back line (either sign)."""
    from radspatial.agent.localizers.organs import organs_view

    got = organs_view.body_depth_axis(body)
    if axis is None:
        assert got is None
    else:
        assert abs(float(np.dot(got, axis))) == pytest.approx(1.0, abs=1e-6)


def test_an_open_pair_s_missing_part_is_reflected_across_the_midline(monkeypatch):
    """``_pair``: the network split "femur, either side" but found no second part; with
    ``midline_from_outline`` the asked femur's mirror reading is it reflected across the
    midline (as a missing counterpart is), so the two readings can still agree."""
    from radspatial.agent.localizers.organs import organs_pairs, organs_view

    monkeypatch.setattr(organs_atlas, "fuse", atlas_at({}))
    monkeypatch.setattr(organs_pairs, "members", lambda *a: (("pa", "va"), ("pb", "vb")))
    femur = Found((40.0, 70.0), 0.9, "organs", {})
    model = Model()
    model.classes = [(0, "background"), (75, "femur_left"), (76, "femur_right")]
    match = replace_ns(MATCH, midline=((64.0, 64.0), (0.0, 1.0)))
    for outline in (True, False):
        loc = localizer()
        loc.atlas_rules = replace(loc.atlas_rules, midline_from_outline=outline)
        monkeypatch.setattr(loc, "_one", lambda m, p, *a: femur if p == "pa" else None)
        f = loc._pair(model, (None, None, None, None, match), (1, 2), 75, "name")
        twin = f.details[mirror.MIRROR]
        if outline:
            assert twin.method == organs_view.REFLECTED and twin.xy == pytest.approx((88.0, 70.0))
        else:
            assert twin is None


def test_a_pair_shown_on_one_side_only_is_that_member_its_counterpart_reflected(monkeypatch):
    """``_pair`` with ``AtlasRules.pair_single``: the merged "femur, either side" shows one
    component; it stands for the asked femur (which side, the image does not say) and its
    counterpart is it reflected across the midline, so both readings can be decided."""
    from radspatial.agent.localizers.organs import organs_pairs, organs_view

    monkeypatch.setattr(organs_atlas, "fuse", atlas_at({}))
    monkeypatch.setattr(organs_pairs, "members", lambda *a: (("pa", "va"), None))
    femur = Found((40.0, 70.0), 0.9, "organs", {})
    model = Model()
    model.classes = [(0, "background"), (75, "femur_left"), (76, "femur_right")]
    match = replace_ns(MATCH, midline=((64.0, 64.0), (0.0, 1.0)))
    loc = localizer()
    loc.atlas_rules = replace(loc.atlas_rules, midline_from_outline=False)  # not needed here
    monkeypatch.setattr(loc, "_one", lambda m, p, *a: femur if p == "pa" else None)
    f = loc._pair(model, (None, None, None, None, match), (1, 2), 75, "name")
    assert f.details["pair"] == "either side (sides not shown), one found, either side"
    twin = f.details[mirror.MIRROR]
    assert twin.method == organs_view.REFLECTED and twin.xy == pytest.approx((88.0, 70.0))
    assert f.details["abstain_reason"].startswith("sides not shown")
