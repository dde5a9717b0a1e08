"""radspatial.bench.counterfactual: left-right mirrored cases with side-true label names.

The real TotalSegmentator example fixes what "left" means: after mirroring, the voxels named
kidney_left must still lie on the patient's left in world (RAS) coordinates.
"""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest
from synth import reorient

from radspatial.bench.counterfactual import (
    EXTENSION_NAMES,
    lr_axis,
    mirror_case,
    mirror_map,
    mirrored_paths,
    swap_side,
)
from radspatial.cli import bundled_example
from radspatial.core.labels import load_table
from radspatial.imaging.volumes import Case, InputError, load_case

TS = load_table("totalsegmentator", group=False).names
IDS = {n: i for i, n in TS.items()}


def world_x(seg: np.ndarray, affine: np.ndarray, label: int) -> float:
    idx = np.argwhere(seg == label)
    return float(nib.affines.apply_affine(affine, idx.mean(axis=0))[0])


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    ct, seg = bundled_example()
    out = tmp_path_factory.mktemp("mirror")
    return ct, seg, out, mirror_case(ct, seg, out)


def test_swap_side():
    assert swap_side("kidney_left") == "kidney_right"
    assert swap_side("rib_right_11") == "rib_left_11"
    assert swap_side("liver") is None


def test_mirror_map_is_an_involution_with_side_true_names():
    mapping, extra = mirror_map(TS)
    assert all(mapping[mapping[i]] == i for i in mapping)
    names = {**TS, **extra}
    for a, b in mapping.items():
        assert names[b] == swap_side(names[a]), (names[a], names[b])
    assert mapping[IDS["kidney_left"]] == IDS["kidney_right"]
    assert mapping[IDS["rib_left_1"]] == IDS["rib_right_1"]
    assert mapping[IDS["iliac_vena_left"]] == IDS["iliac_vena_right"]
    # the right lung has three lobes: its middle lobe gets the extension id 201
    assert mapping[IDS["lung_middle_lobe_right"]] == 201 and extra == {201: EXTENSION_NAMES[201]}
    for unpaired in ("liver", "aorta", "atrial_appendage_left", "spinal_cord"):
        assert IDS[unpaired] not in mapping


@pytest.mark.parametrize(
    "codes, axis",
    [(("R", "A", "S"), 0), (("L", "P", "S"), 0), (("A", "S", "R"), 2), (("P", "L", "I"), 1)],
)
def test_left_right_axis_follows_the_affine(codes, axis):
    data = np.zeros((4, 5, 6))
    _, affine = reorient(data, np.diag([2.0, 3.0, 4.0, 1.0]), codes)
    assert lr_axis(affine) == axis


def test_oblique_affine_picks_the_axis_closest_to_x():
    theta = np.deg2rad(30)
    affine = np.eye(4)
    affine[:3, :3] = [[0, np.cos(theta), 0], [0, np.sin(theta), 1], [1, 0, 0]]
    assert lr_axis(affine) == 1


def test_real_example_mirrored_names_stay_on_their_side(mirrored):
    ct, seg, out, (ct_out, seg_out) = mirrored
    assert (ct_out, seg_out) == mirrored_paths(ct, seg, out)[:2]
    src, dst = nib.load(seg), nib.load(seg_out)
    assert np.array_equal(dst.affine, src.affine)
    assert dst.get_data_dtype() == src.get_data_dtype()
    assert nib.load(ct_out).get_data_dtype() == nib.load(ct).get_data_dtype()
    before, after = np.asarray(src.dataobj), np.asarray(dst.dataobj)
    spine = [i for n, i in IDS.items() if n.startswith("vertebrae_")]
    mid = float(
        nib.affines.apply_affine(src.affine, np.argwhere(np.isin(before, spine)).mean(0))[0]
    )
    # real data: kidney_left on the patient's left (-x in RAS), liver on the right
    assert world_x(before, src.affine, IDS["kidney_left"]) < mid
    assert world_x(before, src.affine, IDS["liver"]) > mid
    # mirrored: the mirror image of the anatomy, names by the side they are now on
    mid_after = float(
        nib.affines.apply_affine(dst.affine, np.argwhere(np.isin(after, spine)).mean(0))[0]
    )
    assert world_x(after, dst.affine, IDS["kidney_left"]) < mid_after
    assert world_x(after, dst.affine, IDS["kidney_right"]) > mid_after
    assert world_x(after, dst.affine, IDS["liver"]) < mid_after  # situs-inversus-like
    assert world_x(after, dst.affine, IDS["spleen"]) > mid_after
    for lab, n in zip(*np.unique(before, return_counts=True), strict=True):
        counterpart = mirror_map(TS)[0].get(int(lab), int(lab))
        assert (after == counterpart).sum() == n
    table = json.loads(mirrored_paths(ct, seg, out)[2].read_text())
    assert table["201"] == "lung_middle_lobe_left" and table["3"] == "kidney_left"


def test_mirroring_twice_restores_arrays_and_labels(mirrored, tmp_path):
    ct, seg, _, (ct_out, seg_out) = mirrored
    ct2, seg2 = mirror_case(ct_out, seg_out, tmp_path)
    for a, b in ((ct, ct2), (seg, seg2)):
        img_a, img_b = nib.load(a), nib.load(b)
        assert np.array_equal(np.asarray(img_a.dataobj), np.asarray(img_b.dataobj))
        assert np.array_equal(img_a.affine, img_b.affine)


def test_any_stored_orientation_gives_the_same_mirrored_anatomy(mirrored, tmp_path):
    ct, seg, _, (ct_out, seg_out) = mirrored
    ras = load_case(Case("ras", ct_out, seg_out))
    src_ct, src_seg = nib.load(ct), nib.load(seg)
    paths = []
    for img, name in ((src_ct, "ct.nii.gz"), (src_seg, "seg.nii.gz")):
        data, affine = reorient(np.asarray(img.dataobj), img.affine, ("A", "S", "L"))
        nib.save(nib.Nifti1Image(data, affine), tmp_path / name)
        paths.append(tmp_path / name)
    asl = load_case(Case("asl", *mirror_case(*paths, tmp_path / "out")))
    assert np.array_equal(asl.seg, ras.seg)
    assert np.allclose(asl.ct, ras.ct) and np.allclose(asl.affine, ras.affine)


def test_bad_input(tmp_path, mirrored):
    ct, seg, _, _ = mirrored
    small = nib.Nifti1Image(np.zeros((4, 4, 4), np.uint8), np.eye(4))
    nib.save(small, tmp_path / "small.nii.gz")
    with pytest.raises(InputError, match="shape"):
        mirror_case(ct, tmp_path / "small.nii.gz", tmp_path / "out")
    with pytest.raises(InputError, match="folder"):
        mirror_case(ct, tmp_path, tmp_path / "out")
    with pytest.raises(InputError, match="no such file"):
        mirror_case(tmp_path / "missing.nii.gz", seg, tmp_path / "out")
