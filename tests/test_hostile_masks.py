"""Hostile NRRD masks and volumes for ``generate`` (issue 36, classes 1-3 and 9): one row per
case, the command as typed, exit 2 and the words of the one-line message (tests/hostile.py).

The synthetic CT (tests/synth.py) is the volume; each row writes a mask beside it. The NRRD rows
are written by hand (header text + bytes), so the hostile field is exactly what the row says.
No row may print a raw ESC byte. The legit encodings must give the NIfTI answer voxel for voxel.
"""

from __future__ import annotations

import bz2
import gzip
import os
import zlib
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from hostile import Base, Case, run_case
from synth import canonical_volumes, write_case

from radspatial.imaging.volumes import Case as VCase
from radspatial.imaging.volumes import InputError, load_case

pytest.importorskip("nrrd")

_, LABELS, RAS = canonical_volumes()
LPS_ROWS = "(-4,0,0) (0,-5,0) (0,0,3)"  # RAS diag(4, 5, 3) written in LPS
LPS_ORIGIN = "(90,100,-30)"
RAW = LABELS.tobytes(order="F")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    tmp = tmp_path_factory.mktemp("hostile_masks")
    write_case(tmp / "in")
    return Base(tmp / "in", tmp / "in")


def header(**fields: str) -> bytes:
    """A NRRD header for the synthetic mask; ``fields`` override or add (``_`` -> space)."""
    base = {
        "type": "uint8",
        "dimension": "3",
        "space": "left-posterior-superior",
        "sizes": "48 40 20",
        "space directions": LPS_ROWS,
        "kinds": "domain domain domain",
        "encoding": "raw",
        "space origin": LPS_ORIGIN,
    }
    base.update(
        {k if k.startswith("Segment") else k.replace("_", " "): v for k, v in fields.items()}
    )
    lines = "".join(f"{k}: {v}\n" for k, v in base.items() if v is not None)
    return f"NRRD0004\n{lines}".encode()


def _generate(tmp: Path, base: Base, seg: Path, *more: str) -> list[str]:
    ct = base.ds / "synth_ct.nii.gz"
    return ["generate", "--ct", str(ct), "--seg", str(seg), "--out", str(tmp / "o"),
            "--setups", "rq1", *more]  # fmt: skip


def attached(data: bytes = RAW, **fields: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        (tmp / "m.nrrd").write_bytes(header(**fields) + b"\n" + data)
        return _generate(tmp, base, tmp / "m.nrrd")

    return setup


def detached(name: str, make=None, **fields: str) -> Case:
    """``m.nhdr`` naming data file ``name``; ``make(tmp)`` creates what the name points at."""

    def setup(tmp: Path, base: Base) -> list[str]:
        (tmp / "d").mkdir()
        (tmp / "d" / "m.nhdr").write_bytes(header(data_file=name, **fields))
        if make is not None:
            make(tmp)
        return _generate(tmp, base, tmp / "d" / "m.nhdr")

    return setup


def _outside(tmp: Path) -> None:
    (tmp / "outside.raw").write_bytes(RAW)


def _link(tmp: Path) -> None:
    (tmp / "outside.raw").write_bytes(RAW)
    os.symlink(tmp / "outside.raw", tmp / "d" / "link.raw")


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "d" / "fifo.raw")


def _lines(tmp: Path) -> None:
    (tmp / "d" / "m.raw").write_bytes(b"one line\n" + RAW)


def _bomb(kind: str, extra: int) -> bytes:
    data = RAW + bytes(extra)
    return gzip.compress(data) if kind == "gzip" else bz2.compress(data)


def _big_header(tmp: Path, base: Base) -> list[str]:
    (tmp / "m.nrrd").write_bytes(header() + b"# " + b"x" * (2 << 20) + b"\n\n" + RAW)
    return _generate(tmp, base, tmp / "m.nrrd")


def _seg_nrrd(tmp: Path, base: Base) -> list[str]:
    fields = {"Segment0_Name": "liver", "Segment0_LabelValue": "5"}
    fields |= {"Segment1_Name": "spleen", "Segment1_LabelValue": "5"}
    (tmp / "m.seg.nrrd").write_bytes(header(**fields) + b"\n" + RAW)
    return _generate(tmp, base, tmp / "m.seg.nrrd")


def _nifti(tmp: Path, seg: np.ndarray, affine: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(seg, affine), tmp / "m.nii.gz")
    return tmp / "m.nii.gz"


def _oblique_ct(tmp: Path, base: Base) -> list[str]:
    ct, seg, affine = canonical_volumes()
    t = np.radians(35.0)
    rot = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    affine = affine.copy()
    affine[:3, :3] = rot @ affine[:3, :3]
    nib.save(nib.Nifti1Image(ct.astype(np.int16), affine), tmp / "ct.nii.gz")
    seg_path = _nifti(tmp, seg, affine)
    return ["generate", "--ct", str(tmp / "ct.nii.gz"), "--seg", str(seg_path),
            "--out", str(tmp / "o"), "--setups", "rq1"]  # fmt: skip


def _constant_mr(tmp: Path, base: Base) -> list[str]:
    ct, seg, affine = canonical_volumes()
    nib.save(nib.Nifti1Image(np.full(ct.shape, 300, np.int16), affine), tmp / "mr.nii.gz")
    return ["generate", "--ct", str(tmp / "mr.nii.gz"), "--seg", str(base.ds / "synth_seg.nii.gz"),
            "--modality", "mr", "--out", str(tmp / "o"), "--setups", "rq1"]  # fmt: skip


def _four_labels(tmp: Path, base: Base) -> list[str]:
    seg = np.zeros_like(LABELS)
    for new, old in enumerate((5, 1, 3, 52), start=1):
        seg[np.equal(LABELS, old)] = new
    path = _nifti(tmp, seg, RAS)
    return _generate(tmp, base, path, "--labels", "totalsegmentator_mr")


ESC = "\x1b[31mRED\x1b[0m"

CASES = [
    Case("nrrd data file absolute", detached("/etc/passwd"), 2, ("m.nhdr", "relative name")),
    Case("nrrd data file ..", detached("../outside.raw", _outside), 2, ("m.nhdr", "leads out")),
    Case("nrrd data file symlink", detached("link.raw", _link), 2, ("m.nhdr", "symlink")),
    Case("nrrd data file FIFO", detached("fifo.raw", _fifo), 2, ("fifo.raw", "not a regular")),
    Case("nrrd data file missing", detached("none.raw"), 2, ("none.raw", "no such file")),
    Case("nrrd data file LIST", detached("LIST"), 2, ("m.nhdr", "several files")),
    Case("nrrd data file pattern", detached("s%03d.raw 1 20 1 2"), 2, ("several files",)),
    Case("nrrd line skip huge", detached("m.raw", _lines, line_skip="1000000000"), 2,
         ("m.nhdr", "line skip", "out of range")),
    Case("nrrd line skip past the end", detached("m.raw", _lines, line_skip="3"), 2,
         ("m.raw", "passes the end")),
    Case("nrrd byte skip negative", attached(byte_skip="-5"), 2, ("m.nrrd", "byte skip")),
    Case("nrrd byte skip huge", attached(byte_skip=str(10**15)), 2, ("byte skip", "range")),
    Case("nrrd byte skip past the data", attached(byte_skip="100"), 2, ("m.nrrd", "declares")),
    Case("nrrd byte skip -1 before the header", attached(RAW[:100], byte_skip="-1"), 2,
         ("m.nrrd", "raw data is")),
    Case("nrrd raw truncated", attached(RAW[:-1]), 2, ("m.nrrd", "declares 38400")),
    Case("nrrd gzip bomb", attached(_bomb("gzip", 1 << 20), encoding="gzip"), 2,
         ("m.nrrd", "inflate to more than the header declares (38400 bytes)")),
    Case("nrrd bzip2 bomb", attached(_bomb("bzip2", 1 << 20), encoding="bzip2"), 2,
         ("m.nrrd", "inflate to more")),
    Case("nrrd gzip truncated", attached(gzip.compress(RAW)[:-20], encoding="gzip"), 2,
         ("m.nrrd", "truncated")),
    Case("nrrd gzip corrupt", attached(b"\x1f\x8b" + bytes(50), encoding="gzip"), 2,
         ("m.nrrd", "corrupt")),
    Case("nrrd encoding hex", attached(encoding="hex"), 2, ("m.nrrd", "not supported")),
    Case("nrrd ascii not numbers", attached(b"x " * 38400, encoding="ascii"), 2,
         ("m.nrrd", "not a uint8")),
    Case("nrrd sizes declare too much", attached(sizes="100000 100000 1000"), 2,
         ("m.nrrd", "exceed the size limit")),
    Case("nrrd sizes zero", attached(sizes="48 0 20"), 2, ("m.nrrd", "at least 1")),
    Case("nrrd kinds RGB", attached(kinds="RGB-color domain domain"), 2,
         ("m.nrrd", "RGB-color", "has size 48")),
    Case("nrrd kinds vector", attached(kinds="vector domain domain"), 2,
         ("m.nrrd", "not a spatial axis")),
    Case("nrrd kinds count", attached(kinds="domain domain"), 2, ("m.nrrd", "2 kinds")),
    Case("nrrd escape in type", attached(type=ESC), 2, ("m.nrrd", "\\x1b")),
    Case("nrrd escape in data file", detached(ESC), 2, ("m.nhdr", "\\x1b")),
    Case("nrrd header over 1 MiB", _big_header, 2, ("m.nrrd", "longer than")),
    Case("nrrd oblique 35 degrees", attached(
        space_directions="(-3.277,-2.294,0) (2.868,-4.096,0) (0,0,3)"), 2,
         ("m.nrrd", "oblique", "35.0 degrees")),
    Case("seg.nrrd two segments one value", _seg_nrrd, 2, ("m.seg.nrrd", "share label value 5")),
    Case("CT oblique 35 degrees", _oblique_ct, 2, ("ct.nii.gz", "oblique", "35.0 degrees")),
    Case("MR of constant intensity", _constant_mr, 2, ("mr.nii.gz", "constant", "blank")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_masks(case, base, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = run_case(case, tmp_path, base, capsys, monkeypatch)
    assert "\x1b" not in text


def _legit(tmp: Path, name: str, data: bytes, **fields: str) -> Path:
    path = tmp / name
    path.write_bytes(header(**fields) + b"\n" + data)
    return path


def test_legit_nrrd_encodings_give_the_nifti_answer(base, tmp_path):
    """raw, gzip, bzip2, ASCII, big-endian uint16, detached, byte skip -1, line skip: all the
    NIfTI mask's labels, voxel for voxel (and RAS storage the same as LPS)."""
    ct = base.ds / "synth_ct.nii.gz"
    want = load_case(VCase("s", ct, base.ds / "synth_seg.nii.gz")).seg
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "m.raw").write_bytes(b"skip me\n" + RAW)
    (tmp_path / "d" / "m.nhdr").write_bytes(header(data_file="m.raw", line_skip="1"))
    text = " ".join(str(int(v)) for v in LABELS.ravel(order="F")).encode()
    paths = [
        _legit(tmp_path, "raw.nrrd", RAW),
        _legit(tmp_path, "gz.nrrd", gzip.compress(RAW), encoding="gzip"),
        _legit(tmp_path, "bz.nrrd", bz2.compress(RAW), encoding="bzip2"),
        _legit(tmp_path, "txt.nrrd", text, encoding="ascii"),
        _legit(
            tmp_path,
            "be.nrrd",
            LABELS.astype(">u2").tobytes(order="F"),
            type="uint16",
            endian="big",
        ),  # fmt: skip
        _legit(tmp_path, "tail.nrrd", b"junk" + RAW, byte_skip="-1"),
        _legit(
            tmp_path, "gzskip.nrrd", gzip.compress(b"pre" + RAW), encoding="gz", byte_skip="3"
        ),  # fmt: skip
        _legit(
            tmp_path,
            "ras.nrrd",
            RAW,
            space="RAS",
            space_directions="(4,0,0) (0,5,0) (0,0,3)",
            space_origin="(-90,-100,-30)",
        ),  # fmt: skip
        tmp_path / "d" / "m.nhdr",
    ]
    for path in paths:
        got = load_case(VCase("s", ct, path)).seg
        np.testing.assert_array_equal(got, want, err_msg=path.name)


def test_gzip_bomb_is_refused_before_it_is_inflated(base, tmp_path):
    """256 MiB of zeros behind a header declaring 38 KB: refused with tracemalloc's peak far
    under the inflated size (the old reader inflated it whole first)."""
    import tracemalloc

    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    bomb = b"".join([comp.compress(RAW)] + [comp.compress(zeros) for _ in range(256)])
    path = _legit(tmp_path, "bomb.nrrd", bomb + comp.flush(), encoding="gzip")
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="inflate to more"):
            load_case(VCase("s", base.ds / "synth_ct.nii.gz", path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak  # the CT itself is ~150 KB; the bomb inflates to 256 MiB


def test_seg_nrrd_segment_value_per_layer_is_fine(base, tmp_path):
    """Two segments may share a label value on different layers (a multi-layer file is refused
    for its 4th axis, not for the names)."""
    from radspatial.imaging.nrrd import nrrd_segment_names

    fields = {"Segment0_Name": "liver", "Segment0_LabelValue": "1", "Segment0_Layer": "0"}
    fields |= {"Segment1_Name": "spleen", "Segment1_LabelValue": "1", "Segment1_Layer": "1"}
    path = _legit(tmp_path, "m.seg.nrrd", RAW, **fields)
    assert nrrd_segment_names(path) == {1: "spleen"} or nrrd_segment_names(path) == {1: "liver"}


def test_a_large_table_on_a_mask_numbered_1_to_4_is_refused(base, tmp_path, capsys):
    """``--labels totalsegmentator_mr`` on a mask holding ids 1..4: refused (round 5; round 4
    only warned), naming the ids and what the table calls them; TotalSegmentator's own ids
    (1, 3, 5, 52) pass without a word."""
    from radspatial.cli import main

    monkey = _four_labels(tmp_path, base)
    assert main(monkey) == 2
    err = capsys.readouterr().err
    assert "m.nii.gz: wrong label table? the mask holds only label ids 1..4" in err
    assert "1=spleen" in err and sum("error:" in x for x in err.splitlines()) == 1
    said: list[str] = []
    load_case(VCase("s", base.ds / "synth_ct.nii.gz", base.ds / "synth_seg.nii.gz"),
              warn=said.append)  # fmt: skip
    assert not said  # ids 1, 3, 5, 52 with TotalSegmentator's table: no doubt


DCMQI = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dcmqi_ct3"


@pytest.mark.skipif(not DCMQI.is_dir(), reason="../shared/data not present")
def test_the_bounded_reader_gives_pynrrd_s_arrays_on_slicer_files():
    """dcmqi's Slicer-written NRRDs (gzip): the same array, dtype and order as nrrd.read."""
    import nrrd

    from radspatial.imaging.nrrd import read_nrrd_labels

    for path in sorted(DCMQI.glob("*.nrrd")):
        ours, _, _ = read_nrrd_labels(path)
        theirs, _ = nrrd.read(str(path))
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, path.name
        np.testing.assert_array_equal(ours, theirs, err_msg=path.name)
