"""docs/planes.png: one slice of patient A's full scan in each plane (rows) and variant
(columns), rendered by the generator's own code, with the structures of one pair marked.

    python benchmarks/planes_figure.py [--out docs/planes.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from radspatial.imaging.markers import Mark, draw_marks
from radspatial.imaging.planes import PLANES, VIEW, reformat
from radspatial.imaging.slices import (
    VARIANTS,
    Geometry,
    Variant,
    render_gray,
    structure_stats,
    to_display,
)
from radspatial.imaging.volumes import Case, load_case

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "totalseg_example"
SLICE = {"axial": 80, "coronal": 50, "sagittal": 61}
PAIR = {
    "axial": ("liver", "aorta"),
    "coronal": ("liver", "spleen"),
    "sagittal": ("liver", "urinary_bladder"),
}
TILE = 200


def tile(vol, plane: str, code: str) -> np.ndarray:
    v = reformat(vol, plane)
    geom = Geometry.for_slice(v.ct.shape[:2], v.spacing[:2], TILE)
    k = SLICE[plane]
    gray = render_gray(to_display(v.ct[:, :, k]), geom, (400.0, 40.0))
    stats = structure_stats(to_display(v.seg[:, :, k]), geom)
    ids = {name: i for i, name in v.table.names.items()}
    variant = Variant(code)
    rgb = variant.apply_image(np.repeat(gray[:, :, None], 3, axis=2))
    marks = [
        Mark("dots", colour, variant.apply_point(stats[ids[name]].marker_xy, TILE))
        for name, colour in zip(PAIR[plane], ("red", "blue"), strict=True)
        if ids.get(name) in stats
    ]
    return draw_marks(rgb, marks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "planes.png")
    args = ap.parse_args()
    case = Case("a", DATA / "example_ct.nii.gz", DATA / "example_seg_fast_force_split.nii.gz",
                "totalsegmentator")  # fmt: skip
    vol = load_case(case)
    head, left = 18, 150
    sheet = Image.new("RGB", (left + TILE * len(VARIANTS), head + TILE * len(PLANES)), "white")
    draw = ImageDraw.Draw(sheet)
    for c, code in enumerate(VARIANTS):
        draw.text((left + c * TILE + TILE // 2 - 8, 3), code, fill="black")
    for r, plane in enumerate(PLANES):
        view = VIEW[plane]
        a, b = PAIR[plane]
        text = f"{plane} {SLICE[plane]}\nB1: left = {view['left']}\ntop = {view['top']}\n"
        draw.multiline_text((4, head + r * TILE + 60), text + f"red {a}\nblue {b}", fill="black")
        for c, code in enumerate(VARIANTS):
            sheet.paste(Image.fromarray(tile(vol, plane, code)), (left + c * TILE, head + r * TILE))
    sheet.save(args.out, optimize=True)
    print(args.out)


if __name__ == "__main__":
    main()
