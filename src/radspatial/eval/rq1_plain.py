"""Plain-slice RQ1: the honest headline of a model that may abstain.

RQ1 is relative position on a plain axial slice with two organ names (no markers): the one
setup where the answer depends on finding anatomy, and the number to set beside the modular
agent paper's 94.1 %. A pooled accuracy that adds marker reading (RQ2/RQ3) hides it, and one
accuracy hides how often a model abstains, so this block gives three numbers, each with its
Wilson 95 % interval and its n (all runs' answers pooled):

- ``accuracy``: right / all, an abstention or unreadable reply (parsed None) counted wrong;
- ``coverage``: answered / all (the answered share);
- ``accuracy_answered``: right / answered.

Calls that failed (``error``: no reply at all) are left out, as in every other metric.

    >>> from radspatial.core.records import ResultRow
    >>> row = ResultRow("rq1/none/a_slice001/q0", 0, "rq1", "none", "Is ...?", 1, False)
    >>> b = plain_rq1([row], runs=1)
    >>> b["n"], b["answered"], b["accuracy"]
    (1, 0, 0.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from radspatial.core.records import ResultRow
from radspatial.core.stats import wilson_interval
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.questions import is_mirp_type

_COUNTS = ("n", "answered", "correct")
DEFINITION = (
    "relative position, setup rq1 (plain axial slice, two organ names, no markers); "
    "accuracy counts abstentions and unreadable replies as wrong"
)


def _is_plain_rq1(row: ResultRow) -> bool:
    return (
        row.setup == "rq1"
        and is_mirp_type(row.question_type)
        and row.plane in (None, "", DEFAULT_PLANE)
        and not row.error
        and row.expected in (0, 1)
    )


def _share(k: int, n: int) -> tuple[float | None, list[float | None]]:
    if not n:
        return None, [None, None]
    lo, hi = wilson_interval(k, n)
    return round(k / n, 6), [round(lo, 6), round(hi, 6)]


def plain_rq1(rows: Sequence[ResultRow], runs: int) -> dict[str, Any]:
    """The ``rq1_plain`` block of ``metrics.json`` (``{"n": 0, ...}`` without RQ1 items)."""
    sub = [r for r in rows if _is_plain_rq1(r)]
    n = len(sub)
    answered = sum(r.parsed is not None for r in sub)
    correct = sum(r.parsed is not None and r.parsed == r.expected for r in sub)
    acc, acc_ci = _share(correct, n)
    cov, cov_ci = _share(answered, n)
    on_answered, on_answered_ci = _share(correct, answered)
    return {
        "definition": DEFINITION,
        "n": n,  # answers over all runs (items x runs)
        "n_items": len({r.id for r in sub}) if sub else 0,
        "runs": runs,
        "answered": answered,
        "correct": correct,
        "accuracy": acc,
        "accuracy_ci": acc_ci,
        "coverage": cov,
        "coverage_ci": cov_ci,
        "accuracy_answered": on_answered,
        "accuracy_answered_ci": on_answered_ci,
        **_decidable_split(sub),
    }


def _decidable_split(sub: Sequence[ResultRow]) -> dict[str, Any]:
    """How many of the items the image decides, and the accuracy on each part (abstentions
    wrong); nothing when no row says (a dataset made before the rule)."""
    known = [r for r in sub if r.decidable is not None]
    if not known:
        return {}
    out: dict[str, Any] = {}
    parts: dict[str, Any] = {}
    for key, flag in (("decidable", True), ("undecidable", False)):
        part = [r for r in known if r.decidable is flag]
        out[f"n_items_{key}"] = len({r.id for r in part})
        right = sum(r.parsed is not None and r.parsed == r.expected for r in part)
        acc, ci = _share(right, len(part))
        parts[key] = {"n": len(part), "correct": right, "accuracy": acc, "accuracy_ci": ci}
    return out | {"by_decidable": parts}


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _pct(v: Any) -> str:
    return f"{100 * v:.1f}%" if _number(v) else "-"


def _ci(ci: Any) -> str:
    """ "[lo, hi]" in %; "[-]" for anything else (metrics.json is read back from files)."""
    if not isinstance(ci, list | tuple) or len(ci) != 2 or not all(map(_number, ci)):
        return "[-]"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def plain_rq1_cells(block: Mapping[str, Any]) -> tuple[str, str, str]:
    """(accuracy, coverage, accuracy on answered), each "x% [lo, hi] (k/n)"."""
    n, k, c = (block.get(key) if _number(block.get(key)) else "-" for key in _COUNTS)
    return (
        f"{_pct(block.get('accuracy'))} {_ci(block.get('accuracy_ci'))} ({c}/{n})",
        f"{_pct(block.get('coverage'))} {_ci(block.get('coverage_ci'))} ({k}/{n})",
        f"{_pct(block.get('accuracy_answered'))} {_ci(block.get('accuracy_answered_ci'))} "
        f"({c}/{k})",
    )


def plain_rq1_line(block: Mapping[str, Any] | None) -> str | None:
    """The console line of ``radspatial eval`` (None without plain RQ1 items)."""
    if not isinstance(block, Mapping) or not _number(block.get("n")) or not block["n"]:
        return None
    acc, cov, ans = plain_rq1_cells(block)
    items, runs = block.get("n_items"), block.get("runs")
    n = f"n {block['n']}"
    if _number(runs) and runs > 1:
        n += f" = {items} items x {runs} runs"
    line = (
        f"  plain-slice RQ1 (relative position, organ names, no markers; {n}): "
        f"accuracy {acc} (abstentions and unreadable replies = wrong), coverage {cov}, "
        f"accuracy on answered {ans}; Wilson 95% CIs"
    )
    return line + decidable_tail(block)


def decidable_tail(block: Mapping[str, Any]) -> str:
    """The plain RQ1 line's second part: how many items the image decides and the accuracy on
    them and on the rest (an honest reader scores 50 % there)."""
    parts = block.get("by_decidable")
    if not isinstance(parts, Mapping) or not _number(block.get("n_items_decidable")):
        return ""
    d, u = parts.get("decidable") or {}, parts.get("undecidable") or {}
    total = block["n_items_decidable"] + (block.get("n_items_undecidable") or 0)
    text = f"\n    the image decides {block['n_items_decidable']} of {total} items"
    if d.get("n"):
        text += f": accuracy there {_pct(d.get('accuracy'))} {_ci(d.get('accuracy_ci'))}"
    if u.get("n"):
        text += (
            f"; on the {block.get('n_items_undecidable')} it does not "
            f"{_pct(u.get('accuracy'))} {_ci(u.get('accuracy_ci'))} (an honest reader: 50%, a "
            "coin)"
        )
    return text


def plain_rq1_markdown(blocks: Mapping[str, Mapping[str, Any]]) -> str:
    """The report's section: one row per model with plain RQ1 items ("" when none has)."""
    from radspatial.core.textsafe import md_table

    if not isinstance(blocks, Mapping):
        return ""
    rows = [
        [label, b["n"], *plain_rq1_cells(b)]
        for label, b in blocks.items()
        if isinstance(b, Mapping) and _number(b.get("n")) and b["n"]
    ]
    if not rows:
        return ""
    header = ["Model", "n", "Accuracy (abstain = wrong)", "Coverage", "Accuracy on answered"]
    return (
        "## Plain-slice RQ1 (no markers)\n\n"
        "Relative position on plain axial slices with two organ names: the setup that needs "
        "anatomy, not marker reading. Accuracy counts abstentions and unreadable replies as "
        "wrong; coverage is the answered share. Wilson 95% CIs and counts, all runs pooled.\n\n"
        + md_table(header, rows)
    )
