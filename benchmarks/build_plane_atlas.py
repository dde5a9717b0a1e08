"""Learn the anatomy prior's coronal and sagittal atlases (``radspatial/data/atlas.json``).

Per plane, the mean standard-view centre (normalised to [0, 1] of the square image) of every
named structure over all slices of patient A's full scan that show it, each slice weighted by
the structure's area in it (its centre of mass, seen in that plane); and per pair of
structures seen on the same slice, the mean difference of their centres over those slices,
each weighted by the smaller area (``models.baselines.pair_offsets``: the anatomy prior reads a
pair from it first). The axial ``centres`` are left as they are. Run from the repository root:

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
from radspatial.models.baselines import Seen, pair_offsets

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "totalseg_example"
ATLAS = ROOT / "src" / "radspatial" / "data" / "atlas.json"
SIZE = 512


def seen_per_slice(vol, plane: str) -> list[list[Seen]]:
    """Every named structure on every slice of ``plane``: (name, x, y, area), x and y the
    standard-view centre normalised to [0, 1] of the square image."""
    v = reformat(vol, plane)
    geom = Geometry.for_slice(v.seg.shape[:2], v.spacing[:2], SIZE)
    out = []
    for k in range(v.seg.shape[2]):
        stats = structure_stats(to_display(v.seg[:, :, k]), geom).items()
        named = [(v.table.names.get(label), s) for label, s in stats]
        out.append(
            [(n, s.center_xy[0] / SIZE, s.center_xy[1] / SIZE, s.area_px) for n, s in named if n]
        )
    return out


def plane_atlas(seen: list[list[Seen]]) -> dict[str, list[float]]:
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for name, x, y, area in (s for one in seen for s in one):
        acc = sums[name]
        acc[0] += area * x
        acc[1] += area * y
        acc[2] += area
    return {n: [round(a / c, 4), round(b / c, 4)] for n, (a, b, c) in sorted(sums.items())}


def plane_pairs(seen: list[list[Seen]]) -> dict[str, list[float]]:
    """Pair offsets, one entry per unordered pair ("a|b" with a < b: centre(a) - centre(b))."""
    pairs = pair_offsets(seen)
    return {f"{a}|{b}": [round(d[0], 4), round(d[1], 4)] for (a, b), d in pairs.items() if a < b}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ct", type=Path, default=DATA / "example_ct.nii.gz")
    ap.add_argument("--seg", type=Path, default=DATA / "example_seg_fast_force_split.nii.gz")
    args = ap.parse_args()
    vol = load_case(Case("patient_a", args.ct, args.seg, "totalsegmentator"))
    atlas = json.loads(ATLAS.read_text())
    seen = {p: seen_per_slice(vol, p) for p in ("coronal", "sagittal")}
    atlas["planes"] = {p: plane_atlas(s) for p, s in seen.items()}
    atlas["plane_pairs"] = {p: plane_pairs(s) for p, s in seen.items()}
    atlas["planes_source"] = (
        "coronal/sagittal: mean standard-view centre per structure, normalised to [0, 1], over "
        "every slice of TotalSegmentator's full example CT (patient A, pelvis to T11; its fast "
        "model's labels, Apache-2.0) that shows it; plane_pairs: per pair 'a|b', the mean of "
        "centre(a) - centre(b) over the slices showing both, weighted by the smaller area; on "
        "patient A this atlas is in-sample"
    )
    ATLAS.write_text(json.dumps(atlas, indent=1, sort_keys=True) + "\n")
    print({p: (len(a), len(atlas["plane_pairs"][p])) for p, a in atlas["planes"].items()})


if __name__ == "__main__":
    main()
