"""Imaging modalities a benchmark is made of, and what the prompts call their images.

MIRP's prompt opens with "The image is a 2D axial slice of an abdominal CT scan with soft tissue
windowing."; an MR dataset's prompt says what its images are instead (they have no Hounsfield
window). ``generate`` records the words in ``dataset.json``; eval puts them in every prompt of
a non-CT item, and says "coronal" or "sagittal" instead of "axial" for an item of that plane.
"""

from __future__ import annotations

MODALITIES = ("CT", "MR")
_SENTENCES = {
    "CT": "The image is a 2D axial slice of an abdominal CT scan with soft tissue windowing. ",
    "MR": "The image is a 2D axial slice of an abdominal MRI scan. ",
}


def modality_sentence(modality: str | None, plane: str | None = None) -> str:
    """The prompt's first sentence for ``modality`` (None: CT, as every dataset before MR) and
    the slice ``plane`` (None: axial)."""
    key = (modality or "CT").upper()
    if key not in _SENTENCES:
        raise ValueError(f"modality {modality!r} is not one of {', '.join(MODALITIES)}")
    if plane in (None, "axial"):
        return _SENTENCES[key]
    return _SENTENCES[key].replace(" axial slice ", f" {plane} slice ", 1)
