"""How many RQ1 items the image decides, per real volume and body level.

The measurement behind docs/benchmark_validity.md.

Generates MIRP's relative-position RQ1 items (default MIRP rules, 512 px, the default label
grouping) from every real volume in ../shared/data, for several seeds, and counts the items
marked decidable (``questions/decidability.py``), with Wilson 95 % intervals, overall, per
reason and per vertebral level (the largest individually labelled vertebra of the slice, read
from the ungrouped label map; "-" where the map labels no vertebra there).

The label-map patients have no CT: their grey is drawn from the labels as the agent's training
synthesis draws its typical image (``training/organs_synth.mean_slice``: every class at its
measured mean HU, a body wall and fat around the labelled hull), so the body and its midline
exist; their slices can only show the structures their maps label.

    python benchmarks/decidability_shares.py --out /tmp/decidability [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import nibabel as nib
import numpy as np

from radspatial.api import generate
from radspatial.core.labels import load_table
from radspatial.core.stats import wilson_interval

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TS = "totalsegmentator"
VOLUMES = {  # name -> (ct, seg, labels, extra generate options)
    "A (CT, pelvis to T11)": (
        "totalseg_example/example_ct.nii.gz",
        "totalseg_example/example_seg_fast_force_split.nii.gz",
        TS,
        {},
    ),
    "B (CT, DICOM, upper abdomen)": (
        "totalseg_example/ct_dicom",
        "totalseg_example/example_seg_dicom.nii.gz",
        TS,
        {},
    ),
    "C (MR, upper abdomen)": (
        "totalseg_mr/example_mr_sm.nii.gz",
        "totalseg_mr/example_seg_mr.nii.gz",
        "totalsegmentator_mr",
        {"modality": "MR"},
    ),
    "D (CT, chest slab, RTSTRUCT)": (
        "gstt_thorax/ct_dicom",
        "gstt_thorax/rtstruct/rt-struct-test-data-81-100.dcm",
        TS,
        {},
    ),
}
LABEL_MAPS = {  # name -> (label map, table)
    "amos_0013 (label map)": ("label_maps/amos_0013_label.nii.gz", "amos"),
    "s0327 (label map, neck to pelvis)": ("label_maps/s0327_seg_totalv2ids.nii.gz", TS),
    "s0328 (label map, chest base to pelvis)": ("label_maps/s0328_seg_totalv2ids.nii.gz", TS),
    "Pelvic-Ref-001 (label map, pelvis)": (
        "label_maps/Pelvic-Ref-001_labels_totalseg.nii.gz",
        "label_maps/pelvic_ref_table_totalv2ids.json",
    ),
    "Pelvic-Ref-004 (label map, pelvis)": (
        "label_maps/Pelvic-Ref-004_labels_totalseg.nii.gz",
        "label_maps/pelvic_ref_table_totalv2ids.json",
    ),
}


def synth_ct(seg_path: Path, table: str, out: Path) -> Path:
    """A CT drawn from a label map (``mean_slice`` per axial slice), on the map's grid."""
    from radspatial.training.organs_synth import mean_slice

    img = nib.load(seg_path)
    lab = np.asarray(img.dataobj).astype(np.int32)
    names = load_table(table if table in (TS, "amos") else DATA / table, group=False).names
    px = float(np.mean(img.header.get_zooms()[:2]))
    hu = np.full(lab.shape, -1000.0, np.float32)
    for z in range(lab.shape[2]):
        if lab[:, :, z].any():
            hu[:, :, z] = mean_slice(lab[:, :, z], names, px)
    nib.save(nib.Nifti1Image(hu, img.affine), out)
    return out


def levels_of(seg: Path, labels: str) -> dict[int, str] | None:
    """Slice index (canonical RAS, as generate records it) -> largest labelled vertebra."""
    try:
        from radspatial.imaging.volumes import Case, load_case

        vol = load_case(Case("levels", seg, seg, labels), group=False)
    except Exception:  # a folder CT or a format the quick read does not take: no levels
        return None
    names = vol.table.names
    ids = {
        i: n.removeprefix("vertebrae_").upper()
        for i, n in names.items()
        if n.startswith("vertebrae_")
    }
    if not ids:
        return None
    out = {}
    for z in range(vol.seg.shape[2]):
        counts = Counter(int(v) for v in vol.seg[:, :, z].ravel() if int(v) in ids)
        if counts:
            out[z] = ids[counts.most_common(1)[0][0]]
    return out


def measure(name: str, ct: Path, seg: Path, labels: str, options: dict, seeds, tmp: Path) -> dict:
    rows = []
    for seed in seeds:
        out = tmp / f"{abs(hash((name, seed)))}"
        generate(
            ct=str(ct), seg=str(seg), labels=labels, out=str(out), seed=seed, setups="rq1",
            as_count=0, markers="numbers", overwrite=True, **options,
        )  # fmt: skip
        rows += [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    levels = levels_of(seg, labels) if not str(seg).endswith(".dcm") else None
    n, k = len(rows), sum(bool(r["decidable"]) for r in rows)
    lo, hi = wilson_interval(k, n) if n else (float("nan"),) * 2
    reasons = Counter(r["decidable_reason"].split(":")[0] for r in rows)
    by_level: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        level = (levels or {}).get(r["source"]["slice_index"], "-")
        by_level[level][0] += 1
        by_level[level][1] += int(r["decidable"])
    return {
        "volume": name,
        "seeds": list(seeds),
        "n": n,
        "decidable": k,
        "share": k / n if n else None,
        "ci": [lo, hi],
        "reasons": dict(reasons),
        "by_level": {lv: {"n": v[0], "decidable": v[1]} for lv, v in sorted(by_level.items())},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--only", nargs="+", help="volume names starting with these words")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        wanted = lambda name: not args.only or any(name.startswith(w) for w in args.only)  # noqa: E731
        for name, (ct, seg, labels, options) in VOLUMES.items():
            if not wanted(name):
                continue
            results.append(measure(name, DATA / ct, DATA / seg, labels, options, args.seeds, tmp))
            print(json.dumps(results[-1]), flush=True)
        for name, (seg, table) in LABEL_MAPS.items():
            if not wanted(name):
                continue
            labels = table if table in (TS, "amos") else str(DATA / table)
            ct = synth_ct(DATA / seg, table, tmp / f"{abs(hash(name))}_ct.nii.gz")
            results.append(measure(name, ct, DATA / seg, labels, {}, args.seeds, tmp))
            print(json.dumps(results[-1]), flush=True)
    (args.out / "decidability_shares.json").write_text(json.dumps(results, indent=1))
    print(f"| volume | RQ1 items (seeds {args.seeds}) | decidable | share [95% CI] | reasons |")
    print("|---|---:|---:|---|---|")
    for r in results:
        lo, hi = r["ci"]
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["reasons"].items()))
        share = (
            "-"
            if r["share"] is None
            else f"{100 * r['share']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"
        )
        print(f"| {r['volume']} | {r['n']} | {r['decidable']} | {share} | {reasons} |")


if __name__ == "__main__":
    main()
