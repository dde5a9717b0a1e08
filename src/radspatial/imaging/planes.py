"""Axial, coronal and sagittal slices of one canonical (RAS+) volume, in standard view.

``reformat(vol, plane)`` returns the volume with its axes reordered (a view: no copy) so that
``vol.ct[:, :, k]`` is the k-th slice of ``plane`` and ``slices.to_display`` puts it in that
plane's standard radiological view, exactly as it does for axial slices:

============  ================================  ==============  ==========================
plane         slice k = canonical index of       image left      image top
============  ================================  ==============  ==========================
axial         z (inferior -> superior)           patient right   anterior
coronal       y (posterior -> anterior)          patient right   superior
sagittal      x (left -> right)                  anterior        superior
============  ================================  ==============  ==========================

Coronal is viewed from the front (as a radiograph); sagittal from the patient's left side, the
patient facing the image left (the usual radiological display). The slice's two in-plane axes
keep their physical spacing: ``Geometry.for_slice`` maps them onto square output pixels
(isotropic in-plane), CT resampled bilinearly and label maps by nearest neighbour (no label
mixing), as for axial slices. The reformatted volume's ``affine`` maps its own voxel indices to
the same world millimetres, so ``slice_position_mm`` is the slice's world coordinate along the
plane's normal (z for axial, y for coronal, x for sagittal).

The three answer frames per plane (``questions/relative_position.py``): the shown image; the
standard view (the table above); the patient's frame, where "left of" means the patient's left
on axial and coronal slices and *anterior* on sagittal ones (image left in standard view), and
"above" means anterior on axial slices and superior on coronal and sagittal ones.
"""

from __future__ import annotations

import dataclasses

import numpy as np

PLANES: tuple[str, ...] = ("axial", "coronal", "sagittal")
# canonical axes (i: x, j: y, k: z) that become the reformatted volume's (0, 1, 2); axis 2 is
# the slice normal, and to_display shows axis 0 right-to-left (reversed) and axis 1 top-down
# from its largest index
_AXES: dict[str, tuple[int, int, int]] = {
    "axial": (0, 1, 2),
    "coronal": (0, 2, 1),
    "sagittal": (1, 2, 0),
}
# what the image's horizontal and vertical axes mean in standard view, per plane
VIEW: dict[str, dict[str, str]] = {
    "axial": {"left": "patient right", "top": "anterior", "normal": "z"},
    "coronal": {"left": "patient right", "top": "superior", "normal": "y"},
    "sagittal": {"left": "anterior", "top": "superior", "normal": "x"},
}


def check_planes(planes: tuple[str, ...]) -> tuple[str, ...]:
    """``planes`` if a non-empty, duplicate-free subset of :data:`PLANES`, else ValueError."""
    bad = [p for p in planes if p not in PLANES]
    if bad or not planes or len(set(planes)) != len(planes):
        raise ValueError(
            f"--planes must be distinct names among {', '.join(PLANES)}, got {','.join(planes)}"
        )
    return planes


def reformat(vol, plane: str):
    """The volume whose axis-2 slices are ``plane``'s (``imaging.volumes.Volume``; a view)."""
    if plane not in _AXES:
        raise ValueError(f"unknown plane {plane!r}; expected one of {', '.join(PLANES)}")
    if plane == "axial":
        return vol
    axes = _AXES[plane]
    affine = np.array(vol.affine, dtype=float, copy=True)
    affine[:, :3] = vol.affine[:, list(axes)]
    return dataclasses.replace(
        vol,
        ct=vol.ct.transpose(axes),
        seg=vol.seg.transpose(axes),
        affine=affine,
        spacing=tuple(float(vol.spacing[a]) for a in axes),
    )


def slice_position_mm(vol, plane: str) -> np.ndarray:
    """World coordinate (mm) along the plane's normal of each slice of ``reformat(vol, plane)``."""
    world = _AXES[plane][2]  # canonical RAS axis = world axis of the normal
    n = vol.seg.shape[2]
    return vol.affine[world, 3] + vol.affine[world, 2] * np.arange(n)
