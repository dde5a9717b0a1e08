"""Hostile DICOM SEG masks for ``generate`` (issue 36, classes 2, 3 and 8): dcmqi's liver SEG
edited one field at a time, on its own 3-slice CT. One row per case: exit 2 and the words of the
one-line message (tests/hostile.py); no row may print a raw ESC byte or take long (a 10^7 frame
or 1,001 segment file is refused from its header)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from hostile import Base, Case, run_case

from radspatial.imaging.dicom_seg import check_references
from radspatial.imaging.volumes import InputError

pydicom = pytest.importorskip("pydicom")
pytest.importorskip("highdicom")

D = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dcmqi_ct3"
pytestmark = pytest.mark.skipif(not D.is_dir(), reason="../shared/data not present")
ESC = "\x1b[31m1.2\x1b[0m"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    return Base(D, D)


def edited(change) -> Case:
    """liver.dcm with ``change(ds)`` applied (value checks off: the file is meant to be bad)."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds = pydicom.dcmread(D / "liver.dcm")
        with pydicom.config.disable_value_validation():
            change(ds)
            ds.save_as(tmp / "m.dcm", enforce_file_format=True)
        return ["generate", "--ct", str(D / "ct-3slice"), "--seg", str(tmp / "m.dcm"),
                "--out", str(tmp / "o"), "--setups", "rq1"]  # fmt: skip

    return setup


def _frames(ds) -> None:
    ds.NumberOfFrames = 10_000_000


def _segments(count: int):
    def change(ds) -> None:
        items = []
        for n in range(1, count + 1):
            item = copy.deepcopy(ds.SegmentSequence[0])
            item.SegmentNumber = n
            items.append(item)
        ds.SegmentSequence = items

    return change


def _two_frames(ds) -> None:
    ds.NumberOfFrames = 2


def _fat_frames(ds) -> None:
    """As 10^7 per-frame items behind a NumberOfFrames of 3 would: parsing stops at the budget."""
    ds.PerFrameFunctionalGroupsSequence[0].FrameContentSequence[0].FrameLabel = "x" * (1200 << 10)


def _long_segments(ds) -> None:
    """As 65,535 small segments would (parsing them took 42 s): more header than 1 MiB."""
    ds.SegmentSequence[0].SegmentDescription = "x" * (1200 << 10)


def _same_number(ds) -> None:
    ds.SegmentSequence = [ds.SegmentSequence[0], copy.deepcopy(ds.SegmentSequence[0])]


def _no_refs(frame: str | None):
    def change(ds) -> None:
        del ds.ReferencedSeriesSequence
        if frame is None:
            del ds.FrameOfReferenceUID
        else:
            ds.FrameOfReferenceUID = frame

    return change


def _ref_uid(value):
    def change(ds) -> None:
        ds.ReferencedSeriesSequence[0].SeriesInstanceUID = value

    return change


def _empty_pixels(ds) -> None:
    ds.PixelData = b""


def _short_pixels(ds) -> None:
    ds.PixelData = ds.PixelData[:1000]


def _nan_orientation(ds) -> None:
    plane = ds.SharedFunctionalGroupsSequence[0].PlaneOrientationSequence[0]
    plane.ImageOrientationPatient = ["nan", 0, 0, 0, 1, 0]


def _modality(tmp: Path, base: Base) -> list[str]:
    ds = pydicom.dcmread(D / "ct-3slice" / "01.dcm")
    with pydicom.config.disable_value_validation():
        ds.Modality = "\x1b[2JCT"
        ds.save_as(tmp / "m.dcm")
    return ["generate", "--ct", str(D / "ct-3slice"), "--seg", str(tmp / "m.dcm"),
            "--out", str(tmp / "o")]  # fmt: skip


CASES = [
    Case("seg 10^7 frames", edited(_frames), 2, ("m.dcm", "10000000 frames, over")),
    Case("seg frames fewer than its items", edited(_two_frames), 2,
         ("m.dcm", "3 per-frame items for 2 frames")),
    Case("seg per-frame groups past their budget", edited(_fat_frames), 2,
         ("m.dcm", "per-frame groups are larger than its 3 frame(s) need")),
    Case("seg 1001 segments", edited(_segments(1001)), 2, ("m.dcm", "1001 segments, over")),
    Case("seg segment list over 1 MiB", edited(_long_segments), 2, ("m.dcm", "over 1 MiB")),
    Case("seg two segments one number", edited(_same_number), 2,
         ("m.dcm", "two segments have SegmentNumber 1")),
    Case("seg no series, other frame of reference", edited(_no_refs("1.2.3")), 2,
         ("m.dcm", "frame of reference 1.2.3 is not the CT's")),
    Case("seg no series, no frame of reference", edited(_no_refs(None)), 2,
         ("m.dcm", "no FrameOfReferenceUID")),
    Case("seg referenced UID multi-valued", edited(_ref_uid(["1.2", "1.3"])), 2,
         ("m.dcm", "has 2 values")),
    Case("seg referenced UID escapes", edited(_ref_uid(ESC)), 2,
         ("m.dcm", "not a DICOM UID", "\\x1b")),
    Case("seg pixel data empty", edited(_empty_pixels), 2, ("m.dcm", "pixel data")),
    Case("seg pixel data short", edited(_short_pixels), 2, ("m.dcm", "need 98304")),
    Case("seg NaN orientation", edited(_nan_orientation), 2,
         ("m.dcm", "ImageOrientationPatient", "finite")),
    Case("CT slice with an escape in Modality", _modality, 2,
         ("m.dcm", "not a DICOM Segmentation", "\\x1b")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_seg(case, base, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = run_case(case, tmp_path, base, capsys, monkeypatch)
    assert "\x1b" not in text


def test_seg_without_series_but_the_ct_frame_of_reference_is_accepted(tmp_path):
    ds = pydicom.dcmread(D / "liver.dcm")
    del ds.ReferencedSeriesSequence
    ds.save_as(tmp_path / "m.dcm")
    check_references(tmp_path / "m.dcm", D / "ct-3slice")  # same frame of reference: fine
    ds.FrameOfReferenceUID = "1.2.3.4"
    ds.save_as(tmp_path / "m.dcm")
    with pytest.raises(InputError, match="frame of reference"):
        check_references(tmp_path / "m.dcm", D / "ct-3slice")


def test_a_refusal_is_one_line_in_a_real_process_pydicom_warnings_included(tmp_path):
    """pytest captures warnings, so the table cannot see pydicom's own two-line UserWarning on a
    UID that breaks its VR; a real ``radspatial`` process must print only our line."""
    import subprocess
    import sys

    argv = edited(_ref_uid(ESC))(tmp_path, Base(D, D))
    cmd = [sys.executable, "-c", "import sys; from radspatial.cli import main; sys.exit(main())"]
    done = subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=600)
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "not a DICOM UID" in lines[0] and "\x1b" not in done.stderr
