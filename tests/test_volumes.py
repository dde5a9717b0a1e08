"""radspatial.imaging.volumes: canonical orientation of NIfTI and DICOM, masks, grouping, bad input.

Synthetic volumes are asymmetric and written by hand (not via nibabel's reorientation), so a wrong
flip or axis swap in the loader changes the values and fails the test.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest

from radspatial.imaging.volumes import (
    Case,
    InputError,
    load_case,
    load_ct,
    load_seg,
    read_cases_csv,
    sha256_path,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "totalseg_example"

# Ground truth in canonical RAS voxel order: axis 0 -> patient Right, 1 -> Anterior, 2 -> Superior.
SHAPE = (12, 9, 7)
SPACING = np.array([2.0, 3.0, 4.0])
ORIGIN = np.array([-11.0, -12.0, -10.0])
RAS_AFFINE = np.diag([*SPACING, 1.0])
RAS_AFFINE[:3, 3] = ORIGIN
LIVER, KIDNEY_LEFT = 5, 3


def truth() -> tuple[np.ndarray, np.ndarray]:
    x, y, z = np.indices(SHAPE)
    ct = (10.0 * x + 100.0 * y + 1000.0 * z - 1000.0).astype(np.float32)
    seg = np.zeros(SHAPE, dtype=np.uint16)
    seg[8:12, 5:9, 3:7] = LIVER  # patient right, anterior, superior
    seg[0:3, 1:4, 1:4] = KIDNEY_LEFT  # patient left, posterior
    return ct, seg


def orient(data: np.ndarray, codes: str) -> tuple[np.ndarray, np.ndarray]:
    """Store canonical ``data`` so that stored axis a points toward ``codes[a]``, by hand."""
    axis_of = {"R": 0, "L": 0, "A": 1, "P": 1, "S": 2, "I": 2}
    src = [axis_of[c] for c in codes]
    out = data.transpose(src)
    affine = np.zeros((4, 4))
    affine[3, 3] = 1.0
    affine[:3, 3] = ORIGIN
    for a, (c, s) in enumerate(zip(codes, src, strict=True)):
        if c in "LPI":
            out = np.flip(out, a)
            affine[s, a] = -SPACING[s]
            affine[s, 3] += (SHAPE[s] - 1) * SPACING[s]
        else:
            affine[s, a] = SPACING[s]
    return np.ascontiguousarray(out), affine


def write_nifti(path: Path, data: np.ndarray, affine: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(data, affine), path)
    return path


def write_case(tmp_path: Path, ct_codes: str = "RAS", seg_codes: str = "RAS") -> Case:
    ct, seg = truth()
    ct_path = write_nifti(tmp_path / "ct.nii.gz", *orient(ct.astype(np.int16), ct_codes))
    seg_path = write_nifti(tmp_path / "seg.nii.gz", *orient(seg.astype(np.uint8), seg_codes))
    return Case("syn", ct_path, seg_path)


def centroid_world(vol, label: int) -> np.ndarray:
    ijk = np.argwhere(vol.seg == label).mean(axis=0)
    return vol.affine[:3, :3] @ ijk + vol.affine[:3, 3]


# --- NIfTI orientation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ct_codes", "seg_codes"),
    [
        ("RAS", "RAS"),
        ("LPS", "LPS"),
        ("LAS", "LAS"),
        ("ASR", "ASR"),
        ("PIL", "SLA"),
        ("LPS", "LAS"),
    ],
)
def test_nifti_any_orientation_becomes_canonical_ras(tmp_path, ct_codes, seg_codes):
    vol = load_case(write_case(tmp_path, ct_codes, seg_codes))
    ct, seg = truth()
    np.testing.assert_array_equal(vol.ct, ct)
    np.testing.assert_array_equal(vol.seg, seg)
    np.testing.assert_allclose(vol.affine, RAS_AFFINE, atol=1e-5)
    assert nib.aff2axcodes(vol.affine) == ("R", "A", "S")
    assert vol.ct.dtype == np.float32 and vol.seg.dtype == np.uint16
    assert vol.spacing == (2.0, 3.0, 4.0)
    assert vol.source["ct_orientation"] == ct_codes
    assert vol.source["seg_orientation"] == seg_codes
    # Patient right is +x in RAS world: the liver lies right/anterior/superior of the left kidney.
    liver, kidney = centroid_world(vol, LIVER), centroid_world(vol, KIDNEY_LEFT)
    assert liver[0] > 0 > kidney[0] and liver[1] > kidney[1] and liver[2] > kidney[2]


def test_ct_scaling_and_trailing_singleton_dim(tmp_path):
    ct, _ = truth()
    img = nib.Nifti1Image(ct.astype(np.int16)[..., None], RAS_AFFINE)
    img.header.set_slope_inter(2.0, -1024.0)
    nib.save(img, tmp_path / "ct.nii.gz")
    data, affine, info = load_ct(tmp_path / "ct.nii.gz")
    assert data.shape == SHAPE and data.dtype == np.float32
    np.testing.assert_array_equal(data, ct * 2 - 1024)
    assert info == {"ct_format": "nifti", "ct_orientation": "RAS"}


# --- real data ---------------------------------------------------------------------------------


def bone_dice(vol) -> float:
    bone_mask, bright = np.isin(vol.seg, [26, 92, 93]), vol.ct > 200
    return 2 * (bone_mask & bright).sum() / (bone_mask.sum() + bright.sum())


def test_real_nifti_pair():
    vol = load_case(Case("ex", DATA / "example_ct_sm.nii.gz", DATA / "example_seg.nii.gz"))
    assert vol.ct.shape == vol.seg.shape == (122, 101, 30)
    liver = vol.ct[vol.seg == LIVER]
    assert 0 < liver.mean() < 150 and liver.std() < 50  # a flipped CT mixes air/bone in
    assert bone_dice(vol) > 0.3  # vertebrae + ribs lie on bright voxels
    assert centroid_world(vol, KIDNEY_LEFT)[0] < centroid_world(vol, 2)[0]  # left < right
    present = set(np.unique(vol.seg).tolist())
    assert {26, 92, 93} <= present and not present & {30, 110}  # MIRP grouping
    assert vol.source["seg_sha256"] == (
        "8be652475a4aaae83103a66bfb3345314b1fc06742807a06cf5005f7a7913a2d"
    )


def test_real_dicom_series_with_las_nifti_mask():
    vol = load_case(Case("dcm", DATA / "ct_dicom", DATA / "example_seg_dicom.nii.gz"))
    assert vol.ct.shape == vol.seg.shape == (512, 512, 20)
    src = vol.source
    assert src["ct_format"] == "dicom" and src["n_slices"] == 20
    assert (src["ct_orientation"], src["seg_orientation"]) == ("LPS", "LAS")
    json.dumps(src)  # the manifest stores it
    np.testing.assert_allclose(vol.spacing, (0.9765625, 0.9765625, 2.0))
    liver = vol.ct[vol.seg == LIVER]
    assert 0 < liver.mean() < 150 and liver.std() < 50
    assert 100 < vol.ct[vol.seg == 52].mean() < 400  # contrast-enhanced aorta
    assert bone_dice(vol) > 0.3
    assert centroid_world(vol, 1)[0] < centroid_world(vol, LIVER)[0]  # spleen left of liver
    assert vol.ct.min() >= -1024  # rescale intercept applied


# --- synthetic DICOM ---------------------------------------------------------------------------

PYDICOM3 = int(pydicom.__version__.split(".")[0]) >= 3
AXIAL = (1, 0, 0, 0, 1, 0)


def raw_value(lps: np.ndarray) -> np.ndarray:
    """Stored pixel value as a function of LPS position (integer mm): asymmetric on purpose."""
    return 3000 + lps[..., 0] + 10 * lps[..., 1] + 100 * lps[..., 2]


def write_dicom_slice(path: Path, pixels: np.ndarray, ipp, **tags) -> None:
    meta = pydicom.dataset.FileMetaDataset()
    meta.MediaStorageSOPClassUID = pydicom.uid.CTImageStorage
    meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
    meta.TransferSyntaxUID = pydicom.uid.ExplicitVRLittleEndian
    ds = pydicom.dataset.FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Rows, ds.Columns = pixels.shape
    ds.ImagePositionPatient = [float(v) for v in ipp]
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
    for key, value in tags.items():
        setattr(ds, key, value)
    ds.PixelData = pixels.astype("<u2").tobytes()
    if PYDICOM3:
        ds.save_as(path, enforce_file_format=True)
    else:  # pydicom 2.4
        ds.is_little_endian, ds.is_implicit_VR = True, False
        ds.save_as(path, write_like_original=False)


def write_series(
    folder: Path,
    *,
    iop=AXIAL,
    n: int = 5,
    rows: int = 6,
    cols: int = 8,
    spacing=(2.0, 1.0),  # DICOM PixelSpacing: (between rows, between columns)
    step: float = 3.0,
    slope: float = 1.0,
    intercept: float = -1024.0,
    skip: tuple[int, ...] = (),
    uid: str = "1.2.3.4",
    seed: int = 0,
    prefix: str = "IM",
    **tags,
) -> Path:
    """A series whose pixel values are raw_value(LPS position); shuffled names and numbers."""
    folder.mkdir(parents=True, exist_ok=True)
    row_dir, col_dir = np.array(iop[:3], float), np.array(iop[3:], float)
    normal, origin = np.cross(row_dir, col_dir), np.array([-5.0, -4.0, -10.0])
    r, c = np.indices((rows, cols))
    rng = np.random.default_rng(seed)
    names, numbers = rng.permutation(n), rng.permutation(n) + 1
    tags = {"Modality": "CT", "SeriesInstanceUID": uid, **tags}
    for s in range(n):
        if s in skip:
            continue
        ipp = origin + s * step * normal
        lps = ipp + c[..., None] * spacing[1] * row_dir + r[..., None] * spacing[0] * col_dir
        write_dicom_slice(
            folder / f"{prefix}{names[s]:04d}",
            raw_value(lps),
            ipp,
            ImageOrientationPatient=list(iop),
            PixelSpacing=list(spacing),
            RescaleSlope=slope,
            RescaleIntercept=intercept,
            InstanceNumber=int(numbers[s]),
            **tags,
        )
    return folder


def world_lps(affine: np.ndarray, shape) -> np.ndarray:
    ras = np.einsum("ij,...j->...i", affine[:3, :3], np.indices(shape).transpose(1, 2, 3, 0))
    return (ras + affine[:3, 3]) * np.array([-1, -1, 1])


@pytest.mark.parametrize(
    "iop",
    [
        AXIAL,
        (-1, 0, 0, 0, 1, 0),  # normal points inferior: slices sorted head -> feet
        (0, 1, 0, -1, 0, 0),  # in-plane rotation: rows and columns swap roles
        (1, 0, 0, 0, 0, -1),  # coronal
        (0, 1, 0, 0, 0, -1),  # sagittal
    ],
)
def test_dicom_series_orientation_sorting_and_rescale(tmp_path, iop):
    folder = write_series(tmp_path / "dcm", iop=iop, slope=2.0, intercept=-1000.0)
    data, affine, info = load_ct(folder)
    assert nib.aff2axcodes(affine) == ("R", "A", "S")
    assert sorted(data.shape) == sorted((8, 6, 5))
    # Every voxel's value must be the one written at that voxel's patient position.
    np.testing.assert_allclose(data, raw_value(world_lps(affine, data.shape)) * 2 - 1000)
    assert info["ct_format"] == "dicom"


def test_dicom_axial_spacing_and_orientation(tmp_path):
    data, affine, info = load_ct(write_series(tmp_path / "dcm"))
    assert data.shape == (8, 6, 5)  # columns along x, rows along y
    np.testing.assert_allclose(np.linalg.norm(affine[:3, :3], axis=0), (1.0, 2.0, 3.0))
    assert info["ct_orientation"] == "LPS"


def test_dicom_with_las_nifti_mask(tmp_path):
    """A DICOM CT and a NIfTI mask stored LAS, defined by patient position, line up."""
    folder = write_series(tmp_path / "dcm", rows=6, cols=8, n=5)
    # Mask grid: the DICOM grid stored L(i) A(j) S(k), built from the world rule directly.
    affine = np.diag([-1.0, 2.0, 3.0, 1.0])
    affine[:3, 3] = [5.0, -(-4.0 + 5 * 2.0), -10.0]  # RAS of voxel 0: x=+5 (LPS -5), y=-6
    ras = np.einsum("ij,...j->...i", affine[:3, :3], np.indices((8, 6, 5)).transpose(1, 2, 3, 0))
    ras += affine[:3, 3]
    mask = np.where(ras[..., 0] > 0, LIVER, KIDNEY_LEFT).astype(np.uint8)  # right half = liver
    write_nifti(tmp_path / "seg.nii.gz", mask, affine)
    vol = load_case(Case("d", folder, tmp_path / "seg.nii.gz"))
    lps = world_lps(vol.affine, vol.ct.shape)
    np.testing.assert_array_equal(vol.seg == LIVER, lps[..., 0] < 0)  # LPS x < 0 is right
    np.testing.assert_allclose(vol.ct, raw_value(lps) - 1024)


def test_dicom_skips_non_dicom_files_with_warning(tmp_path):
    folder = write_series(tmp_path / "dcm")
    (folder / "README").write_text("not dicom")
    warnings: list[str] = []
    data, _, _ = load_ct(folder, warn=warnings.append)
    assert data.shape == (8, 6, 5)
    assert len(warnings) == 1 and "README" in warnings[0]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: write_series(d, skip=(2,)), "gap"),
        (lambda d: write_series(d, Modality="MR"), "modality MR"),
        (lambda d: write_series(d, n=1), "only one"),
        (lambda d: d.mkdir() or (d / "DICOMDIR.txt").write_text("x"), "no DICOM"),
    ],
)
def test_bad_dicom_folder(tmp_path, make, message):
    folder = tmp_path / "dcm"
    make(folder)
    with pytest.raises(InputError, match=message) as err:
        load_ct(folder, warn=lambda _: None)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)


def test_dicom_two_series_and_duplicates(tmp_path):
    two = write_series(tmp_path / "two", n=3)
    write_series(two, n=3, uid="9.9.9", prefix="OTHER")
    with pytest.raises(InputError, match="2 series"):
        load_ct(two)
    dup = write_series(tmp_path / "dup", n=3)
    (dup / "copy").write_bytes(sorted(dup.iterdir())[0].read_bytes())
    with pytest.raises(InputError, match="same position"):
        load_ct(dup)


# --- masks -------------------------------------------------------------------------------------


def write_mask(tmp_path: Path, seg: np.ndarray, name: str = "m.nii.gz") -> Path:
    return write_nifti(tmp_path / name, seg, RAS_AFFINE)


def test_grouping_and_unknown_labels(tmp_path):
    _, seg = truth()
    seg[0, 0, 0], seg[1, 0, 0], seg[2, 0, 0] = 30, 110, 200  # vertebra L2, rib right 7, unknown
    ct_path = write_nifti(tmp_path / "ct.nii.gz", truth()[0], RAS_AFFINE)
    case = Case("g", ct_path, write_mask(tmp_path, seg))
    warnings: list[str] = []
    vol = load_case(case, warn=warnings.append)
    assert (vol.seg[0, 0, 0], vol.seg[1, 0, 0], vol.seg[2, 0, 0]) == (26, 93, 0)
    assert vol.source["skipped_label_ids"] == [200] and "200" in warnings[0]
    assert vol.source["grouping"] == "mirp" and vol.table.names[26] == "vertebrae"
    raw = load_case(case, group=False, warn=warnings.append)
    assert (raw.seg[0, 0, 0], raw.seg[1, 0, 0]) == (30, 110) and raw.source["grouping"] is None


def test_other_label_table(tmp_path):
    ct, seg = truth()
    ct_path = write_nifti(tmp_path / "ct.nii.gz", ct, RAS_AFFINE)
    vol = load_case(Case("b", ct_path, write_mask(tmp_path, seg), labels="btcv"))
    assert vol.table.name == "btcv" and vol.source["labels"] == "btcv"
    assert vol.table.names[LIVER] == "esophagus"  # BTCV ids, not TotalSegmentator's
    with pytest.raises(InputError, match="not a built-in label table"):
        load_case(Case("b", ct_path, tmp_path / "m.nii.gz", labels="nope"))


@pytest.mark.parametrize(
    ("value", "message"),
    [(1.5, "non-integer"), (0.0, "empty"), (-1.0, "negative"), (300.0, "empty")],
)
def test_bad_mask_values(tmp_path, value, message):
    from radspatial.core.labels import load_table

    seg = np.zeros(SHAPE, dtype=np.float32)
    seg[3, 3, 3] = value
    path = write_mask(tmp_path, seg)
    with pytest.raises(InputError, match=message) as err:
        load_seg(path, load_table(None), warn=lambda _: None)
    assert str(err.value).startswith(str(path))


def test_totalsegmentator_folder(tmp_path):
    ct, seg = truth()
    folder = tmp_path / "segs"
    folder.mkdir()
    for name, label in [("liver", LIVER), ("kidney_left", KIDNEY_LEFT)]:
        write_nifti(folder / f"{name}.nii.gz", *orient((seg == label).astype(np.uint8), "LPS"))
    spine = np.zeros(SHAPE, np.uint8)
    spine[5, 0, :] = 1
    write_nifti(folder / "vertebrae_L2.nii.gz", *orient(spine, "LPS"))
    write_nifti(folder / "not_an_organ.nii.gz", *orient(spine, "LPS"))
    warnings: list[str] = []
    case = Case("ts", write_nifti(tmp_path / "ct.nii.gz", ct, RAS_AFFINE), folder)
    vol = load_case(case, warn=warnings.append)
    expected = seg.copy()
    expected[5, 0, :] = 26
    np.testing.assert_array_equal(vol.seg, expected)
    assert vol.source["seg_format"] == "totalseg_dir" and "not_an_organ" in warnings[0]
    with pytest.raises(InputError, match="totalsegmentator table"):
        load_case(Case("ts", case.ct, folder, labels="btcv"))
    write_nifti(folder / "spleen.nii.gz", np.ones((3, 3, 3), np.uint8), RAS_AFFINE)
    with pytest.raises(InputError, match=r"mask shape .* spleen.nii.gz shape \(3, 3, 3\)"):
        load_case(case, warn=warnings.append)


# --- bad input ---------------------------------------------------------------------------------


def test_grid_mismatch(tmp_path):
    ct, seg = truth()
    ct_path = write_nifti(tmp_path / "ct.nii.gz", ct, RAS_AFFINE)
    cases = {
        "shape": (seg[:, :-1], RAS_AFFINE),
        "spacing": (seg, RAS_AFFINE @ np.diag([1.1, 1, 1, 1])),
        "origin": (seg, RAS_AFFINE + np.pad(np.ones((3, 1)), ((0, 1), (3, 0)))),
    }
    for what, (data, affine) in cases.items():
        seg_path = write_nifti(tmp_path / f"{what}.nii.gz", data, affine)
        with pytest.raises(InputError, match=what) as err:
            load_case(Case("m", ct_path, seg_path))
        assert str(err.value).startswith(str(seg_path)) and str(ct_path) in str(err.value)


def test_corrupt_and_missing_files(tmp_path):
    rng = np.random.default_rng(0)
    noisy = rng.integers(-1000, 1000, (40, 40, 40)).astype(np.int16)
    good = write_nifti(tmp_path / "good.nii.gz", noisy, RAS_AFFINE).read_bytes()
    truncated = tmp_path / "truncated.nii.gz"
    truncated.write_bytes(good[: len(good) * 2 // 3])
    flipped = bytearray(good)
    flipped[len(good) // 2 : len(good) // 2 + 64] = bytes(64)
    corrupt = tmp_path / "corrupt.nii.gz"
    corrupt.write_bytes(bytes(flipped))
    garbage = tmp_path / "garbage.nii.gz"
    garbage.write_bytes(gzip.compress(b"not an image at all"))
    plain = write_nifti(tmp_path / "plain.nii", noisy, RAS_AFFINE).read_bytes()
    short = tmp_path / "short.nii"
    short.write_bytes(plain[: len(plain) // 2])  # header intact, data cut
    flat = write_nifti(tmp_path / "flat.nii.gz", np.zeros((10, 10), np.int16), np.eye(4))
    frames = write_nifti(tmp_path / "4d.nii.gz", np.zeros((4, 4, 4, 2), np.int16), np.eye(4))
    for path in [tmp_path / "missing.nii.gz", truncated, corrupt, garbage, short, flat, frames]:
        with pytest.raises(InputError) as err:
            load_ct(path)
        msg = str(err.value)
        assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    with pytest.raises(InputError, match="no such file"):
        load_case(Case("x", tmp_path / "good.nii.gz", tmp_path / "nope.nii.gz"))


# --- cases CSV and hashes ----------------------------------------------------------------------


def test_read_cases_csv(tmp_path):
    (tmp_path / "sub").mkdir()
    rows = [
        {
            "ct": "sub/a.nii.gz",
            "seg": "sub/a_seg.nii.gz",
            "labels": "",
            "case_id": "",
            "variant": "",
        },
        {
            "ct": "/abs/dcm_folder",
            "seg": "s.nii",
            "labels": "my.json",
            "case_id": "",
            "variant": "",
        },
        {"ct": "c.nii", "seg": "c_seg.nii", "labels": "btcv", "case_id": "X", "variant": "situs"},
    ]
    path = tmp_path / "sub" / "cases.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    a, b, c = read_cases_csv(path)
    assert a == Case("a", tmp_path / "sub/sub/a.nii.gz", tmp_path / "sub/sub/a_seg.nii.gz")
    assert (b.case_id, b.ct, b.labels) == (
        "dcm_folder",
        Path("/abs/dcm_folder"),
        str(tmp_path / "sub/my.json"),
    )
    assert (c.case_id, c.labels, c.variant) == ("X", "btcv", "situs")

    path.write_text("ct,seg\na.nii.gz,s1.nii.gz\nother/a.nii.gz,s2.nii.gz\n")
    with pytest.raises(InputError, match="duplicate case_id 'a'"):
        read_cases_csv(path)
    path.write_text("image,seg\na.nii.gz,s.nii.gz\n")
    with pytest.raises(InputError, match="missing column"):
        read_cases_csv(path)


def test_sha256_path(tmp_path):
    f = tmp_path / "d" / "a.bin"
    f.parent.mkdir()
    f.write_bytes(b"abc")
    assert sha256_path(f) == hashlib.sha256(b"abc").hexdigest()
    before = sha256_path(f.parent)
    assert sha256_path(f.parent) == before
    f.rename(f.with_name("b.bin"))
    assert sha256_path(f.parent) != before


def test_a_non_volume_nibabel_file_is_refused_by_name(tmp_path):
    """nibabel opens a GIFTI surface too; it has no voxel grid, so it is refused, not a crash."""
    from nibabel.gifti import GiftiDataArray, GiftiImage

    path = tmp_path / "ct.gii"
    nib.save(GiftiImage(darrays=[GiftiDataArray(np.zeros(3, np.float32))]), path)
    with pytest.raises(InputError, match=r"ct\.gii: not a volume \(nibabel reads a GiftiImage\)"):
        load_ct(path)
