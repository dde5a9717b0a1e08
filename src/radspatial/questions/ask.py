"""One parser over every registered type the agent answers: ``parse_question`` tries each
type's ``parse`` (``questions/parsing.py``'s ``Asked``: the shared parts) in the types' order;
``extract_question`` takes the question out of a longer prompt (MIRP's, an in-context example).
Kept apart from ``parsing.py`` so that the type contract, which annotates with ``Asked``, and
the registry it walks form no import circle."""

from __future__ import annotations

import re
from collections.abc import Iterable

from radspatial.questions import agent_types
from radspatial.questions.parsing import Asked, _key
from radspatial.questions.records import ParsedQuestion, ParseError


def parse_question(
    text: str, *, from_prompt: bool = False, names: Iterable[str] = ()
) -> ParsedQuestion:
    """Parse a question of any registered type the agent answers (see the module doc).

    With ``from_prompt`` the question is first taken out of a longer prompt
    (:func:`extract_question`). ``names``: the dataset's own structure names (snake_case, e.g. a
    phantom's ``mass``), known besides the built-in tables. Raises ParseError for anything that
    is not one such question about known structures / markers.
    """
    question = extract_question(text) if from_prompt else " ".join(text.split())
    if _lettered_options(question):
        # a yes/no or open rule would read an option's words ("(E) mirrored ...") as the question
        raise ParseError(f"multiple choice (lettered options): no agent rule answers {question!r}")
    asked = Asked(question, {_key(n): n for n in names})
    for qtype in agent_types():
        parsed = qtype.parse(asked)
        if parsed is not None:
            return parsed
    raise ParseError(f"no question type the agent answers reads {question!r}")


def _lettered_options(question: str) -> bool:
    """SPAR-VQA's multiple choice: "Options: (A) ...; (B) ..." (two finds: linear time)."""
    at = question.find("(A) ")
    return at >= 0 and question.find("(B) ", at) > at


_Q_MARK = re.compile(r"\bQ[ \t]*:")
_A_MARK = re.compile(r"\bA[ \t]*:")
_SENTENCE_END = re.compile(r"[.?!\n]")


def _after_last_q(line: str) -> str:
    """Text after the line's last "Q:" up to a following "A:" (linear time, no backtracking)."""
    last = None
    for last in _Q_MARK.finditer(line):  # noqa: B007 - we want the last match
        pass
    if last is None:
        return ""
    rest = line[last.end() :]
    answer = _A_MARK.search(rest)
    return (rest[: answer.start()] if answer else rest).strip()


def extract_question(prompt: str) -> str:
    """The real question of a prompt: text after the last "Q:" (up to "A:" or the line's end),
    else the last sentence ending in "?" that contains a type's relation words
    (``relation_words``: relative position's "above", "left of", ...).

    Linear in the prompt's length (no regex that can backtrack on long or padded prompts).

    >>> extract_question("Q: Is the aorta above the spleen? A: 1\\nQ: Is the liver below the IVC?")
    'Is the liver below the IVC?'
    """
    for line in reversed(prompt.splitlines()):
        q = _after_last_q(line)
        if q:
            return " ".join(q.split())
    start = 0
    sentences = []
    for m in _SENTENCE_END.finditer(prompt):
        if m.group() == "?":
            sentences.append(prompt[start : m.end()])
        start = m.end()
    words = [qt.relation_words for qt in agent_types() if qt.relation_words is not None]
    for sentence in reversed(sentences):
        if any(w.search(sentence) for w in words):
            return " ".join(sentence.split())
    raise ParseError(f"no question found in prompt {prompt[:80]!r}...")
