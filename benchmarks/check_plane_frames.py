"""The mask oracle in all three answer frames, each read its own way, on a generated dataset.

For every relative-position item of a dataset made with ``--export-masks``:

- image frame: the two labels' centroids on the exported mask of the shown image;
- standard frame: the same on that mask with the item's rotation/flip undone here (numpy, not
  the generator's code);
- anatomical frame: from the CT volume in world millimetres, with no display convention at
  all: the centroid of each label's voxels on the item's slice (``source.slice_index`` along the
  plane's normal: z axial, y coronal, x sagittal, of the canonical RAS+ volume) mapped through
  the affine; "left of" is the patient's left (smaller world x) on axial and coronal slices and
  anterior (larger world y) on sagittal ones; "above" is anterior on axial slices and superior
  (larger world z) on the others (``docs/planes.md``).

Prints, per plane and frame, how many of n items the oracle answers as the dataset says. Run
from the folder the dataset was generated in (its ``source.ct`` paths are relative to it):

    python benchmarks/check_plane_frames.py --data DATA
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from PIL import Image

from radspatial.imaging.volumes import Case, load_case

_NORMAL = {"axial": 2, "coronal": 1, "sagittal": 0}  # canonical axis of the slice normal
# world axis and sign of "left of" / "above" in the patient's frame, per plane
_LEFT = {"axial": (0, -1), "coronal": (0, -1), "sagittal": (1, +1)}
_UP = {"axial": (1, +1), "coronal": (2, +1), "sagittal": (2, +1)}


def undo_variant(shown: np.ndarray, code: str) -> np.ndarray:
    """The standard-view image of a shown one (MIRP's codes: A flipped, then 1..4 quarter
    turns counter-clockwise)."""
    out = np.rot90(shown, -(int(code[1]) - 1))
    return out[:, ::-1] if code[0] == "A" else out


def centroid(mask: np.ndarray, label: int) -> tuple[float, float] | None:
    ys, xs = np.nonzero(mask == label)
    return (float(xs.mean()), float(ys.mean())) if xs.size else None


def image_answer(relation: str, c1, c2) -> int:
    axis = 0 if relation in ("left_of", "right_of") else 1
    smaller = c1[axis] < c2[axis]
    return int(smaller == (relation in ("left_of", "above")))


def world_answer(vol, plane: str, k: int, relation: str, l1: int, l2: int) -> int | None:
    """The patient-frame answer from the labels' voxel centroids on the slice, in world mm."""
    index = [slice(None)] * 3
    index[_NORMAL[plane]] = k
    centres = []
    for label in (l1, l2):
        ijk = np.argwhere(vol.seg[tuple(index)] == label).astype(float)
        if not len(ijk):
            return None
        ijk = np.insert(ijk, _NORMAL[plane], float(k), axis=1).mean(axis=0)
        centres.append(np.asarray(vol.affine)[:3, :3] @ ijk + np.asarray(vol.affine)[:3, 3])
    axis, sign = (_LEFT if relation in ("left_of", "right_of") else _UP)[plane]
    first_further = sign * (centres[0][axis] - centres[1][axis]) > 0  # further left / up
    return int(first_further == (relation in ("left_of", "above")))


def check(data: Path) -> dict[tuple[str, str], list[int]]:
    meta = json.loads((data / "dataset.json").read_text())
    labels = {c["case_id"]: c["labels"] for c in meta["cases"]}
    vols: dict[str, object] = {}
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for line in (data / "manifest.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("question_type") != "relative_position" or not r.get("mask"):
            continue
        plane, src = r.get("plane") or "axial", r["source"]
        shown = np.asarray(Image.open(data / r["mask"]))
        l1, l2 = r["object1"]["label_id"], r["object2"]["label_id"]
        if src["case_id"] not in vols:
            case = Case(src["case_id"], src["ct"], src["seg"], labels[src["case_id"]])
            vols[src["case_id"]] = load_case(case)
        said = {
            "image": image_answer(r["relation"], centroid(shown, l1), centroid(shown, l2)),
            "standard": image_answer(
                r["relation"], *(centroid(undo_variant(shown, r["transform"]), x) for x in (l1, l2))
            ),
            "anatomical": world_answer(
                vols[src["case_id"]], plane, src["slice_index"], r["relation"], l1, l2
            ),
        }
        truth = {
            "image": r["answer"],
            "standard": r["answer_standard"],
            "anatomical": r["answer_anatomical"],
        }
        for frame, answer in said.items():
            t = tally[(plane, frame)]
            t[0] += 1
            t[1] += answer == truth[frame]
    return dict(tally)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    args = ap.parse_args()
    for (plane, frame), (n, right) in sorted(check(args.data).items()):
        print(f"{plane:9s} {frame:10s} {right}/{n} ({100 * right / n:.1f}%)")


if __name__ == "__main__":
    main()
