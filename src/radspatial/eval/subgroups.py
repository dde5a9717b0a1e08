"""Subgroups of result rows with Wilson 95% intervals: reasoning type, anatomy region,
structure, setup, rotation/flip variant, anatomy variant and modality.

- reasoning type: laterality, direction, identification, counting (the open types), and
  "yes/no relation" for every binary type.
- anatomy region, from every named structure of the slice (the dataset's MIRP centres file),
  first match wins: ``pelvis`` (bladder, hip, sacrum, femur, rectum, prostate, gluteus,
  iliac vessels), ``kidneys`` (a kidney and no liver, spleen or stomach), ``upper abdomen``
  (liver, spleen, stomach, pancreas, gallbladder), else ``other``. Slices at the kidneys that
  still show the liver count as upper abdomen.
- structure: each structure the item is about (an item counts once under each of its
  structures).
- modality: recorded per case (``generate --modality``: CT or MR).

The rows are ``core.records.ResultRow`` (``read_results``); each table is a mapping of
``core.metrics_blocks.Share`` records (``metrics.json``'s ``subgroups`` block).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from radspatial.core.metrics_blocks import Share
from radspatial.core.records import ResultRow
from radspatial.core.stats import wilson_interval
from radspatial.questions.open_common import reasoning_type

_PELVIS: tuple[str, ...] = ("urinary_bladder", "hip", "sacrum", "femur", "rectum", "prostate")
_PELVIS += ("gluteus",)
_PELVIS += ("iliac_artery", "iliac_vena", "iliac")
_UPPER = ("liver", "spleen", "stomach", "pancreas", "gallbladder")


def anatomy_region(structures: Iterable[str]) -> str:
    names = [s.lower() for s in structures]
    if any(n.startswith(p) for n in names for p in _PELVIS):
        return "pelvis"
    upper = any(n.startswith(p) for n in names for p in _UPPER)
    if any(n.startswith("kidney") for n in names) and not upper:
        return "kidneys"
    return "upper abdomen" if upper else "other"


Rows = Sequence[ResultRow]


def _group(rows: Rows, keys: Callable[[ResultRow], Iterable[str]]) -> dict[str, Share]:
    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        for k in keys(r):
            groups[k].append(r)
    out = {}
    for k, sub in sorted(groups.items()):
        n = len(sub)
        correct = sum(bool(r.correct) for r in sub)
        lo, hi = wilson_interval(correct, n)
        out[k] = Share(
            n=n,  # answers (items x runs)
            accuracy=round(correct / n, 6),
            ci_low=round(lo, 6),
            ci_high=round(hi, 6),
            invalid_rate=round(sum(not r.answered for r in sub) / n, 6),
        )
    return out


def grouped_accuracy(rows: Rows, key: Callable[[ResultRow], str | None]) -> dict[str, Share]:
    """Accuracy with Wilson 95% CI per ``key(row)`` (rows keyed None are left out)."""
    return _group(rows, lambda r: [k] if (k := key(r)) is not None else [])


def subgroup_metrics(rows: Rows) -> dict[str, dict[str, Share]]:
    """Accuracy with Wilson 95% CI (all runs pooled) per subgroup; errors left out."""
    rows = [r for r in rows if not r.error]
    return {
        "reasoning_type": _group(rows, lambda r: [reasoning_type(r.question_type)]),
        "region": _group(rows, lambda r: [r.region] if r.region else []),
        "structure": _group(rows, lambda r: sorted(set(r.structures_asked))),
        "setup": _group(rows, lambda r: [r.setup]),
        "transform": _group(rows, lambda r: [r.transform] if r.transform else []),
        "variant": _group(rows, lambda r: [r.variant]),  # type: ignore[list-item]
        "modality": _group(rows, lambda r: [r.modality or "unknown"]),
    }
