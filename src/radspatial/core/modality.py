"""Imaging modalities a benchmark is made of, and what the prompts call their images.

MIRP's prompt opens with "The image is a 2D axial slice of an abdominal CT scan with soft tissue
windowing."; an MR dataset's prompt says what its images are instead (they have no Hounsfield
window). ``generate`` records the words in ``dataset.json``; eval puts them in every prompt of
a non-CT item, and says "coronal" or "sagittal" instead of "axial" for an item of that plane.

Without ``--modality`` the label table decides (``infer_modality``): TotalSegmentator's
``total_mr`` table makes an MR dataset, every other table a CT one. A CT shown in the default
Hounsfield window must hold air (about -1000 HU): a volume with no voxel below -200 is refused
(``check_hounsfield``), so an MR given as a CT is never shown white in a CT window.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from radspatial.core.errors import InputError

MODALITIES = ("CT", "MR")
# what a dataset, item or row that names no modality is (every dataset before MR was CT);
# ``generate`` writes a modality only where it is not this one
DEFAULT_MODALITY = "CT"
MR_TABLES = ("totalsegmentator_mr",)  # label tables only MR segmentations use
# every abdominal CT has voxels below this (air ~-1000 HU, lung, bowel gas, the scanner's
# padding at -1024 or lower); an MR volume (no negative values) or a CT stored without its
# rescale (raw values from 0) has none
AIR_BELOW_HU = -200.0
_SENTENCES = {
    "CT": "The image is a 2D axial slice of an abdominal CT scan with soft tissue windowing. ",
    "MR": "The image is a 2D axial slice of an abdominal MRI scan. ",
}


def modality_sentence(modality: str | None, plane: str | None = None) -> str:
    """The prompt's first sentence for ``modality`` (None: CT, as every dataset before MR) and
    the slice ``plane`` (None: axial)."""
    key = modality_of(modality).upper()
    if key not in _SENTENCES:
        raise ValueError(f"modality {modality!r} is not one of {', '.join(MODALITIES)}")
    if plane in (None, "axial"):
        return _SENTENCES[key]
    return _SENTENCES[key].replace(" axial slice ", f" {plane} slice ", 1)


def modality_of(value: str | None) -> str:
    """The modality a config, row or item names: as given, or :data:`DEFAULT_MODALITY`."""
    return value or DEFAULT_MODALITY


def recorded_modality(modality: str) -> str | None:
    """What a manifest row records: None (the field left out) for the default modality."""
    return None if modality == DEFAULT_MODALITY else modality


def infer_modality(tables: Iterable[str | None]) -> str:
    """The modality the cases' label tables say: MR when every table is an MR one
    (``MR_TABLES``), CT when none is; a mix is a ``ValueError`` naming ``--modality``."""
    is_mr = {str(t) in MR_TABLES for t in tables}
    if is_mr == {True, False}:
        raise ValueError(
            f"the cases mix MR ({', '.join(MR_TABLES)}) and CT label tables: one dataset is one "
            "modality; generate them apart, or say which with --modality ct|mr"
        )
    return "MR" if is_mr == {True} else DEFAULT_MODALITY


def check_hounsfield(ct: Any, where: str) -> None:
    """Refuse a volume shown in the CT window that holds no air (``AIR_BELOW_HU``): an MR,
    or a CT not in Hounsfield units, would be shown as a white image. ``ct`` is an array;
    the error names ``where`` (the file) once: an ``InputError`` is passed on unprefixed."""
    if ct.size and float(ct.min()) >= AIR_BELOW_HU:
        raise InputError(
            f"{where}: no voxel below {AIR_BELOW_HU:g} HU, so not a CT in Hounsfield units (a "
            "CT holds air at about -1000 HU) and the CT window would show it white: for an MR "
            "give --modality mr (its label table: --labels totalsegmentator_mr); to show it "
            "as it is give --window W,L"
        )
