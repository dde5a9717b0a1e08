"""Which abstention check of the ``organs`` localizer rejects what, and is it right to?

    .venv/bin/python benchmarks/bench_organs_checks.py --set patient-c --model-dir runs/a_only
    .venv/bin/python benchmarks/bench_organs_checks.py --set held-out          # shipped weights

Every structure asked on a set is located once with all 8 test-time variants; the per-variant
class maps are kept, so each check can be replayed for the variant subsets the localizer may
use (1, 2 = identity + left-right flip, 4 = those and their half turns, 8). Per subset and per
check: how many localizations it rejects (the score floor under both rules: ``mean``
probability over the component, the previous one, and ``core``, the shipped one), and how many
of those were in fact right (centre within ``--ok-px`` px of the truth on a 512 px image), with
the answered localizations' precision and coverage (Wilson 95 % CIs). Rows go to ``--jsonl``
for threshold studies.

Sets: ``patient-c`` (dcmqi_ct3, a *training* patient of the shipped model, for a model trained
without it: cross-validation) rendered at several display windows; ``held-out`` (patient B,
RQ1 seeds 0-4, and the three MIRP RQ1 images; diagnosis only, never for tuning).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

from radspatial.agent.localizers.organs import organs, organs_checks
from radspatial.agent.localizers.organs.organs import OrgansLocalizer
from radspatial.core.labels import normalize_name
from radspatial.nets import unet

SUBSETS = {v: tuple(range(v)) for v in (1, 2, 4, 8)}  # the first v of VARIANT_ORDER
WINDOWS = ((400, 40), (350, 50), (600, 60), (1000, 0), (1500, -100), (2000, 100))


def patient_c_items(size: int = 512):
    """dcmqi_ct3's 3 slices at each window of :data:`WINDOWS`; truth = labelled centroid."""
    from radspatial.imaging.slices import window_to_uint8
    from radspatial.training import organs_data

    vol = organs_data.patient_c(organs_data.shared_data())
    names = {5: "liver", 26: "vertebrae", 6: "stomach"}
    for z in range(vol.ct.shape[2]):
        hu = organs_data.render_hu(vol.ct, z, vol.spacing, size)
        lab = organs_data.render_lab(vol.seg, z, vol.spacing, size)
        objects = []
        for label_id, name in names.items():
            region = organs_checks.largest(lab == label_id)
            if region is not None:
                ys, xs = np.nonzero(region)
                objects.append((name, [float(xs.mean()), float(ys.mean())]))
        for w, lv in WINDOWS:
            grey = window_to_uint8(hu, w, lv)
            yield f"c_z{z}_W{w}L{lv}", np.stack([grey] * 3, axis=2), objects


def held_out_items(cache: Path):
    """Patient B RQ1 seeds 0-4 and the MIRP RQ1 images, one entry per image."""
    import bench_organs as bo
    from PIL import Image

    items = []
    for seed in range(5):
        items += [("B", it) for it in bo._items_dicom(bo.dicom_rq1(cache, seed))]
    items += [("MIRP", it) for it in bo._items_mirp(bo.SHARED / "mirp_sample")]
    for set_name, it in items:
        image = np.asarray(Image.open(it["image"]).convert("RGB"))
        yield f"{set_name}:{it['id']}", image, it["objects"]


def records(loc: OrgansLocalizer, image: np.ndarray, objects, ok_px: float) -> list[dict]:
    """One row per object: for each variant subset, found, score, votes, spread, the
    plausibility verdict and the error to the truth (image px)."""
    model = loc.model
    probs, gray = organs.variant_probs(model, image, 8)
    probs_v = probs.permute(0, 3, 1, 2).numpy()  # (V, C, S, S), VARIANT_ORDER
    votes = probs_v.argmax(axis=1)
    body = organs_checks.body_of(gray)
    scale = 512.0 / max(image.shape[:2])
    sx, sy = image.shape[1] / model.size, image.shape[0] / model.size
    rows = []
    for name, truth in objects:
        label_id = model.id_of_name(normalize_name(name))
        cls = None if label_id is None else model.class_of(label_id)
        row: dict = {"name": name, "known": cls is not None}
        for v, subset in SUBSETS.items():
            if cls is None:
                continue
            mean = probs_v[list(subset)].mean(axis=0)
            pred = unet.Prediction(mean, np.where(body, mean.argmax(axis=0), 0))
            found = unet.found_for_class(pred, cls, label_id, "name", organs_checks.core_prob)
            old = unet.found_for_class(pred, cls, label_id, "name")
            if found is None or old is None:
                row[str(v)] = {"found": False}
                continue
            n_votes, spread, _ = organs_checks.agreement(votes[list(subset)], cls, body)
            region = organs_checks.largest(pred.labels == cls)
            plaus = organs_checks.plausible(region, body, model.plausibility.get(label_id))
            x, y = (found.xy[0] + 0.5) * sx - 0.5, (found.xy[1] + 0.5) * sy - 0.5
            err = math.dist((x, y), truth) * scale
            row[str(v)] = {
                "found": True,
                "score": round(found.score, 4),
                "score_mean": round(old.score, 4),
                "votes": n_votes,
                "spread": round(spread, 4) if np.isfinite(spread) else None,
                "implausible": plaus,
                "err_px": round(err, 1),
                "ok": err <= ok_px,
            }
        rows.append(row)
    return rows


def reject_reasons(
    r: dict, v: int, floor: float, min_votes: int, spread: float, key: str = "score"
) -> list[str]:
    if not r.get("found"):
        return ["not found"]
    out = []
    if r[key] < floor:
        out.append("score")
    if v > 1 and r["votes"] < min_votes:
        out.append("votes")
    if v > 1 and (r["spread"] is None or r["spread"] > spread):
        out.append("spread")
    if r["implausible"]:
        out.append("plausibility")
    return out


def summarise(
    rows: list[dict], v: int, floor: float, votes_frac: float, spread: float, key: str = "score"
) -> dict:
    from radspatial.core.stats import wilson_interval

    min_votes = max(1, math.ceil(votes_frac * v))
    rejected: Counter = Counter()
    wrongly: Counter = Counter()
    n = answered = right = 0
    for row in rows:
        if not row["known"]:
            continue
        r = row[str(v)]
        n += 1
        reasons = reject_reasons(r, v, floor, min_votes, spread, key)
        for reason in reasons:
            rejected[reason] += 1
            wrongly[reason] += int(bool(r.get("ok")))
        if not reasons:
            answered += 1
            right += int(r["ok"])
    return {
        "rule": "core" if key == "score" else "mean",
        "variants": v,
        "n": n,
        "coverage": round(answered / n, 3) if n else None,
        "coverage_ci": [round(x, 3) for x in wilson_interval(answered, n)],
        "precision": round(right / answered, 3) if answered else None,
        "precision_ci": [round(x, 3) for x in wilson_interval(right, answered)],
        "rejected_by": dict(rejected),
        "of_which_right": dict(wrongly),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", choices=("patient-c", "held-out"), required=True)
    p.add_argument("--model-dir", type=Path)
    p.add_argument("--cache", type=Path, default=Path("/tmp/bench_organs"))
    p.add_argument("--ok-px", type=float, default=20.0)
    p.add_argument("--floor", type=float, default=organs.MIN_SCORE)
    p.add_argument("--votes", type=float, default=0.75, help="fraction of variants that must agree")
    p.add_argument("--spread", type=float, default=0.25)
    p.add_argument("--jsonl", type=Path)
    a = p.parse_args()
    import torch

    torch.set_num_threads(1)
    loc = OrgansLocalizer(a.model_dir)
    items = patient_c_items() if a.set == "patient-c" else held_out_items(a.cache)
    rows = []
    for item_id, image, objects in items:
        rows += [{"item": item_id, **r} for r in records(loc, image, objects, a.ok_px)]
    if a.jsonl:
        a.jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    groups = sorted({r["item"].split(":")[0] for r in rows}) if a.set == "held-out" else ["c"]
    for g in groups:
        sel = [r for r in rows if a.set != "held-out" or r["item"].startswith(g + ":")]
        for key in ("score_mean", "score"):  # the previous rule, then the shipped one
            for v in SUBSETS:
                print(g, json.dumps(summarise(sel, v, a.floor, a.votes, a.spread, key)))


if __name__ == "__main__":
    main()
