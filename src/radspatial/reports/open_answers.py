"""Report sections for the open question types, the LLM judge, subgroups and human review
(appended to ``summary.md`` by ``reports.build.build_report``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.metrics_blocks import Share
from radspatial.core.metrics_open import OPEN_FRAMES, Accuracy
from radspatial.core.textsafe import Markup, md_code, md_table

DASH = "–"


def _pct(x: Any) -> str:
    return DASH if x is None else f"{100 * float(x):.1f}"


def _ci(g: Accuracy | Share) -> str:
    if not g.n:
        return DASH
    return Markup(f"{_pct(g.accuracy)} [{_pct(g.ci_low)}, {_pct(g.ci_high)}]")


_table = md_table  # every cell escaped as literal markdown


def review_for(runs: Sequence[Any], marks_path: Path) -> dict[str, Any]:
    from radspatial.core.records import read_results
    from radspatial.grading.review import fold_review, read_marks

    marks = read_marks(marks_path)
    data = []
    for r in runs:
        results = Path(r.path) / "results.jsonl"
        rows = read_results(results) if results.is_file() else []
        data.append((r.label, str(r.metrics.model or r.label), rows))
    return {"marks": str(marks_path), **fold_review(data, marks)}


def open_markdown(runs: Sequence[Any], review: dict[str, Any] | None) -> str:
    parts: list[str] = []
    rows = []
    for r in runs:
        for qtype, g in (r.metrics.open or {}).items():
            graded = ", ".join(f"{k} {v}" for k, v in g.graded_by.items())
            frames = [_ci(g.frame(f)) for f in OPEN_FRAMES]
            rows.append([r.label, qtype, _pct(g.chance), *frames, _pct(g.invalid_rate), graded])
    if rows:
        header = ["Model", "Open type", "Chance", "Image [95% CI]", "Standard view"]
        header += ["Anatomical", "Invalid", "Graded by"]
        parts.append(
            "\n## Open questions (accuracy in %, all runs pooled)\n\n" + _table(header, rows)
        )
    judged = [(r.label, r.metrics.judge) for r in runs if r.metrics.judge]
    if judged:
        jrows = [
            [
                label,
                j.judge,
                f"{j.n_judged} of {j.n_open_rows} ({_pct(j.judge_needed_rate)}%)",
                kappa_text(j.rules_vs_judge.kappa),
                _pct(j.calibration.judge_accuracy),
            ]
            for label, j in judged
        ]
        header = ["Model", "Judge", "Judged", "Rules vs judge kappa", "Judge acc. (calibration)"]
        parts.append("\n## LLM judge\n\n" + _table(header, jrows))
    for name, title in (("reasoning_type", "reasoning type"), ("region", "anatomy region")):
        srows = []
        for r in runs:
            for key, g in r.metrics.subgroups.get(name, {}).items():
                srows.append([r.label, key, str(g.n), _ci(g), _pct(g.invalid_rate)])
        if srows:
            header = ["Model", title.capitalize(), "Answers", "Accuracy [95% CI]", "Invalid"]
            parts.append(f"\n## By {title}\n\n" + _table(header, srows))
    if review is not None:
        rrows = [
            [
                label,
                str(m["n_reviewed"]),
                str(m["n_ambiguous"]),
                _pct(m["agreement"]),
                kappa_text(m["kappa"]),
                _pct(m["accuracy_automatic"]),
                _pct(m["accuracy_reviewed"]),
            ]
            for label, m in review["models"].items()
        ]
        header = ["Model", "Reviewed", "Ambiguous", "Agreement", "Kappa", "Auto acc.", "Rev. acc."]
        text = (
            f"\n## Human review ({review['n_marks']} marks from {md_code(review['marks'])}; "
            f"{review['unmatched']} match no answer)\n\nThe automatic grades stay in every "
            "metric; disagreements are listed in `review.json`.\n\n"
        )
        parts.append(text + (_table(header, rrows) if rrows else "No mark matches a run.\n"))
        parts.append(_judge_review_markdown(review))
    return "".join(parts)


def kappa_text(kappa: float | None) -> str:
    """Cohen's kappa as read beside percentages: two decimals (0.57), a dash when undefined.

    Example:
        >>> kappa_text(0.571429), kappa_text(None)
        ('0.57', '–')
    """
    return DASH if kappa is None else f"{kappa:.2f}"


def _judge_review_markdown(review: dict[str, Any]) -> str:
    """LLM judge vs the reviewers per question type (``grading.review.judge_vs_review``)."""
    rows = []
    for label, m in review["models"].items():
        for qtype, a in (m.get("judge_vs_review") or {}).items():
            cells = [
                f"{verdict} → {mark}: {n}"
                for verdict, marks in sorted(a["confusion"].items())
                for mark, n in sorted(marks.items())
            ]
            kappa = kappa_text(a["kappa"])
            rows.append([label, qtype, str(a["n"]), _pct(a["agreement"]), kappa, "; ".join(cells)])
    if not rows:
        return ""
    header = ["Model", "Question type", "n", "Agreement", "Kappa", "Judge → reviewer"]
    return (
        "\n## LLM judge vs human review\n\nOn the reviewed answers the judge graded: Cohen's "
        "kappa on correct vs not correct (a reply the judge found invalid counts as incorrect), "
        "and the confusion (judge verdict → reviewer's mark: count).\n\n" + _table(header, rows)
    )
