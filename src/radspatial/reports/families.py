"""Question types grouped into families for the report: MIRP's relative position, SPAR-VQA as
SPAR-Bench's Table 2, the earlier yes/no SPAR-VQA set, and the open types (a word or a number).

Types of different families share words ("size" is a yes/no question, "spar_size" a 4-way
choice; "count" asks "is it exactly N?", "counting" asks "how many?"), and their chance levels
differ (50% for a balanced yes/no type, 1/k for k balanced classes): one table per family, a
type per row with its answer kind and its own chance level beside the models' accuracies, so no
number is read against the wrong chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from radspatial.core.metrics_blocks import TypeGroup
from radspatial.reports.common import DASH, RELPOS, type_groups

# family key -> title; the key is a question type's ``group`` (questions/), RELPOS its own
FAMILIES = {
    "relpos": "MIRP relative position (yes/no)",
    "spar": "SPAR-VQA (SPAR-Bench Table 2: yes/no and multiple choice)",
    "spar-binary": "SPAR-VQA, earlier yes/no set",
    "open": "Open questions (a word or a number)",
    "other": "Other question types",
}
# a family whose answers the tables label by the family (the others: by the chance level)
FAMILY_ANSWERS = {"open": "open"}


def family_of(name: str) -> str:
    """The family key of question type ``name`` (``other`` for an unknown or ungrouped one)."""
    from radspatial.questions import QUESTION_TYPES

    if name == RELPOS:
        return "relpos"
    if name not in QUESTION_TYPES:
        return "other"
    group = getattr(QUESTION_TYPES.get(name), "group", "")
    return group if group in FAMILIES else "other"


def split_families(types: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``types`` by family, families in ``FAMILIES`` order, types in their given order."""
    out: dict[str, list[str]] = {key: [] for key in FAMILIES}
    for name in types:
        out[family_of(name)].append(name)
    return [(key, names) for key, names in out.items() if names]


def answer_kind(name: str, chance: float | None) -> str:
    """What an answer to ``name`` is: its family's label (``FAMILY_ANSWERS``: "open", a word or
    a number), else yes/no or one of k options (k from its chance level, 1/k)."""
    if label := FAMILY_ANSWERS.get(family_of(name)):
        return label
    if chance is None or chance >= 0.5:
        return "yes/no" if chance else DASH
    return f"1 of {round(1 / chance)}"


def chances(
    by: Mapping[str, Mapping[str, TypeGroup]], types: Sequence[str]
) -> dict[str, float | None]:
    """Each type's chance level as the runs' metrics record it (None: not recorded)."""
    out: dict[str, float | None] = {}
    for name in types:
        levels = [chance for g in by.values() if name in g and (chance := g[name].chance)]
        out[name] = float(levels[0]) if levels else None
    return out


def family_tables(s: dict[str, Any], acc: Any, pct: Any, table: Any) -> str:
    """One markdown table per family with more than relative position: a row per type (its
    answer kind and chance level), a column per model; ``acc``, ``pct`` and ``table`` are the
    report's cell and table writers (``md``)."""
    by = type_groups(s.get("by_question_type") or {})
    if not by:
        return ""
    types: list[str] = s["question_types"]
    level = chances(by, types)
    models = list(by)
    parts = []
    for key, names in split_families(types):
        rows = [
            [name, answer_kind(name, level[name]), pct(level[name])]
            + [acc(by[m].get(name)) for m in models]
            for name in names
        ]
        parts.append(
            f"### {FAMILIES[key]}\n\n" + table(["Type", "Answer", "Chance", *models], rows)
        )
    return "\n".join(parts)
