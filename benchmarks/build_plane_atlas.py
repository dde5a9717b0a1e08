"""Learn the anatomy prior's coronal and sagittal atlases (``radspatial/data/atlas.json``).

Per plane, the mean standard-view centre (normalised to [0, 1] of the square image) of every
named structure over all slices of patient A's full scan that show it, each slice weighted by
the structure's area in it (its centre of mass, seen in that plane); the axial ``centres``
are left as they are. Run from the repository root:

    python benchmarks/build_plane_atlas.py [--ct CT --seg SEG]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from radspatial.imaging.planes import reformat
from radspatial.imaging.slices import Geometry, structure_stats, to_display
from radspatial.imaging.volumes import Case, load_case

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "totalseg_example"
ATLAS = ROOT / "src" / "radspatial" / "data" / "atlas.json"
SIZE = 512


def plane_atlas(vol, plane: str) -> dict[str, list[float]]:
    v = reformat(vol, plane)
    geom = Geometry.for_slice(v.seg.shape[:2], v.spacing[:2], SIZE)
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for k in range(v.seg.shape[2]):
        for label, s in structure_stats(to_display(v.seg[:, :, k]), geom).items():
            name = v.table.names.get(label)
            if name:
                acc = sums[name]
                acc[0] += s.area_px * s.center_xy[0] / SIZE
                acc[1] += s.area_px * s.center_xy[1] / SIZE
                acc[2] += s.area_px
    return {n: [round(a / c, 4), round(b / c, 4)] for n, (a, b, c) in sorted(sums.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ct", type=Path, default=DATA / "example_ct.nii.gz")
    ap.add_argument("--seg", type=Path, default=DATA / "example_seg_fast_force_split.nii.gz")
    args = ap.parse_args()
    vol = load_case(Case("patient_a", args.ct, args.seg, "totalsegmentator"))
    atlas = json.loads(ATLAS.read_text())
    atlas["planes"] = {p: plane_atlas(vol, p) for p in ("coronal", "sagittal")}
    atlas["planes_source"] = (
        "coronal/sagittal: mean standard-view centre per structure, normalised to [0, 1], over "
        "every slice of TotalSegmentator's full example CT (patient A, pelvis to T11; its fast "
        "model's labels, Apache-2.0) that shows it; on patient A this atlas is in-sample"
    )
    ATLAS.write_text(json.dumps(atlas, indent=1, sort_keys=True) + "\n")
    print({p: len(a) for p, a in atlas["planes"].items()})


if __name__ == "__main__":
    main()
