"""The probe suite's default protocol on the real data in ``../shared/data``.

- **In domain: patient A** (``totalseg_example/example_ct.nii.gz``, 112 slices, with its
  ``--fast`` TotalSegmentator labels). Splits are by case, so the scan is cut into ``n_slabs``
  contiguous slabs along z (``slab_cases``), each written as its own NIfTI with the affine
  shifted to the slab's first slice (physical positions unchanged); the slabs are the cases,
  so no slice and no neighbouring slice of a test slab is ever trained on. Contiguous slabs are
  still one patient: in-domain here means same patient, other body levels.
- **Zero-shot: patient B** (the DICOM series, its TotalSegmentator mask as NIfTI; the LPS/RAS
  alignment is the loader's) and **patient C** (MR, ``totalseg_mr``, ``total_mr`` label ids via
  its own JSON table; MR has no Hounsfield units, so its intensities are mapped linearly so that
  the 1st / 99th percentile inside the body land on the soft-tissue window's ends, and the
  suite's CT rendering applies unchanged: ``mr_as_window``).

Every step writes into a folder of the caller's and is atomic; nothing here downloads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from radspatial.core.io import atomic_write_bytes
from radspatial.imaging.volumes import Case

WINDOW = (400.0, 40.0)  # the generator's soft-tissue window (W, L), HU


def shared_data() -> Path:
    """``../shared/data`` of the checkout (the worktree's parent holds ``shared``)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared" / "data"
    raise FileNotFoundError("no shared/data folder above the package (see ../shared/data)")


def _save(img, path: Path) -> Path:
    import nibabel as nib

    atomic_write_bytes(path, img.to_bytes())
    nib.load(path)  # readable back
    return path


def slab_cases(ct: Path, seg: Path, out: Path, n_slabs: int, prefix: str) -> list[Case]:
    """``ct``/``seg`` cut into ``n_slabs`` contiguous z slabs, one case each
    (``{prefix}_z{a}-{b}``, a and b the slab's first and last slice)."""
    import nibabel as nib

    ct_img, seg_img = nib.load(ct), nib.load(seg)
    nz = ct_img.shape[2]
    if seg_img.shape != ct_img.shape or n_slabs < 1 or n_slabs > nz:
        raise ValueError(f"{ct}: cannot cut {ct_img.shape} (mask {seg_img.shape}) in {n_slabs}")
    edges = np.linspace(0, nz, n_slabs + 1).round().astype(int)
    cases = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        shift = np.eye(4)
        shift[2, 3] = a
        affine = ct_img.affine @ shift  # voxel (i, j, 0) of the slab = voxel (i, j, a)
        cid = f"{prefix}_z{a:03d}-{b - 1:03d}"
        paths = []
        for img, kind in ((ct_img, "ct"), (seg_img, "seg")):
            data = np.asanyarray(img.dataobj)[:, :, a:b]
            part = nib.Nifti1Image(np.ascontiguousarray(data), affine, img.header)
            paths.append(_save(part, out / f"{cid}_{kind}.nii"))
        cases.append(Case(cid, paths[0], paths[1]))
    return cases


def mr_as_window(mr: Path, seg: Path, out: Path) -> Path:
    """MR intensities mapped so the body's 1st / 99th percentiles meet the window's ends."""
    import nibabel as nib

    img = nib.load(mr)
    data = np.asanyarray(img.dataobj).astype(np.float32)
    body = np.asanyarray(nib.load(seg).dataobj) > 0
    lo, hi = np.percentile(data[body] if body.any() else data, [1, 99])
    width, level = WINDOW
    scaled = (data - lo) / max(hi - lo, 1e-6) * width + (level - width / 2)
    return _save(nib.Nifti1Image(scaled, img.affine), out / "patient_c_mr_windowed.nii")


def default_cases(out: Path, n_slabs: int = 5) -> dict[str, list[Case]]:
    """{"in_domain": patient A's slabs, "patient_b": [B], "patient_c": [C]}."""
    root = shared_data()
    ts, mr = root / "totalseg_example", root / "totalseg_mr"
    out.mkdir(parents=True, exist_ok=True)
    a = slab_cases(
        ts / "example_ct.nii.gz",
        ts / "example_seg_fast_force_split.nii.gz",
        out,
        n_slabs,
        "patient_a",
    )
    b = Case("patient_b", ts / "ct_dicom", ts / "example_seg_dicom.nii.gz")
    table = root / "label_tables" / "totalsegmentator_v2_total_mr.json"
    c_img = mr_as_window(mr / "example_mr_sm.nii.gz", mr / "example_seg_mr.nii.gz", out)
    c = Case("patient_c", c_img, mr / "example_seg_mr.nii.gz", str(table))
    return {"in_domain": a, "patient_b": [b], "patient_c": [c]}
