"""Generation on hostile input: every bad input is exit 2 and one line naming the file, nothing
is written outside --out or left half-written, --overwrite swaps atomically, outputs follow the
umask."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from synth import canonical_volumes, write_case

SHARED_DICOM = Path(__file__).resolve().parents[1].parent / "shared/data/totalseg_example/ct_dicom"
FAST = ("--setups", "rq1", "--size", "128", "--as-count", "0")


def run(*args: str, cwd: Path | None = None, umask: int | None = None):
    return subprocess.run(
        [sys.executable, "-m", "radspatial.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def _nifti(path: Path, data: np.ndarray, affine: np.ndarray) -> Path:
    """A .nii.gz whose sform is ``affine`` verbatim (nibabel refuses to build bad ones)."""
    hdr = nib.Nifti1Image(data, np.eye(4)).header
    hdr["qform_code"], hdr["sform_code"] = 0, 1
    for k, row in enumerate(("srow_x", "srow_y", "srow_z")):
        hdr[row] = affine[k]
    hdr["vox_offset"] = 352
    path.write_bytes(gzip.compress(hdr.binaryblock + b"\0" * 4 + data.tobytes("F")))
    return path


def _header_only(path: Path, shape, extra: bytes = b"") -> Path:
    hdr = nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(np.int16)
    hdr["vox_offset"] = 352
    raw = hdr.binaryblock + b"\0" * 4 + extra
    path.write_bytes(gzip.compress(raw) if path.name.endswith(".gz") else raw)
    return path


@contextmanager
def _tmpfs(path: Path, options: str):
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)])
    if res.returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


def _case_args(tmp: Path) -> tuple[Path, Path]:
    return write_case(tmp / "in")


def _bad_affine(kind: str):
    def make(tmp: Path) -> tuple[list[str], str]:
        ct, seg = _case_args(tmp)
        ctv, _, affine = canonical_volumes()
        a = affine.copy()
        if kind == "singular":
            a[:3, 1] = a[:3, 0]
        elif kind == "zero":
            a[:3, :3] = 0
        else:
            a[0, 0] = np.nan
        bad = _nifti(tmp / f"{kind}_affine.nii.gz", ctv.astype(np.int16), a)
        return ["--ct", str(bad), "--seg", str(seg)], bad.name

    return make


def _nan_voxels(tmp: Path):
    _, seg = _case_args(tmp)
    ctv, _, affine = canonical_volumes()
    ctv[3, 3, 3] = np.nan
    bad = tmp / "nan_ct.nii.gz"
    nib.save(nib.Nifti1Image(ctv, affine), bad)
    return ["--ct", str(bad), "--seg", str(seg)], "nan_ct.nii.gz"


def _dicom_zero_spacing(tmp: Path):
    import pydicom

    if not SHARED_DICOM.is_dir():
        pytest.skip("../shared/data not present")
    folder = tmp / "zero_spacing_dicom"
    shutil.copytree(SHARED_DICOM, folder)
    for p in folder.iterdir():
        ds = pydicom.dcmread(p)
        ds.PixelSpacing = [0, 0]
        ds.save_as(p)
    seg = SHARED_DICOM.parent / "example_seg_dicom.nii.gz"
    return ["--ct", str(folder), "--seg", str(seg)], "zero_spacing_dicom"


def _cases_csv(text: str, name: str = "cases.csv"):
    def make(tmp: Path):
        ct, seg = _case_args(tmp)
        path = tmp / name
        path.write_text(text.format(ct=ct, seg=seg))
        return ["--cases", str(path)], name

    return make


def _labels(content: str, name: str):
    def make(tmp: Path):
        ct, seg = _case_args(tmp)
        path = tmp / name
        path.write_text(content)
        return ["--ct", str(ct), "--seg", str(seg), "--labels", str(path)], name

    return make


def _huge_header(name: str, extra: bytes = b""):
    def make(tmp: Path):
        _, seg = _case_args(tmp)
        shape = (8, 8, 4) if extra else (30000, 30000, 30000)
        bad = _header_only(tmp / name, shape, extra)
        return ["--ct", str(bad), "--seg", str(seg)], name

    return make


def _option(*extra: str, needle: str):
    def make(tmp: Path):
        ct, seg = _case_args(tmp)
        return ["--ct", str(ct), "--seg", str(seg), *extra], needle

    return make


def _partial(kind: str):
    def make(tmp: Path):
        ct, seg = _case_args(tmp)
        stage = tmp / "out.partial"
        if kind == "file":
            stage.write_text("not a folder")
        else:
            (tmp / "elsewhere").mkdir()
            (tmp / "elsewhere" / "keep.txt").write_text("x")
            stage.symlink_to(tmp / "elsewhere")
        return ["--ct", str(ct), "--seg", str(seg)], "out.partial"

    return make


BOMB = b"\0" * (50 << 20)  # 50 MB of zeros after a header declaring 512 bytes of data

BAD_INPUTS = {
    "singular affine": _bad_affine("singular"),
    "zero affine": _bad_affine("zero"),
    "nan affine": _bad_affine("nan"),
    "nan voxels": _nan_voxels,
    "dicom zero PixelSpacing": _dicom_zero_spacing,
    "csv extra fields": _cases_csv("ct,seg\n{ct},{seg},surplus\n"),
    "csv case id escapes": _cases_csv("ct,seg,case_id\n{ct},{seg},../../../../tmp/x\n"),
    "csv case id dotfile": _cases_csv("ct,seg,case_id\n{ct},{seg},.hidden\n"),
    "labels extends a list": _labels('{"extends": ["btcv"], "1": "spleen"}', "ext.json"),
    "labels nested deeply": _labels("[" * 200000 + "]" * 200000, "deep.json"),
    "30000^3 header (gz)": _huge_header("huge.nii.gz"),
    "30000^3 header (nii)": _huge_header("huge.nii"),
    "gzip bomb": _huge_header("bomb.nii.gz", BOMB),
    "--case-id escapes": _option("--case-id", "../../x", needle="--case-id"),
    "--size 0": _option("--size", "0", needle="--size"),
    "--size huge": _option("--size", "1000000", needle="--size"),
    "--window nan": _option("--window", "nan,40", needle="--window"),
    "--window inf": _option("--window", "400,inf", needle="--window"),
    "--margin nan": _option("--margin", "nan", needle="--margin"),
    "--min-distance inf": _option("--min-distance", "inf", needle="--min-distance"),
    "--min-component nan": _option("--min-component", "nan", needle="--min-component"),
    "--workers 0": _option("--workers", "0", needle="--workers"),
    "--workers -1": _option("--workers", "-1", needle="--workers"),
    "OUT.partial is a file": _partial("file"),
    "OUT.partial is a symlink": _partial("symlink"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_exit_2_one_line_naming_the_file(tmp_path, name):
    args, needle = BAD_INPUTS[name](tmp_path)
    out = tmp_path / "out"
    res = run("generate", "--out", str(out), *FAST, *args)
    assert res.returncode == 2, (name, res.stdout, res.stderr)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, (name, res.stderr)
    assert needle in lines[0] and "Traceback" not in res.stderr, (name, lines[0])
    assert not out.exists()
    stage = tmp_path / "out.partial"
    assert not stage.exists() or name.startswith("OUT.partial")
    if name == "OUT.partial is a symlink":
        assert (tmp_path / "elsewhere" / "keep.txt").exists()
    assert not list(tmp_path.rglob("*.png")) and not Path("/tmp/x").exists()


def test_out_dot_is_refused(tmp_path):
    ct, seg = write_case(tmp_path / "in")
    res = run("generate", "--ct", str(ct), "--seg", str(seg), "--out", ".", "--overwrite",
              *FAST, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "--out ." in res.stderr
    assert ct.exists() and not list(tmp_path.rglob("*.png"))


def test_read_only_out_and_full_disk_are_one_line(tmp_path):
    ct, seg = write_case(tmp_path / "in")
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        res = run("generate", "--ct", str(ct), "--seg", str(seg), "--out", str(ro / "o"), *FAST)
        assert res.returncode == 2, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "cannot write" in res.stderr
    with _tmpfs(tmp_path / "full", "size=64k") as full:
        res = run("generate", "--ct", str(ct), "--seg", str(seg), "--out", str(full / "o"),
                  "--size", "512", "--setups", "rq1,rq2")  # fmt: skip
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "no space left" in lines[0], res.stderr
        assert not (full / "o").exists()


def test_outputs_follow_the_umask(tmp_path):
    ct, seg = write_case(tmp_path / "in")
    out = tmp_path / "out"
    res = run("generate", "--ct", str(ct), "--seg", str(seg), "--out", str(out),
              "--setups", "rq1,as", "--as-count", "2", "--size", "128", umask=0o027)  # fmt: skip
    assert res.returncode == 0, res.stderr
    modes = {p.suffix: p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()}
    assert set(modes) == {".png", ".json", ".jsonl"}
    assert set(modes.values()) == {0o640}, modes


def test_overwrite_keeps_the_old_dataset_when_the_new_one_fails(tmp_path):
    ct, seg = write_case(tmp_path / "in")
    out = tmp_path / "out"
    assert (
        run("generate", "--ct", str(ct), "--seg", str(seg), "--out", str(out), *FAST).returncode
        == 0
    )
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.nii.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00broken")
    res = run("generate", "--ct", str(bad), "--seg", str(seg), "--out", str(out), "--overwrite",
              *FAST)  # fmt: skip
    assert res.returncode == 2
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    res = run("generate", "--ct", str(ct), "--seg", str(seg), "--out", str(out), "--overwrite",
              "--seed", "3", *FAST)  # fmt: skip
    assert res.returncode == 0 and json.loads((out / "dataset.json").read_text())["seed"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.nii.gz", "in", "out"]


def test_swap_puts_the_old_folder_back_when_the_new_one_cannot_move_in(tmp_path):
    from radspatial.core.staging import swap_in

    out = tmp_path / "out"
    out.mkdir()
    (out / "dataset.json").write_text("{}")
    with pytest.raises(FileNotFoundError):
        swap_in(tmp_path / "never_built", out)
    assert (out / "dataset.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
