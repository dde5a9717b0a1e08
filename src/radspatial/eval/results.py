"""The ``results.jsonl`` row of one call (``core.records.ResultRow``): the item, the reply and
its scores in the three frames (image, standard view, anatomical). Yes/no replies are parsed by
``scoring.parse_answer`` (and MIRP's parser, always, for MIRP's statistics; it decides under
``--protocol mirp``); open replies are graded by ``grading.rows``.
"""

from __future__ import annotations

from typing import Any

from radspatial.core.answers import YES_NO
from radspatial.core.records import ResultRow
from radspatial.eval.items import EvalItem
from radspatial.eval.mirp import parse_mirp
from radspatial.eval.scoring import parse_answer
from radspatial.eval.subgroups import anatomy_region
from radspatial.grading.rows import open_scores
from radspatial.questions import answer_kind

# the item's fields a result row repeats as they are
_AS_ASKED = (
    "id",
    "setup",
    "marker",
    "question",
    "question_type",
    "relation",
    "transform",
    "variant",
    "pair",
)


def result_row(
    item: EvalItem, run: int, call: dict | None, prompt: str = "", protocol: str = "radspatial"
) -> ResultRow:
    """The results.jsonl row of one call: the item, the reply and its scores in three frames
    (open question types: graded by ``grading.rows``)."""
    reply = call.get("reply") if call else None
    error = call.get("error") if call else "not run"
    answered = reply if reply is not None and not error else None
    if answer_kind(item.question_type) == YES_NO:  # MIRP's parser too, for its statistics
        scores = _yes_no_scores(item, answered, prompt, protocol)
    else:  # the type's own reader (grading.rows): words, names, numbers
        scores = open_scores(item, answered)
    return ResultRow(
        **{k: getattr(item, k) for k in _AS_ASKED},
        run=run,
        image=str(item.image),
        prompt=prompt,
        reply=reply,
        latency_s=call.get("latency_s") if call else None,
        error=error,
        **scores,
        **subgroup_fields(item),
    )


def _yes_no_scores(item: EvalItem, reply: str | None, prompt: str, protocol: str) -> dict[str, Any]:
    parsed_mirp = parse_mirp(reply, item.question, prompt) if reply is not None else None
    if protocol == "mirp":
        parsed = parsed_mirp
    else:
        parsed = parse_answer(reply, item.question) if reply is not None else None

    def correct(target: int | str | None) -> bool | None:
        return None if target is None else parsed == target

    return {
        "expected": item.expected,
        "expected_standard": item.expected_standard,
        "expected_anatomical": item.expected_anatomical,
        "parsed": parsed,
        "parsed_mirp": parsed_mirp,
        "correct": parsed == item.expected,
        "correct_standard": correct(item.expected_standard),
        "correct_anatomical": correct(item.expected_anatomical),
    }


def subgroup_fields(item: EvalItem) -> dict[str, Any]:
    """What the subgroup tables group by (``radspatial.eval.subgroups``)."""
    asked = [o for o in (item.object1, item.object2, item.extra.get("object3")) if o]
    structures = item.extra.get("structures")
    return {
        "structures_asked": tuple(asked),
        "region": anatomy_region(structures) if structures else None,
        "modality": item.extra.get("modality"),
        # coronal/sagittal (absent: axial) and the consistency group (eval/consistency.py)
        **{k: item.extra.get(k) for k in ("plane", "group", "group_twin")},
        # whether the image decides the item (questions/decidability.py; None: unknown)
        "decidable": item.extra.get("decidable"),
    }
