"""Model selection for the ``organs`` localizer on non-held-out data: a validation slab of
patient A and the MR patient, shipped model against a candidate.

    .venv/bin/python benchmarks/bench_organs_val.py --model-dir runs/candidate --slab 88-95

Sets: ``slab``, patient A's slices ``--slab`` (a candidate trained with ``--exclude a:...``
never saw them; the shipped model may have) at W400/L40 and W1500/L-100; ``mr``, the MR
patient (``totalseg_mr``, a third patient and another modality) at its 1-99 percentile
window, ``total_mr`` ids mapped to the CT classes by name. Truth: the centroid of each
structure's largest component of >= ``--min-px`` px on the 512 px image. Every localization
goes through the shipped checks as ``bench_organs_checks.py`` replays them (4 copies, core
score floor, votes, spread, plausibility); answered = passes them, right = centre within
``--ok-px`` px. Prints per model and set: answered, right, wrong, coverage and precision
(Wilson 95 % CIs), and per structure found / present and the median centre error. Held-out
sets (patient B, MIRP) are never read here.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

WINDOWS = ((400, 40), (1500, -100))
VARIANTS = 4  # the shipped checks' copies


def _objects(lab: np.ndarray, names: dict[int, str], min_px: int) -> list:
    from radspatial.agent.localizers.organs import organs_checks
    from radspatial.training.organs_data import IGNORE

    out = []
    for label_id in np.unique(lab).tolist():
        if label_id in (0, IGNORE) or label_id not in names:
            continue
        region = organs_checks.largest(lab == label_id)
        if region is None or region.sum() < min_px:
            continue
        ys, xs = np.nonzero(region)
        out.append((names[label_id], [float(xs.mean()), float(ys.mean())]))
    return out


def slab_items(zs: list[int], min_px: int, size: int = 512):
    from radspatial.core.labels import load_table
    from radspatial.imaging.slices import window_to_uint8
    from radspatial.training import organs_data

    names = load_table("totalsegmentator", group=True).names
    vol = organs_data.patient_a(organs_data.shared_data())
    for z in zs:
        hu = organs_data.render_hu(vol.ct, z, vol.spacing, size)
        objects = _objects(organs_data.render_lab(vol.seg, z, vol.spacing, size), names, min_px)
        for w, lv in WINDOWS:
            grey = window_to_uint8(hu, w, lv)
            yield f"slab:a_z{z}_W{w}L{lv}", np.stack([grey] * 3, axis=2), objects


def mr_items(min_px: int, size: int = 512):
    from radspatial.core.labels import load_table
    from radspatial.imaging.slices import percentile_window, window_to_uint8
    from radspatial.imaging.volumes import Case, load_case
    from radspatial.training import organs_data

    root = organs_data.shared_data() / "totalseg_mr"
    case = Case(
        "mr", root / "example_mr_sm.nii.gz", root / "example_seg_mr.nii.gz", "totalsegmentator_mr"
    )
    vol = load_case(case)
    names = load_table("totalsegmentator_mr", group=True).names  # the CT classes' names
    window = percentile_window(vol.ct)
    for z in range(vol.ct.shape[2]):
        img = organs_data.render_hu(vol.ct, z, vol.spacing, size)
        objects = _objects(organs_data.render_lab(vol.seg, z, vol.spacing, size), names, min_px)
        if objects:
            grey = window_to_uint8(img, *window)
            yield f"mr:z{z}", np.stack([grey] * 3, axis=2), objects


def per_structure(rows: list[dict]) -> dict:
    per: dict[str, dict] = defaultdict(lambda: {"present": 0, "found": 0, "errs": []})
    for r in rows:
        if not r["known"]:
            continue
        s = per[r["name"]]
        s["present"] += 1
        v = r[str(VARIANTS)]
        if v.get("found"):
            s["found"] += 1
            s["errs"].append(v["err_px"])
    return {
        n: {
            "found": s["found"],
            "present": s["present"],
            "median_err_px": round(statistics.median(s["errs"]), 1) if s["errs"] else None,
        }
        for n, s in sorted(per.items())
    }


def measure(model_dir: Path | None, items: list, ok_px: float) -> dict:
    import bench_organs_checks as boc

    from radspatial.agent.localizers.organs import organs
    from radspatial.agent.localizers.organs.organs import OrgansLocalizer

    loc = OrgansLocalizer(model_dir)
    rows_by_set: dict[str, list] = defaultdict(list)
    for item_id, image, objects in items:
        for r in boc.records(loc, image, objects, ok_px):
            rows_by_set[item_id.split(":")[0]].append({"item": item_id, **r})
    out = {}
    for name, rows in rows_by_set.items():
        s = boc.summarise(rows, VARIANTS, organs.MIN_SCORE, 0.75, 0.25, "score")
        passed = [
            r[str(VARIANTS)]
            for r in rows
            if r["known"]
            and not boc.reject_reasons(r[str(VARIANTS)], VARIANTS, organs.MIN_SCORE, 3, 0.25)
        ]
        answered, right = len(passed), sum(bool(v["ok"]) for v in passed)
        out[name] = {
            **s,
            "answered": answered,
            "right": right,
            "wrong": answered - right,
            "structures": per_structure(rows),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, action="append", help="repeat; none: shipped")
    p.add_argument("--tag", action="append")
    p.add_argument("--slab", default="88-95", help="patient A z range (inclusive)")
    p.add_argument("--min-px", type=int, default=200)
    p.add_argument("--ok-px", type=float, default=20.0)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    import torch

    torch.set_num_threads(1)
    lo, _, hi = a.slab.partition("-")
    items = list(slab_items(list(range(int(lo), int(hi or lo) + 1)), a.min_px))
    items += list(mr_items(a.min_px))
    dirs = a.model_dir or [None]
    tags = a.tag or [str(d or "shipped") for d in dirs]
    report = {}
    for model_dir, tag in zip(dirs, tags, strict=True):
        report[tag] = measure(model_dir, items, a.ok_px)
        for set_name, s in report[tag].items():
            head = {k: v for k, v in s.items() if k != "structures"}
            print(tag, set_name, json.dumps(head))
            for n, st in s["structures"].items():
                print(f"    {n}: {json.dumps(st)}")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
