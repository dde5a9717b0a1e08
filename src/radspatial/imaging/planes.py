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

Each row is a :class:`Plane` record (:data:`PLANE`), the one place that says what a plane means;
the answer frames, the anatomy prior, the report and the prompts read it.

The three answer frames per plane (``questions/relative_position.py``): the shown image; the
standard view (the table above); the patient's frame, where "left of" means the patient's left
on axial and coronal slices and *anterior* on sagittal ones (image left in standard view), and
"above" means anterior on axial slices and superior on coronal and sagittal ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Plane:
    """What one slice plane means: its axes, what the standard view's image left and top are
    anatomically, and the words prompts and reports use for it (the table above). Read by the
    answer frames (``questions/frames.py``), the anatomy prior (``models/baselines.py``), the
    report's plane tables and figures and the prompts (``core/modality.py``)."""

    name: str  # also the prompt's word: "a 2D coronal slice"
    axes: tuple[int, int, int]  # canonical axes that become the reformatted (0, 1, 2)
    normal: str  # the world axis along the slice normal
    image_left: str  # what image left is in standard view
    image_top: str  # what image top is in standard view
    # image left/right is the patient's right/left, so "left of" in the patient's frame is
    # image right (axial, coronal); False: no side axis, "left of" reads as the image's
    # (sagittal: anterior)
    sided: bool
    left_right: str  # the report's words for its left/right axis
    above_below: str  # ... and for its above/below axis

    @property
    def meaning(self) -> str:
        """The anatomical frame in one phrase (the report's "By plane" section)."""
        return f"{self.left_right_words}, above/below = {self.above_below}"

    @property
    def axis_titles(self) -> dict[str, str]:
        """Axis name (``questions/frames.AXES``) -> its title in this plane's figures."""
        on = "" if self.sided else " on the image"
        return {
            "left_right": f"Left/right{on} ({self.left_right})",
            "above_below": f"Above/below ({self.above_below})",
        }

    @property
    def left_right_words(self) -> str:
        if self.sided:
            return "left/right = the patient's left/right"
        return f"'left of' = {self.image_left} (image left in standard view)"


AXIAL = Plane(
    "axial",
    (0, 1, 2),
    "z",
    "patient right",
    "anterior",
    True,
    "patient's left/right",
    "anterior/posterior",
)
CORONAL = Plane(
    "coronal",
    (0, 2, 1),
    "y",
    "patient right",
    "superior",
    True,
    "patient's left/right",
    "superior/inferior",
)
SAGITTAL = Plane("sagittal", (1, 2, 0), "x", "anterior", "superior", False,
                 "anterior/posterior", "superior/inferior")  # fmt: skip
PLANE: dict[str, Plane] = {p.name: p for p in (AXIAL, CORONAL, SAGITTAL)}
PLANES: tuple[str, ...] = tuple(PLANE)
DEFAULT_PLANE = AXIAL.name  # MIRP's plane: a row without ``plane`` is axial


def plane_of(name: str | None) -> Plane:
    """The plane a row, item or request names: None or empty is axial (rows written before
    planes existed), and so is a name ``generate`` never writes (a data file's plane is
    checked only as text; the prompt keeps its word, ``core/modality.py``)."""
    return PLANE.get(name or DEFAULT_PLANE, AXIAL)


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
    if plane not in PLANE:
        raise ValueError(f"unknown plane {plane!r}; expected one of {', '.join(PLANES)}")
    if plane == AXIAL.name:
        return vol
    import numpy as np  # on first use: the plane names load without numpy (the CLI's specs)

    axes = PLANE[plane].axes
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
    import numpy as np

    world = PLANE[plane].axes[2]  # canonical RAS axis = world axis of the normal
    n = vol.seg.shape[2]
    true_z = vol.source.get("slice_positions_mm") if plane == AXIAL.name else None
    if true_z is not None and len(true_z) == n:  # an unevenly spaced series (imaging/dicom.py)
        return np.asarray(true_z, dtype=float)
    return vol.affine[world, 3] + vol.affine[world, 2] * np.arange(n)
