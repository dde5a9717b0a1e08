"""Small asymmetric synthetic CT + mask volumes for geometry tests (no downloads)."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from nibabel.orientations import apply_orientation, axcodes2ornt, inv_ornt_aff, ornt_transform

SHAPE = (48, 40, 20)  # canonical RAS voxels: i -> patient right, j -> anterior, k -> superior
SPACING = (4.0, 5.0, 3.0)

# label id -> (name, centre (i, j), radius in voxels, HU). Liver on the patient's right and
# anterior, spleen left and posterior: a wrong flip of either axis moves them.
STRUCTURES = {
    5: ("liver", (36, 28), 7, 60.0),
    1: ("spleen", (9, 10), 5, 110.0),
    3: ("kidney_left", (12, 27), 4, 160.0),
    52: ("aorta", (24, 14), 3, 230.0),
}


def canonical_volumes(z_shift: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CT (HU) and mask in canonical RAS order, plus the RAS affine."""
    ct = np.full(SHAPE, -1000.0, np.float32)
    seg = np.zeros(SHAPE, np.uint8)
    ii, jj = np.meshgrid(np.arange(SHAPE[0]), np.arange(SHAPE[1]), indexing="ij")
    body = ((ii - 24) / 22.0) ** 2 + ((jj - 20) / 18.0) ** 2 <= 1
    for k in range(SHAPE[2]):
        ct[:, :, k][body] = 0.0
        for label, (_, (ci, cj), r, hu) in STRUCTURES.items():
            dj = (k % 3) - 1 if z_shift else 0  # small drift so slices differ
            disk = (ii - ci) ** 2 + (jj - cj - dj) ** 2 <= r * r
            seg[:, :, k][disk] = label
            ct[:, :, k][disk] = hu
    affine = np.diag([*SPACING, 1.0])
    affine[:3, 3] = (-90.0, -100.0, -30.0)
    return ct, seg, affine


def reorient(data: np.ndarray, affine: np.ndarray, codes: tuple[str, str, str]):
    """Store canonical RAS data in another orientation, keeping the world geometry."""
    transform = ornt_transform(axcodes2ornt(("R", "A", "S")), axcodes2ornt(codes))
    out = apply_orientation(data, transform)
    return np.ascontiguousarray(out), affine @ inv_ornt_aff(transform, data.shape)


def write_case(
    folder: Path, codes: tuple[str, str, str] = ("R", "A", "S"), name: str = "synth"
) -> tuple[Path, Path]:
    """Write the synthetic CT and mask as NIfTI in orientation ``codes``."""
    ct, seg, affine = canonical_volumes()
    folder.mkdir(parents=True, exist_ok=True)
    ct_o, aff_o = reorient(ct, affine, codes)
    seg_o, _ = reorient(seg, affine, codes)
    ct_path, seg_path = folder / f"{name}_ct.nii.gz", folder / f"{name}_seg.nii.gz"
    nib.save(nib.Nifti1Image(ct_o.astype(np.int16), aff_o), ct_path)
    nib.save(nib.Nifti1Image(seg_o, aff_o), seg_path)
    return ct_path, seg_path


def window_gray(hu: float, width: float = 400.0, level: float = 40.0) -> int:
    lo = level - width / 2
    return int(np.clip((hu - lo) * 255.0 / width + 0.5, 0, 255))
