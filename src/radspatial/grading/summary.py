"""Metrics of the open question types: accuracy per type in the three frames (Wilson 95% CI,
all runs pooled), invalid rate, chance level, and how each answer was graded (rules, judge, or
neither: undecided without a judge, scored wrong)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from radspatial.core.metrics_open import Accuracy, OpenTypeMetrics
from radspatial.core.records import ResultRow
from radspatial.core.stats import wilson_interval
from radspatial.grading.rows import is_open_row


def _acc(flags: list[bool]) -> Accuracy:
    n, k = len(flags), sum(flags)
    if not n:
        return Accuracy(n=0)
    lo, hi = wilson_interval(k, n)
    return Accuracy(n, round(k / n, 6), round(lo, 6), round(hi, 6))


def open_metrics(rows: Sequence[ResultRow]) -> dict[str, OpenTypeMetrics]:
    """The ``open`` block of ``metrics.json``: per open question type (``is_open_row``; failed
    calls left out), accuracy in each frame, the invalid rate (no answer: ``ResultRow.outcome``
    None), chance and who graded; empty where no row is open."""
    from radspatial.questions import chance_levels

    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        if is_open_row(r) and not r.error:
            groups[r.question_type].append(r)
    out: dict[str, OpenTypeMetrics] = {}
    for qtype, sub in sorted(groups.items()):
        chance = chance_levels().get(qtype)
        if chance is None:  # per item (identification): mean of 1 / options
            chance = _item_chance(sub)
        grades = [r.grade for r in sub]
        frames = {
            "image": _acc([bool(r.correct) for r in sub]),
            "standard": _acc([bool(r.correct_standard) for r in sub]),
            "anatomical": _acc([bool(r.correct_anatomical) for r in sub]),
        }
        out[qtype] = OpenTypeMetrics(
            chance=None if chance is None else round(chance, 6),
            frames=frames,
            invalid_rate=round(sum(r.outcome is None for r in sub) / len(sub), 6),
            graded_by=dict(sorted(Counter(g.source for g in grades).items())),
            rules_status=dict(sorted(Counter(g.status for g in grades).items())),
        )
    return out


def answers_label(rows: Sequence[ResultRow]) -> str | None:
    """A group's ``answers`` in ``metrics.json``: "open" where every row is open
    (``is_open_row``), "mixed" where some are, None where none is."""
    n_open = sum(is_open_row(r) for r in rows)
    if not n_open:
        return None
    return "open" if n_open == len(rows) else "mixed"


def _item_chance(rows: list[ResultRow]) -> float | None:
    options = [r.grade.metadata.get("options") for r in rows]
    values = [1 / len(o) for o in options if o]
    return sum(values) / len(values) if values else None
