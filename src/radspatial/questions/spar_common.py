"""Shared parts of the SPAR-VQA question types as SPAR-Bench's Table 2 asked them (``spar``).

SPAR-VQA poses the Level 3 probes to whole models. Where the probe is binary (relative
position, distance) the question is yes/no; where it has more classes (orientation, symmetry,
size) it is **multiple choice**: the options are listed in the question as ``(A) ...; (B) ...``
after "Options:", in a fixed order per type, and the answer is the option's class name (an open
answer, read by ``read_reply`` from the letter or the option's words). Each type words
its stem with one of a few paraphrases, drawn per question from the type's own random stream,
so a dataset generated with another ``--seed`` asks the same kinds of question in other words
(the paper's "phrasing resampled per seed"). The paraphrase index is ``params["phrasing"]``.

SPAR-VQA asks about organs by name (RQ1 only), as the paper's Level 3 questions do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from radspatial import questions as q
from radspatial.core.answers import CHOICE, Grade
from radspatial.questions.reading import Option, open_grade, read_choice

LETTERS = "ABCDEFGH"
GROUP = "spar"


def phrasing(spec: q.QuestionSpec) -> int:
    return int(spec.params.get("phrasing", 0))


def draw_phrasing(rng: np.random.Generator, stems: Sequence[str]) -> int:
    """The paraphrase of one question: one draw of ``rng``."""
    return int(rng.integers(len(stems)))


class ChoiceType(q.KeepVariant):
    """Base of the multiple-choice SPAR types: ``options`` in the order shown (letters A, B,
    ...), ``classes`` their values (the generator balances over them), chance 1 / classes."""

    answer_kind = CHOICE
    setups = ("rq1",)
    group = GROUP
    options: tuple[Option, ...] = ()
    stems: tuple[str, ...] = ()  # paraphrases of the question's stem ({a}: the structure)

    def __init__(self) -> None:
        self.classes = tuple(o.value for o in self.options)
        self.chance = 1 / len(self.options)

    def read_reply(self, reply: str | None, question: str | None = None) -> Grade:
        """The option a reply names: its letter, its words, or a percentage (``read_choice``)."""
        return open_grade(reply, question, lambda text: read_choice(text, self))

    def option_list(self, names: Sequence[str] = ()) -> str:
        """ "Options: (A) ...; (B) ...; ... Answer with the letter." (texts may name {a}, {b})."""
        refs = {k: f"the {n}" for k, n in zip("ab", names, strict=False)}
        parts = [f"({LETTERS[i]}) {o.text.format(**refs)}" for i, o in enumerate(self.options)]
        return "Options: " + "; ".join(parts) + ". Answer with the letter."

    def letter_value(self, letter: str) -> str | None:
        i = LETTERS.find(letter.upper())
        return self.options[i].value if 0 <= i < len(self.options) else None

    def number_value(self, percent: float) -> str | None:
        """The class a stated percentage names (size's bins); None: numbers name no class."""
        return None

    def worded(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        names = wording.names
        refs = {k: f"the {n}" for k, n in zip("ab", names, strict=False)}
        stem = self.stems[phrasing(spec)].format(**refs)
        return f"{stem} {self.option_list(names)}"

    def text(self, spec: q.QuestionSpec, wording: q.Wording) -> str:
        return self.worded(spec, wording)


def choice_type(question_type: str) -> ChoiceType | None:
    """The registered multiple-choice type of that name, None for any other name."""
    if question_type not in q.QUESTION_TYPES:
        return None
    qt = q.QUESTION_TYPES.get(question_type)
    return qt if isinstance(qt, ChoiceType) else None
