"""Human review marks, folded into a report next to the automatic grades (never over them).

Marks file (JSONL, one mark per line; what the report's gallery downloads)::

    {"id": "rq1/none/case_slice012_laterality/q0", "run": 0, "model": "openai:gpt-4o",
     "mark": "correct", "reviewer": "jd", "note": "says 'right half'"}

- ``id`` (required): the item id of ``results.jsonl``; ``mark`` (required): ``correct``,
  ``incorrect`` or ``ambiguous``;
- ``run`` (optional, default 0): which repeat was reviewed; ``model`` (optional): the run's model
  spec (or report label); without it the mark applies to every run folder holding the id;
- ``reviewer``, ``note``, ``time`` (optional strings), kept as given.

A later line for the same (model, id, run, reviewer) replaces an earlier one. The report shows,
per model, how many answers were reviewed, the agreement and Cohen's kappa between reviewed and
automatic grades (ambiguous marks are counted apart), and lists every disagreement; the
automatic grade stays in ``results.jsonl`` and in every metric.

Where the LLM judge graded reviewed answers (``--judge``: the row's ``judge.verdict``),
``judge_vs_review`` gives, per question type and over all, the judge-reviewer agreement,
Cohen's kappa on correct vs not correct (a reply the judge found invalid is scored wrong, so it
counts as "incorrect" there) and the confusion table (judge verdict -> reviewer mark -> count),
with n: how far the judge can stand in for the reviewers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from radspatial.core.datafiles import (
    DataFileError,
    json_objects,
    max_jsonl_bytes,
    read_text_bounded,
)
from radspatial.core.records import ResultRow
from radspatial.grading.judge import cohen_kappa

MARKS = ("correct", "incorrect", "ambiguous")
_OPTIONAL_STR = ("model", "reviewer", "note", "time")


def read_marks(path: Path) -> list[dict[str, Any]]:
    """The marks of ``path``; any bad line is a ``DataFileError`` naming the line."""
    path = Path(path)
    text = read_text_bounded(path, max_jsonl_bytes())
    latest: dict[tuple, dict] = {}
    for where, mark in json_objects(path, text, "mark"):
        if not isinstance(mark.get("id"), str) or not mark["id"]:
            raise DataFileError(f"{where}: missing item 'id'")
        if mark.get("mark") not in MARKS:
            raise DataFileError(f"{where}: 'mark' must be one of {', '.join(MARKS)}")
        run = mark.get("run", 0)
        if isinstance(run, bool) or not isinstance(run, int) or run < 0:
            raise DataFileError(f"{where}: 'run' must be an integer >= 0")
        for key in _OPTIONAL_STR:
            if mark.get(key) is not None and not isinstance(mark[key], str):
                raise DataFileError(f"{where}: {key!r} must be a string")
        clean = {"id": mark["id"], "run": run, "mark": mark["mark"]}
        clean.update({k: mark[k] for k in _OPTIONAL_STR if mark.get(k) is not None})
        latest[(clean.get("model"), clean["id"], run, clean.get("reviewer"))] = clean
    return list(latest.values())


def fold_review(
    runs: list[tuple[str, str, list[ResultRow]]], marks: list[dict[str, Any]]
) -> dict[str, Any]:
    """``runs``: (label, model spec, result rows). Per model: reviewed vs automatic grades."""
    out: dict[str, Any] = {"n_marks": len(marks), "models": {}, "unmatched": 0}
    matched: set[int] = set()  # marks that matched some run (one matching two counts once)
    for label, spec, rows in runs:
        by_key = {(r.id, r.run): r for r in rows}
        pairs: list[tuple[str, str]] = []  # (automatic, reviewed)
        disagree: list[dict[str, Any]] = []
        ambiguous = 0
        judged: list[tuple[ResultRow, str]] = []  # (row, reviewer's mark) of non-ambiguous marks
        for k, m in enumerate(marks):
            if m.get("model") not in (None, label, spec):
                continue
            row = by_key.get((m["id"], m["run"]))
            if row is None:
                continue
            matched.add(k)
            auto = "correct" if row.correct else "incorrect"
            if m["mark"] == "ambiguous":
                ambiguous += 1
                continue
            pairs.append((auto, m["mark"]))
            judged.append((row, m["mark"]))
            if auto != m["mark"]:
                disagree.append(
                    {
                        "id": m["id"],
                        "run": m["run"],
                        "automatic": auto,
                        "reviewed": m["mark"],
                        "grade_source": row.grade.source,
                        "reply": row.reply,
                        **{k: m[k] for k in ("reviewer", "note") if k in m},
                    }
                )
        if not pairs and not ambiguous:
            continue
        autos, revs = [a for a, _ in pairs], [b for _, b in pairs]
        out["models"][label] = {
            "n_reviewed": len(pairs) + ambiguous,
            "n_ambiguous": ambiguous,
            "agreement": round(sum(a == b for a, b in pairs) / len(pairs), 6) if pairs else None,
            "kappa": cohen_kappa(autos, revs),
            "accuracy_automatic": round(autos.count("correct") / len(pairs), 6) if pairs else None,
            "accuracy_reviewed": round(revs.count("correct") / len(pairs), 6) if pairs else None,
            "disagreements": disagree,
            **({"judge_vs_review": agreement} if (agreement := judge_vs_review(judged)) else {}),
        }
    out["unmatched"] = len(marks) - len(matched)
    return out


def _agreement(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """n, agreement, kappa (invalid read as incorrect) and the confusion of (judge, mark)."""
    confusion: dict[str, dict[str, int]] = {}
    for verdict, mark in pairs:
        row = confusion.setdefault(verdict, {})
        row[mark] = row.get(mark, 0) + 1
    binary = [("correct" if v == "correct" else "incorrect", m) for v, m in pairs]
    agree = sum(a == b for a, b in binary)
    return {
        "n": len(pairs),
        "agreement": round(agree / len(pairs), 6),
        "kappa": cohen_kappa([a for a, _ in binary], [b for _, b in binary]),
        "confusion": confusion,
    }


def judge_vs_review(judged: list[tuple[ResultRow, str]]) -> dict[str, Any]:
    """Judge verdicts vs reviewer marks on the reviewed rows the judge graded: per question
    type and ``all`` (empty when the judge graded none of them)."""
    by_type: dict[str, list[tuple[str, str]]] = {}
    for row, mark in judged:
        verdict = (row.grade.metadata.get("judge") or {}).get("verdict")
        if verdict not in ("correct", "incorrect", "invalid"):
            continue  # not judged, or the judge's call failed
        by_type.setdefault(str(row.question_type), []).append((verdict, mark))
    if not by_type:
        return {}
    out = {qtype: _agreement(pairs) for qtype, pairs in sorted(by_type.items())}
    out["all"] = _agreement([p for pairs in by_type.values() for p in pairs])
    return out
