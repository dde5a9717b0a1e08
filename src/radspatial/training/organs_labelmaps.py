"""Real patients' label maps without images, on our label ids, and slices synthesised from them.

Label-map patients (``../shared/data``; sha256 of each file in every record):

- ``amos``: AMOS 2022 amos_0013 (``label_maps/amos_0013_label.nii.gz``, AMOS ids 1-15, the
  reference annotation): 14 of its organs map to TotalSegmentator names; "prostate/uterus"
  has none and is *unknown*; only 15 organs are labelled, so the rest of its body is unknown;
- ``s0327``, ``s0328``: TotalSegmentator dataset subjects (TotalSegmentator v2 ids; 108 and
  69 structures: every structure of their levels, so unlabelled body is background);
- ``mr``: the MR patient's ``total_mr`` labels (``totalseg_mr/example_seg_mr.nii.gz``, 23
  structures; the lungs and discs have no CT-table class here and are unknown; partial).

Ids are mapped by structure name onto the TotalSegmentator table with MIRP's grouping (the
``organs`` network's ids). :func:`label_volume` reads one; :func:`synth_bank` renders its
axial slices in the generator's display geometry and draws CT-like images for them
(``organs_synth``), with the pixels inside the drawn body that the map does not label marked
unknown (:data:`organs_data.IGNORE`) for partial maps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.core.io import sha256_file
from radspatial.imaging.slices import Geometry
from radspatial.training import organs_data, organs_synth

# name -> (file under ../shared/data, label table, complete: unlabelled body is background)
LABEL_MAPS = {
    "amos": ("label_maps/amos_0013_label.nii.gz", "amos", False),
    "s0327": ("label_maps/s0327_seg_totalv2ids.nii.gz", "totalsegmentator", True),
    "s0328": ("label_maps/s0328_seg_totalv2ids.nii.gz", "totalsegmentator", True),
    "mr": ("totalseg_mr/example_seg_mr.nii.gz", "totalsegmentator_mr", False),
    # the two pelvic patients' manual muscle and bone maps (no organs: partial)
    "pelvic001": (
        "label_maps/Pelvic-Ref-001_labels_totalseg.nii.gz",
        "label_maps/pelvic_ref_table_totalv2ids.json",
        False,
    ),
    "pelvic004": (
        "label_maps/Pelvic-Ref-004_labels_totalseg.nii.gz",
        "label_maps/pelvic_ref_table_totalv2ids.json",
        False,
    ),
}


@dataclass(frozen=True, eq=False)
class LabelVolume:
    name: str
    seg: np.ndarray  # (X, Y, Z) grouped TotalSegmentator ids, canonical RAS+, IGNORE: unknown
    spacing: tuple[float, ...]
    complete: bool  # unlabelled body pixels are background (else unknown)
    source: dict[str, Any]


def ts_names() -> dict[int, str]:
    from radspatial.core.labels import load_table

    return load_table("totalsegmentator", group=True).names


def to_ts_lut(table_names: dict[int, str], max_id: int) -> np.ndarray:
    """Source id -> grouped TotalSegmentator id by name; IGNORE for a name it lacks."""
    inv = {n: i for i, n in ts_names().items()}
    lut = np.zeros(max(max_id, max(table_names, default=0)) + 1, np.uint16)
    for i, name in table_names.items():
        lut[i] = inv.get(name, organs_data.IGNORE)
    return lut


def label_volume(name: str, root: Path | None = None) -> LabelVolume:
    """One label-map patient (``LABEL_MAPS``) on the grouped TotalSegmentator ids."""
    from radspatial.core.labels import load_table
    from radspatial.imaging.volumes import load_seg

    root = Path(root) if root else organs_data.shared_data()
    rel, table_name, complete = LABEL_MAPS[name]
    path = root / rel
    if table_name.endswith(".json"):  # a table of its own beside the map (TotalSegmentator ids)
        table = load_table(root / table_name)
    else:
        group = None if table_name == "amos" else True
        table = load_table(table_name, group=group) if group else load_table(table_name)
    seg, affine, info = load_seg(path, table)
    seg = to_ts_lut(table.names, int(seg.max()))[seg]
    spacing = tuple(float(s) for s in np.linalg.norm(affine[:3, :3], axis=0))
    source = {"seg": rel, "seg_sha256": sha256_file(path), "labels": table_name, **info}
    return LabelVolume(name, seg, spacing, complete, source)


def slice_ids(lvol: LabelVolume, step_mm: float) -> list[int]:
    """z indices about ``step_mm`` apart that hold at least one known structure."""
    step = max(1, round(step_mm / lvol.spacing[2]))
    keep = []
    for z in range(0, lvol.seg.shape[2], step):
        s = lvol.seg[:, :, z]
        if np.any((s > 0) & (s != organs_data.IGNORE)):
            keep.append(z)
    return keep


def px_mm(lvol: LabelVolume, size: int) -> float:
    geom = Geometry.for_slice(lvol.seg.shape[:2], lvol.spacing[:2], size)
    return max(geom.n_cols * lvol.spacing[0], geom.n_rows * lvol.spacing[1]) / size


def training_labels(lab: np.ndarray, hu: np.ndarray, complete: bool) -> np.ndarray:
    """The loss's labels of a drawn slice: unlabelled pixels inside the drawn body are
    unknown for a partial map, background for a complete one."""
    if complete:
        return lab
    out = lab.copy()
    out[(out == 0) & (hu > -500)] = organs_data.IGNORE
    return out


def synth_bank(
    lvol: LabelVolume, size: int, step_mm: float, draws: int, seed: int
) -> tuple[tuple[np.ndarray, np.ndarray], dict]:
    """(HU float16 (n, S, S), label ids uint16 (n, S, S)) of ``draws`` synthetic images of
    each kept slice, and the record (slices, draws, seed); deterministic given ``seed``."""
    from radspatial.core.runtime import keyed_rng

    names, mm = ts_names(), px_mm(lvol, size)
    hus, labs = [], []
    zs = slice_ids(lvol, step_mm)
    for z in zs:
        lab = organs_data.render_lab(lvol.seg, z, lvol.spacing, size)
        for d in range(draws):
            rng = keyed_rng(seed, f"synth-{lvol.name}-{z}-{d}")
            hu, _ = organs_synth.synth_slice(lab, names, mm, rng, lvol.complete)
            hus.append(hu.astype(np.float16))
            labs.append(training_labels(lab, hu, lvol.complete))
    record = {"name": lvol.name, **lvol.source, "slices": len(zs), "draws": draws}
    record |= {"step_mm": step_mm, "seed": seed, "complete": lvol.complete}
    if not hus:
        empty = np.zeros((0, size, size))
        return (empty.astype(np.float16), empty.astype(np.uint16)), record
    return (np.stack(hus), np.stack(labs)), record


def synth_banks(config: Any, vols: list) -> tuple[tuple[np.ndarray, np.ndarray], list[dict]]:
    """Every synthesised slice of ``config.synth`` (label-map patients by name; "a" draws
    patient A's own label map anew, from ``vols``), concatenated, with one record each."""
    size = config.size
    parts, records = [], []
    for name in config.synth:
        if name in LABEL_MAPS:
            lv = label_volume(name)
        else:
            tv = next(v for v in vols if v.name == f"patient_{name}")
            lv = LabelVolume(tv.name, tv.seg, tv.spacing, True, dict(tv.source))
        bank, record = synth_bank(lv, size, config.synth_step_mm, config.synth_draws, config.seed)
        parts.append(bank)
        records.append(record)
    if not parts:
        empty = np.zeros((0, size, size))
        return (empty.astype(np.float16), empty.astype(np.uint16)), records
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])), records
