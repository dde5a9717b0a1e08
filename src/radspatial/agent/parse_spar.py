"""Parse the SPAR-VQA question kinds: orientation, size/symmetry, distance, count.

Covered: the generator's wordings (``radspatial.questions``) and close paraphrases:

- orientation: "... is this image mirrored / flipped (left to right) / a mirror image ...".
- size: "Is the {1} larger|bigger|greater|smaller than the {2} (in this image)?"; "the structure
  marked by the number 12" is a marker reference.
- distance: "Is the {A} closer to|nearer to|farther from|further from the {B} than (to|from)
  the {C}?".
- count: "Is the number of separate regions of the {X} (in this image) exactly {n}?", "Does the
  {X} appear as exactly {n} separate regions?", "Are there exactly {n} separate regions of the
  {X}?" (regions, components, parts or pieces; n as digits or one..ten).

``match_spar`` gets the question body with its leading "Is/Are/Does" already removed and
returns None when the body is none of these kinds (then it is parsed as relative position).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from radspatial.agent.types import ParsedQuestion, ParseError, Ref

RefParser = Callable[[str, str, str], Ref]

_ORIENTATION_RE = re.compile(
    r"\b(?:mirrored|mirror[\s-]+image|(?:horizontally\s+)?flipped|reflected)\b", re.IGNORECASE
)
_SIZE_RE = re.compile(
    r"\s+(?:(?P<larger_than>larger|bigger|greater)|(?P<smaller_than>smaller))"
    r"(?:\s+in\s+(?:size|area))?\s+than\s+",
    re.IGNORECASE,
)
_DISTANCE_RE = re.compile(
    r"\s+(?:(?P<closer_to>(?:closer|nearer)\s+to)|(?P<farther_from>(?:farther|further)"
    r"(?:\s+away)?\s+from))\s+(?P<first>.+?)\s+than\s+(?:(?:to|from)\s+)?(?P<second>.+)$",
    re.IGNORECASE,
)
_REGIONS = r"(?:separate\s+|distinct\s+|disconnected\s+)?(?:regions?|components?|parts?|pieces?)"
_N = r"(?P<n>\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_COUNT_RES = (
    re.compile(rf"^the\s+number\s+of\s+{_REGIONS}\s+of\s+(?P<x>.+?)\s+exactly\s+{_N}$", re.I),
    re.compile(
        rf"^(?P<x>.+?)\s+(?:appear|appears|seen|shown)\s+as\s+exactly\s+{_N}\s+{_REGIONS}$", re.I
    ),
    re.compile(rf"^there\s+exactly\s+{_N}\s+{_REGIONS}\s+of\s+(?P<x>.+)$", re.I),
)
_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
_IN_VIEW = re.compile(
    r"\s+(?:in|on)\s+(?:this|the)\s+(?:ct\s+|axial\s+)?(?:image|slice|scan|picture|view)\b",
    re.IGNORECASE,
)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _WORDS.index(text.lower()) + 1


def match_orientation(question: str) -> ParsedQuestion | None:
    """ "(Ignoring rotation,) is this image mirrored ...?" (any lead-in), else None."""
    if _ORIENTATION_RE.search(question):
        return ParsedQuestion((), "mirrored", question, "orientation")
    return None


def match_spar(body: str, question: str, parse_ref: RefParser) -> ParsedQuestion | None:
    """A size, distance or count question from ``body`` (lead verb removed), else None."""
    plain = _IN_VIEW.sub("", body)
    for pattern in _COUNT_RES:
        if m := pattern.match(plain):
            n = _number(m["n"])
            if n < 1:
                raise ParseError(f"a count must be at least 1 in {question!r}")
            ref = parse_ref(m["x"], question, "counted")
            return ParsedQuestion((ref,), "count", question, "count", {"n": n})
    if m := _DISTANCE_RE.search(plain):
        relation = "closer_to" if m["closer_to"] else "farther_from"
        refs = (
            parse_ref(_strip_verb(plain[: m.start()]), question, "anchor"),
            parse_ref(m["first"], question, "first"),
            parse_ref(m["second"], question, "second"),
        )
        _distinct(refs, question)
        return ParsedQuestion(refs, relation, question, "distance")
    if m := _SIZE_RE.search(plain):
        relation = "larger_than" if m["larger_than"] else "smaller_than"
        refs = (
            parse_ref(_strip_verb(plain[: m.start()]), question, "first"),
            parse_ref(plain[m.end() :], question, "second"),
        )
        _distinct(refs, question)
        return ParsedQuestion(refs, relation, question, "size")
    return None


_VERB_TAIL = re.compile(
    r"(?:\s+(?:is|are|located|positioned|situated|lying|lies|appear|appears))+$"
)


def _strip_verb(text: str) -> str:
    return _VERB_TAIL.sub("", text, count=1)


def _distinct(refs: tuple[Ref, ...], question: str) -> None:
    keys = [(r.name, r.marker, r.text) for r in refs]
    if len(set(keys)) != len(keys):
        raise ParseError(f"the same structure twice in {question!r}")
