"""The yes/no reading: a free-text reply -> 1 (yes), 0 (no) or None (no valid answer).

``parse_answer`` is how every yes/no question type reads a reply (``QuestionType.read_reply``
of the ``yes/no`` kind); the open kinds' readers are in ``questions/reading.py``. Cleaning
(reasoning, markup) is shared with them in ``core/replies.py``.
"""

from __future__ import annotations

import bisect
import json
import re

from radspatial.core.replies import demarkup, strip_think
from radspatial.imaging.markers import marker_nouns
from radspatial.questions.frames import STATED_OPPOSITE, STATED_RE, stated_terms

_VALUES = {"yes": 1, "yeah": 1, "yep": 1, "yup": 1, "true": 1, "1": 1}
_VALUES |= {"no": 0, "nope": 0, "false": 0, "0": 0}
_EXACT = {**_VALUES, "y": 1, "n": 0}
_JSON_KEYS = ("final_answer", "answer", "result", "prediction", "label", "output", "response")
_CONNECT = {"or", "and"}
# A digit after these, or after a marker style's nouns ("number", "dot"), is a label ("the
# number 1"), not an answer.
_NUMBER_NOUNS = {"label", "marker", "the", "a"}
# "No" answers before a clause ("No, it is below", "No the aorta ..."); before any other word it
# is a determiner ("no doubt", "no evidence"). A digit answers before a reason ("0 because").
_BECAUSE = {"because", "since", "as", "but", "so", "actually", "according", "based"}
_CLAUSE_START = _BECAUSE | {"it", "its", "it's", "the", "this", "that", "there", "they", "i", "we"}
_CLAUSE_START |= {"not"}
_DIGIT_LEADS = {"is", "be", "answer", "say", "output", "select", "choose", "pick"}
_CONFLICT = -1

_FENCE = re.compile(r"```(?P<lang>[A-Za-z][\w+-]*(?=\s))?[ \t]*\n?(?P<body>.*?)```", re.S)
_LEGEND = re.compile(
    r"['\"(]?\b[01]\b['\")]?\s*(?:for|=|means|:|->|→)\s*['\"]?(?:yes|no)\b['\"]?", re.I
)
_MARKER = re.compile(
    r"\b(?P<final>final\s+)?(?:answer|response|result|prediction|output|conclusion|verdict)\b"
    r"(?:\s+(?:is|would\s+be|should\s+be|will\s+be))?\s*[:=\-]?|(?-i:\bA)\s*:",
    re.I,
)
# A new "Q:" or "User:" turn after the reply is a made-up continuation of the conversation.
_NEW_TURN = re.compile(r"(?:\n|(?<=\s))(?-i:Q)\s*:|\n\s*(?:question|user|human)\s*:", re.I)
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?|\n|[^\w\s]")
_REFUSAL = re.compile(
    r"\b(?:cannot|can't|can not|unable to|not possible to|impossible to)\s+(?:be\s+)?"
    r"(?:determine|determined|tell|say|answer|assess|see|identify|provide|help|confirm|judge)"
    r"|\b(?:sorry|apologi[sz]e|not enough information|insufficient|don't know|do not know"
    r"|not sure|unclear|uncertain)\b",
    re.I,
)
_HEDGE = re.compile(rf"{_REFUSAL.pattern}|\b(?:whether|if)\b", re.I)
_NEGATION = re.compile(r"\b(?:not|never|neither|nor|rather\s+than|instead\s+of)\b|n't\b", re.I)
_CLAUSE_BREAK = re.compile(r"[.!?;,:\n]|\b(?:and|but|while|whereas|although|however)\b", re.I)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def parse_answer(reply: str | None, question: str | None = None) -> int | None:
    r"""Read a model reply as 1 (yes), 0 (no) or None (no valid answer).

    Precedence, first hit wins:

    1. Clean: keep only what follows the last ``</think>`` and precedes an unterminated
       ``<think>`` (both are reasoning), unwrap code fences; after JSON (2), also drop
       markdown/LaTeX and cut a made-up next turn (a later ``Q:`` or ``User:`` line).
    2. JSON object with an ``answer``-like key (``{"answer": 1}``, ``{"result": "no"}``).
    3. Exact form: ``1``, ``(0)``, ``"Yes."``, ``FALSE``, ``Y``.
    4. Explicit markers, after removing echoed questions (any ``...?`` sentence) and the
       "1 for Yes or 0 for No" instruction: ``Final answer:``, ``\boxed{}`` and ``<answer>``
       beat ``Answer:``/``The answer is``/``A:``/``Result:``; the last of the winning kind
       counts; ``Answer: 1 or 0`` is None.
    5. Leading/trailing token: ``Yes, the aorta ...``, ``... so, no.``; if both exist and
       disagree ("Yes. Actually no.", "0 1") -> None. A trailing digit must stand alone
       ("the number 1" is not an answer), and a token in a refusal sentence does not count.
       If the reply also restates the asked relation naming both structures and the
       restatement disagrees with the token, -> None.
    6. Relation restatement, only with ``question`` ("Is the liver to the left of the
       stomach?"): the asked relation gives 1, its opposite 0, each flipped by a negation or
       by swapped structures; sentences with hedges ("whether", "cannot determine") are
       skipped; disagreeing restatements -> None.

    Example:
        >>> parse_answer("<think>left? right?</think>**Final Answer:** 0")
        0
    """
    if not isinstance(reply, str):
        return None
    text = strip_think(reply)
    text = _FENCE.sub(lambda m: f"\n{m['body'] if m['body'].strip() else m['lang']}\n", text)
    found, value = _from_json(text, question)
    return value if found else _parse_text(text, question)


def _from_json(text: str, question: str | None) -> tuple[bool, int | None]:
    for candidate in reversed(re.findall(r"\{[^{}]*\}", text)):
        for src in (candidate, candidate.replace("'", '"')):
            try:
                obj = json.loads(src)
            except ValueError:
                continue
            keys = {str(k).lower().replace(" ", "_"): v for k, v in obj.items()}
            value = next((keys[k] for k in _JSON_KEYS if k in keys), obj)
            if value is obj:  # no answer key: leave the object to the text rules
                break
            if isinstance(value, str):
                return True, _parse_text(value, question)
            return True, int(value) if isinstance(value, int | float) and value in (0, 1) else None
    return False, None


def _exact(text: str) -> int | None:
    return _EXACT.get(text.strip(" \t\r\n\"'()[]{}<>.,!?:;").lower())


def _strip_prompt(text: str, question: str | None) -> str:
    if question:
        core = question.split("?")[0].split()
        if core:
            echo = r"\s+".join(map(re.escape, core)) + r"\s*\??"
            text = re.sub(echo, " ", text, flags=re.I)
    text = re.sub(r"(?<![^.!?\n])[^.!?\n]*\?", " ", text)  # questions ask, they do not answer
    # "'1' for Yes or '0' for No", "(1 = yes, 0 = no)": a pair of these defines, not answers.
    if len(_LEGEND.findall(text)) >= 2:
        text = _LEGEND.sub(" ", text)
    return text


def _parse_text(text: str, question: str | None) -> int | None:
    text = demarkup(text).strip()
    text = text[: m.start()] if (m := _NEW_TURN.search(text)) else text
    value = _exact(text)
    if value is not None:
        return value
    text = _strip_prompt(text, question)
    toks = [(m[0].lower(), m.start()) for m in _TOKEN.finditer(text)]
    value = _from_markers(text, toks)
    if value is not None:
        return None if value == _CONFLICT else value
    value = _from_ends(text, toks)
    if value == _CONFLICT:
        return None
    relation = _from_relation(text, question, strict=value is not None)
    if value is not None:
        return value if relation in (None, value) else None
    return relation


def _is_word(tok: str) -> bool:
    return tok[0].isalnum()


def _value_at(toks: list[tuple[str, int]], i: int) -> int | None:
    word = toks[i][0]
    value = _VALUES.get(word)
    if value is None:
        return None
    nxt = toks[i + 1][0] if i + 1 < len(toks) else None
    free = nxt is None or not _is_word(nxt) or nxt in _VALUES or nxt in _CONNECT
    if word in ("1", "0"):
        prev = toks[i - 1][0] if i > 0 else None
        label = prev in _NUMBER_NOUNS or prev in marker_nouns()
        return value if (free or nxt in _BECAUSE) and not label else None
    if word in ("no", "nope"):
        return value if free or nxt in _CLAUSE_START else None
    if word in ("true", "false"):  # "true lumen"
        return value if free else None
    return value


def _run(toks: list[tuple[str, int]], i: int, step: int) -> tuple[int | None, int]:
    """Value of the run of answer tokens from ``i`` (skipping punctuation), and its far end."""
    while 0 <= i < len(toks) and not _is_word(toks[i][0]):
        i += step
    if not 0 <= i < len(toks) or _value_at(toks, i) is None:
        return None, i
    values, end = set(), i
    while 0 <= i < len(toks):
        value = _value_at(toks, i)
        if value is not None:
            values.add(value)
            end = i
        elif _is_word(toks[i][0]) and toks[i][0] not in _CONNECT:
            break
        i += step
    return (values.pop() if len(values) == 1 else _CONFLICT), end


def _from_markers(text: str, toks: list[tuple[str, int]]) -> int | None:
    starts = [start for _, start in toks]
    final: list[int] = []
    plain: list[int] = []
    for m in _MARKER.finditer(text):
        value, _ = _run(toks, bisect.bisect_left(starts, m.end()), 1)
        if value is not None:
            (final if m["final"] else plain).append(value)
    found = final or plain
    return found[-1] if found else None


def _sentence(text: str, pos: int) -> str:
    start = max(text.rfind(c, 0, pos) for c in ".!?\n") + 1
    ends = [e for e in (text.find(c, pos) for c in ".!?\n") if e >= 0]
    return text[start : min(ends, default=len(text))]


def _from_ends(text: str, toks: list[tuple[str, int]]) -> int | None:
    lead, _ = _run(toks, 0, 1)
    trail, first = _run(toks, len(toks) - 1, -1)
    if trail is not None and trail != _CONFLICT:
        before = toks[first - 1][0] if first > 0 else None
        digit = any(toks[j][0] in ("0", "1") for j in range(first, len(toks)))
        if digit and before is not None and _is_word(before) and before not in _DIGIT_LEADS:
            trail = None
    found = []
    for value, idx in ((lead, 0), (trail, len(toks) - 1)):
        if value is not None and not _REFUSAL.search(_sentence(text, toks[idx][1])):
            found.append(value)
    if not found:
        return None
    return found[0] if len(set(found)) == 1 else _CONFLICT


def _covered(spans: list[tuple[int, int, str]], starts: list[int], lo: int, hi: int) -> bool:
    i = bisect.bisect_left(starts, hi)
    return i > 0 and spans[i - 1][1] > lo


def _from_relation(text: str, question: str | None, *, strict: bool) -> int | None:
    parsed = stated_terms(demarkup(question)) if question else None
    if parsed is None:
        return None
    asked, xs, ys = parsed
    names = [
        (who, re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, a.split())) + r"(?!\w)", re.I))
        for who, aliases in (("x", xs), ("y", ys))
        for a in aliases
    ]
    text = "\n".join(s for s in _SENTENCE_BREAK.split(text) if not _HEDGE.search(s))
    values = set()
    for clause in _CLAUSE_BREAK.split(text):
        rels = [(m.start(), m.end(), m.lastgroup or "") for m in STATED_RE.finditer(clause)]
        if not rels:
            continue
        # Sorted spans + bisect keep a looping 100 kB reply linear.
        rel_starts = [r[0] for r in rels]
        mentions = sorted(
            (m.start(), m.end(), who)
            for who, pattern in names
            for m in pattern.finditer(clause)
            if not _covered(rels, rel_starts, m.start(), m.end())
        )
        starts = [m[0] for m in mentions]
        by_end = sorted(mentions, key=lambda m: m[1])
        ends = [m[1] for m in by_end]
        for start, end, rel in rels:
            if rel not in (asked, STATED_OPPOSITE[asked]):
                continue
            i, j = bisect.bisect_right(ends, start), bisect.bisect_left(starts, end)
            before = by_end[i - 1] if i else None
            after = mentions[j] if j < len(mentions) else None
            b, a = before and before[2], after and after[2]
            if (b or a) is None or b == a or (strict and (b is None or a is None)):
                continue
            swapped = b == "y" or (b is None and a == "x")
            negated = bool(_NEGATION.search(clause[before[1] if before else 0 : start]))
            values.add(int(rel == asked) ^ swapped ^ negated)
    return values.pop() if len(values) == 1 else None
