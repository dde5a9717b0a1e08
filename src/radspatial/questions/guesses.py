"""What a question type answers without looking at the image, and how our prompt asks for it.

Mixed into :class:`radspatial.questions.QuestionType`, so every type (a plugin's too) has these
members from its answer kind and classes, and the code above asks the type instead of testing
whether it is open: ``models/baselines.py`` (the constant and random readers: the answers they
may give, a guess at chance fixed by a hash of the call's key) and ``eval/prompts.py`` (the
answer format our CT prompt gives: MIRP's '1'/'0' wording for yes/no, else one word or number).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from radspatial.core.answers import YES_NO

OPEN_INSTRUCTION = (
    "Answer with only the requested word, structure name or number. No explanations, no "
    "additional text. "
)


class Guesses:
    """The members; a type may override any of them. ``Guesses()`` itself answers as a yes/no
    type (what a reader does for an item whose type no module claims)."""

    answer_kind: str = YES_NO
    classes: tuple = ()

    @property
    def answer_instruction(self) -> str | None:
        """The answer format our CT prompt gives for this type (None: MIRP's own yes/no one)."""
        return None if self.answer_kind == YES_NO else OPEN_INSTRUCTION

    def answer_options(self, meta: Mapping[str, Any]) -> tuple:
        """The answers a reader that does not look may give, the "yes" one first: 1, 0 for
        yes/no; else the type's classes, or the item's ``options`` (identification)."""
        if self.answer_kind == YES_NO:
            return (1, 0)
        return tuple(self.classes or meta.get("options") or ("unknown",))

    def chance_answer(self, key: str, options: Sequence[Any]) -> Any:
        """A guess at chance among ``options``, fixed by a hash of ``key`` (the same on every
        rerun): one bit of it for yes/no, else its first 4 bytes modulo the options."""
        digest = hashlib.sha256(key.encode()).digest()
        if self.answer_kind == YES_NO:
            return digest[0] & 1
        return options[int.from_bytes(digest[:4], "big") % len(options)]
