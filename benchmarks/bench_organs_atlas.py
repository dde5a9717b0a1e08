"""Multi-atlas label propagation (``organs+atlas``) against the network alone, per localization.

    .venv/bin/python benchmarks/bench_organs_atlas.py --set patient-c --model-dir runs/prev \\
        --atlas runs/atlas_a                           # cross-validation: neither saw patient C
    .venv/bin/python benchmarks/bench_organs_atlas.py --set held-out   # shipped model + atlas

Every asked structure is located by the network with its checks (``organs``), by the atlas
alone (fused centre, support, spread) and by each ``--rule`` of the combination; a
localization is right when its centre lies within ``--ok-px`` px (512 px image) of the truth.
Prints, per method: localizations answered, right among them (Wilson 95 % CI), the atlas's
own centre error (median, 90th percentile) and the CPU time per slice of the atlas step
(match + registration + fusion, 1 thread). ``--jsonl`` keeps one row per localization for
threshold studies (set on ``patient-c`` only; ``held-out`` is diagnosis).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from radspatial.agent.localizers.organs import organs, organs_atlas, organs_checks
from radspatial.agent.localizers.organs.organs import OrgansLocalizer
from radspatial.agent.pipeline.types import Context, Ref
from radspatial.core.labels import normalize_name

RULES = {
    "check": organs_atlas.AtlasRules(),
    "check+rescue": organs_atlas.AtlasRules(rescue=True),
}


def atlas_rows(loc: OrgansLocalizer, image: np.ndarray, objects, ok_px: float) -> list[dict]:
    """One row per object: the network's and the atlas's centre, checks and errors."""
    model = loc.model
    names = [normalize_name(n) for n, _ in objects]
    plain = OrgansLocalizer(loc.model_dir, min_score=loc.min_score, checks=loc.checks)
    net = plain.locate(image, [Ref(name=n) for n in names], Context())
    pred, _, gray = organs.predict_small(model, image, loc.checks.variants)
    body = organs_checks.body_of(gray)
    t, c = time.perf_counter(), time.process_time()
    match = loc._match(model, pred, gray, body)
    opinions = [
        None if (lid := model.id_of_name(n)) is None or match is None
        else organs_atlas.fuse(match, str(loc.atlas_dir), lid)
        for n in names
    ]  # fmt: skip
    cost = (1000 * (time.perf_counter() - t), 1000 * (time.process_time() - c))
    sx, sy = image.shape[1] / model.size, image.shape[0] / model.size
    rows = []
    for (name, truth), f, a in zip(objects, net, opinions, strict=True):
        row = {"name": normalize_name(name), "cost_ms": cost}
        if f is not None:
            row["net_err"] = math.dist(f.xy, truth)
            row["net_answered"] = f.score >= loc.min_score and not f.details.get("abstain_reason")
        if a is not None and a.support > 0:
            xy = ((a.xy[0] + 0.5) * sx - 0.5, (a.xy[1] + 0.5) * sy - 0.5)
            row |= {"atlas_err": math.dist(xy, truth), "support": a.support}
            row |= {"spread": a.spread, "atlas_xy": xy}
            if f is not None:
                row["distance"] = math.dist(f.xy, xy) / (match.body_radius * sx)
        rows.append(row)
    for rule_name, rules in RULES.items():
        with_rule = OrgansLocalizer(
            loc.model_dir, min_score=loc.min_score, checks=loc.checks, atlas=loc.atlas_dir,
            atlas_rules=rules, atlas_config=loc.atlas_config,
        )  # fmt: skip
        found = with_rule.locate(image, [Ref(name=n) for n in names], Context())
        for row, f, (_, truth) in zip(rows, found, objects, strict=True):
            ok = f is not None and f.score >= loc.min_score and not f.details.get("abstain_reason")
            row[rule_name] = None if not ok else math.dist(f.xy, truth) <= ok_px
    for row in rows:
        if row.get("net_answered"):
            row["organs"] = row["net_err"] <= ok_px
        else:
            row["organs"] = None
    return rows


def summarise(rows: list[dict]) -> dict:
    from radspatial.core.stats import wilson_interval

    out = {"localizations": len(rows)}
    for method in ("organs", *RULES):
        answered = [r[method] for r in rows if r.get(method) is not None]
        right = sum(answered)
        ci = [round(v, 3) for v in wilson_interval(right, len(answered))]
        out[method] = {"answered": len(answered), "right": right, "right_ci": ci}
    errs = [r["atlas_err"] for r in rows if "atlas_err" in r]
    if errs:
        out["atlas_err_px"] = {
            "n": len(errs),
            "median": round(statistics.median(errs), 1),
            "p90": round(float(np.percentile(errs, 90)), 1),
        }
    per = defaultdict(list)
    for r in rows:
        per[r["name"]].append(round(r["atlas_err"], 1) if "atlas_err" in r else None)
    out["atlas_err_by_structure"] = {k: v for k, v in sorted(per.items())}
    costs = [r["cost_ms"][1] for r in rows]
    out["atlas_cpu_ms_median"] = round(statistics.median(costs), 1) if costs else None
    return out


def main() -> None:
    import bench_organs_checks as boc
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", choices=("patient-c", "held-out"), default="patient-c")
    p.add_argument("--model-dir", type=Path)
    p.add_argument("--atlas", type=Path, help="atlas folder (default: the model folder's)")
    p.add_argument("--k", type=int, default=organs_atlas.AtlasConfig.k)
    p.add_argument("--steps", type=int, default=organs_atlas.AtlasConfig.steps)
    p.add_argument("--label-weight", type=float, default=organs_atlas.AtlasConfig.label_weight)
    p.add_argument("--cache", type=Path, default=Path("/tmp/bench_organs"))
    p.add_argument("--ok-px", type=float, default=20.0)
    p.add_argument("--jsonl", type=Path)
    a = p.parse_args()
    torch.set_num_threads(1)
    cfg = organs_atlas.AtlasConfig(k=a.k, steps=a.steps, label_weight=a.label_weight)
    loc = OrgansLocalizer(a.model_dir, atlas=a.atlas or True, atlas_config=cfg)
    if a.set == "patient-c":
        items = [("C", i, im, o) for i, im, o in boc.patient_c_items()]
    else:
        items = [(i.split(":")[0], i, im, o) for i, im, o in boc.held_out_items(a.cache)]
    by_set: dict[str, list] = defaultdict(list)
    for set_name, item_id, image, objects in items:
        for row in atlas_rows(loc, image, objects, a.ok_px):
            by_set[set_name].append({"set": set_name, "item": item_id, **row})
    for set_name, rows in by_set.items():
        print(set_name, json.dumps(summarise(rows)))
    if a.jsonl:
        a.jsonl.write_text("".join(json.dumps(r) + "\n" for rs in by_set.values() for r in rs))


if __name__ == "__main__":
    main()
