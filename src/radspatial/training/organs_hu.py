"""Measure per-class CT intensities on our real scans: the data table ``organs_synth`` draws from.

    python -m radspatial.training.organs_hu --out src/radspatial/data/ct_hu_table.json

For every labelled structure of each real CT (patient A: ``example_ct`` + its ``--fast``
labels; patient C: ``dcmqi_ct3`` with its NRRD maps; patient B: the DICOM series with its
mask, measured for comparison only), the HU of its voxels one voxel inside its border (no
partial volume) are pooled per intensity class (``organs_synth.intensity_class``); fat is
the body's unlabelled voxels between -200 and -20 HU. The table's ``classes`` (what synthesis
uses) pool the *training* patients only (``--pool``, default A and C): patient B stays
unseen by training even through its intensities. Per class: ``mean`` (mean of the structures'
means), ``between_sd`` (spread of those means, at least 15 HU), ``within_sd`` (mean of the
structures' own spreads), the structures and voxels counted. Every file's sha256 is recorded.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from radspatial.core.io import atomic_write_json

MIN_BETWEEN = 15.0  # HU: the least spread of a class mean between draws
FAT_HU = (-200.0, -20.0)


def structure_stats(ct: np.ndarray, seg: np.ndarray, names: dict[int, str]) -> list[dict]:
    """(name, class, mean, sd, n) of every structure's eroded voxels and of the body's fat."""
    from scipy import ndimage

    from radspatial.training.organs_data import IGNORE, body_mask_volume
    from radspatial.training.organs_synth import intensity_class

    rows = []
    for label_id in np.unique(seg).tolist():
        if label_id in (0, IGNORE) or label_id not in names:
            continue
        core = ndimage.binary_erosion(seg == label_id)
        if core.sum() < 20:
            continue
        v = ct[core]
        name = names[label_id]
        rows.append(_row(name, intensity_class(name), v))
    body = body_mask_volume(ct)
    v = ct[body & (seg == 0)]
    v = v[(v > FAT_HU[0]) & (v < FAT_HU[1])]
    if v.size > 100:
        rows.append(_row("unlabelled body fat", "fat", v))
    return rows


def _row(name: str, cls: str, v: np.ndarray) -> dict:
    return {
        "structure": name,
        "class": cls,
        "mean": round(float(v.mean()), 1),
        "sd": round(float(v.std()), 1),
        "n": int(v.size),
    }


def patients(root: Path) -> dict[str, tuple[np.ndarray, np.ndarray, dict]]:
    """name -> (CT HU, grouped label ids, source with sha256) of each real labelled CT."""
    from radspatial.core.labels import load_table
    from radspatial.imaging.volumes import Case, load_case
    from radspatial.training import organs_data

    out = {}
    for vol in organs_data.training_volumes(root, ("a", "c")):
        out[vol.name] = (vol.ct, vol.seg, vol.source)
    ts = root / "totalseg_example"
    b = load_case(Case("patient_b", ts / "ct_dicom", ts / "example_seg_dicom.nii.gz"))
    out["patient_b"] = (b.ct, b.seg, {k: b.source[k] for k in ("seg", "seg_sha256", "ct")})
    names = load_table("totalsegmentator", group=True).names
    return {k: (*v, names) for k, v in out.items()}  # type: ignore[misc]


def pool(rows: list[dict]) -> dict[str, dict]:
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["class"], []).append(r)
    out = {}
    for cls, rs in sorted(by.items()):
        means = np.array([r["mean"] for r in rs])
        out[cls] = {
            "mean": round(float(means.mean()), 1),
            "between_sd": round(max(MIN_BETWEEN, float(means.std())), 1),
            "within_sd": round(float(np.mean([r["sd"] for r in rs])), 1),
            "structures": len(rs),
            "voxels": int(sum(r["n"] for r in rs)),
        }
    return out


def build(root: Path, pooled: tuple[str, ...]) -> dict:
    per = {}
    sources = {}
    for name, (ct, seg, source, names) in patients(root).items():
        per[name] = structure_stats(ct, seg, names)
        sources[name] = source
    rows = [r for name in pooled for r in per[name]]
    return {
        "format": "radspatial-ct-hu-table",
        "pooled_patients": list(pooled),
        "classes": pool(rows),
        "per_patient_classes": {n: pool(rs) for n, rs in per.items()},
        "per_patient_structures": per,
        "sources": sources,
        "method": __doc__.split("\n\n")[2].replace("\n", " "),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--data", type=Path)
    p.add_argument("--pool", default="patient_a,patient_c")
    a = p.parse_args(argv)
    from radspatial.training.organs_data import shared_data

    table = build(a.data or shared_data(), tuple(a.pool.split(",")))
    table["command"] = f"python -m radspatial.training.organs_hu --out {a.out} --pool {a.pool}"
    atomic_write_json(a.out, table)
    for cls, s in table["classes"].items():
        print(f"{cls}: {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
