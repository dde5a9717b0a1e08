"""CT synthesis from label maps, label-map patients on our ids, the all-anatomies atlas and prior.

Tiny inputs only: a 64 px label slice, a 40 x 40 x 4 AMOS-style label map written to a
temporary ``../shared/data`` layout. Nothing is trained.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

import nibabel as nib
import numpy as np
import pytest

from radspatial.training import organs_data, organs_hu, organs_synth
from radspatial.training import organs_labelmaps as lm

LIVER, SPLEEN, VERTEBRAE, KIDNEY_L = 5, 1, 26, 3
NAMES = {LIVER: "liver", SPLEEN: "spleen", VERTEBRAE: "vertebrae", KIDNEY_L: "kidney_left"}


def _slice() -> np.ndarray:
    """An asymmetric display slice: a big liver on the image's left (the patient's right), a
    small spleen on the right, a vertebra at the back, a left kidney."""
    lab = np.zeros((64, 64), np.uint16)
    lab[18:40, 10:30] = LIVER
    lab[20:30, 44:52] = SPLEEN
    lab[44:52, 28:36] = VERTEBRAE
    lab[34:42, 40:48] = KIDNEY_L
    return lab


def _params(seed: int) -> organs_synth.SynthParams:
    return organs_synth.draw_params(np.random.default_rng(seed), ("liver", "spleen", "bone"))


def test_same_seed_same_image_and_parameters_apart_from_their_use():
    lab = _slice()
    p1, p2 = _params(7), _params(7)
    assert p1 == p2  # the draw is reproducible
    a = organs_synth.apply(lab, NAMES, 3.0, p1)
    b = organs_synth.apply(lab, NAMES, 3.0, p1)  # the apply is deterministic
    assert np.array_equal(a, b)
    img, drawn = organs_synth.synth_slice(lab, NAMES, 3.0, np.random.default_rng(7))
    img2, _ = organs_synth.synth_slice(lab, NAMES, 3.0, np.random.default_rng(7))
    assert np.array_equal(img, img2)
    other, _ = organs_synth.synth_slice(lab, NAMES, 3.0, np.random.default_rng(8))
    assert not np.array_equal(img, other)


def test_each_structure_drawn_at_its_class_intensity_where_it_is_not_mirrored():
    lab = _slice()
    p = dataclasses.replace(
        _params(1),
        class_hu=(("liver", 60.0, 5.0), ("spleen", 220.0, 5.0), ("bone", 500.0, 5.0)),
        noise_hu=3.0,
        blur_px=0.0,
        res_factor=1.0,
        fov=2.0,
    )
    hu = organs_synth.apply(lab, NAMES, 3.0, p)
    assert hu.shape == lab.shape and hu.dtype == np.float32
    assert hu.min() >= -1024 and hu.max() <= 3071
    liver_core = hu[22:36, 14:26].mean()
    spleen_core = hu[22:28, 46:50].mean()
    assert abs(liver_core - 60) < 15 and abs(spleen_core - 220) < 15
    # a left-right flip would put the bright spleen where the liver is
    assert hu[22:28, 64 - 50 : 64 - 46].mean() < 120
    assert hu[45:51, 29:35].mean() > 400  # bone, with its bright cortex
    muscle = p.hu_of("muscle")[0]
    assert abs(hu[36:40, 42:46].mean() - muscle) < 30  # an unlisted class: muscle-like
    for label_id in NAMES:  # every structure is drawn (none left at air)
        assert hu[lab == label_id].mean() > -200


def test_body_outline_adds_wall_and_fat_around_the_labels():
    lab = _slice()
    p = dataclasses.replace(_params(2), fat_mm=12.0, wall_mm=6.0, noise_hu=0.0, fov=2.0)
    hull, wall, fat = organs_synth.body_outline(
        np.kron(lab, np.ones((2, 2), lab.dtype)), 1.5, 6, 12
    )
    assert hull.sum() > (lab > 0).sum() * 4 and wall.any() and fat.any()
    assert not (hull & fat).any() and not (wall & fat).any()
    hu = organs_synth.apply(lab, NAMES, 3.0, p)
    assert hu[0, 0] == pytest.approx(organs_synth.AIR, abs=1)  # air outside the body
    body = hu > -500
    assert body.sum() > (lab > 0).sum()  # the body is larger than the labelled organs


def test_partial_maps_mark_unlabelled_body_unknown_complete_ones_background():
    lab = _slice()
    hu = organs_synth.apply(lab, NAMES, 3.0, _params(3))
    partial = lm.training_labels(lab, hu, complete=False)
    complete = lm.training_labels(lab, hu, complete=True)
    inside = (lab == 0) & (hu > -500)
    assert inside.any()
    assert (partial[inside] == organs_data.IGNORE).all()
    assert (complete[inside] == 0).all()
    assert (partial[lab > 0] == lab[lab > 0]).all()


def _amos_root(tmp_path, axes: str = "LAS"):
    """A tiny AMOS-id label map (LAS, as amos_0013; or RAS / LPS, as other datasets store
    theirs): liver (AMOS 6) on the patient's right, spleen (AMOS 1) on the left,
    prostate/uterus (15) which has no TotalSegmentator name."""
    data = np.zeros((40, 40, 4), np.uint16)
    data[2:14, 10:30, :] = 6  # low i = patient's right in LAS
    data[28:36, 12:22, :] = 1
    data[18:22, 30:34, 1:3] = 15
    affine = np.diag([-2.0, 2.0, 5.0, 1.0])
    if axes == "RAS":  # i runs to the patient's left in LAS, to the right in RAS
        data, affine = data[::-1].copy(), np.diag([2.0, 2.0, 5.0, 1.0])
    elif axes == "LPS":  # j runs to the back: rows stored the other way round
        data, affine = data[:, ::-1].copy(), np.diag([-2.0, -2.0, 5.0, 1.0])
    (tmp_path / "label_maps").mkdir()
    nib.save(nib.Nifti1Image(data, affine), tmp_path / "label_maps" / "amos_0013_label.nii.gz")
    return tmp_path


@pytest.mark.parametrize("axes", ["LAS", "RAS", "LPS"])
def test_label_map_sides_survive_every_storage_orientation(tmp_path, axes):
    """A wrong flip of a label map's axes would put the liver on the image's right, the
    spleen on its left, in the training slices and in the atlas alike."""
    from radspatial.training import organs_atlas as builder

    lv = lm.label_volume("amos", _amos_root(tmp_path, axes))
    assert lv.source["seg_orientation"] == axes
    disp = organs_data.render_lab(lv.seg, 1, lv.spacing, 64)
    rows_liver, cols_liver = np.nonzero(disp == LIVER)
    rows_spleen, cols_spleen = np.nonzero(disp == SPLEEN)
    assert cols_liver.mean() < 32 < cols_spleen.mean()  # patient's right on the image's left
    assert rows_liver.mean() < rows_spleen.mean()  # j 10-30 (liver) lies in front of 12-22
    arrays, _ = builder.build(("amos",), tmp_path, step_mm=5.0)
    lab = arrays["labels"][1]
    assert np.nonzero(lab == LIVER)[1].mean() < np.nonzero(lab == SPLEEN)[1].mean()


def test_amos_label_map_keeps_sides_and_maps_ids_by_name(tmp_path):
    lv = lm.label_volume("amos", _amos_root(tmp_path))
    ids = set(np.unique(lv.seg).tolist())
    assert ids == {0, LIVER, SPLEEN, organs_data.IGNORE}  # prostate/uterus: unknown
    assert not lv.complete and len(lv.source["seg_sha256"]) == 64
    disp = organs_data.render_lab(lv.seg, 1, lv.spacing, 64)
    liver_col = np.nonzero(disp == LIVER)[1].mean()
    spleen_col = np.nonzero(disp == SPLEEN)[1].mean()
    assert liver_col < spleen_col  # radiological view: the patient's right on the image's left


def test_synth_bank_is_deterministic_and_draws_every_labelled_slice(tmp_path):
    lv = lm.label_volume("amos", _amos_root(tmp_path))
    (h1, l1), rec = lm.synth_bank(lv, 32, 5.0, 2, seed=0)
    (h2, _), _ = lm.synth_bank(lv, 32, 5.0, 2, seed=0)
    assert h1.shape == (8, 32, 32) and l1.shape == (8, 32, 32)
    assert np.array_equal(h1, h2) and rec["slices"] == 4 and rec["draws"] == 2
    assert not np.array_equal(h1[0], h1[1])  # two draws of one slice differ


def test_atlas_from_label_maps_counts_anatomies_and_keeps_sides(tmp_path):
    from radspatial.agent.localizers.organs.organs_atlas import UNKNOWN
    from radspatial.training import organs_atlas as builder

    arrays, meta = builder.build(("amos",), _amos_root(tmp_path), step_mm=5.0)
    assert meta["anatomies"] == 1 and meta["slices"] == len(arrays["grey"]) == 4
    assert meta["volumes"][0]["labelled_ids"] == [0, SPLEEN, LIVER]
    assert arrays["known"][0, LIVER] and not arrays["known"][0, KIDNEY_L]
    labels = arrays["labels"][1]
    assert (labels == UNKNOWN).any()  # a partial map's unlabelled body says nothing
    assert np.nonzero(labels == LIVER)[1].mean() < np.nonzero(labels == SPLEEN)[1].mean()


def test_plausibility_ranges_come_from_real_and_synthesised_slices():
    real_lab = np.zeros((1, 64, 64), np.uint16)
    real_lab[0, 18:40, 10:30] = LIVER
    real_hu = np.where(real_lab > 0, 50.0, -1000.0).astype(np.float32)
    real_hu[0, 10:54, 6:58] = np.maximum(real_hu[0, 10:54, 6:58], -80.0)  # a body around it
    drawn_lab = _slice()[None]
    drawn_hu = np.where(drawn_lab > 0, 50.0, -1000.0).astype(np.float32)
    drawn_hu[0, 10:56, 6:58] = np.maximum(drawn_hu[0, 10:56, 6:58], -80.0)
    ranges = organs_data.plausibility_of((real_hu, real_lab), (drawn_hu, drawn_lab))
    assert {LIVER, SPLEEN, VERTEBRAE, KIDNEY_L} <= set(ranges)  # spleen: label maps only
    assert ranges[LIVER]["n_slices"] == 2 and ranges[SPLEEN]["n_slices"] == 1
    none = (np.zeros((0, 64, 64), np.float32), np.zeros((0, 64, 64), np.uint16))
    assert set(organs_data.plausibility_of((real_hu, real_lab), none)) == {LIVER}


def test_hu_table_pools_structures_per_class():
    ct = np.full((14, 14, 5), -100.0, np.float32)
    seg = np.zeros(ct.shape, np.uint16)
    ct[2:10, 2:10], seg[2:10, 2:10] = 60.0, LIVER
    rows = organs_hu.structure_stats(ct, seg, NAMES)
    assert rows[0]["class"] == "liver" and rows[0]["mean"] == 60.0
    pooled = organs_hu.pool([*rows, {**rows[0], "mean": 100.0}])
    assert pooled["liver"]["mean"] == 80.0 and pooled["liver"]["between_sd"] >= 15.0


def test_shipped_tables_state_their_anatomies_and_sources():
    hu = organs_synth.hu_table()
    assert hu["pooled_patients"] == ["patient_a", "patient_c"]  # B stays unseen
    assert {"liver", "spleen", "bone", "fat", "lung"} <= set(hu["classes"])
    text = resources.files("radspatial.data").joinpath("atlas.json").read_text()
    prior = json.loads(text)
    assert prior["anatomies"] == 6
    assert "patient_b" not in {s["name"] for s in prior["anatomy_sources"]}
    c = prior["centres"]  # standard view: the patient's left on the image's right
    assert c["spleen"][0] > c["liver"][0] and c["kidney_left"][0] > c["kidney_right"][0]


def test_anatomy_prior_says_how_many_anatomies_it_recites():
    from radspatial.models.base import create_backend

    info = create_backend("baseline:anatomy-prior").describe()
    assert info["atlas_anatomies"] == 6 and info["atlas_source"] == "built-in"


SHARED = organs_data.shared_data()
needs_shared = pytest.mark.skipif(
    not (SHARED / "totalseg_mr").is_dir(), reason="needs ../shared/data"
)


@needs_shared
def test_train_command_line_mixes_synthesised_label_map_slices_and_records_them(tmp_path):
    from radspatial.training.organs_train import main

    out = tmp_path / "m"
    args = ["--out", str(out), "--n-phantoms", "0", "--real-weight", "0.5", "--steps", "2"]
    args += ["--batch-size", "2", "--size", "32", "--channels", "8,16", "--volumes", "c"]
    args += ["--synth", "mr", "--synth-weight", "0.5", "--synth-draws", "1"]
    assert main([*args, "--synth-step-mm", "30", "--threads", "1"]) == 0
    record = json.loads((out / "config.json").read_text())
    (drawn,) = record["data"]["real"]["synthesised"]
    assert drawn["name"] == "mr" and drawn["seg_sha256"].startswith("e73a5ee1")
    assert drawn["slices"] >= 1 and drawn["seed"] == 0
    assert "--synth mr --synth-weight 0.5" in record["training"]["command"]
    names = {c["name"] for c in record["classes"]}
    assert {"liver", "stomach", "vertebrae", "spleen", "kidney_left"} <= names


@needs_shared
def test_atlas_command_line_takes_a_label_map_patient(tmp_path, capsys):
    from radspatial.training import organs_atlas as builder

    assert builder.main(["--out", str(tmp_path), "--volumes", "c,mr", "--step-mm", "30"]) == 0
    assert "(2 anatomies)" in capsys.readouterr().out
    meta = json.loads((tmp_path / "atlas.json").read_text())
    assert [v["name"] for v in meta["volumes"]] == ["mr", "patient_c"]
    assert "--step-mm 30" in meta["command"]


@needs_shared
def test_hu_command_line_measures_the_training_patients_only(tmp_path):
    out = tmp_path / "hu.json"
    assert organs_hu.main(["--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert table["pooled_patients"] == ["patient_a", "patient_c"]
    assert table["classes"]["liver"]["structures"] == 2  # A's liver and C's
    assert table["per_patient_classes"]["patient_b"]["artery"]["mean"] > 100  # B: contrast


@pytest.mark.parametrize("r", [1, 3, 7])
def test_disk_closing_is_scipy_s_binary_closing_by_the_disk(r):
    """The body hull's closing by distance transforms (issue 50: the structuring element took
    seconds at 512 px) gives scipy's binary_closing pixel for pixel, edges included."""
    from scipy import ndimage

    rng = np.random.default_rng(r)
    for density in (0.02, 0.2):
        fg = rng.random((40, 33)) < density
        fg[0, 5] = fg[-1, -1] = True  # structures touching the edges
        padded = np.pad(fg, r + 1)
        y, x = np.ogrid[-r : r + 1, -r : r + 1]
        want = ndimage.binary_closing(padded, structure=x * x + y * y <= r * r)
        want = want[r + 1 : -r - 1, r + 1 : -r - 1]
        assert np.array_equal(organs_synth.disk_closing(fg, r), want)
