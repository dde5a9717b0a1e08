"""DICOM RTSTRUCT masks (issue 48): the real chest slab against its NIfTI masks (Dice per
structure, ``generate`` centres within 1 px), a synthetic asymmetric structure set where a
left/right flip or a nearest-z placement would show, hostile structure sets (one line each,
tests/hostile.py), and uneven slice spacing (axial accepted, coronal refused)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hostile import Base, Case, run_case

from radspatial.cli import main
from radspatial.core.labels import load_table, normalize_name, with_v1_heart
from radspatial.imaging.rtstruct import read_on_ct
from radspatial.imaging.rtstruct_fill import fill_even_odd, outline_pixels
from radspatial.imaging.volumes import Case as CtCase
from radspatial.imaging.volumes import load_case

pydicom = pytest.importorskip("pydicom")
from pydicom.dataset import Dataset, FileMetaDataset  # noqa: E402
from pydicom.uid import ExplicitVRLittleEndian, ImplicitVRLittleEndian, generate_uid  # noqa: E402

GSTT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gstt_thorax"
RT = GSTT / "rtstruct" / "rt-struct-test-data-81-100.dcm"
FRAME = "1.2.826.0.1.3680043.8.498.1"
RT_CLASS = "1.2.840.10008.5.1.4.1.1.481.3"
ROWS, COLS = 40, 48  # 1 mm pixels; column i at LPS x = i - 24 (x > 0: the patient's left)


# ---------------------------------------------------------------- synthetic CT and RTSTRUCT
def write_ct(folder: Path, z: tuple[float, ...] = (0, 2, 4, 6, 8, 10)) -> list[str]:
    """A small axial CT series (air around a 40 HU box); its SOPInstanceUIDs by slice."""
    folder.mkdir(parents=True)
    series, uids = generate_uid(), []
    for k, zk in enumerate(z):
        ds = Dataset()
        ds.file_meta = FileMetaDataset()
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.SOPClassUID, ds.SOPInstanceUID = "1.2.840.10008.5.1.4.1.1.2", generate_uid()
        ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.Modality, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = "CT", series, FRAME
        ds.InstanceNumber, ds.Rows, ds.Columns = k + 1, ROWS, COLS
        ds.PixelSpacing, ds.ImageOrientationPatient = [1.0, 1.0], [1, 0, 0, 0, 1, 0]
        ds.ImagePositionPatient = [-24.0, -20.0, float(zk)]
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.RescaleSlope, ds.RescaleIntercept = 1, 0
        pixels = np.full((ROWS, COLS), -1000, dtype=np.int16)
        pixels[3:37, 2:46] = 40
        ds.PixelData = pixels.tobytes()
        ds.save_as(folder / f"ct{k:02d}.dcm", enforce_file_format=True)
        uids.append(ds.SOPInstanceUID)
    return uids


def square(x0: float, y0: float, x1: float, y1: float, z: float) -> list[float]:
    """A closed square's corners (LPS mm) as flat ContourData."""
    return [v for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)) for v in (x, y, z)]


def write_rt(path: Path, rois: list[tuple], *, frame: str = FRAME) -> Path:
    """An RTSTRUCT: ``rois`` = (number, name, [(image UID or None, ContourData, type)]);
    sequences of undefined length, so a test may swap a ContourData's bytes afterwards."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
    ds.SOPClassUID, ds.SOPInstanceUID, ds.Modality = RT_CLASS, generate_uid(), "RTSTRUCT"
    ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    ref = Dataset()
    ref.FrameOfReferenceUID = frame
    ds.ReferencedFrameOfReferenceSequence = [ref]
    declared, contoured = [], []
    for number, name, contours in rois:
        roi = Dataset()
        roi.ROINumber, roi.ROIName, roi.ReferencedFrameOfReferenceUID = number, name, frame
        declared.append(roi)
        items = []
        for uid, data, kind in contours:
            c = Dataset()
            if uid is not None:
                image = Dataset()
                image.ReferencedSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
                image.ReferencedSOPInstanceUID = uid
                c.ContourImageSequence = [image]
            c.ContourGeometricType, c.NumberOfContourPoints = kind, len(data) // 3
            c.ContourData = data
            c.is_undefined_length_sequence_item = True
            items.append(c)
        rc = Dataset()
        rc.ReferencedROINumber, rc.ContourSequence = number, items
        rc["ContourSequence"].is_undefined_length = True
        rc.is_undefined_length_sequence_item = True
        contoured.append(rc)
    ds.StructureSetROISequence, ds.ROIContourSequence = declared, contoured
    ds["ROIContourSequence"].is_undefined_length = True
    with pydicom.config.disable_value_validation():
        ds.save_as(path, enforce_file_format=True)
    return path


def asymmetric(uids: list[str]) -> list[tuple]:
    """kidney_left on the patient's left of slice 1 (its z says 7.9 mm: nearest slice 4),
    the liver on the right of slice 1, the spleen with a hole on slice 2, an unknown ROI."""
    ring = square(4, 2, 18, 14, 4.0), square(8, 6, 14, 10, 4.0)
    return [
        (3, "Kidney_Left", [(uids[1], square(6, -14, 16, -6, 7.9), "CLOSED_PLANAR")]),
        (5, "liver", [(uids[1], square(-20, -14, -6, 10, 2.0), "CLOSED_PLANAR")]),
        (7, "SPLEEN", [(uids[2], ring[0], "CLOSED_PLANAR"), (uids[2], ring[1], "CLOSED_PLANAR")]),
        (9, "PTV_60", [(uids[2], square(-4, -4, 0, 0, 4.0), "CLOSED_PLANAR")]),
        (11, "empty", []),
    ]


@pytest.fixture(scope="module")
def ct(tmp_path_factory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("rt") / "ct"
    return folder, write_ct(folder)


def _lps_voxels(vol, label_id: int) -> np.ndarray:
    """LPS mm of the voxels holding ``label_id`` (canonical RAS volume)."""
    idx = np.argwhere(vol.seg == label_id)
    ras = (vol.affine @ np.c_[idx, np.ones(len(idx))].T).T[:, :3]
    return ras * np.array([-1, -1, 1])


def test_asymmetric_placement_side_and_hole(ct, tmp_path):
    folder, uids = ct
    rt = write_rt(tmp_path / "rs.dcm", asymmetric(uids))
    warned: list[str] = []
    vol = load_case(CtCase("s", folder, rt, "totalsegmentator"), warn=warned.append)
    ids = {n: i for i, n in vol.table.names.items()}
    kidney = _lps_voxels(vol, ids["kidney_left"])
    assert set(np.round(kidney[:, 2], 3)) == {2.0}  # the referenced slice, not z 7.9's slice 8
    assert kidney[:, 0].min() == 6 and kidney[:, 0].max() == 16  # patient's left: LPS x > 0
    assert kidney[:, 1].min() == -14 and kidney[:, 1].max() == -6
    assert len(kidney) == 11 * 9  # corners on pixel centres: the outline is inside
    liver = _lps_voxels(vol, ids["liver"])
    assert liver[:, 0].max() == -6 and set(liver[:, 2]) == {2.0}
    spleen = {tuple(p) for p in np.round(_lps_voxels(vol, ids["spleen"])).astype(int)}
    assert (11, 8, 4) not in spleen and (5, 3, 4) in spleen  # the hole, and the ring
    assert (8, 6, 4) in spleen  # the hole's outline belongs to the structure
    assert [w for w in warned if "PTV_60" in w and "skipped" in w and "empty" not in w]


def test_fill_is_even_odd_as_matplotlib():
    from matplotlib.path import Path as MplPath

    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:30, 0:32]
    for _ in range(10):  # random, mostly self-intersecting polygons
        poly = rng.uniform(-3, 35, (int(rng.integers(3, 12)), 2))
        ref = MplPath(poly).contains_points(np.c_[xx.ravel(), yy.ravel()]).reshape(30, 32)
        assert (fill_even_odd([poly], 30, 32) == ref).all()
    bowtie = np.array([[2.0, 2], [20, 20], [20, 2], [2, 20]])
    assert outline_pixels([bowtie], 30, 32)[11, 11]  # the crossing point is on the outline


# ---------------------------------------------------------------- the chest slab
needs_gstt = pytest.mark.skipif(not RT.is_file(), reason="../shared/data not present")


@needs_gstt
def test_chest_slab_dice_against_nifti():
    """Each structure against its NIfTI mask, matched by slice index with rows flipped
    (gstt_thorax's README); measured on landed code: 0.996-1.000 for all 34."""
    nib = pytest.importorskip("nibabel")
    table = with_v1_heart(load_table("totalsegmentator", group=False))
    ids = {name: i for i, name in table.names.items()}
    labels, _ = read_on_ct(RT, GSTT / "ct_dicom", table, lambda _: None)
    dice = {}
    for p in sorted((GSTT / "nii_seg").glob("*.nii.gz")):
        name = normalize_name(p.name[: -len(".nii.gz")])
        truth = np.asanyarray(nib.load(p).dataobj)[:, ::-1] > 0
        mine = labels == ids[name]
        dice[name] = 2 * (truth & mine).sum() / (truth.sum() + mine.sum())
    assert len(dice) == 34 and min(dice.values()) > 0.99, dice
    mine = labels == ids["heart_ventricle_left"]  # without the rows' flip: caught
    truth = np.asanyarray(nib.load(GSTT / "nii_seg" / "heart_ventricle_left.nii.gz").dataobj) > 0
    assert 2 * (mine & truth).sum() / (mine.sum() + truth.sum()) < 0.9


def _centres(out: Path) -> dict[tuple[str, str], tuple[float, float]]:
    name = "center_of_anatomical_stuctures_in_standard_radiological_orientation.json"
    return {
        (e["filename"], s["class_name"]): (s["center_x"], s["center_y"])
        for e in json.loads((out / name).read_text())
        for s in e["label_info"]
    }


@needs_gstt
def test_chest_slab_generate_centres_match_nifti(tmp_path, capsys, caplog):
    """`generate` on the RTSTRUCT (the README's command) and on the NIfTI masks put on the
    series' grid by slice index: the same structures on every slice, centres within 1 px."""
    nib = pytest.importorskip("nibabel")
    from radspatial.imaging.dicom import read_series_geometry

    common = ["--labels", "totalsegmentator", "--setups", "rq1", "--size", "256"]
    assert main(["generate", "--ct", str(GSTT / "ct_dicom"), "--seg", str(RT),
                 "--out", str(tmp_path / "rt"), *common]) == 0  # fmt: skip
    assert "uneven slice spacing" in caplog.text and "skipped" not in caplog.text
    table = with_v1_heart(load_table("totalsegmentator", group=False))
    extra = {str(i): table.names[i] for i in range(118, 123)}
    (tmp_path / "L.json").write_text(json.dumps({"extends": "totalsegmentator", **extra}))
    ids = {name: i for i, name in table.names.items()}
    geo = read_series_geometry(GSTT / "ct_dicom", uneven=True)
    merged = np.zeros((geo.cols, geo.rows, len(geo.uids)), dtype=np.uint16)
    files = sorted(
        (GSTT / "nii_seg").glob("*.nii.gz"), key=lambda p: ids[normalize_name(p.name[:-7])]
    )
    for p in files:  # ascending ids: the higher wins, as in the RTSTRUCT
        merged[np.asanyarray(nib.load(p).dataobj)[:, ::-1] > 0] = ids[normalize_name(p.name[:-7])]
    nib.save(nib.Nifti1Image(merged, geo.ras), tmp_path / "seg.nii.gz")
    assert main(["generate", "--ct", str(GSTT / "ct_dicom"), "--seg", str(tmp_path / "seg.nii.gz"),
                 "--out", str(tmp_path / "nii"), *common[2:],
                 "--labels", str(tmp_path / "L.json")]) == 0  # fmt: skip
    rt, nii = _centres(tmp_path / "rt"), _centres(tmp_path / "nii")
    assert rt.keys() == nii.keys() and len(rt) > 200
    worst = max(np.hypot(rt[k][0] - nii[k][0], rt[k][1] - nii[k][1]) for k in rt)
    assert worst < 1.0, worst
    data = json.loads((tmp_path / "rt" / "dataset.json").read_text())
    assert data["cases"][0]["seg_format"] == "rtstruct"
    assert {c for _, c in rt} >= {"heart_ventricle_left", "heart_myocardium"}  # v1 names kept
    rows = [json.loads(x) for x in (tmp_path / "rt" / "manifest.jsonl").read_text().splitlines()]
    assert {round(r["source"]["z_mm"], 3) for r in rows} >= {-821.001, -819.401}  # true z


# ---------------------------------------------------------------- hostile structure sets
def _rt_case(make, *words: str, code: int = 2) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        folder, uids = base.ds, json.loads((base.ds.parent / "uids.json").read_text())
        seg = make(tmp, uids)
        return ["generate", "--ct", str(folder), "--seg", str(seg), "--labels", "totalsegmentator",
                "--out", str(tmp / "o"), "--setups", "rq1", "--size", "64"]  # fmt: skip

    return Case(make.__name__, setup, code, ("rs.dcm", *words) if code == 2 else words)


def _one(uid, data, kind="CLOSED_PLANAR", name="liver", extra=()):
    return [(5, name, [(uid, data, kind)]), *extra]


def no_reference(tmp, uids):
    return write_rt(tmp / "rs.dcm", _one(None, square(-20, -14, -6, 10, 2.0)))


def unknown_reference(tmp, uids):
    return write_rt(tmp / "rs.dcm", _one("1.2.3.4", square(-20, -14, -6, 10, 2.0)))


def outside_image(tmp, uids):
    return write_rt(tmp / "rs.dcm", _one(uids[1], square(500, 500, 520, 520, 2.0)))


def million_points(tmp, uids):
    """10^6 real points in one contour (its bytes swapped in: pydicom would take ~10 s)."""
    path = write_rt(tmp / "rs.dcm", _one(uids[1], [9.25, 9.25, 9.25]))
    value = ("1.5\\" * (3 * 10**6 - 1) + "1.5 ").encode()
    old = b"\x06\x30\x50\x00" + struct.pack("<I", 14) + b"9.25\\9.25\\9.25"
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, b"\x06\x30\x50\x00" + struct.pack("<I", len(value)) + value))
    return path


def duplicate_roi_numbers(tmp, uids):
    twice = (5, "spleen", [(uids[1], square(4, 2, 18, 14, 2.0), "CLOSED_PLANAR")])
    return write_rt(tmp / "rs.dcm", _one(uids[1], square(-20, -14, -6, 10, 2.0), extra=[twice]))


def no_contours(tmp, uids):
    return write_rt(tmp / "rs.dcm", [(5, "liver", []), (6, "spleen", [])])


def other_frame(tmp, uids):
    contours = _one(uids[1], square(-20, -14, -6, 10, 2.0))
    return write_rt(tmp / "rs.dcm", contours, frame="1.2.3.99")


def nothing_matches(tmp, uids):
    return write_rt(tmp / "rs.dcm", _one(uids[1], square(-20, -14, -6, 10, 2.0), name="PTV"))


def ct_slice_as_mask(tmp, uids):
    folder = tmp.parent / "ct-as-seg"
    if not folder.exists():
        write_ct(folder)
    return next(folder.iterdir()).rename(tmp / "rs.dcm")


def self_intersecting_and_open(tmp, uids):
    """A bow-tie liver (even-odd defines it) and an open line: accepted, one warning."""
    bowtie = [-20, -14, 2.0, -6, 10, 2.0, -6, -14, 2.0, -20, 10, 2.0]
    kidney = (3, "kidney_left", [(uids[1], square(6, -14, 16, -6, 2.0), "CLOSED_PLANAR"),
                                 (uids[1], [0, 0, 2.0, 5, 5, 2.0], "OPEN_PLANAR")])  # fmt: skip
    return write_rt(tmp / "rs.dcm", _one(uids[1], bowtie, extra=[kidney]))


HOSTILE = [
    _rt_case(no_reference, "names no image"),
    _rt_case(unknown_reference, "not a slice of the CT"),
    _rt_case(outside_image, "outside the CT image"),
    _rt_case(million_points, "over 100000 points"),
    _rt_case(duplicate_roi_numbers, "two ROIs have ROINumber 5"),
    _rt_case(no_contours, "has no contours"),
    _rt_case(other_frame, "frame of reference 1.2.3.99"),
    _rt_case(nothing_matches, "none of its 1 contoured ROIs", "PTV"),
    _rt_case(ct_slice_as_mask, "CT Image Storage", "nor an RTSTRUCT"),
    _rt_case(self_intersecting_and_open, code=0),
]


@pytest.fixture(scope="module")
def base(ct) -> Base:
    folder, uids = ct
    (folder.parent / "uids.json").write_text(json.dumps(uids))
    return Base(folder, folder)


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_hostile_rtstruct(case, tmp_path, base, capsys, monkeypatch):
    run_case(case, tmp_path, base, capsys, monkeypatch)


# ---------------------------------------------------------------- uneven slice spacing
def test_uneven_spacing_axial_only(tmp_path, capsys, caplog):
    folder = tmp_path / "ct"
    uids = write_ct(folder, z=(0, 4, 6, 8, 10, 12))  # one 4 mm step, 2 mm elsewhere
    rois = asymmetric(uids)
    for _, _, contours in rois[:2]:  # kidney and liver on slices 1, 3 and 4
        contours += [
            (uids[k], c[1][:2] + [0.0] + c[1][3:], c[2]) for k in (3, 4) for c in contours[:1]
        ]
    rt = write_rt(tmp_path / "rs.dcm", rois)
    args = ["generate", "--ct", str(folder), "--seg", str(rt), "--labels", "totalsegmentator",
            "--setups", "rq1", "--size", "256"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    warned = [r.getMessage() for r in caplog.records]
    assert [w for w in warned if "uneven slice spacing: 4.00 mm" in w and "axial slices only" in w]
    assert [w for w in warned if "1 contoured ROI(s) not in table" in w and "PTV_60" in w]
    rows = (tmp_path / "a" / "manifest.jsonl").read_text().splitlines()
    z_mm = {json.loads(r)["source"]["z_mm"] for r in rows}
    assert z_mm and z_mm <= {4.0, 8.0, 10.0}  # true positions (the mean step puts 2.4, 7.2, 9.6)
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "c"), "--planes", "axial,coronal"]) == 2
    err = capsys.readouterr().err
    assert "gap in the series" in err and "only generate --planes axial" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_name_map_json_and_own_names(ct, tmp_path):
    """--labels as a JSON of ROI name -> structure name (any case), and no --labels: the
    contoured ROIs' own names (the ROI without contours is no structure)."""
    folder, uids = ct
    rt = write_rt(tmp_path / "rs.dcm", asymmetric(uids))
    (tmp_path / "map.json").write_text(
        json.dumps({"KIDNEY_LEFT": "kidney_left", "ptv_60": "Target"})
    )
    warned: list[str] = []
    vol = load_case(CtCase("m", folder, rt, str(tmp_path / "map.json")), warn=warned.append)
    assert sorted(vol.table.names.values()) == ["kidney_left", "target"]
    assert [w for w in warned if "2 contoured ROI(s) not in table" in w and "liver" in w]
    ids = {n: i for i, n in vol.table.names.items()}
    assert (_lps_voxels(vol, ids["target"])[:, 2] == 4.0).all()
    own = load_case(CtCase("o", folder, rt))
    assert sorted(own.table.names.values()) == ["kidney_left", "liver", "ptv_60", "spleen"]
    assert own.source["seg_format"] == "rtstruct" and "label_names" in own.source
