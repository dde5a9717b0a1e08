"""Issue #34 round 3: the slice's view from the anatomy the network found, and the atlas-only
centres it gates (benchmarks/RESULTS.md, "Round 3 of issue #34")."""

from __future__ import annotations

import numpy as np
import pytest

from radspatial.agent.localizers.organs import organs_atlas, organs_checks, organs_view
from radspatial.agent.pipeline.types import Found

IDS = {"vertebrae": 1, "liver": 2, "spleen": 3}


def _standard(with_sides: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A 64 px body in the atlas's standard view: spine at the bottom (posterior), liver on
    the image's left (the patient's right), spleen on the right; not symmetric under any of
    the 8 views."""
    y, x = np.mgrid[:64, :64]
    body = (x - 32) ** 2 / 28**2 + (y - 32) ** 2 / 20**2 <= 1
    ids = np.zeros((64, 64), np.int64)
    ids[(x - 32) ** 2 + (y - 46) ** 2 <= 16] = IDS["vertebrae"]
    if with_sides:
        ids[(x - 16) ** 2 + (y - 30) ** 2 <= 64] = IDS["liver"]
        ids[(x - 50) ** 2 + (y - 36) ** 2 <= 16] = IDS["spleen"]
    return ids, body


def _views(ids: np.ndarray, body: np.ndarray, k: int) -> tuple[int, ...]:
    ids_k = organs_atlas._dihedral_np(ids, k)
    body_k = organs_atlas._dihedral_np(body, k)
    axes = organs_view.anatomy_axes(
        ids_k, body_k, IDS.get, organs_checks.body_radius(np.ascontiguousarray(body_k))
    )
    return organs_view.allowed_views(*axes)


def test_every_view_of_an_asymmetric_slice_is_found_as_the_atlas_would_transform_it():
    ids, body = _standard()
    for k in range(8):
        assert _views(ids, body, k) == (k,)


def test_a_wrong_flip_is_caught():
    """The same slice mirrored left-right is another view: a rule that ignored the sides
    (or flipped them the wrong way) would allow the unmirrored one."""
    ids, body = _standard()
    mirrored = (ids[:, ::-1], body[:, ::-1])
    assert _views(*mirrored, 0) == (4,)  # the flip of view 0 is view 4 (rot 0, then flip)
    assert 0 not in _views(*mirrored, 0)
    swapped = ids.copy()  # liver and spleen exchanged: the patient's right is on the right
    swapped[ids == IDS["liver"]], swapped[ids == IDS["spleen"]] = IDS["spleen"], IDS["liver"]
    assert _views(swapped, body, 0) != (0,)


def test_the_spine_alone_leaves_the_mirror_open_and_nothing_leaves_every_view():
    ids, body = _standard(with_sides=False)
    for k in range(8):
        views = _views(ids, body, k)
        assert len(views) == 2 and k in views
    assert _views(np.zeros_like(ids), body, 0) == tuple(range(8))


def test_an_atlas_only_centre_needs_the_confirmed_view():
    from radspatial.agent.localizers.organs.organs import OrgansLocalizer

    loc = OrgansLocalizer(atlas=True, atlas_rules=organs_atlas.AtlasRules(confirm_view=True))
    extra = {"label_id": 5, "class": 5, "via": "name"}
    atlas = organs_atlas.AtlasFound((60.0, 52.0), 1.0, 0.05, 5)
    assert loc._with_atlas(None, atlas, 50.0, extra, True).method == "atlas"
    assert loc._with_atlas(None, atlas, 50.0, extra, False) is None
    weak = Found((50.0, 50.0), 0.3, "organs", {"checks": {}})
    assert loc._with_atlas(weak, atlas, 50.0, extra, False) is weak  # abstains on its score
    strong = Found((50.0, 50.0), 0.9, "organs", {"checks": {}})
    assert loc._with_atlas(strong, atlas, 50.0, extra, False).xy == (50.0, 50.0)
    off = OrgansLocalizer(atlas=True)  # the shipped default: off (it failed its rule)
    assert off._with_atlas(None, atlas, 50.0, extra, False).method == "atlas"


def test_the_match_records_the_views_the_anatomy_allows():
    m = organs_atlas.Match(np.zeros((1, 2, 2)), None, (0,), 3, (1.0,), (0, 2, 0, 2), 1.0)
    assert not m.view_confirmed  # no anatomy: every view allowed
    from dataclasses import replace

    assert replace(m, views=(3,)).view_confirmed
    assert not replace(m, views=(3, 7)).view_confirmed


def test_sides_are_shown_only_by_asymmetric_organs_in_the_atlas_view():
    ids, body = _standard()
    radius = organs_checks.body_radius(body)
    for k in range(8):
        ids_k = organs_atlas._dihedral_np(ids, k)
        _, right = organs_view.anatomy_axes(
            ids_k, organs_atlas._dihedral_np(body, k), IDS.get, radius
        )
        assert organs_view.sides_shown(right, k)
        axes = organs_view.VIEW_AXES  # its mirror: the same posterior, the sides swapped
        (mirror,) = [j for j in range(8) if j != k and (axes[j, 0] == axes[k, 0]).all()]
        assert not organs_view.sides_shown(right, mirror)
    bare, _ = _standard(with_sides=False)  # spine only: a mirrored view looks the same
    _, right = organs_view.anatomy_axes(bare, body, IDS.get, radius)
    assert right is None and not organs_view.sides_shown(right, 0)
    assert organs_view.lateral("iliopsoas_left") and not organs_view.lateral("liver")


def test_a_lateral_structure_abstains_when_the_sides_are_not_shown(monkeypatch):
    """The localizer's gate, end to end on a real image: the match reports the sides as
    not shown, so a structure with a side abstains with the reason and one without is kept."""
    from dataclasses import replace

    from radspatial.agent.localizers.organs.organs import OrgansLocalizer
    from radspatial.agent.pipeline.types import Context, Ref
    from radspatial.training import organs_data

    sm = organs_data.shared_data() / "totalseg_example" / "example_ct_sm.nii.gz"
    if not sm.is_file():
        import pytest

        pytest.skip("../shared/data not here")
    vol = organs_data.patient_a(organs_data.shared_data())
    hu = organs_data.render_hu(vol.ct, vol.ct.shape[2] - 10, vol.spacing, 256)
    grey = np.clip((hu + 160) / 400 * 255, 0, 255).astype(np.uint8)
    image = np.repeat(grey[:, :, None], 3, axis=2)
    rules = organs_atlas.AtlasRules(need_sides=True)
    loc = OrgansLocalizer(atlas=True, atlas_rules=rules)
    refs = [Ref(name="liver"), Ref(name="autochthon_left")]
    real = loc._match
    monkeypatch.setattr(loc, "_match", lambda *a: replace(real(*a), sides=False))
    liver, left = loc.locate(image, refs, Context())
    assert left is not None and left.details["abstain_reason"] == organs_view.SIDES_NOT_SHOWN
    assert liver is None or liver.details.get("abstain_reason") != organs_view.SIDES_NOT_SHOWN


VESSELS = {"vertebrae": 1, "aorta": 4, "inferior_vena_cava": 5}


def _lumbar(aorta_x: int = 38, ivc_x: int = 26, ivc_y: int = 38) -> tuple[np.ndarray, np.ndarray]:
    """A lumbar slice without liver or spleen: the spine, the aorta left of it (image right in
    standard view) and the IVC right of it (image left), 6 px off the midline (0.25 body
    radii): the landmark table's vessels fix the patient's right (issue #46/#47)."""
    y, x = np.mgrid[:64, :64]
    body = (x - 32) ** 2 / 28**2 + (y - 32) ** 2 / 20**2 <= 1
    ids = np.zeros((64, 64), np.int64)
    ids[(x - 32) ** 2 + (y - 46) ** 2 <= 16] = VESSELS["vertebrae"]
    ids[(x - aorta_x) ** 2 + (y - 38) ** 2 <= 5] = VESSELS["aorta"]
    ids[(x - ivc_x) ** 2 + (y - ivc_y) ** 2 <= 5] = VESSELS["inferior_vena_cava"]
    return ids, body


def _sides(ids: np.ndarray, body: np.ndarray, k: int):
    ids_k, body_k = organs_atlas._dihedral_np(ids, k), organs_atlas._dihedral_np(body, k)
    radius = organs_checks.body_radius(np.ascontiguousarray(body_k))
    return organs_view.anatomy_sides(ids_k, body_k, VESSELS.get, radius)


def test_the_vessels_of_the_landmark_table_fix_the_sides_in_every_view():
    ids, body = _lumbar()
    for k in range(8):
        posterior, right, names = _sides(ids, body, k)
        assert right is not None and set(names) == {"aorta", "inferior_vena_cava"}
        assert organs_view.allowed_views(posterior, right) == (k,)


def test_vessels_on_the_wrong_sides_or_disagreeing_fix_nothing():
    ids, body = _lumbar(aorta_x=26, ivc_x=38)  # swapped: the mirror image's reading
    _, right, _ = _sides(ids, body, 0)
    assert right is not None and right[0] > 0  # the patient's right read on the image's right
    ids, body = _lumbar(aorta_x=24, ivc_x=27)  # both on one side: the votes disagree
    assert _sides(ids, body, 0)[1:] == (None, ())
    ids, body = _lumbar(aorta_x=33, ivc_x=31, ivc_y=32)  # within the offsets of the midline
    assert _sides(ids, body, 0)[1:] == (None, ())


def test_a_landmark_the_copies_disagree_on_does_not_vote():
    """``vote_ids`` (the pixels every re-oriented copy labels alike): an aorta drawn on the
    wrong side that one copy does not see leaves the IVC's vote alone; read from ``ids`` the
    two disagree and nothing is fixed (issue #47 round 2)."""
    ids, body = _lumbar(aorta_x=22, ivc_x=26)  # a spurious aorta beside the IVC
    radius = organs_checks.body_radius(body)
    assert organs_view.anatomy_sides(ids, body, VESSELS.get, radius)[1:] == (None, ())
    agreed = np.where(ids == VESSELS["aorta"], 0, ids)
    _, right, names = organs_view.anatomy_sides(ids, body, VESSELS.get, radius, True, agreed)
    assert names == ("inferior_vena_cava",) and right is not None and right[0] < -0.9


def test_reflect_puts_the_counterpart_across_the_midline_in_any_view():
    """A structure whose counterpart was not found stands in for it mirrored across the body's
    midline (the line along the posterior axis through the body's centre), whatever the
    view's rotation; the sides abstention is dropped and the uncertainty has a floor."""
    from radspatial.agent.localizers.organs.organs_atlas import UNCERTAINTY
    from radspatial.agent.localizers.organs.organs_view import (
        REFLECT_UNCERTAINTY,
        REFLECTED,
        reflect,
    )
    from radspatial.questions.records import Found

    f = Found((40.0, 70.0), 0.9, "organs", {"abstain_reason": "sides not shown", "class": 3})
    down = reflect(f, (64.0, 64.0), (0.0, 1.0), name="femur_right")  # posterior down
    assert down.xy == pytest.approx((88.0, 70.0)) and down.method == REFLECTED
    assert "abstain_reason" not in down.details and down.details[UNCERTAINTY] == REFLECT_UNCERTAINTY
    assert down.details["reflected_from"] == "femur_left"
    turned = reflect(f, (64.0, 64.0), (1.0, 0.0), name="femur_right")  # posterior right
    assert turned.xy == pytest.approx((40.0, 58.0))
    sure = Found((40.0, 70.0), 0.9, "organs", {UNCERTAINTY: 0.4})
    assert reflect(sure, (64.0, 64.0), (0.0, 1.0), name="x_right").details[UNCERTAINTY] == 0.4


def test_an_open_pair_is_split_into_its_two_members_by_the_networks_lean():
    """``organs_pairs.members``: a left-right pair whose probability the network splits
    between the two sides is one structure on either side; its two components are the pair's
    members, the asked side taken where the network leans to it (issue #47 round 2)."""
    from radspatial.agent.localizers.organs import organs_pairs
    from radspatial.agent.localizers.organs.organs import merge_parts
    from radspatial.nets.unet import Prediction

    size = 32
    probs = np.zeros((3, size, size), np.float32)
    probs[0] = 1.0
    left_blob, right_blob = np.zeros((size, size), bool), np.zeros((size, size), bool)
    left_blob[10:16, 4:10], right_blob[10:16, 22:28] = True, True
    for blob, lean in ((left_blob, 0.1), (right_blob, -0.1)):  # class 1 wins on the left blob
        probs[:, blob] = np.array([0.0, 0.5 + lean, 0.5 - lean])[:, None]
    labels = probs.argmax(axis=0)
    votes = np.stack([labels, labels])
    body = np.ones((size, size), bool)
    merged, mv = merge_parts(Prediction(probs, labels), votes, (1, 2))
    asked, twin = organs_pairs.members(merged, mv, probs, 1, 2, body)
    assert (asked[0].labels == 1).sum() == 36 and (asked[0].labels[left_blob] == 1).all()
    assert (twin[0].labels[right_blob] == 1).all() and not (twin[0].labels[left_blob] == 1).any()
    assert np.allclose(asked[0].probs[1][left_blob], 1.0)  # the two sides' probabilities summed
    merged2, mv2 = merge_parts(Prediction(probs, labels), votes, (2, 1))  # the other side
    (asked2, _), (twin2, _) = organs_pairs.members(merged2, mv2, probs, 2, 1, body)
    assert (asked2.labels[right_blob] == 2).all() and (twin2.labels[left_blob] == 2).all()
    one = np.where(right_blob, 0, labels)
    merged1, mv1 = merge_parts(Prediction(probs, one), np.stack([one, one]), (1, 2))
    assert organs_pairs.members(merged1, mv1, probs, 1, 2, body) is None  # one member only
    # session 18 (``AtlasRules.pair_single``): the one member found is the asked one, either
    # side, with the merged class as it is; no counterpart
    (alone, alone_votes), none = organs_pairs.members(merged1, mv1, probs, 1, 2, body, True)
    assert none is None and alone is merged1 and alone_votes is mv1
    assert organs_pairs.members(merged, mv, probs, 1, 2, body, True)[1] is not None  # two: split


ORGANS = {"vertebrae": 1, "liver": 2, "stomach": 3}


def _upper(liver_xy: tuple[int, int], stomach_xy: tuple[int, int]) -> np.ndarray:
    y, x = np.mgrid[:64, :64]
    ids = np.zeros((64, 64), np.int64)
    ids[(x - 32) ** 2 + (y - 50) ** 2 <= 16] = ORGANS["vertebrae"]  # posterior: down
    ids[(x - liver_xy[0]) ** 2 + (y - liver_xy[1]) ** 2 <= 30] = ORGANS["liver"]
    ids[(x - stomach_xy[0]) ** 2 + (y - stomach_xy[1]) ** 2 <= 20] = ORGANS["stomach"]
    return ids


def test_liver_and_stomach_fix_the_right_only_across_the_body():
    """``max_skew`` (``AtlasRules.right_skew``): liver vs stomach fix the patient's right when
    their direction runs across the body; one as much front-back as across (a stomach found
    behind the liver, as a network may on unseen texture) fixes nothing (issue #47 round 3)."""
    y, x = np.mgrid[:64, :64]
    body = (x - 32) ** 2 / 28**2 + (y - 32) ** 2 / 22**2 <= 1
    radius = organs_checks.body_radius(body)
    across = _upper((16, 30), (46, 28))  # liver on the image's left: standard view
    _, right, names = organs_view.anatomy_sides(across, body, ORGANS.get, radius, max_skew=0.5)
    assert right is not None and right[0] < -0.9 and "liver" in names
    skewed = _upper((22, 20), (34, 40))  # the stomach more behind the liver than beside it
    assert organs_view.anatomy_sides(skewed, body, ORGANS.get, radius, max_skew=0.5)[1:] == (
        None,
        (),
    )
    _, right, _ = organs_view.anatomy_sides(skewed, body, ORGANS.get, radius, max_skew=1.0)
    assert right is not None  # the rule off: any direction fixes it, as before


def test_a_structure_named_for_a_side_found_on_the_other_is_not_trusted():
    """Where the sides are fixed, a structure named left that lies on the patient's right of
    the midline is refused with the reason; on its own side, or within the margin, it passes."""
    from types import SimpleNamespace

    from radspatial.agent.localizers.organs.organs import OrgansLocalizer

    loc = OrgansLocalizer(atlas=True)
    match = SimpleNamespace(midline=((32.0, 32.0), (0.0, 1.0)), right=(-1.0, 0.0), body_radius=20.0)
    on_right = Found((20.0, 30.0), 0.9, "organs", {})  # x < 32: the patient's right here
    why = loc._wrong_side(on_right, "lung_lower_lobe_left", match)
    assert why is not None and why.startswith("on the wrong side: named left")
    assert loc._wrong_side(on_right, "lung_lower_lobe_right", match) is None
    near = Found((32.5, 30.0), 0.9, "organs", {})  # 0.025 body radii over: within the margin
    assert loc._wrong_side(near, "autochthon_right", match) is None
    assert organs_view.side_offset((20.0, 30.0), (32.0, 32.0), (-1.0, 0.0), 20.0) == 0.6
