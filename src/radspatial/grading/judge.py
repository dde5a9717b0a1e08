"""The LLM judge: grades the replies the rules could not (or, if asked, all replies).

``--judge SPEC`` takes any backend spec (``openai-compat:MODEL@URL``, ``hf:...``, ``vllm:...``,
even ``agent``-less baselines for testing). The prompt is fixed (``JUDGE_PROMPT``, versioned by
``JUDGE_VERSION`` and written into ``judge.json``); the judge sees no image, only the question,
the reference answer with its accepted forms, and the reply. Verdicts are cached write-ahead in
``judge_calls.jsonl`` keyed by a hash of (judge spec, decoding, prompt): a rerun of the same
eval resumes without repeating a finished judge call, as the model calls do.

Every judged run also grades the calibration set shipped with the package
(``radspatial/data/judge_calibration.jsonl``: replies with known grades), so the report can
show the judge's accuracy on it and its agreement with the rules (Cohen's kappa) where both
decided.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from radspatial.core.answers import Grade
from radspatial.core.datafiles import DataFileError
from radspatial.core.io import atomic_write_json, jsonl_line, open_append, read_call_log
from radspatial.core.records import ResultRow
from radspatial.core.redact import redact, redact_json
from radspatial.grading.normalize import normalize, rule_grade
from radspatial.grading.rows import is_open_row
from radspatial.grading.verdict import parse_verdict
from radspatial.models.base import Decoding, Reply, Request, create_backend
from radspatial.questions import get_question_type

JUDGE_VERSION = "radspatial-judge-1"
JUDGE_PROMPT = (
    "You grade a reply to a question about a CT image. You do not see the image; the reference "
    "answer is correct by construction.\n"
    "Question: {question}\n"
    "Reference answer: {expected}\n"
    "Also accepted: {accepted}\n"
    "Reply to grade: {reply}\n\n"
    "Rules: left/right/above/below refer to the image as shown, not the patient. The reply is "
    "CORRECT if it commits to the reference answer (a synonym or an equivalent number counts). "
    "It is INCORRECT if it commits to a different answer. It is INVALID if it refuses, hedges, "
    "gives several answers, or answers in the patient's frame instead of the image's.\n"
    "Answer with one word: CORRECT, INCORRECT or INVALID."
)
JUDGE_CALLS = "judge_calls.jsonl"
JUDGE_DECODING = Decoding(max_tokens=256)  # greedy, seed 0: recorded in judge.json
_CALL_FIELDS = frozenset({"key", "reply", "error", "understood", "grade"})


def accepted_forms(expected: Any, question_type: str) -> str:
    """Other forms of the reference answer the judge should accept (the type says which)."""
    return get_question_type(question_type).accepted_forms(expected)


def judge_prompt(question: str, expected: Any, reply: str, question_type: str) -> str:
    return JUDGE_PROMPT.format(
        question=question,
        expected=expected,
        accepted=accepted_forms(expected, question_type),
        reply=reply,
    )


def judge_key(spec: str, decoding: Decoding, prompt: str) -> str:
    blob = json.dumps(
        {"judge": spec, "decoding": decoding.to_json(), "prompt": prompt}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def load_calibration() -> list[dict[str, Any]]:
    """The shipped calibration set: {question_type, question, expected, reply, grade}."""
    text = resources.files("radspatial.data").joinpath("judge_calibration.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _load(path: Path) -> dict[str, dict]:
    """Finished verdicts of the judge's write-ahead log (failed calls are asked again).

    A record with a field the judge never writes is refused, naming the file and key; the
    verdict is read again from the logged reply (``parse_verdict``), never taken from the
    log's ``grade``, so a log written by an older parser (or edited) grades as this one does."""
    done = {}
    for key, row in read_call_log(path, "judge").items():
        unknown = sorted(set(row) - _CALL_FIELDS)
        if unknown:
            raise DataFileError(
                f"{path}: judge record {key[:12]}: unknown {unknown[0]!r} (a field not written "
                "by radspatial's judge; move the file aside to judge again)"
            )
        if row.get("error") is None:
            understood, grade = parse_verdict(row.get("reply"))
            done[key] = {**row, "understood": understood, "grade": grade}
    return done


def run_judge(
    cases: Sequence[dict[str, Any]],
    out: Path,
    spec: str,
    *,
    decoding: Decoding | None = None,
    concurrency: int = 4,
    backend: Any = None,
) -> dict[str, dict]:
    """Judge ``cases`` ({question, expected, reply, question_type}); return key -> record.

    Finished calls in ``out/judge_calls.jsonl`` are reused; new ones are appended as they
    return. Each case gets ``key`` and ``prompt`` set."""
    decoding = decoding or JUDGE_DECODING
    path = Path(out) / JUDGE_CALLS
    done = _load(path)
    pending: dict[str, Request] = {}
    for case in cases:
        prompt = judge_prompt(case["question"], case["expected"], case["reply"], case["qtype"])
        case["prompt"], case["key"] = prompt, judge_key(spec, decoding, prompt)
        if case["key"] not in done and case["key"] not in pending:
            pending[case["key"]] = Request(case["key"], prompt, None, {"judge": True})
    if pending:
        backend = backend or create_backend(spec, decoding=decoding, concurrency=concurrency)
        with open_append(path) as log:

            def on_reply(req: Request, reply: Reply) -> None:
                understood, grade = parse_verdict(reply.text)
                row = {
                    "key": req.key,
                    "reply": reply.text,
                    "error": reply.error,
                    "understood": understood,
                    "grade": grade,
                }
                log.write(jsonl_line(row))
                log.flush()
                if reply.error is None:
                    done[req.key] = row

            backend.generate(list(pending.values()), on_reply)
    return done


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two raters' labels (None if undefined: no items, or chance = 1)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    labels = sorted(set(a) | set(b), key=str)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    expected = sum((list(a).count(k) / n) * (list(b).count(k) / n) for k in labels)
    if expected >= 1:
        return None
    return round((observed - expected) / (1 - expected), 6)


def _label(grade: int | None) -> str:
    return {1: "correct", 0: "incorrect", None: "invalid"}[grade]


def apply_judge(
    rows: Sequence[ResultRow],
    out: Path,
    spec: str,
    *,
    judge_all: bool = False,
    concurrency: int = 4,
    backend: Any = None,
) -> tuple[list[ResultRow], dict[str, Any]]:
    """Judge the open rows the rules left undecided (all open rows with ``judge_all``); return
    the rows in their order (judged ones take the judge's grade: ``correct`` and the grade's
    ``source`` = ``judge``; the rules' reading stays in ``parsed`` and the grade's ``status``;
    the verdict in the grade's ``metadata["judge"]``) and the judge summary written to
    ``out/judge.json``."""
    open_rows = [i for i, r in enumerate(rows) if is_open_row(r) and not r.error]
    chosen = [i for i in open_rows if judge_all or _grade(rows[i]).status == "undecided"]
    cases = [
        _case(rows[i].question, rows[i].expected, rows[i].reply or "", rows[i].question_type)
        for i in chosen
    ]
    calibration = load_calibration()
    calib_cases = [
        _case(c["question"], c["expected"], c["reply"], c["question_type"]) for c in calibration
    ]
    done = run_judge(cases + calib_cases, out, spec, concurrency=concurrency, backend=backend)
    pairs: tuple[list[str], list[str]] = ([], [])  # (rules, judge) labels where both decided
    judged, n_failed = _take_verdicts([rows[i] for i in chosen], cases, done, pairs)
    rows = list(rows)
    for i, row in zip(chosen, judged, strict=True):
        rows[i] = row
    calib = _grade_calibration(calibration, calib_cases, done, pairs)
    known = [c for c in calib if c["judge"] != "failed"]
    summary = {
        "judge": redact(spec),
        "version": JUDGE_VERSION,
        "prompt": JUDGE_PROMPT,
        "decoding": JUDGE_DECODING.to_json(),  # its seed, temperature and token limit
        "seed": JUDGE_DECODING.seed,
        "judge_all": judge_all,
        "n_open_rows": len(open_rows),
        "n_judged": len(chosen),
        "judge_needed_rate": round(len(chosen) / len(open_rows), 6) if open_rows else None,
        "n_judge_failed": n_failed,
        "rules_vs_judge": _agreement(*pairs),
        "calibration": {
            "n": len(calib),
            "judge_accuracy": (
                round(sum(c["judge"] == c["grade"] for c in known) / len(known), 6)
                if known
                else None
            ),
            "rules_accuracy_decided": _rules_acc(calib),
            "rules_undecided": sum(c["rules_status"] == "undecided" for c in calib),
        },
    }
    atomic_write_json(Path(out) / "judge.json", redact_json(summary))
    return rows, summary


def _case(question: str, expected: Any, reply: str, qtype: str) -> dict[str, Any]:
    """What the judge is asked about one reply (``run_judge`` adds its prompt and key)."""
    return {"question": question, "expected": expected, "reply": reply, "qtype": qtype}


def needs_judge(rows: Sequence[ResultRow]) -> bool:
    """Whether some rows' answers are words, names or numbers (what the judge grades)."""
    return any(is_open_row(r) for r in rows)


def _grade(row: ResultRow) -> Grade:
    if not is_open_row(row):
        raise ValueError(f"result row {row.id!r} (run {row.run}) is not an open row")
    return row.grade


def _judged(row: ResultRow, verdict: dict[str, Any], correct: bool | None = None) -> ResultRow:
    """``row`` with the judge's ``verdict`` in its grade's metadata; ``correct`` (where the
    judge decided): the judge's grade."""
    grade = _grade(row)
    metadata = {**grade.metadata, "judge": verdict}
    if correct is None:
        return replace(row, reading=replace(grade, metadata=metadata))
    taken = replace(grade, correct=correct, source="judge", metadata=metadata)
    return replace(row, correct=correct, reading=taken)


def _take_verdicts(
    chosen: list[ResultRow],
    cases: list[dict[str, Any]],
    done: dict[str, dict],
    pairs: tuple[list[str], list[str]],
) -> tuple[list[ResultRow], int]:
    """Each judged row with the judge's grade, and how many the judge failed to grade."""
    n_failed, judged = 0, []
    for row, case in zip(chosen, cases, strict=True):
        rec = done.get(case["key"])
        grade = _grade(row)
        if rec is None or not rec.get("understood"):
            n_failed += 1
            failed = {"verdict": None, "reply": rec.get("reply") if rec else None}
            judged.append(_judged(row, failed))
            continue
        verdict = rec["grade"]
        if grade.status != "undecided":
            pairs[0].append(_label(row.outcome))
            pairs[1].append(_label(verdict))
        taken = {"verdict": _label(verdict), "key": case["key"]}
        judged.append(_judged(row, taken, verdict == 1))
    return judged, n_failed


def _grade_calibration(
    calibration: list[dict[str, Any]],
    calib_cases: list[dict[str, Any]],
    done: dict[str, dict],
    pairs: tuple[list[str], list[str]],
) -> list[dict[str, Any]]:
    """The calibration set with the judge's and the rules' grades."""
    calib = []
    for c, case in zip(calibration, calib_cases, strict=True):
        rec = done.get(case["key"])
        understood = bool(rec and rec.get("understood"))
        grade: int | None = rec["grade"] if rec and understood else None
        norm = normalize(c["reply"], c["question_type"], c["question"])
        rules = rule_grade(norm, c["expected"], c["question_type"])
        judged = grade if understood else "failed"
        calib.append({**c, "judge": judged, "rules": rules, "rules_status": norm.status})
        if norm.status != "undecided" and understood:
            pairs[0].append(_label(rules))
            pairs[1].append(_label(grade))
    return calib


def _agreement(rules: list[str], judge: list[str]) -> dict[str, Any]:
    n = len(rules)
    agree = sum(a == b for a, b in zip(rules, judge, strict=True))
    return {
        "n": n,
        "agreement": round(agree / n, 6) if rules else None,
        "kappa": cohen_kappa(rules, judge),
    }


def _rules_acc(calib: list[dict]) -> float | None:
    decided = [c for c in calib if c["rules_status"] != "undecided"]
    if not decided:
        return None
    return round(sum(c["rules"] == c["grade"] for c in decided) / len(decided), 6)
