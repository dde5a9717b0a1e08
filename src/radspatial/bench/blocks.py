"""Balanced blocks of open question types: every answer class once per block, in one view.

An open type with 3 or 4 classes (counting, direction) asks them in blocks that share one
rotation/flip view, so the answers are balanced per view. A view can make a class impossible
(after a 90-degree turn almost no pair stays clearly apart along one axis in both the shown
and the standard frame), and the block then never finished: every later slice of the case
waited for it and the type vanished for some case ids. Two rules fix it: a slice that cannot
ask the block's next class may ask another class the block still needs
(:func:`propose_other_class`), and a block a view cannot finish is dropped and the slices no
block took are scanned again in the next view of the cycle, each view once
(:func:`plan_in_views`). Yes/no types (blocks of 2) and identification (1) are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from radspatial.core.rules import QuestionRules

Plan = TypeVar("Plan")


def plan_in_views(
    usable: Sequence[Any],
    block: int,
    n_views: int,
    scan: Callable[[list[Any], int, list[Plan]], list[Plan]],
) -> list[Plan]:
    """Plans from ``scan(slices, view_shift, plans_so_far)`` passes (slices and plans carry
    ``.z``), in slice order: one pass for blocks of 1 or 2, else up to ``n_views``."""
    plans: list[Plan] = []
    for shift in range(n_views if block > 2 else 1):
        used = {p.z for p in plans}  # type: ignore[attr-defined]
        left = [info for info in usable if info.z not in used]
        if not left:
            break
        plans = scan(left, shift, plans)
        plans = plans[: len(plans) - len(plans) % block]  # a view that cannot finish it
    return sorted(plans, key=lambda p: p.z) if block > 2 else plans  # type: ignore[attr-defined]


def propose_other_class(
    qtype: Any,
    facts: Any,
    targets: list[int],
    at: int,
    rng: np.random.Generator,
    rules: QuestionRules,
) -> Any | None:
    """A question for one of the classes the block still needs after ``targets[at]`` (which
    this slice cannot ask), moved to position ``at`` of ``targets`` (in place); None if none."""
    for j in range(at + 1, len(targets)):
        spec = qtype.propose(facts, targets[j], rng, rules)
        if spec is not None:
            targets[at], targets[j] = targets[j], targets[at]
            return spec
    return None
