"""Consistency over the 8 variants of one slice and pair (``generate --consistency``).

A group is one question (same slice, pair and words) in all 8 rotation/flip variants, within
one setup and marker and one run. Each group is put in the first class it fits:

- ``all_right``: right in the shown image in all 8 (a model that reads the image);
- ``anatomy``: follows the patient-frame answer (``expected_anatomical``, the same in all 8)
  in at least 7 of 8, *and so does its twin* (the same pair asked the other way round, whose
  anatomical answer is the opposite): a model that recites anatomy. The twin is what tells it
  from a constant answerer, which agrees with anatomy in one of the two;
- ``constant``: the same valid answer 8 times (an answer bias);
- ``mixed``: anything else (a random guesser, mostly).

Shares are pooled over runs with Wilson 95% intervals (``metrics.wilson_interval``); an
invalid reply counts as wrong and as not the anatomical answer. Groups with a missing variant
(an error left out, a sample) are not classified and are counted in ``n_incomplete``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from radspatial.core.metrics_blocks import CONSISTENCY_CLASSES as CLASSES
from radspatial.core.metrics_blocks import ClassShare, Consistency
from radspatial.core.records import ResultRow
from radspatial.core.stats import wilson_interval

TITLES = {
    "all_right": "All 8 right",
    "anatomy": "Anatomy-consistent (>= 7/8, twin too)",
    "constant": "Constant",
    "mixed": "Mixed",
}
Row = ResultRow
N_VARIANTS = 8


def _follows_anatomy(rows: Sequence[Row] | None) -> bool:
    if rows is None:
        return True  # no twin in these rows: judged on the group alone
    return sum(r.parsed == r.expected_anatomical for r in rows) >= N_VARIANTS - 1


def classify(rows: Sequence[Row], twin: Sequence[Row] | None = None) -> str:
    """The class of one complete group (8 rows), given its twin's rows when known."""
    answers = [r.parsed for r in rows]
    if all(r.parsed == r.expected for r in rows):
        return "all_right"
    if _follows_anatomy(rows) and _follows_anatomy(twin):
        return "anatomy"
    if answers[0] is not None and len(set(answers)) == 1:
        return "constant"
    return "mixed"


def _shares(counts: dict[str, int], incomplete: int) -> Consistency:
    n = sum(counts.values())
    classes = {}
    for c in CLASSES:
        k = counts.get(c, 0)
        lo, hi = wilson_interval(k, n) if n else (None, None)
        classes[c] = ClassShare(
            n=k,
            share=round(k / n, 6) if n else None,
            ci_low=None if lo is None else round(lo, 6),
            ci_high=None if hi is None else round(hi, 6),
        )
    return Consistency(n_groups=n, n_incomplete=incomplete, classes=classes)


def consistency_metrics(rows: Sequence[Row]) -> dict[str, Consistency]:
    """Class shares of the consistency groups, all setups pooled (``all``) and per
    ``setup/marker``, from result rows (``core.records.ResultRow``)."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.group:
            groups[(r.run, r.setup, r.marker, r.group)].append(r)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    incomplete: dict[str, int] = defaultdict(int)
    for (run, setup, marker, _), members in sorted(groups.items()):
        keys = ("all", f"{setup}/{marker}")
        if len(members) != N_VARIANTS:
            for k in keys:
                incomplete[k] += 1
            continue
        twin = groups.get((run, setup, marker, members[0].group_twin))
        cls = classify(members, twin if twin and len(twin) == N_VARIANTS else None)
        for k in keys:
            counts[k][cls] += 1
    names = sorted(set(counts) | set(incomplete), key=lambda k: (k != "all", k))
    return {k: _shares(counts[k], incomplete[k]) for k in names}
