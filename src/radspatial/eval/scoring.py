"""Scoring on the eval side: a reply to an item -> its :class:`~radspatial.core.answers.Grade`.

The reading itself belongs to the item's question type (``QuestionType.read_reply``: the yes/no
reading of ``questions/yesno_reading.py``, the open kinds' readers of ``questions/reading.py``);
``parse_answer`` is the yes/no reading, kept here under its old name.
"""

from __future__ import annotations

from radspatial.questions.yesno_reading import parse_answer

__all__ = ["parse_answer"]
