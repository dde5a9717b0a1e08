"""Binary metrics with confidence intervals (``eval/scoring.py`` reads the answers they
count; the intervals and paired tests themselves are ``core/stats.py``'s).

Pure functions of expected answers and parsed answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from radspatial.core.stats import wilson_interval


@dataclass(frozen=True)
class BinaryMetrics:
    """Scores of yes/no answers; invalid (None) answers count as wrong everywhere."""

    n: int
    n_valid: int
    correct: int
    accuracy: float  # correct / n
    f1: float  # F1 of "yes"; None is scored as the opposite of expected (MIRP's convention)
    invalid_rate: float  # fraction of answers parsed as None
    yes_rate: float  # fraction of valid answers that are 1 (answer bias); nan if none valid
    ci_low: float  # Wilson interval on accuracy
    ci_high: float

    def to_json(self) -> dict[str, Any]:
        """Plain dict; nan becomes None so the result is strict JSON."""
        return {
            k: None if isinstance(v, float) and math.isnan(v) else v
            for k, v in asdict(self).items()
        }


def binary_metrics(
    expected: Sequence[int], parsed: Sequence[int | None], *, z: float = 1.959964
) -> BinaryMetrics:
    """Accuracy, F1, invalid rate, yes rate and a Wilson interval.

    F1 is for the "yes" class with an invalid answer replaced by the opposite of the expected
    one, so it is always a miss (a false negative when 1 was expected, a false positive when 0
    was). F1 is 0.0 when there are no true positives (also when undefined, as sklearn does).

    Example:
        >>> binary_metrics([1, 0], [1, None]).accuracy
        0.5
    """
    if len(expected) != len(parsed):
        raise ValueError(f"{len(expected)} expected answers but {len(parsed)} parsed answers")
    if any(e not in (0, 1) for e in expected):
        raise ValueError("expected answers must be 0 or 1")
    if any(p not in (0, 1, None) for p in parsed):
        raise ValueError("parsed answers must be 0, 1 or None")
    n = len(expected)
    valid = [p for p in parsed if p is not None]
    correct = sum(p == e for e, p in zip(expected, parsed, strict=True))
    scored = [1 - e if p is None else p for e, p in zip(expected, parsed, strict=True)]
    tp = sum(e == 1 and p == 1 for e, p in zip(expected, scored, strict=True))
    wrong = sum(e != p for e, p in zip(expected, scored, strict=True))  # fp + fn
    low, high = wilson_interval(correct, n, z)
    nan = float("nan")
    return BinaryMetrics(
        n=n,
        n_valid=len(valid),
        correct=correct,
        accuracy=correct / n if n else nan,
        f1=2 * tp / (2 * tp + wrong) if tp else 0.0,
        invalid_rate=(n - len(valid)) / n if n else nan,
        yes_rate=sum(valid) / len(valid) if valid else nan,
        ci_low=low,
        ci_high=high,
    )
