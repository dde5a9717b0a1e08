"""The question parser, for the agent's users: its home is ``questions/ask.py`` (over
``questions/parsing.py``).

>>> parse_question("Is the aorta (BZ) above the spleen (AA)?").relation
'above'
"""

from __future__ import annotations

from radspatial.questions.ask import extract_question, parse_question
from radspatial.questions.parsing import Asked, known_names, lookup_name
from radspatial.questions.records import ParsedQuestion, ParseError, Ref

__all__ = [
    "Asked",
    "ParseError",
    "ParsedQuestion",
    "Ref",
    "extract_question",
    "known_names",
    "lookup_name",
    "parse_question",
]
