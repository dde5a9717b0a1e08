"""What a DICOM file is (its SOP class and modality), read from its first bytes only, so a
mask reader can be chosen by content and a file that is no mask is refused by name: "a CT
Image Storage (modality CT)", not a parser's complaint about what it expected to find."""

from __future__ import annotations

import io
from pathlib import Path

from radspatial.core.textsafe import log_text

RTSTRUCT_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.481.3"
_HEAD_BYTES = 1 << 16  # the file meta and the first group: where SOP class and modality are
_MODALITY = 0x00080060


def dicom_class(path: Path) -> tuple[str, str] | None:
    """(SOPClassUID, Modality) of a DICOM file ('' where absent), None if it is not DICOM."""
    from pydicom.filereader import read_partial

    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return None
    if head[128:132] != b"DICM":
        return None
    try:
        ds = read_partial(io.BytesIO(head), stop_when=lambda tag, vr, length: tag > _MODALITY)
        meta = getattr(ds, "file_meta", None)
        sop = ds.get("SOPClassUID") or (meta.get("MediaStorageSOPClassUID") if meta else None)
        return str(sop or "").strip(), str(ds.get("Modality", "") or "").strip()
    except Exception:  # noqa: BLE001 (pydicom raises many types on bad bytes)
        return "", ""


def dicom_mask_reader(path: Path) -> str | None:
    """The mask reader of a DICOM file: 'rtstruct' for an RT Structure Set, 'dicom_seg' for
    any other DICOM (which refuses what is not a SEG, naming it), None if not DICOM."""
    kind = dicom_class(path)
    if kind is None:
        return None
    return "rtstruct" if kind[0] == RTSTRUCT_SOP_CLASS else "dicom_seg"


def describe(kind: tuple[str, str]) -> str:
    """'a DICOM CT Image Storage object (modality CT, SOP class 1.2.840.10008.5.1.4.1.1.2)'."""
    from pydicom.uid import UID

    sop, modality = kind
    name = UID(sop).name if sop else ""
    named = f"a DICOM {name} object" if name and name != sop else "a DICOM object"
    return log_text(f"{named} (modality {modality or '?'}, SOP class {sop or '?'})")[:200]
