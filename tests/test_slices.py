"""Slices: display orientation, resampling geometry, the 8 variants, structure stats, markers."""

from __future__ import annotations

import numpy as np
import pytest

from radspatial.core.labels import (
    display_name,
    letter_code,
    letter_to_id,
    load_table,
    normalize_name,
)
from radspatial.imaging.markers import DOT_COLORS, Mark, dot_extent, draw_marks, marker_area
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    StructureStat,
    Variant,
    component_areas,
    referenceable,
    render_gray,
    render_labels,
    structure_stats,
    to_display,
)


def test_to_display_is_radiological():
    # canonical RAS slice [i, j]: i grows toward the patient's right, j anterior
    sl = np.zeros((5, 4), int)
    sl[4, 3] = 1  # most right, most anterior -> image top-left
    sl[0, 0] = 2  # most left, most posterior -> image bottom-right
    d = to_display(sl)
    assert d.shape == (4, 5)
    assert d[0, 0] == 1 and d[-1, -1] == 2


@pytest.mark.parametrize("code", VARIANTS)
def test_variant_moves_pixels_and_points_alike(code):
    size = 9
    img = np.zeros((size, size), int)
    img[1, 2] = 7  # asymmetric: (x=2, y=1)
    img[6, 5] = 3
    v = Variant(code)
    out = v.apply_image(img)
    for val, xy in ((7, (2, 1)), (3, (5, 6))):
        x, y = v.apply_point(xy, size)
        assert out[int(y), int(x)] == val
        assert v.invert_point((x, y), size) == xy


def test_variant_semantics():
    size = 101
    right_edge = (100.0, 50.0)
    assert Variant("B1").apply_point(right_edge, size) == right_edge
    assert Variant("A1").apply_point(right_edge, size) == (0.0, 50.0)  # horizontal flip
    assert Variant("B2").apply_point(right_edge, size) == (50.0, 0.0)  # CCW: right -> top
    assert Variant("B3").apply_point(right_edge, size) == (0.0, 50.0)
    assert Variant("B4").apply_point(right_edge, size) == (50.0, 100.0)
    assert Variant("A3").long_name == "Horizontal flip and 180 degree rotation"
    assert Variant("B2").long_name == "No flip and 90 degree rotation"
    with pytest.raises(ValueError):
        Variant("C1")


def test_geometry_keeps_aspect_and_pads():
    # 100 x 50 voxels at 1 x 4 mm -> 100 mm wide, 200 mm tall -> height fills 200 px
    g = Geometry.for_slice((100, 50), (1.0, 4.0), 200)
    assert (g.content_w, g.content_h) == (100, 200)
    assert (g.pad_x, g.pad_y) == (50, 0)
    x0, y0 = g.to_output(0, 0)
    x1, y1 = g.to_output(99, 49)
    assert x0 == pytest.approx(50.0) and y0 == pytest.approx(1.5)
    assert x1 == pytest.approx(149.0) and y1 == pytest.approx(197.5)
    lab = np.zeros((50, 100), np.uint16)
    lab[10, 20] = 4
    out = render_labels(lab, g)
    x, y = g.to_output(20, 10)
    assert out[int(round(y)), int(round(x))] == 4
    gray = render_gray(np.full((50, 100), 40.0), g, (400, 40))
    assert gray[100, 100] == 128 and gray[100, 10] == 0  # level -> mid grey, padding black


def test_structure_stats_components_area_centre_and_concave_marker():
    lab = np.zeros((60, 60), np.int32)
    lab[10:20, 10:30] = 1  # one rectangle
    lab[40:45, 5:10] = 2
    lab[40:45, 50:55] = 2  # two components
    # a C shape: its centre of mass falls in the hole
    lab[25:55, 25:30] = 3
    lab[25:30, 25:50] = 3
    lab[50:55, 25:50] = 3
    g = Geometry.for_slice((60, 60), (1.0, 1.0), 60)
    st = structure_stats(lab, g)
    assert st[1].n_components == 1 and st[1].area_px == 200
    assert st[1].center_xy == pytest.approx((19.5, 14.5))
    assert st[1].inside and st[1].marker_xy == st[1].center_xy
    assert st[2].n_components == 2
    c = st[3]
    assert not c.inside
    mx, my = (int(round(v)) for v in c.marker_xy)
    assert lab[my, mx] == 3


def test_markers_drawn_upright_and_sized():
    img = np.zeros((512, 512, 3), np.uint8)
    out = draw_marks(img, [Mark("numbers", "52", (100, 100)), Mark("dots", "red", (300, 300))])
    assert tuple(out[300, 300]) == (255, 0, 0)
    assert (out[95:105, 85:115] == 255).any() and (out[95:105, 85:115] == 0).any()
    assert 200 < marker_area(512) < 1500
    with pytest.raises(ValueError, match="red, blue, green"):
        draw_marks(img, [Mark("dots", "purple", (10, 10))])


def test_component_areas_largest_first_scaled_and_boxed():
    lab = np.zeros((6, 9), np.int32)
    lab[0:2, 0:3] = 4  # 6 px, top-left
    lab[4, 7] = 4  # 1 px speck, bottom-right (diagonal neighbours join: 8-connected)
    lab[5, 8] = 4
    lab[3, 3] = 2
    assert component_areas(lab, 4) == [6.0, 2.0]
    assert component_areas(lab, 4, scale=0.5) == [3.0, 1.0]
    assert component_areas(lab, 4, (slice(0, 3), slice(0, 5))) == [6.0]
    assert component_areas(lab, 7) == []


def test_referenceable_needs_name_one_component_and_area():
    def stat(i, n, area):
        return StructureStat(i, n, area, (0.0, 0.0), (0.0, 0.0), True)

    stats = {3: stat(3, 1, 50.0), 1: stat(1, 1, 80.0), 2: stat(2, 2, 90.0), 5: stat(5, 1, 10.0)}
    stats[9] = stat(9, 1, 99.0)  # not in the table
    names = {1: "liver", 2: "colon", 3: "spleen", 5: "aorta"}
    assert [s.label_id for s in referenceable(stats, names, 40.0)] == [1, 3]


def test_dots_take_a_palette_and_reject_other_colours():
    img = np.zeros((128, 128, 3), np.uint8)
    out = draw_marks(img, [Mark("dots", "teal", (20.0, 100.0))], colors={"teal": (0, 128, 128)})
    assert tuple(out[100, 20]) == (0, 128, 128)
    assert tuple(out[100, 20 + dot_extent(128)]) == (255, 255, 255)  # the white ring
    assert tuple(out[20, 100]) == (0, 0, 0)
    with pytest.raises(ValueError, match="teal"):
        draw_marks(img, [Mark("dots", "teal", (20.0, 20.0))])
    assert "teal" not in DOT_COLORS


def test_labels_tables_and_codes():
    assert letter_code(1) == "AA" and letter_code(52) == "BZ" and letter_to_id("BZ") == 52
    assert display_name("kidney_left") == "left kidney"
    assert normalize_name("Left Kidney") == "kidney_left"
    ts = load_table("totalsegmentator")
    assert ts.grouping == "mirp" and ts.apply(30) == 26 and ts.apply(110) == 93
    assert ts.names[92] == "rib_left" and ts.names[93] == "rib_right"
    assert load_table("btcv").names[2] == "kidney_right"
    assert load_table("word").names[3] == "kidney_left"  # WORD's kidney order differs
    assert load_table("totalsegmentator", group=False).names[93] == "rib_left_2"
    with pytest.raises(ValueError):
        load_table("btcv", group=True)


def test_json_table_can_extend_totalsegmentator_and_keep_grouping(tmp_path):
    import json

    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"extends": "totalsegmentator", "200": "mass"}))
    t = load_table(path)
    assert t.names[200] == "mass" and t.names[5] == "liver"
    assert t.grouping == "mirp" and t.apply(30) == 26
    path.write_text(json.dumps({"extends": "nope", "200": "mass"}))
    with pytest.raises(ValueError, match="not a built-in"):
        load_table(path)
