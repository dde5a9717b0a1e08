"""MIRP's own rules, re-implemented: answer parsing, statistics and the replication protocol.

MIRP's published evaluation scripts (``RQ1_RQ2_RQ3-2_calculate_results_image.py`` and
``RQ3-1_calculate_results_anatomy.py``, MIT) define the paper's numbers; this module follows
their rules with our own code, and the test suite runs the unmodified scripts on our export to
check that the numbers agree exactly:

- a reply is read by a cascade: a lone 0/1, a lone yes/no, a 0/1/yes/no token at the start or
  end, a short one-sentence reply restating the asked relation, then the reply with the
  prompt's lines removed (first sentence's relation, or "answer is 1"); otherwise it is unsure;
- an unsure reply is scored as the wrong answer in the image frame (``1 - expected``), and that
  same guess is scored in the anatomical frame (where it may happen to be right);
- accuracy and binary F1 per run, mean and ``statistics.stdev`` across runs (0 for one run);
- the anatomical subset: RQ1 questions worded "is the A to the (left|right) of the B?" whose
  structures have standard-view centres; the truth is "A lies on the patient's left of B".

The replication protocol (``radspatial eval --protocol mirp``) is MIRP's inference code: the
in-context example is the first question of another image of the same setup and marker with its
true answer, drawn anew for each item and run by ``random.Random(2025)`` in file order; the text
goes before the image; every setup (the blank images too) gets the CT prompt.
"""

from __future__ import annotations

import random
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from radspatial.core.records import ResultRow
from radspatial.eval.metrics import BinaryMetrics, binary_metrics
from radspatial.questions import is_mirp_type

_OPEN = r"[\(\[\{'\"\.\s]*"
_CLOSE = r"[\)\]\}'\"\.\s]*"
_DIGIT = re.compile(_OPEN + r"(0|1)" + _CLOSE)
_YESNO = re.compile(_OPEN + r"(yes|no)" + _CLOSE, re.IGNORECASE)
_LEAD = re.compile(r"^" + _OPEN + r"(0|1|yes|no)", re.IGNORECASE)
_TRAIL = re.compile(r"(0|1|yes|no)" + _CLOSE + r"$", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
_ANSWER_IS = re.compile(
    r"(?:answer|correct answer|final answer|solution|response)(?: is|:)?\s*([10])", re.IGNORECASE
)
_DIRECTIONS = (("above", "below"), ("below", "above"), ("left", "right"), ("right", "left"))
ANATOMY_QUESTION = re.compile(r"is the (.+?) to the (left|right) of the (.+?)\?", re.IGNORECASE)
EXAMPLE_SEED = 2025  # MIRP's inference scripts: random.seed(2025) per setup and marker


def _relation_word(question: str, reply: str) -> int | None:
    """1/0 when the reply names the asked direction word or its opposite (first asked wins)."""
    q, a = question.lower(), reply.lower()
    for word, opposite in _DIRECTIONS:
        if word in q:
            if word in a:
                return 1
            if opposite in a:
                return 0
    return None


def _token(match: re.Match[str] | None) -> int | None:
    if match is None:
        return None
    return 1 if match.group(1).lower() in ("1", "yes") else 0


def parse_mirp(reply: str, question: str, prompt: str) -> int | None:
    """MIRP's answer cascade: 1, 0, or None (unsure)."""
    text = reply.strip()
    for pattern in (_DIGIT, _YESNO):
        if (got := _token(pattern.fullmatch(text))) is not None:
            return got
    if (got := _token(_LEAD.match(text) or _TRAIL.search(text))) is not None:
        return got
    short = "\n" not in text and len(re.findall(r"[.!?]", text)) <= 1 and len(text) < 150
    if short and (got := _relation_word(question, text)) is not None:
        return got
    cleaned = text
    for line in prompt.splitlines():
        if line.strip():
            cleaned = cleaned.replace(line.strip(), "")
    first = _SENTENCE.search(cleaned)
    if first and (got := _relation_word(question, first.group(0).strip())) is not None:
        return got
    return _token(_ANSWER_IS.search(cleaned))


def group_key(setup: str, marker: str) -> str:
    return f"{setup.upper()}/{marker}"


def _stats(per_run: list[BinaryMetrics], n: int) -> dict[str, Any]:
    """MIRP's aggregation: mean and statistics.stdev (0 for one run) across runs."""
    accs, f1s = [m.accuracy for m in per_run], [m.f1 for m in per_run]
    sd = statistics.stdev if len(per_run) > 1 else (lambda _: 0.0)
    return {
        "n_items": n,
        "accuracy_mean": statistics.mean(accs),
        "accuracy_std": sd(accs),
        "f1_mean": statistics.mean(f1s),
        "f1_std": sd(f1s),
        "correct": [m.correct for m in per_run],
    }


def _scored(by_run: list[list[ResultRow]], target: str) -> dict[str, Any]:
    """MIRP's statistics of the guesses against ``target`` per run. The guesses never are None:
    binary_metrics scores them as sklearn does (F1 of "yes", 0 without true positives), which is
    what MIRP's scripts compute."""
    per_run = [
        binary_metrics([getattr(r, target) for r in b], [mirp_guess(r) for r in b]) for b in by_run
    ]
    return _stats(per_run, len(by_run[0]))


def mirp_guess(row: ResultRow) -> int:
    """The 0/1 MIRP's scripts score: the parsed reply, else the wrong image-frame answer."""
    parsed = row.parsed_mirp
    return int(parsed) if parsed is not None else 1 - int(row.expected)


def in_anatomy_subset(row: ResultRow) -> bool:
    """RQ1 left/right questions MIRP's anatomy script can score (names with known centres)."""
    return (
        row.setup == "rq1"
        and row.expected_anatomical is not None
        and ANATOMY_QUESTION.search(row.question) is not None
    )


def in_anatomy_image_subset(row: ResultRow) -> bool:
    """RQ1 questions MIRP's anatomy script scores in the image frame: every question whose text
    says "left" or "right" anywhere (its own selection, names such as "left kidney" included)."""
    words = row.question.lower()
    return row.setup == "rq1" and ("left" in words or "right" in words)


def mirp_block(rows: Sequence[ResultRow], runs: int) -> dict[str, Any]:
    """MIRP's statistics per setup and marker (relative position only, as in the paper):
    ``{"RQ1/none": {"image": {...}, "anatomy_left_right": {...}, "anatomy_image": {...}},
    "RQ2/dots": {...}, ...}``. RQ3(1) is the RQ1 pair ``anatomy_image`` (image frame) and
    ``anatomy_left_right`` (anatomical frame), each on the anatomy script's own subset."""
    groups: dict[str, list[ResultRow]] = defaultdict(list)
    for r in rows:
        if is_mirp_type(r.question_type):
            groups[group_key(r.setup, r.marker)].append(r)
    out: dict[str, Any] = {}
    for key in sorted(groups):
        by_run = [[r for r in groups[key] if r.run == k] for k in range(runs)]
        by_run = [b for b in by_run if b]
        if not by_run:
            continue
        block: dict[str, Any] = {"image": _scored(by_run, "expected")}
        unsure = [sum(1 for r in b if r.parsed_mirp is None) for b in by_run]
        block["image"]["unsure"] = unsure
        subsets = {  # RQ3(1): the anatomy script's two selections
            "anatomy_left_right": (in_anatomy_subset, "expected_anatomical"),
            "anatomy_image": (in_anatomy_image_subset, "expected"),
        }
        for name, (keep, target) in subsets.items():
            sub = [[r for r in b if keep(r)] for b in by_run]
            if key.startswith("RQ1/") and sub[0]:
                block[name] = _scored(sub, target)
        out[key] = block
    return out


def draw_examples(
    groups: dict[tuple[str, str, str], list[tuple[str, str, int | str]]], runs: int
) -> dict[tuple[str, int], tuple[str, int]]:
    """MIRP's in-context examples: ``(item id, run) -> (question, answer)``.

    ``groups`` maps (setup, marker, question type) to that group's items in file order, each as
    ``(id, question, answer)``. Per group a ``random.Random(2025)`` draws, run after run and
    item after item, another item of the group (as MIRP's scripts draw another image)."""
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for key in sorted(groups):
        members = groups[key]
        rng = random.Random(EXAMPLE_SEED)
        for run in range(runs):
            for i, (item_id, _, _) in enumerate(members):
                others = members[:i] + members[i + 1 :]
                if not others:
                    raise ValueError(
                        f"--protocol mirp needs two items per setup and marker; "
                        f"{key[0]}/{key[1]} has one"
                    )
                _, question, answer = rng.choice(others)
                out[(item_id, run)] = (question, int(answer))
    return out
