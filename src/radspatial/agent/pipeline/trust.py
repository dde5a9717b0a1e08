"""The agent's shared trust checks: what every kind of question goes through between the
localizer and the question type's ``verify``.

A yes/no, choice, count or name question is answered by one pipeline (``agent/pipeline/agent.py``):
parse -> the type's ``to_locate`` -> :func:`refusal` -> locate -> :func:`check_found` -> the
type's ``verify``. The checks here never ask what kind of answer the question wants: each
structure the type names by a role (``QuestionType.roles``) must be found, with a score at or
above the localizer's floor (``Found.details["abstain_below"]``) and without the localizer's own
reason to abstain (``abstain_reason``) or, where the type's rule does not weigh the uncertainty,
to doubt it (``uncertain_reason``). Structures a type locates without a role (orientation's
landmarks) are left to its ``verify``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from radspatial.questions import QuestionType
from radspatial.questions.records import Decision, Found, Ref

LOW_CONFIDENCE = "abstain on low localizer confidence"
NOT_TRUSTED = "abstain: localization not trustworthy"
NOT_FOUND = "abstain: structure not found"
REFUSED = "localizer refused"


def refusal(localizer: Any, refs: Sequence[Ref], context: Any) -> str | None:
    """A localizer's reason not to look at this image at all (optional ``refuses``: a plane
    it was not trained on, a model trained on CT asked about an MR slice)."""
    reason = getattr(localizer, "refuses", None)
    return reason(list(refs), context) if callable(reason) else None


def distrust(found: Found, qtype: QuestionType) -> str | None:
    """The localizer's reason not to trust ``found`` for this question: its own abstention,
    or a flag of uncertainty where the type's rule does not weigh ``uncertainty_px``."""
    why = found.details.get("abstain_reason")
    if why or qtype.weighs_uncertainty:
        return why
    return found.details.get("uncertain_reason")


def _check_one(role: str, ref: Ref, f: Found | None, qtype: QuestionType) -> dict[str, Any]:
    """One role's record for the trace: ``failed`` names the check it failed (None: passed)."""
    what = ref.name or ref.text or role
    out: dict[str, Any] = {"role": role, "ref": what, "found": f is not None}
    if f is None:
        return {**out, "failed": NOT_FOUND, "reason": f"{role} not found"}
    floor = float(f.details.get("abstain_below", 0.0))
    out.update(score=round(float(f.score), 4), floor=floor, failed=None, reason="")
    if f.score < floor:
        reason = f"{role} ({what}) found with low confidence {f.score:.2f} < {floor:g}"
        out.update(failed=LOW_CONFIDENCE, reason=reason)
    elif why := distrust(f, qtype):
        out.update(failed=NOT_TRUSTED, reason=f"{role} ({what}) {why}")
    return out


def check_found(
    qtype: QuestionType, refs: Sequence[Ref], found: Sequence[Found | None]
) -> tuple[Decision | None, list[dict[str, Any]]]:
    """The shared checks on what was found for each of the type's roles: an abstention (the
    first role found with too low a confidence or not trusted, else the roles not found) or
    None to let the type's ``verify`` decide; and one record per role for the trace."""
    roles = qtype.roles
    records = [_check_one(*rf, qtype) for rf in zip(roles, refs, found, strict=False)]
    for rec in records:
        if rec["failed"] in (LOW_CONFIDENCE, NOT_TRUSTED):
            return Decision(None, rec["reason"], rec["failed"]), records
    checked = found[: len(records)]
    gone = Decision.not_found(NOT_FOUND, roles[: len(records)], checked) if records else None
    return gone, records


def with_fallback_notes(decision: Decision, found: Sequence[Found | None]) -> Decision:
    """A marker reference answered from the name instead: the reader of the reason must know."""
    notes = [f.details["fallback"] for f in found if f and f.details.get("fallback")]
    if not notes:
        return decision
    return replace(decision, reason=f"{decision.reason} ({'; '.join(notes)})")
