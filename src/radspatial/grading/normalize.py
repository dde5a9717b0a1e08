"""Rule-based normalizer: a free-text reply to an open question -> its canonical answer.

``normalize(reply, question_type)`` returns a :class:`Normalized` with ``status``:

- ``answer``: one value was read (a side, a direction word, a structure's snake_case name, an
  integer);
- ``invalid``: the reply hedges ("probably left", "at least 2"), refuses ("cannot determine"),
  gives several different values ("left or right", "2 or 3", "above and to the left") or only
  negates ("not on the left"): scored wrong, as an invalid yes/no answer is;
- ``undecided``: nothing the rules know was found, or the reply answers in another frame ("the
  patient's left", "anterior"): the LLM judge (``grading.judge``) decides these.

Cleaning first (reasoning blocks, code fences, markdown, JSON ``{"answer": ...}``, ``\\boxed{}``,
``Final answer:``), then the echoed question and its option list are removed, so "left or
right?" in a restated question is not a hedge. A value preceded by a negation within its clause
("not the left", "isn't above", "rather than the liver") is dropped; "right next to" is an
adverb, not a side.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from radspatial.eval.scoring import _demarkup, _strip_think

_NUM_WORDS = {
    "zero": 0, "none": 0, "no": 0, "one": 1, "single": 1, "once": 1, "two": 2, "twice": 2,
    "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "a": 1, "an": 1,
}  # fmt: skip
_DIRECTION_WORDS = {
    "left": "left", "leftward": "left", "leftwards": "left",
    "right": "right", "rightward": "right", "rightwards": "right",
    "above": "above", "up": "above", "upward": "above", "upwards": "above", "higher": "above",
    "superior": "above", "top": "above", "over": "above", "upper": "above",
    "below": "below", "down": "below", "downward": "below", "downwards": "below",
    "lower": "below", "inferior": "below", "bottom": "below", "beneath": "below",
    "under": "below", "underneath": "below",
}  # fmt: skip
_SIDE_WORDS = {"left": "left", "right": "right", "l": "left", "r": "right"}
_OTHER_FRAME = re.compile(
    r"\b(?:patient'?s?\s+(?:left|right)|anterior(?:ly)?|posterior(?:ly)?|ventral(?:ly)?"
    r"|dorsal(?:ly)?|medial(?:ly)?|lateral(?:ly)?|cranial(?:ly)?|caudal(?:ly)?)\b",
    re.I,
)
_HEDGE = re.compile(
    r"\b(?:cannot|can't|can not|unable to|impossible to|not possible to)\s+(?:be\s+)?"
    r"(?:determine|determined|tell|say|answer|identify|see|assess|know|count)"
    r"|\b(?:not sure|unsure|unclear|uncertain|unknown|don'?t know|do not know|hard to say"
    r"|difficult to (?:say|tell|determine)|probably|possibly|perhaps|maybe|likely|might"
    r"|may be|either|at least|at most|more than|fewer than|less than|approximately|about"
    r"|around|roughly|several|multiple|many|some|few|couple|sorry|i guess|could be"
    r"|abstain(?:s|ed)?)\b",  # the agent's "abstain: <reason>" may name a structure
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|rather than|instead of)\b|n't\b", re.I)
_CLAUSE = re.compile(r"[.;!?\n]|,\s*(?:but|and|while)\b|\b(?:but|whereas|however)\b", re.I)
_FINAL = re.compile(
    r"\b(?:final\s+answer|answer|response|result|prediction|output)\b\s*(?:is|:|=|-)\s*", re.I
)
_JSON_KEYS = ("final_answer", "answer", "result", "prediction", "output", "response")
_ADVERB_RIGHT = re.compile(
    r"\bright\s+(?:next|beside|by|at|in|on|near|there|here|now|away)\b", re.I
)
_COUNT_NOUN = re.compile(
    r"(?:separate|isolated|distinct|region|regions|component|part|segment|loop|area)\b", re.I
)
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+")


@dataclass(frozen=True)
class Normalized:
    value: str | int | None  # canonical: side/direction word, snake_case name, integer
    status: str  # answer | invalid | undecided
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "status": self.status, "reason": self.reason}


def clean(reply: str, question: str | None = None) -> str:
    """The part of a reply that answers: no reasoning, markup, JSON wrapper or echoed question."""
    text = _strip_think(reply)
    text = re.sub(r"```[A-Za-z]*\n?(.*?)```", r"\1", text, flags=re.S)
    for obj in reversed(re.findall(r"\{[^{}]*\}", text)):
        try:
            data = json.loads(obj)
        except ValueError:
            continue
        if isinstance(data, dict):
            keys = {str(k).lower().replace(" ", "_"): v for k, v in data.items()}
            hit = next((keys[k] for k in _JSON_KEYS if k in keys), None)
            if hit is not None:
                return str(hit)
    text = _demarkup(text)
    finals = list(_FINAL.finditer(text))
    if finals:
        text = text[finals[-1].end() :]
    if question:
        core = question.split(":")[0].split("?")[0]
        text = re.sub(re.escape(core) + r"\s*[:?]?", " ", text, flags=re.I)
        if ":" in question:  # the option list ("left or right?") read back is no hedge
            opts = question.split(":", 1)[1].strip(" ?")
            text = re.sub(re.escape(opts) + r"\??", " ", text, flags=re.I)
    text = re.sub(r"\s+", " ", text).strip()
    # a yes/no lead-in ("No, it is on the left") is not part of an open answer
    return re.sub(r"^(?:yes|no|ok|okay|sure)\s*[,.!:;-]+\s*", "", text, flags=re.I)


def _clauses(text: str) -> list[str]:
    return [c for c in _CLAUSE.split(text) if c and c.strip()]


def _negated(clause: str, start: int) -> bool:
    """A negation earlier in the clause, within four words of the value."""
    before = _WORD.findall(clause[:start])[-4:]
    return any(_NEGATION.fullmatch(w) or w.lower().endswith("n't") for w in before)


def _collect(text: str, find) -> tuple[set, set]:
    """(values stated, values negated) over the clauses of ``text``; ``find(clause)`` yields
    (start, value)."""
    stated, negated = set(), set()
    for clause in _clauses(text):
        for start, value in find(clause):
            (negated if _negated(clause, start) else stated).add(value)
    return stated, negated


def _decide(stated: set, negated: set, what: str) -> Normalized:
    if len(stated) == 1:
        return Normalized(next(iter(stated)), "answer", f"one {what}")
    if len(stated) > 1:
        values = ", ".join(sorted(map(str, stated)))
        return Normalized(None, "invalid", f"several {what}s ({values})")
    if negated:
        return Normalized(None, "invalid", f"only a negated {what}")
    return Normalized(None, "undecided", f"no {what} found")


def _words_finder(table: dict[str, str], exact_only: frozenset = frozenset()):
    def find(clause: str):
        masked = _ADVERB_RIGHT.sub(lambda m: " " * len(m[0]), clause)
        for m in _WORD.finditer(masked):
            w = m[0].lower()
            if w in table and w not in exact_only:
                yield m.start(), table[w]

    return find


def _numbers(clause: str):
    for m in _WORD.finditer(clause):
        w = m[0].lower()
        if w.isdigit():
            yield m.start(), int(w)
        elif w in ("a", "an", "no"):
            # "a single region", "an isolated region", "no regions": only before a count noun
            rest = clause[m.end() :].split()
            if (
                rest
                and _COUNT_NOUN.match(rest[0])
                and (w == "no" or rest[0].lower() not in ("single", "one"))
            ):
                yield m.start(), _NUM_WORDS[w]
        elif w in _NUM_WORDS:
            yield m.start(), _NUM_WORDS[w]


def _structures(clause: str):
    from radspatial.questions.parsing import lookup_name

    words = list(_WORD.finditer(clause))
    taken: set[int] = set()
    for size in (5, 4, 3, 2, 1):  # longest phrase first: "left kidney" before "kidney"
        for i in range(len(words) - size + 1):
            span = range(i, i + size)
            if taken & set(span):
                continue
            phrase = " ".join(w[0] for w in words[i : i + size])
            if size == 1 and phrase.lower() in ("left", "right", "l", "r", "a", "the"):
                continue
            name = lookup_name(phrase)
            if name:
                taken |= set(span)
                yield words[i].start(), name
    # "kidney (left)" reads as "kidney left": the key matcher is word-order free


def normalize(reply: str | None, question_type: str, question: str | None = None) -> Normalized:
    """Read ``reply`` as an answer to an open question of ``question_type``."""
    if not isinstance(reply, str) or not reply.strip():
        return Normalized(None, "invalid", "empty reply")
    text = clean(reply, question)
    if not text:
        return Normalized(None, "invalid", "nothing after cleaning")
    if (choice := _choice_type(question_type)) is not None:
        return _read_choice(text, choice)
    if _HEDGE.search(text):
        return Normalized(None, "invalid", f"hedge or refusal ({_HEDGE.search(text)[0]!r})")
    if question_type in ("laterality", "direction") and _OTHER_FRAME.search(text):
        return Normalized(None, "undecided", "answers in another frame")
    if question_type == "laterality":
        stated, negated = _collect(text, _words_finder(_SIDE_WORDS, _exact_letters(text)))
        return _decide(stated, negated, "side")
    if question_type == "direction":
        stated, negated = _collect(text, _words_finder(_DIRECTION_WORDS))
        return _decide(stated, negated, "direction")
    if question_type == "counting":
        stated, negated = _collect(text, _numbers)
        return _decide(stated, negated, "number")
    if question_type == "identification":
        stated, negated = _collect(text, _structures)
        return _decide(stated, negated, "structure")
    raise ValueError(f"{question_type!r} is not an open question type")


def _choice_type(question_type: str):
    from radspatial.questions.spar_common import choice_type

    return choice_type(question_type)


# an option letter: "(B)", "B)", "option b", a standalone capital B-H, or "A" where it
# cannot be the article ("A", "A.", "A or E")
_LETTER = re.compile(
    r"\(([A-H])\)|\b([B-H])\b(?!')|\b(A)\b(?=\s*(?:$|[).,;:]|or\b|and\b))"
    r"|\boption\s+([A-Ha-h])\b"
)
_PERCENT = re.compile(r"(\d+(?:,\d+)?)\s*(?:%|percent\b)", re.I)


def _read_choice(text: str, choice) -> Normalized:
    """A multiple-choice reply (``questions/spar_common.py``): the option's letter ("B",
    "(B)", "B) ...", "option B"), words that name one option ("mirrored", "the left kidney"),
    or, where the type reads numbers (size's bins), a percentage."""
    text = re.sub(r"\babout (?:the )?(same|equal)", r"the \1", text, flags=re.I)
    text = re.sub(r"(?<=\d)\.(?=\d)", ",", text)  # a decimal point ends no clause: 1,5
    if _HEDGE.search(text):
        return Normalized(None, "invalid", f"hedge or refusal ({_HEDGE.search(text)[0]!r})")

    values = {o.value.lower().replace(",", "."): o.value for o in choice.options}
    if (whole := text.strip(" .").lower().replace(",", ".")) in values:  # the class name itself
        return Normalized(values[whole], "answer", "the option's name")

    def find(clause: str):
        for m in _LETTER.finditer(clause):
            value = choice.letter_value(next(g for g in m.groups() if g))
            if value is not None:
                yield m.start(), value
        masked = _ADVERB_RIGHT.sub(lambda m: " " * len(m[0]), clause).lower()
        hits = [
            (m.start(), m.end(), o.value)
            for o in choice.options
            for p in o.phrases
            for m in re.finditer(rf"(?<![\w-]){p}(?![\w])", masked)
        ]
        for start, end, value in sorted(hits, key=lambda h: h[0] - h[1]):  # longest first
            if masked[start:end].strip():
                masked = masked[:start] + " " * (end - start) + masked[end:]
                yield start, value
        for m in _PERCENT.finditer(masked):
            value = choice.number_value(float(m[1].replace(",", ".")))
            if value is not None:
                yield m.start(), value

    stated, negated = _collect(text, find)
    return _decide(stated, negated, "option")


def _exact_letters(text: str) -> frozenset:
    """'L'/'R' count as sides only when they are the whole reply."""
    return frozenset() if text.strip(" .").lower() in ("l", "r") else frozenset({"l", "r"})


def canonical(value: Any, question_type: str) -> Any:
    """The expected answer in the normalizer's terms (identification: snake_case name)."""
    if question_type == "identification" and isinstance(value, str):
        from radspatial.questions.parsing import lookup_name

        return lookup_name(value) or value.strip().lower().replace(" ", "_")
    if question_type == "counting" and value is not None:
        return int(value)
    return value


def rule_grade(norm: Normalized, expected: Any, question_type: str) -> int | None:
    """1 correct, 0 incorrect, None invalid/undecided."""
    if norm.status != "answer" or expected is None:
        return None
    return int(norm.value == canonical(expected, question_type))
