"""The judge's reply read as a verdict, the way ``eval.scoring`` reads an answer.

``parse_verdict(text)`` returns ``(understood, grade)``: grade 1 (CORRECT), 0 (INCORRECT) or
None (INVALID: the graded reply refuses or hedges); ``understood`` is False when no verdict can
be read, and the row then keeps the rules' grade (counted in ``n_judge_failed``).

Precedence, first hit wins (reasoning blocks and markdown removed first):

1. The whole reply is one verdict word (``"INCORRECT."``, ``"**Correct**"``).
2. Explicit verdicts (``Verdict: X``, ``Final answer: X``, ``Grade - X``, a last line that is
   only ``X``): the last one counts. ``Verdict: not CORRECT`` says what it is not, not what
   it is: not understood.
3. Verdict words in the text: a word negated within its clause ("is not CORRECT", "isn't
   incorrect"), in a question, or used as an adjective ("the correct answer is left") asserts
   nothing; the others must all agree, else (a contradiction) not understood.

    >>> parse_verdict("The reply is not CORRECT. Verdict: INCORRECT")
    (True, 0)
    >>> parse_verdict("It is correct. No wait, it is incorrect.")
    (False, None)
"""

from __future__ import annotations

import re

from radspatial.core.replies import demarkup, strip_think

VERDICTS = {"CORRECT": 1, "INCORRECT": 0, "INVALID": None}
_WORD = r"(?P<word>CORRECT|INCORRECT|INVALID)\b"
_VERDICT = re.compile(rf"\b{_WORD}", re.I)
_EXPLICIT = re.compile(
    r"\b(?:final\s+)?(?:verdict|grade|grading|answer|judg(?:e)?ment|decision|label"
    r"|classification|evaluation|assessment|rating|output|result)\b"
    r"(?:\s+(?:is|would\s+be|should\s+be|will\s+be))?\s*[:=\-]?\s*[\"'(\[]*"
    rf"(?P<neg>not\s+|n't\s+)?{_WORD}",
    re.I,
)
_ALONE = re.compile(rf"^\W*{_WORD}\W*$", re.I)
_NEGATION = re.compile(r"\b(?:not|never|neither|nor|hardly|rather\s+than|instead\s+of)\b|n't\b")
_CLAUSE = re.compile(r"[.;!?\n]|,\s*(?:but|and|while)\b|\b(?:but|whereas|however|although)\b")
# "the correct answer", "an incorrect side": the word describes a noun, it grades nothing
_ADJECTIVE = re.compile(
    r"\s+(?:answer|answers|reference|response|reply|one|side|term|word|label|value|option"
    r"|choice|form|frame|structure|organ|direction|count|number|interpretation)\b",
    re.I,
)
_QUESTION = re.compile(r"(?<![^.!?\n])[^.!?\n]*\?")


def parse_verdict(text: str | None) -> tuple[bool, int | None]:
    """(understood, grade) of a judge's reply (see the module docstring)."""
    if not isinstance(text, str):
        return False, None
    clean = demarkup(strip_think(text)).strip()
    alone = _ALONE.match(clean)
    if alone:
        return True, VERDICTS[alone["word"].upper()]
    explicit = list(_EXPLICIT.finditer(clean))
    lines = [x for x in clean.splitlines() if x.strip()]
    last = _ALONE.match(lines[-1]) if lines else None
    if last is not None:  # a closing line of its own is the last explicit verdict
        return True, VERDICTS[last["word"].upper()]
    if explicit:
        final = explicit[-1]
        if final["neg"]:
            return False, None
        return True, VERDICTS[final["word"].upper()]
    return _from_mentions(_QUESTION.sub(" ", clean))


def _from_mentions(text: str) -> tuple[bool, int | None]:
    """The verdict words the text asserts; they must agree."""
    asserted = set()
    for m in _VERDICT.finditer(text):
        clause_start = max((c.end() for c in _CLAUSE.finditer(text, 0, m.start())), default=0)
        if _NEGATION.search(text[clause_start : m.start()].lower()):
            continue
        if _ADJECTIVE.match(text, m.end()):
            continue
        asserted.add(m["word"].upper())
    if len(asserted) != 1:
        return False, None  # none, or a contradiction
    return True, VERDICTS[asserted.pop()]
