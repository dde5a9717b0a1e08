"""The command line on real data and on bad input (exit 2, one line naming the file)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "totalseg_example"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "radspatial.cli", *args], capture_output=True, text=True
    )


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]


def test_generate_on_bundled_example(tmp_path):
    out = tmp_path / "bench"
    res = run("generate", "--out", str(out), "--as-count", "4", "--size", "256")
    assert res.returncode == 0, res.stderr
    assert "questions:" in res.stdout and str(out.name) in res.stdout
    rows = _rows(out)
    rq1 = [r for r in rows if r["setup"] == "rq1"]
    assert len(rq1) >= 20  # 30 slices in the example; nearly all qualify
    names = {o["name"] for r in rq1 for o in (r["object1"], r["object2"])}
    assert "vertebrae" in names or "liver" in names
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["cases"][0]["grouping"] == "mirp"
    assert meta["config"]["rules"]["profile"] == "mirp"  # the default rule profile
    # refuses to overwrite without --overwrite
    again = run("generate", "--out", str(out), "--as-count", "4")
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_generate_rules_strict_is_recorded(tmp_path):
    out = tmp_path / "strict"
    args = ["--setups", "rq1", "--size", "256", "--out", str(out)]
    assert run("generate", *args, "--rules", "strict").returncode == 0
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["config"]["rules"]["profile"] == "strict"
    bad = run("generate", *args[:-1], str(tmp_path / "x"), "--rules", "paper")
    assert bad.returncode == 2 and "--rules" in bad.stderr


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data not present")
def test_generate_on_real_dicom_series_with_nifti_mask(tmp_path):
    out = tmp_path / "dicom"
    res = run(
        "generate",
        "--ct",
        str(SHARED / "ct_dicom"),
        "--seg",
        str(SHARED / "example_seg_dicom.nii.gz"),
        "--out",
        str(out),
        "--setups",
        "rq1",
        "--export-masks",
    )
    assert res.returncode == 0, res.stderr
    rows = _rows(out)
    assert rows
    # In the rendered soft-tissue window, liver/kidney/spleen centres are mid-grey soft tissue,
    # not air (0) or bone (255): the DICOM (LPS) image and the RAS mask are aligned.
    soft = {"liver", "spleen", "kidney_left", "kidney_right", "aorta", "inferior_vena_cava"}
    checked = 0
    for r in rows:
        img = np.asarray(Image.open(out / r["image"]).convert("L"))
        lab = np.asarray(Image.open(out / r["mask"]))
        for o in (r["object1"], r["object2"]):
            x, y = (round(c) for c in o["marker_xy"])
            assert lab[y, x] == o["label_id"]
            if o["name"] in soft:
                vals = img[lab == o["label_id"]]
                assert 80 < np.median(vals) < 250, (o["name"], np.median(vals))
                checked += 1
    assert checked >= 3
    lr = [r for r in rows if r["relation"] in ("left_of", "right_of") and r["transform"] == "B1"]
    for r in lr:  # standard view: the patient's left kidney is on the image right
        names = (r["object1"]["name"], r["object2"]["name"])
        if set(names) == {"kidney_left", "kidney_right"}:
            left = r["object1"] if names[0] == "kidney_left" else r["object2"]
            right = r["object2"] if left is r["object1"] else r["object1"]
            assert left["center_xy"][0] > right["center_xy"][0]


def _one_error_line(res: subprocess.CompletedProcess, needle: str) -> None:
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    assert needle in lines[0], lines[0]


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    import nibabel as nib

    corrupt = tmp_path / "corrupt.nii.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00not really gzip")
    ok_ct = tmp_path / "ct.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((8, 8, 4), np.int16), np.eye(4)), ok_ct)
    flat = tmp_path / "flat.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((8, 8), np.int16), np.eye(4)), flat)
    other = tmp_path / "seg.nii.gz"
    nib.save(nib.Nifti1Image(np.ones((8, 9, 4), np.uint8), np.eye(4)), other)
    out = str(tmp_path / "o")
    _one_error_line(
        run("generate", "--ct", str(corrupt), "--seg", str(other), "--out", out), "corrupt.nii.gz"
    )
    _one_error_line(
        run("generate", "--ct", str(flat), "--seg", str(other), "--out", out), "flat.nii.gz"
    )
    _one_error_line(
        run("generate", "--ct", str(ok_ct), "--seg", str(other), "--out", out), "seg.nii.gz"
    )
    missing = tmp_path / "nope.nii.gz"
    _one_error_line(
        run("generate", "--ct", str(missing), "--seg", str(other), "--out", out), "nope.nii.gz"
    )
    assert not (tmp_path / "o").exists()


def test_help_is_fast_and_lists_generate():
    res = run("--help")
    assert res.returncode == 0 and "generate" in res.stdout


def test_serve_command_answers_over_http():
    import urllib.request

    from served import serve_cli

    with serve_cli("--localizer", "markers", "--api-key", "k3y") as (base, output):
        req = urllib.request.Request(f"{base}/models", headers={"Authorization": "Bearer k3y"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            models = json.loads(resp.read())
        assert [m["id"] for m in models["data"]] == ["agent:markers"]
    assert output and "k3y" not in "".join(output)


def test_phantom_counterfactual_and_probe_commands(tmp_path):
    from radspatial.cli import bundled_example

    res = run("phantom", "--out", str(tmp_path / "ph"), "--n", "2", "--shape", "64,64,24",
              "--variant", "normal,situs_inversus")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "ph" / "cases.csv").is_file()
    ct, seg = bundled_example()
    res = run("counterfactual", "mirror", "--ct", str(ct), "--seg", str(seg),
              "--out", str(tmp_path / "mirror"))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "mirrored mask:" in res.stdout
    res = run("probe", "build", "--out", str(tmp_path / "probes"), "--tasks", "orient,relpos",
              "--size", "128")  # fmt: skip
    assert res.returncode == 0, res.stderr
    info = json.loads((tmp_path / "probes" / "probes.json").read_text())
    assert set(info["tasks"]) == {"orient", "relpos"}
    bad = run("phantom", "--out", str(tmp_path / "x"), "--shape", "64,64")
    assert bad.returncode == 2 and "three comma-separated" in bad.stderr
