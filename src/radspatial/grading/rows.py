"""Result rows of the open question types: the reply graded by the rules (the judge may decide
later, ``grading.judge``), scored in the three frames.

Open rows keep the result-row schema of the yes/no types so every metric applies unchanged:
``expected`` is 1 and ``parsed`` is the grade (1 correct, 0 incorrect, None invalid or
undecided), so accuracy and invalid rate mean what they mean for yes/no. What was asked and
read lives beside it: ``answer_expected`` (the canonical answer, shown image),
``answer_standard``/``answer_anatomical`` (the other frames), ``answer_read`` (the normalized
reply), ``grade_source`` (``rules`` | ``judge`` | ``none``) and ``rules`` (the normalizer's
status and reason).
"""

from __future__ import annotations

from typing import Any

from radspatial.eval.items import EvalItem
from radspatial.grading.normalize import canonical, normalize, rule_grade


def open_result_row(item: EvalItem, run: int, call: dict | None, prompt: str) -> dict[str, Any]:
    reply = call.get("reply") if call else None
    error = call.get("error") if call else "not run"
    answered = reply is not None and not error
    qtype = item.question_type
    norm = normalize(reply, qtype, item.question) if answered else None
    grade = rule_grade(norm, item.expected, qtype) if norm else None

    def frame(expected: Any) -> bool | None:
        if expected is None or norm is None:
            return None
        return norm.status == "answer" and norm.value == canonical(expected, qtype)

    return {
        "id": item.id,
        "run": run,
        "setup": item.setup,
        "marker": item.marker,
        "question": item.question,
        "question_type": qtype,
        "relation": item.relation,
        "transform": item.transform,
        "variant": item.variant,
        "pair": item.pair,
        "expected": 1,
        "expected_standard": None,
        "expected_anatomical": None,
        "answer_expected": item.expected,
        "answer_standard": item.expected_standard,
        "answer_anatomical": item.expected_anatomical,
        "image": str(item.image),
        "prompt": prompt,
        "reply": reply,
        "answer_read": norm.value if norm else None,
        "rules": norm.to_json() if norm else None,
        "grade_source": "rules"
        if grade is not None or (norm and norm.status == "invalid")
        else "none",
        "parsed": grade,
        "parsed_mirp": None,
        "correct": grade == 1,
        "correct_standard": frame(item.expected_standard),
        "correct_anatomical": frame(item.expected_anatomical),
        "latency_s": call.get("latency_s") if call else None,
        "error": error,
        **({"options": opts} if (opts := (item.extra.get("params") or {}).get("options")) else {}),
    }
