"""Real training volumes of the ``organs`` localizer, their slices and what a plausible organ is.

Training volumes (every real labelled CT the project may train on, in ``../shared/data``):

- patient A, the full scan ``totalseg_example/example_ct.nii.gz`` (112 slices) with the
  TotalSegmentator ``--fast`` labels ``example_seg_fast_force_split.nii.gz`` (61 ids, 44
  structures after MIRP's vertebrae / rib grouping), read with the generator's loader;
- patient C, ``dcmqi_ct3`` (3 slices, DICOM) with the NRRD label maps ``liver_spine_seg.nrrd``
  (1 liver, 2 spine -> vertebrae) and ``heart_seg.nrrd`` (which outlines the stomach). Only
  these three structures are labelled: the rest of the body is *unknown* (:data:`IGNORE`, not
  background), only the air outside the body is background. The NRRD is read here with pynrrd
  (LPS labelmap on the CT grid; checked against the CT's grid).

- patient B, the DICOM series ``totalseg_example/ct_dicom`` (20 slices, 0.98 mm) with its
  TotalSegmentator v2 labels ``example_seg_dicom.nii.gz``, only when named (``"b"``): the
  shipped weights hold B out as their real test patient, and so does
  :data:`DEFAULT_VOLUMES` (issue #34 round 5 measured adding B: benchmarks/RESULTS.md; a model
  trained on B has no real patient B to be tested on, and its config.json says so).

- the chest slab ``gstt_thorax`` (20 DICOM slices at the heart, T7-T12, RLE lossless) with
  its DICOM RTSTRUCT (34 contoured structures), read through the generator's loader (each
  contour on the slice it references; the one uneven step accepted, axial slices only), only
  when named (``"chest"``). Its labels are TotalSegmentator v1 *model output*, not manual: the
  heart as five structures (``core.labels.TOTALSEG_V1_HEART``), lung lobes, esophagus, aorta,
  IVC, T7-T12, ribs, autochthon; every other pixel of the body is background, as v1 labels
  every structure it knows (record: ``labels``).

Never read here: ``mirp_sample``.

:func:`plausibility` summarises the training labels per structure in terms that survive the
8 rotation / flip variants and the display's zoom: the area as a fraction of the body's area
and the centroid's distance from the body's centroid over the body's radius. The localizer
abstains on a structure outside that range (``organs``: the reason goes to the trace).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from radspatial.core.io import sha256_file
from radspatial.core.labels import composite_ids
from radspatial.imaging.body import BODY_HU, body_mask, region_stats
from radspatial.imaging.slices import Geometry, to_display

IGNORE = 65535  # label id of "unknown" pixels (partially labelled volumes); no loss there
_DCMQI_LABELS = {"liver_spine_seg.nrrd": {1: 5, 2: 26}, "heart_seg.nrrd": {3: 6}}  # -> TS ids


@dataclass(frozen=True, eq=False)
class TrainVolume:
    name: str
    ct: np.ndarray  # (X, Y, Z) HU, canonical RAS+
    seg: np.ndarray  # (X, Y, Z) grouped TotalSegmentator ids, IGNORE where unknown
    spacing: tuple[float, ...]
    source: dict[str, Any]  # files and sha256


def render_hu(ct: np.ndarray, z: int, spacing: tuple[float, ...], size: int) -> np.ndarray:
    """One axial slice in the generator's display geometry, HU (float32), air outside."""
    geom = Geometry.for_slice(ct.shape[:2], spacing[:2], size)
    disp = to_display(ct[:, :, z]).astype(np.float32)
    img = Image.fromarray(disp, mode="F").resize(
        (geom.content_w, geom.content_h), Image.Resampling.BILINEAR
    )
    out = np.full((size, size), -1024.0, np.float32)
    out[geom.pad_y : geom.pad_y + geom.content_h, geom.pad_x : geom.pad_x + geom.content_w] = img
    return out


def render_lab(seg: np.ndarray, z: int, spacing: tuple[float, ...], size: int) -> np.ndarray:
    from radspatial.imaging.slices import render_labels

    geom = Geometry.for_slice(seg.shape[:2], spacing[:2], size)
    return render_labels(to_display(seg[:, :, z]), geom)


def shared_data() -> Path:
    here = Path(__file__).resolve()
    for root in (*here.parents, Path.cwd(), *Path.cwd().parents):
        cand = root / "shared" / "data"
        if (cand / "totalseg_example").is_dir():
            return cand
    return Path("/work/shared/data")


def patient_a(root: Path) -> TrainVolume:
    from radspatial.imaging.volumes import Case, load_case

    ts = root / "totalseg_example"
    ct, seg = ts / "example_ct.nii.gz", ts / "example_seg_fast_force_split.nii.gz"
    vol = load_case(Case("patient_a", ct, seg, "totalsegmentator"))
    source = {"ct": str(ct.name), "ct_sha256": sha256_file(ct)}
    source |= {"seg": str(seg.name), "seg_sha256": sha256_file(seg)}
    source["levels"] = vertebral_levels(Case("patient_a", ct, seg, "totalsegmentator"))
    return TrainVolume("patient_a", vol.ct, vol.seg, vol.spacing, source)


def patient_c(root: Path) -> TrainVolume:
    """dcmqi_ct3: liver, vertebrae, stomach labelled; the rest of the body unknown."""
    import nibabel as nib
    import nrrd

    from radspatial.imaging.volumes import load_ct

    folder = root / "dcmqi_ct3"
    ct, ct_affine, _ = load_ct(folder / "ct-3slice")
    seg = np.zeros(ct.shape, np.uint16)
    source: dict[str, Any] = {"ct": "ct-3slice/*.dcm"}
    for i, f in enumerate(sorted((folder / "ct-3slice").glob("*.dcm"))):
        source[f"ct_{i}_sha256"] = sha256_file(f)
    for name, mapping in _DCMQI_LABELS.items():
        data, header = nrrd.read(str(folder / name))
        if header.get("space") != "left-posterior-superior":
            raise ValueError(f"{folder / name}: space {header.get('space')!r}, expected LPS")
        affine = np.eye(4)
        affine[:3, :3] = np.asarray(header["space directions"], float).T
        affine[:3, 3] = np.asarray(header["space origin"], float)
        affine[:2] *= -1  # LPS -> RAS
        ornt = nib.orientations.io_orientation(affine)
        data = nib.orientations.apply_orientation(data, ornt)
        canon = affine @ nib.orientations.inv_ornt_aff(ornt, data.shape)
        if data.shape != ct.shape or not np.allclose(canon, ct_affine, atol=1e-2):
            raise ValueError(f"{folder / name}: label map grid differs from the CT's")
        for value, ts_id in mapping.items():
            seg[data == value] = ts_id
        source[f"{name}_sha256"] = sha256_file(folder / name)
    body = body_mask_volume(ct)
    seg[(seg == 0) & body] = IGNORE
    spacing = tuple(float(np.linalg.norm(ct_affine[:3, k])) for k in range(3))
    source["levels"] = []  # its spine is one label: no level is named
    return TrainVolume("patient_c", ct, seg, spacing, source)


def patient_b(root: Path) -> TrainVolume:
    """The DICOM series (LPS on disk) with its NIfTI TotalSegmentator labels (RAS), both read
    to canonical RAS+ by the generator's loader, which checks they share one grid."""
    from radspatial.imaging.volumes import Case, load_case

    ts = root / "totalseg_example"
    folder, seg = ts / "ct_dicom", ts / "example_seg_dicom.nii.gz"
    vol = load_case(Case("patient_b", folder, seg, "totalsegmentator"))
    levels = vertebral_levels(Case("patient_b", folder, seg, "totalsegmentator"))
    source: dict[str, Any] = {"ct": "ct_dicom/*.dcm"}
    for i, f in enumerate(sorted(p for p in folder.iterdir() if p.is_file())):
        source[f"ct_{i}_sha256"] = sha256_file(f)
    source |= {"seg": seg.name, "seg_sha256": sha256_file(seg), "levels": levels}
    return TrainVolume("patient_b", vol.ct, vol.seg, vol.spacing, source)


def chest_slab(root: Path) -> TrainVolume:
    """gstt_thorax: the real chest slab through its RTSTRUCT (model-output labels)."""
    from radspatial.imaging.volumes import Case, load_case

    folder = root / "gstt_thorax"
    ct, rt = folder / "ct_dicom", folder / "rtstruct" / "rt-struct-test-data-81-100.dcm"
    case = Case("chest", ct, rt, "totalsegmentator")
    vol = load_case(case, uneven=True, warn=lambda _: None)
    source: dict[str, Any] = {"ct": "gstt_thorax/ct_dicom/*.dcm"}
    for i, f in enumerate(sorted(p for p in ct.iterdir() if p.is_file())):
        source[f"ct_{i}_sha256"] = sha256_file(f)
    source |= {"seg": f"gstt_thorax/rtstruct/{rt.name}", "seg_sha256": sha256_file(rt)}
    source["labels"] = "TotalSegmentator v1 model output (not manual)"
    source["levels"] = vertebral_levels(case)
    return TrainVolume("patient_chest", vol.ct, vol.seg, vol.spacing, source)


def vertebral_levels(case: Any) -> list[str]:
    """The vertebral levels a case's labels name (``vertebrae_T7`` ...), head to feet; empty
    where the spine is one label. Read with the table's own ids (no grouping)."""
    from radspatial.imaging.volumes import load_case
    from radspatial.questions.decidability import LEVELS

    vol = load_case(case, group=False, uneven=True, warn=lambda _: None)
    names = vol.table.names
    present = {
        names[i].removeprefix("vertebrae_").upper()
        for i in np.unique(vol.seg).tolist()
        if str(names.get(i, "")).startswith("vertebrae_")
    }
    return [level for level in LEVELS if level in present]


def levels_record(sources: list[dict], labs: np.ndarray, names: dict[int, str]) -> dict:
    """What the real training images covered (config.json ``data.real.levels``): each
    volume's vertebral levels, their span, and every structure with its number of real
    slices (the agent answers only structures seen in real texture: ``structures_real``)."""
    from radspatial.questions.decidability import LEVELS

    per = {s["name"]: s.get("levels", []) for s in sources}
    every = [lv for lv in LEVELS if any(lv in v for v in per.values())]
    counts: dict[str, int] = {}
    for lab in labs:
        for label_id in np.unique(lab).tolist():
            if label_id not in (0, IGNORE) and label_id in names:
                counts[names[label_id]] = counts.get(names[label_id], 0) + 1
    for whole, parts in composite_ids().values():  # the heart, where only its parts are
        n = sum(bool(np.isin(lab, parts).any()) for lab in labs)
        if n and names.get(whole) and names[whole] not in counts:
            counts[names[whole]] = n
    return {
        "vertebrae": per,
        "span": [every[0], every[-1]] if every else None,
        "structures_real": dict(sorted(counts.items())),
    }


def body_mask_volume(ct: np.ndarray) -> np.ndarray:
    return np.stack([body_mask(ct[:, :, z] > BODY_HU) for z in range(ct.shape[2])], axis=2)


DEFAULT_VOLUMES = ("a", "c")
READERS = {"a": patient_a, "b": patient_b, "c": patient_c, "chest": chest_slab}
VOLUME_NAMES = {key: f"patient_{key}" for key in READERS}  # each reader's TrainVolume.name
# a patient's files when not trained on
HELD_OUT_FILES = {"b": "totalseg_example/ct_dicom", "chest": "gstt_thorax"}


def training_volumes(root: Path | None = None, names: tuple[str, ...] = DEFAULT_VOLUMES):
    root = Path(root) if root else shared_data()
    unknown = [n for n in names if n not in READERS]
    if unknown:
        raise ValueError(f"unknown training volume(s) {unknown}; known: {sorted(READERS)}")
    return [READERS[n](root) for n in names]


def held_out(names: tuple[str, ...]) -> list[str]:
    """The shared files a model trained on ``names`` never read (its real test data)."""
    return [f for key, f in HELD_OUT_FILES.items() if key not in names] + ["mirp_sample"]


def parse_exclude(specs: tuple[str, ...]) -> dict[str, set[int]]:
    """``("a:86-97", "c:1")`` -> {"patient_a": {86, ..., 97}, "patient_c": {1}} (z indices of
    the canonical RAS grid, inclusive ranges)."""
    out: dict[str, set[int]] = {}
    for spec in specs:
        key, _, ranges = spec.partition(":")
        zs = out.setdefault(VOLUME_NAMES.get(key, key), set())
        for part in ranges.split("+"):
            lo, _, hi = part.partition("-")
            zs.update(range(int(lo), int(hi or lo) + 1))
    return out


def banks(
    vols: list[TrainVolume], size: int, exclude: dict[str, set[int]] | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], list]:
    """(HU float16 (n, S, S), label ids uint16 (n, S, S)) of every slice with >= 1 structure,
    and the per-volume source records (with the number of slices used); ``exclude``: z indices
    per volume name kept out (a validation slab)."""
    hus, labs, sources = [], [], []
    exclude = exclude or {}
    for v in vols:
        used = 0
        skip = exclude.get(v.name, set())
        for z in range(v.ct.shape[2]):
            if z in skip:
                continue
            if not np.any((v.seg[:, :, z] > 0) & (v.seg[:, :, z] != IGNORE)):
                continue
            hus.append(render_hu(v.ct, z, v.spacing, size).astype(np.float16))
            labs.append(render_lab(v.seg, z, v.spacing, size))
            used += 1
        record = {"name": v.name, **v.source, "slices": used}
        if skip:
            record["excluded_z"] = (
                f"{min(skip)}-{max(skip)}"
                if len(skip) == max(skip) - min(skip) + 1
                else sorted(skip)
            )
        sources.append(record)
    return (np.stack(hus), np.stack(labs)), sources


def plausibility(hu: np.ndarray, lab: np.ndarray, margin: float = 0.5) -> dict[int, dict]:
    """Per label id: [lo, hi] of area / body area and of centroid distance from the body's
    centroid / body radius over the training slices, widened by ``margin`` (x (1 - margin)
    and x (1 + margin)); rotation, flip and zoom invariant."""
    stats: dict[int, list[tuple[float, float]]] = {}
    wholes = composite_ids().values()
    for h, lb in zip(hu, lab, strict=True):
        body = body_mask(h.astype(np.float32) > BODY_HU)
        if body.sum() < 50:
            continue
        present = np.unique(lb[body]).tolist()
        for label_id in present:
            if label_id in (0, IGNORE):
                continue
            stats.setdefault(int(label_id), []).append(region_stats(lb == label_id, body))
        for whole, parts in wholes:  # the heart as its five v1 parts
            if whole not in present and any(p in present for p in parts):
                stats.setdefault(whole, []).append(region_stats(np.isin(lb, parts), body))
    out = {}
    for label_id, vals in stats.items():
        a, r = np.array(vals).T
        out[label_id] = {
            "area_frac": [round(float(a.min()) * (1 - margin), 5), round(float(a.max()) * 2, 5)],
            "radial": [round(float(r.min()) * (1 - margin), 4), round(float(r.max()) + margin, 4)],
            "n_slices": len(vals),
        }
    return out


def plausibility_of(real: tuple, drawn: tuple) -> dict[int, dict]:
    """:func:`plausibility` over every labelled training slice, real and synthesised from
    label maps (a structure only a label map holds gets a range too)."""
    if not len(drawn[0]):
        return plausibility(real[0], real[1])
    if not len(real[0]):
        return plausibility(drawn[0], drawn[1])
    return plausibility(np.concatenate([real[0], drawn[0]]), np.concatenate([real[1], drawn[1]]))
