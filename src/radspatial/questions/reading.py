"""The open kinds' reply readers: a cleaned reply -> a :class:`~radspatial.core.answers.Grade`.

A question type reads its own replies (``QuestionType.read_reply``); the open types build theirs
from these parts: ``read_words`` (a side or a direction word from a table), ``read_count`` (an
integer), ``read_name`` (a structure's snake_case name) and ``read_choice`` (a multiple-choice
option: its letter, its words, or a percentage where the type reads numbers). The reading's
status is ``answer`` (one value), ``invalid`` (a hedge or refusal, several different values, or
only negated ones) or ``undecided`` (nothing the rules know, or another frame: the judge
decides). A value preceded by a negation within its clause ("not the left", "isn't above",
"rather than the liver") is dropped; "right next to" is an adverb, not a side. The reply is
cleaned first by ``core.replies.clean_open`` (``open_grade``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from radspatial.core.answers import Answer, Grade
from radspatial.core.replies import clean_open


@dataclass(frozen=True)
class Option:
    """One answer option: its class (the canonical answer), the text shown after its letter,
    and the phrases (regular expressions, lower case) that name it in a free-text reply."""

    value: str
    text: str
    phrases: tuple[str, ...] = ()


class Choices(Protocol):
    """What a multiple-choice reply is read against (``questions/spar_common.ChoiceType``)."""

    answer_kind: str
    options: tuple[Option, ...]

    def letter_value(self, letter: str) -> str | None: ...

    def number_value(self, percent: float) -> str | None: ...


Finder = Callable[[str], Iterator[tuple[int, Any]]]

NUM_WORDS = {
    "zero": 0, "none": 0, "no": 0, "one": 1, "single": 1, "once": 1, "two": 2, "twice": 2,
    "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "a": 1, "an": 1,
}  # fmt: skip
DIRECTION_WORDS = {
    "left": "left", "leftward": "left", "leftwards": "left",
    "right": "right", "rightward": "right", "rightwards": "right",
    "above": "above", "up": "above", "upward": "above", "upwards": "above", "higher": "above",
    "superior": "above", "top": "above", "over": "above", "upper": "above",
    "below": "below", "down": "below", "downward": "below", "downwards": "below",
    "lower": "below", "inferior": "below", "bottom": "below", "beneath": "below",
    "under": "below", "underneath": "below",
}  # fmt: skip
SIDE_WORDS = {"left": "left", "right": "right", "l": "left", "r": "right"}
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
_ADVERB_RIGHT = re.compile(
    r"\bright\s+(?:next|beside|by|at|in|on|near|there|here|now|away)\b", re.I
)
_COUNT_NOUN = re.compile(
    r"(?:separate|isolated|distinct|region|regions|component|part|segment|loop|area)\b", re.I
)
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+")
# an option letter: "(B)", "B)", "option b", a standalone capital B-H, or "A" where it
# cannot be the article ("A", "A.", "A or E")
_LETTER = re.compile(
    r"\(([A-H])\)|\b([B-H])\b(?!')|\b(A)\b(?=\s*(?:$|[).,;:]|or\b|and\b))"
    r"|\boption\s+([A-Ha-h])\b"
)
_PERCENT = re.compile(r"(\d+(?:,\d+)?)\s*(?:%|percent\b)", re.I)


def open_grade(reply: str | None, question: str | None, read: Callable[[str], Grade]) -> Grade:
    """The shared frame of every open reading: an empty reply, or nothing left after cleaning,
    is invalid; otherwise ``read`` decides on the cleaned text."""
    if not isinstance(reply, str) or not reply.strip():
        return Grade(None, "invalid", "empty reply")
    text = clean_open(reply, question)
    if not text:
        return Grade(None, "invalid", "nothing after cleaning")
    return read(text)


def hedged(text: str) -> Grade | None:
    """An invalid reading where the reply hedges or refuses ("probably", "cannot tell")."""
    m = _HEDGE.search(text)
    return Grade(None, "invalid", f"hedge or refusal ({m[0]!r})") if m else None


def other_frame(text: str) -> Grade | None:
    """Undecided where the reply answers in the patient's frame ("anterior", "patient's left")."""
    return (
        Grade(None, "undecided", "answers in another frame") if _OTHER_FRAME.search(text) else None
    )


def _clauses(text: str) -> list[str]:
    return [c for c in _CLAUSE.split(text) if c and c.strip()]


def _negated(clause: str, start: int) -> bool:
    """A negation earlier in the clause, within four words of the value."""
    before = _WORD.findall(clause[:start])[-4:]
    return any(_NEGATION.fullmatch(w) or w.lower().endswith("n't") for w in before)


def collect(text: str, find: Finder) -> tuple[set, set]:
    """(values stated, values negated) over the clauses of ``text``; ``find(clause)`` yields
    (start, value)."""
    stated: set[Any] = set()
    negated: set[Any] = set()
    for clause in _clauses(text):
        for start, value in find(clause):
            (negated if _negated(clause, start) else stated).add(value)
    return stated, negated


def decide(stated: set, negated: set, what: str, kind: str) -> Grade:
    """One stated value: an answer of ``kind``; several, or only negated ones: invalid."""
    if len(stated) == 1:
        return Grade(Answer(kind, next(iter(stated))), "answer", f"one {what}")
    if len(stated) > 1:
        values = ", ".join(sorted(map(str, stated)))
        return Grade(None, "invalid", f"several {what}s ({values})")
    if negated:
        return Grade(None, "invalid", f"only a negated {what}")
    return Grade(None, "undecided", f"no {what} found")


def words_finder(table: Mapping[str, Any], exact_only: frozenset = frozenset()) -> Finder:
    def find(clause: str) -> Iterator[tuple[int, Any]]:
        masked = _ADVERB_RIGHT.sub(lambda m: " " * len(m[0]), clause)
        for m in _WORD.finditer(masked):
            w = m[0].lower()
            if w in table and w not in exact_only:
                yield m.start(), table[w]

    return find


def read_words(text: str, table: Mapping[str, str], what: str, kind: str) -> Grade:
    """A word of ``table`` (sides, directions); a lone letter counts only as the whole reply
    ('L', 'R'); hedges invalid, the patient's frame undecided."""
    if (bad := hedged(text) or other_frame(text)) is not None:
        return bad
    whole = text.strip(" .").lower()
    exact = frozenset(w for w in table if len(w) == 1 and w != whole)
    stated, negated = collect(text, words_finder(table, exact))
    return decide(stated, negated, what, kind)


def _numbers(clause: str) -> Iterator[tuple[int, int]]:
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
                yield m.start(), NUM_WORDS[w]
        elif w in NUM_WORDS:
            yield m.start(), NUM_WORDS[w]


def read_count(text: str, kind: str) -> Grade:
    """An integer, in digits or words ("two", "a single region")."""
    if (bad := hedged(text)) is not None:
        return bad
    return decide(*collect(text, _numbers), "number", kind)


def _structures(clause: str) -> Iterator[tuple[int, str]]:
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


def read_name(text: str, kind: str) -> Grade:
    """A structure's snake_case name (display names, synonyms, "kidney (left)")."""
    if (bad := hedged(text)) is not None:
        return bad
    return decide(*collect(text, _structures), "structure", kind)


def read_choice(text: str, choice: Choices) -> Grade:
    """A multiple-choice reply (``questions/spar_common.py``): the option's letter ("B",
    "(B)", "B) ...", "option B"), words that name one option ("mirrored", "the left kidney"),
    or, where the type reads numbers (size's bins), a percentage."""
    text = re.sub(r"\babout (?:the )?(same|equal)", r"the \1", text, flags=re.I)
    text = re.sub(r"(?<=\d)\.(?=\d)", ",", text)  # a decimal point ends no clause: 1,5
    if (bad := hedged(text)) is not None:
        return bad
    kind = choice.answer_kind
    values = {o.value.lower().replace(",", "."): o.value for o in choice.options}
    if (whole := text.strip(" .").lower().replace(",", ".")) in values:  # the class name itself
        return Grade(Answer(kind, values[whole]), "answer", "the option's name")

    def find(clause: str) -> Iterator[tuple[int, Any]]:
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
            number = choice.number_value(float(m[1].replace(",", ".")))
            if number is not None:
                yield m.start(), number

    return decide(*collect(text, find), "option", kind)
