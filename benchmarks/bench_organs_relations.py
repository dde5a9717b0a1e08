"""RQ1 answers of the ``organs`` agent under two abstention rules, on validation slices.

    .venv/bin/python benchmarks/bench_organs_relations.py --set patient-c \\
        --model-dir runs/prev --atlas runs/atlas_a
    .venv/bin/python benchmarks/bench_organs_relations.py --set slab --atlas runs/atlas_noslab

Every image of the set is shown in each of the 8 rotations / flips; for every pair of its
labelled structures and each image axis along which their true centres lie at least
``MIN_DISTANCE_PX`` apart (the generator's mirp rule), one relative-position question is asked
("Is the liver to the left of the spleen?", the relation alternating so that half the truths
are yes). The agent answers it through its whole pipeline (parse, localize, decide); the
localizations of an image are computed once and reused by every question on it. Two rules:

- ``structure``: the rule before issue #22's round 4: a localization whose re-oriented
  copies spread more than ``Checks.max_spread`` or whose atlas centre lies more than
  ``AtlasRules.agree`` away is abstained on;
- ``relation`` (shipped): such a localization is decided on with that spread / distance as its
  uncertainty, and the answer is given only when it holds wherever in the two uncertainty
  discs the centres lie (``verify_relation``: margin + both ``uncertainty_px``).

Prints coverage and accuracy on answered (Wilson 95 %), and among answered items how many had
both localizations within ``--ok-px`` of the truth. Sets: ``patient-c`` (dcmqi_ct3, 3 slices x 6
windows; for a model and an atlas that never saw it), ``slab`` (patient A z = 88-95 at 2
windows; for an atlas built with ``--exclude a:86-97``; the shipped network saw those slices),
``held-out`` (diagnosis only: patient B and the MIRP images; no threshold is set on it).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

from radspatial.agent.localizers.organs.organs import OrgansLocalizer
from radspatial.agent.pipeline.agent import Agent
from radspatial.core.rules import MIN_DISTANCE_PX
from radspatial.questions.relative_position import named_question

RULES = ("structure", "relation")


def variant_of(image: np.ndarray, points: list, k: int) -> tuple[np.ndarray, list]:
    """Variant ``k`` (k % 4 quarter turns, then a left-right flip when k >= 4, as
    ``organs_checks.dihedral``) of an (H, W, 3) image and of (x, y) points in it."""
    h, w = image.shape[:2]
    out = np.rot90(image, k % 4, axes=(0, 1))
    pts = [tuple(p) for p in points]
    for _ in range(k % 4):  # np.rot90: out[i, j] = a[j, W - 1 - i]
        pts = [(y, w - 1 - x) for x, y in pts]
        h, w = w, h
    if k >= 4:
        out = out[:, ::-1]
        pts = [(w - 1 - x, y) for x, y in pts]
    return np.ascontiguousarray(out), [list(p) for p in pts]


def questions(objects: list) -> list[tuple[str, str, str, int]]:
    """(subject, relation, reference, truth) for each pair and axis the mirp rule allows."""
    out = []
    for i, (n1, c1) in enumerate(objects):
        for n2, c2 in objects[i + 1 :]:
            for axis, (neg, pos) in enumerate((("left_of", "right_of"), ("above", "below"))):
                d = c1[axis] - c2[axis]
                if abs(d) < MIN_DISTANCE_PX:
                    continue
                rel = (neg, pos)[len(out) % 2]  # alternate: half the truths are yes
                truth = int((d < 0) == (rel == neg))
                out.append((n1, rel, n2, truth))
    return out


class Cached:
    """A localizer answering from localizations made once per image (``found``: name ->
    Found); ``rule`` "structure" turns a doubt into an abstention and drops the uncertainty,
    as before round 4."""

    name = "organs-cached"

    def __init__(self, found: dict, rule: str) -> None:
        self.found, self.rule = found, rule

    def locate(self, image, refs, context):
        return [self._as_rule(self.found.get(r.name)) for r in refs]

    def _as_rule(self, f):
        from dataclasses import replace

        if f is None or self.rule == "relation":
            return f
        d = {k: v for k, v in f.details.items() if k != "uncertainty_px"}
        if d.get("uncertain_reason") and not d.get("abstain_reason"):
            d["abstain_reason"] = d["uncertain_reason"]
        return replace(f, details=d)


def run(items, loc: OrgansLocalizer, ok_px: float) -> dict:
    from radspatial.agent.pipeline.types import Context, Ref

    counts = {r: Counter() for r in RULES}
    for _, image, objects in items:
        names = [n for n, _ in objects]
        for k in range(8):
            shown, pts = variant_of(image, [c for _, c in objects], k)
            truth_xy = dict(zip(names, pts, strict=True))
            qs = questions(list(truth_xy.items()))
            if not qs:
                continue
            found = loc.locate(shown, [Ref(name=n) for n in names], Context())
            found = dict(zip(names, found, strict=True))
            for rule in RULES:
                agent, c = Agent(Cached(found, rule)), counts[rule]
                for n1, rel, n2, truth in qs:
                    r = agent.answer(shown, named_question(_words(n1), rel, _words(n2)))
                    c["n"] += 1
                    if r.answer is None:
                        continue
                    c["answered"] += 1
                    c["right"] += int(r.answer == truth)
                    close = [_close(found[n], truth_xy[n], ok_px) for n in (n1, n2)]
                    c["both_close"] += int(all(close))
    return {r: _summary(c) for r, c in counts.items()}


def _words(name: str) -> str:
    return name.replace("_", " ")


def _close(f, truth, ok_px: float) -> bool:
    return f is not None and math.dist(f.xy, truth) <= ok_px


def _summary(c: Counter) -> dict:
    from radspatial.core.stats import wilson_interval

    n, a, r = c["n"], c["answered"], c["right"]
    cov = wilson_interval(a, n) if n else (0.0, 0.0)
    acc = wilson_interval(r, a) if a else (0.0, 0.0)
    return {
        "n": n,
        "answered": a,
        "coverage": round(a / n, 3) if n else None,
        "coverage_ci": [round(v, 3) for v in cov],
        "right": r,
        "accuracy_on_answered": round(r / a, 3) if a else None,
        "accuracy_ci": [round(v, 3) for v in acc],
        "both_within_ok_px": c["both_close"],
    }


def _items(name: str, cache: Path):
    import bench_organs_checks as boc
    import bench_organs_val as bov

    if name == "patient-c":
        return list(boc.patient_c_items())
    if name == "slab":
        return list(bov.slab_items(list(range(88, 96)), min_px=200))
    return [(i, im, [o for o in objs if o[0]]) for i, im, objs in boc.held_out_items(cache)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", choices=("patient-c", "slab", "held-out"), required=True)
    p.add_argument("--model-dir", type=Path)
    p.add_argument("--atlas", type=Path, help="an atlas folder (organs+atlas); none: organs")
    p.add_argument("--ok-px", type=float, default=20.0)
    p.add_argument("--cache", type=Path, default=Path("/tmp/bench_organs"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variants", type=int, help="test-time copies (default: the localizer's)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    from radspatial.agent.localizers.organs.organs_checks import with_copies

    checks = with_copies(a.variants) if a.variants else None
    loc = OrgansLocalizer(a.model_dir, atlas=a.atlas or False, checks=checks)
    checks = loc.checks
    report = {"set": a.set, "localizer": loc.name, "model_dir": str(a.model_dir or "shipped")}
    report["atlas"] = str(a.atlas) if a.atlas else None
    report["checks"] = {"variants": checks.variants, "min_votes": checks.min_votes}
    report["rules"] = run(_items(a.set, a.cache), loc, a.ok_px)
    print(json.dumps(report, indent=1))
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
