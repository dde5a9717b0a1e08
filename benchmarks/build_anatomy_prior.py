"""Learn ``baseline:anatomy-prior``'s built-in atlas from every anatomy we have (issue #34).

    .venv/bin/python benchmarks/build_anatomy_prior.py

Anatomies: patient A (its ``--fast`` labels), patient C (3 labelled slices; axial only: three
slices make no coronal or sagittal picture), and the label maps of AMOS amos_0013,
TotalSegmentator s0327 and s0328 and the MR patient (``training/organs_labelmaps``: their ids
mapped by name onto TotalSegmentator's). Patient B, the held-out patient, is no longer used
(the previous axial centres averaged the bundled example CT and B's DICOM series).

Per anatomy and plane, the area-weighted mean standard-view centre of each structure over the
slices showing it and the pair offsets (``build_plane_atlas``); then per structure (pair) the
mean over the anatomies that show it, each anatomy weighted equally. Writes
``radspatial/data/atlas.json`` (``centres``, ``planes``, ``plane_pairs``) with ``anatomies``
and each source's sha256.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict

import numpy as np
from build_plane_atlas import ATLAS, plane_atlas, plane_pairs, seen_per_slice

from radspatial.core.labels import load_table
from radspatial.imaging.volumes import Volume
from radspatial.training import organs_data, organs_labelmaps

PLANES = ("axial", "coronal", "sagittal")


def anatomies() -> list[tuple[str, Volume, dict, tuple[str, ...]]]:
    """(name, Volume with grouped TotalSegmentator ids, source, planes it serves)."""
    table = load_table("totalsegmentator", group=True)
    out = []
    for tv in organs_data.training_volumes(None, ("a", "c")):
        seg = np.where(tv.seg == organs_data.IGNORE, 0, tv.seg).astype(np.uint16)
        planes = PLANES if tv.name == "patient_a" else ("axial",)
        out.append((tv.name, _volume(tv.name, seg, tv.spacing, table), tv.source, planes))
    for name in organs_labelmaps.LABEL_MAPS:
        lv = organs_labelmaps.label_volume(name)
        seg = np.where(lv.seg == organs_data.IGNORE, 0, lv.seg).astype(np.uint16)
        out.append((name, _volume(name, seg, lv.spacing, table), lv.source, PLANES))
    return out


def _volume(name: str, seg: np.ndarray, spacing, table) -> Volume:
    affine = np.diag([*spacing, 1.0])
    ct = np.zeros((1, 1, 1), np.float32)
    vol = Volume(name, ct, seg, affine, tuple(spacing), table, "normal", {})
    return dataclasses.replace(vol, ct=np.broadcast_to(ct, seg.shape))


def mean_over(tables: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    sums: dict[str, list] = defaultdict(list)
    for t in tables:
        for k, v in t.items():
            sums[k].append(v)
    return {
        k: [round(float(np.mean([v[i] for v in vs])), 4) for i in (0, 1)]
        for k, vs in sorted(sums.items())
    }


def main() -> None:
    per_plane: dict[str, list] = defaultdict(list)
    pairs: dict[str, list] = defaultdict(list)
    sources = []
    for name, vol, source, planes in anatomies():
        for plane in planes:
            seen = seen_per_slice(vol, plane)
            per_plane[plane].append(plane_atlas(seen))
            if plane != "axial":
                pairs[plane].append(plane_pairs(seen))
        sources.append({"name": name, "planes": list(planes), **source})
    atlas = json.loads(ATLAS.read_text())
    atlas["centres"] = mean_over(per_plane["axial"])
    atlas["planes"] = {p: mean_over(per_plane[p]) for p in ("coronal", "sagittal")}
    atlas["plane_pairs"] = {p: mean_over(pairs[p]) for p in ("coronal", "sagittal")}
    atlas["anatomies"] = len(sources)
    atlas["anatomy_sources"] = sources
    atlas["source"] = (
        f"{len(sources)} anatomies (benchmarks/build_anatomy_prior.py): per anatomy, the "
        "area-weighted mean standard-view centre of each structure over the slices showing it, "
        "normalised to [0, 1]; per structure the mean over the anatomies showing it (each "
        "weighted equally). Patient A, patient C (axial only), AMOS amos_0013, TotalSegmentator "
        "s0327 and s0328, the MR patient's labels; the held-out patient B is not used"
    )
    atlas["planes_source"] = (
        atlas["source"]
        + "; plane_pairs: per anatomy, the mean of centre(a) - centre(b) over the slices "
        + "showing both, weighted by the smaller area, then the mean over anatomies"
    )
    ATLAS.write_text(json.dumps(atlas, indent=1, sort_keys=True) + "\n")
    print({p: len(per_plane[p]) for p in PLANES}, len(atlas["centres"]), "axial structures")


if __name__ == "__main__":
    main()
