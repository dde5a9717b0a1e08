"""Parse a question into its kind, relation and structure references (``ParsedQuestion``).

    >>> parse_question("Is the aorta (BZ) above the spleen (AA)?").relation
    'above'

One parser for every question type: this module holds what the types share (the lead and tail
of a question, structure names, marker references) and asks each registered type's ``parse``
in the types' ``parse_order``: the open types first (their wording
is anchored), then orientation, count, distance, size, and relative position last, which
reads any remaining "Is X <relation> Y" or refuses it. The types' module docs list the
wordings they cover: every generator and MIRP template and free paraphrases ("In this image,
is ...", no article, no "?", any case).

Decisions:

- Structure names come from every built-in label table (TotalSegmentator v2, BTCV, AMOS, WORD) plus
  MIRP's grouped vertebrae / rib_left / rib_right, matched as a whole phrase in any word order
  ("left kidney", "kidney_left", "kidney (left)", "adrenal gland left") with the conservative
  synonyms in ``_ALIASES`` (IVC, SVC, gall bladder, bladder, small intestine, large bowel -> colon,
  portal/splenic vein, vertebra/spine -> vertebrae, L1 -> vertebrae_l1, adrenal, psoas ->
  iliopsoas, ...) and side abbreviations L/R/Lt/Rt. Because the whole phrase must match,
  "left kidney cyst" is kidney_cyst_left, never kidney_left; an unknown phrase is an error naming
  it, never a partial match.
- A Ref whose name is unknown but which carries a marker ("the thing (BZ)") keeps the marker with
  ``name=None``: the marker alone locates it.
- Marker references are each registered marker style's patterns (``imaging/marker_styles``): a
  parenthetical of exactly two capital letters is a letter marker, digits a number marker,
  red/blue a dot; any other parenthetical is part of the name ("kidney (left)").
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property

from radspatial.imaging.markers import MarkerStyle, marker_styles
from radspatial.questions.records import ParseError, Ref

# --- question frame ------------------------------------------------------------------------------

_VIEW = r"(?:this|the)\s+(?:ct\s+|axial\s+|given\s+)?(?:image|slice|scan|picture|figure|view)"
_LEAD_RE = re.compile(
    rf"^(?:q\s*:\s*)?(?:(?:in|on)\s+{_VIEW}\s*,?\s*)?"
    r"(?:(?:can|could)\s+you\s+tell\s+(?:me\s+)?(?:if|whether)\s+|tell\s+me\s+(?:if|whether)\s+"
    r"|(?:is|are|does|do)\s+(?:it\s+(?:true|the\s+case)\s+that\s+)?)",
    re.IGNORECASE,
)
_TAIL_RE = re.compile(
    rf"\s*,?\s*(?:\b(?:in|on|within)\s+{_VIEW}|\bhere|\bor\s+not"
    r"|\(?\s*(?:yes\s*(?:/|or)\s*no|[01]\s*(?:/|or)\s*[01])\s*\)?)\s*$",
    re.IGNORECASE,
)
# "in this image" inside the body ("Is the liver in this image larger than ..."); a verb left
# before a relation ("Is the liver located closer to ...")
_IN_VIEW = re.compile(
    r"\s+(?:in|on)\s+(?:this|the)\s+(?:ct\s+|axial\s+)?(?:image|slice|scan|picture|view)\b",
    re.IGNORECASE,
)
_VERB_TAIL = re.compile(
    r"(?:\s+(?:is|are|located|positioned|situated|lying|lies|appear|appears))+$"
)

# --- markers -------------------------------------------------------------------------------------

_ARTICLE_RE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_PAREN_RE = re.compile(r"^(.*?)\s*\(\s*([^()]*?)\s*\)$")
_MARKED_RE = re.compile(
    r"^(.*?),?\s+(?:marked|labell?ed|tagged)\s+(?:with\s+|as\s+|by\s+)?(?:the\s+)?(.+)$",
    re.IGNORECASE,
)


@cache
def _marker_patterns(
    styles: tuple[MarkerStyle, ...],
) -> tuple[list[tuple[MarkerStyle, re.Pattern]], re.Pattern]:
    """Each style's marker-only reference ("number 52"), and "marker <any style's text>"."""
    own = [(s, re.compile(rf"^(?:{s.reference})$", re.IGNORECASE)) for s in styles]
    tokens = "|".join(s.token for s in styles)
    return own, re.compile(rf"^(?:marker|label|mark)\s+({tokens})$", re.IGNORECASE)


def _classify(text: str, *, strict: bool) -> tuple[str, str] | None:
    """Marker style and text of a bare token: 'BZ' -> letters, '52' -> numbers, 'red' -> dots.

    ``strict`` (parentheticals) requires capitals for letters, so "(lt)" is not a marker.
    """
    for style in marker_styles():
        found = style.classify(text, strict)
        if found is not None:
            return style.name, found
    return None


def _marker_only(text: str) -> tuple[str, str] | None:
    own, any_style = _marker_patterns(marker_styles())
    for style, pattern in own:
        m = pattern.match(text)
        found = style.classify(m.group(1), False) if m else None
        if found is not None:
            return style.name, found
    m = any_style.match(text)
    return _classify(m.group(1), strict=False) if m else None


# --- structure names -----------------------------------------------------------------------------

# Synonyms of a table name's base (the name without its side); a sided base keeps its side:
# "left adrenal" -> adrenal_gland_left. Only unambiguous, common ones.
_ALIASES: dict[str, tuple[str, ...]] = {
    "inferior_vena_cava": ("ivc",),
    "superior_vena_cava": ("svc",),
    "gallbladder": ("gall bladder",),
    "urinary_bladder": ("bladder",),
    "small_bowel": ("small intestine",),
    "colon": ("large bowel", "large intestine"),
    "portal_vein_and_splenic_vein": (
        "portal vein",
        "splenic vein",
        "portal and splenic vein",
        "portal and splenic veins",
        "portal splenic vein",
    ),
    "vertebrae": ("vertebra", "spine", "spinal column", "vertebral column"),
    "adrenal_gland": ("adrenal", "suprarenal gland"),
    "iliopsoas": ("psoas", "psoas muscle", "iliopsoas muscle"),
    "esophagus": ("oesophagus",),
    "thyroid_gland": ("thyroid",),
    "clavicula": ("clavicle",),
    "iliac_vena": ("iliac vein", "common iliac vein"),
    "iliac_artery": ("common iliac artery",),
    "common_carotid_artery": ("carotid artery",),
    "kidney_cyst": ("renal cyst",),
    "femur_head": ("femoral head",),
    "rib": ("ribs",),
}
_TOKEN_MAP = {"l": "left", "lt": "left", "r": "right", "rt": "right"}
_DROP = {"the", "a", "an"}
_SIDES = ("left", "right")

Key = tuple[str, ...]


def _key(text: str) -> Key:
    """Order-free word multiset: 'Left Kidney', 'kidney_left', 'kidney (L)' -> same key."""
    words = re.findall(r"[a-z0-9]+", text.lower().replace("&", " and "))
    words = [re.sub(r"^(\d+)(?:st|nd|rd|th)$", r"\1", w) for w in words if w not in _DROP]
    return tuple(sorted(_TOKEN_MAP.get(w, w) for w in words))


def known_names() -> list[str]:
    """Every structure name the parser can return (sorted)."""
    from radspatial.core.labels import BUILTIN_TABLES, TOTALSEG_V1_HEART, load_table

    names = {n for t in BUILTIN_TABLES for n in load_table(t, group=False).names.values()}
    names |= set(load_table("totalsegmentator", group=True).names.values())
    names |= set(TOTALSEG_V1_HEART.values())  # RTSTRUCTs of TotalSegmentator v1 name chambers
    return sorted(names)


@cache
def _index() -> tuple[dict[Key, str], dict[Key, list[str]]]:
    """(phrase key -> name, key of a sided-only base -> its sided names), built once."""
    exact: dict[Key, str] = {}

    def add(phrase: str, name: str) -> None:
        key = _key(phrase)
        if exact.setdefault(key, name) != name:
            raise RuntimeError(f"name index: {phrase!r} means both {exact[key]} and {name}")

    names = known_names()
    sided: dict[str, list[str]] = defaultdict(list)
    for name in names:
        add(name, name)
        words = name.split("_")
        side = words[-1] if words[-1] in _SIDES else None
        base = "_".join(words[:-1]) if side else name
        if side:
            sided[base].append(name)
        for alias in _ALIASES.get(base, ()):
            add(f"{alias} {side or ''}", name)
        m = re.fullmatch(r"vertebrae_([clts]\d+)", name)
        if m:
            for form in ("vertebra {}", "{}", "vertebral body {}"):
                add(form.format(m.group(1)), name)
    needs_side: dict[Key, list[str]] = {}
    for base, options in sided.items():
        if base not in names:
            for phrase in (base, *_ALIASES.get(base, ())):
                needs_side[_key(phrase)] = options
    return exact, needs_side


def lookup_name(phrase: str) -> str | None:
    """'left kidney' / 'kidney_left' / 'L kidney' -> 'kidney_left'; None when unknown."""
    return _index()[0].get(_key(phrase))


# --- parsing -------------------------------------------------------------------------------------


def _parse_ref(
    phrase: str, question: str, role: str, extra: Mapping[Key, str] | None = None
) -> Ref:
    phrase = phrase.strip(" \t,;:\"'`")
    core = _ARTICLE_RE.sub("", phrase)
    if not core:
        raise ParseError(f"no {role} structure in {question!r}")
    found = _marker_only(core)
    if found:
        return Ref(name=None, marker=found[0], text=found[1], phrase=phrase)
    name_text, marker = core, None
    m = _PAREN_RE.match(core)
    if m:
        inner = m.group(2)
        marker = _classify(inner, strict=True) or _marker_only(inner)
        name_text = m.group(1) if marker else f"{m.group(1)} {inner}"
    elif m := _MARKED_RE.match(core):
        inner = _ARTICLE_RE.sub("", m.group(2))
        marker = _classify(inner, strict=False) or _marker_only(inner)
        if marker:
            name_text = m.group(1)
    name = lookup_name(name_text) or (extra or {}).get(_key(name_text))
    if name is None and marker is None:
        options = _index()[1].get(_key(name_text))
        if options:
            raise ParseError(
                f"{name_text!r} ({role}) needs a side: {' or '.join(options)} in {question!r}"
            )
        raise ParseError(f"unknown structure {name_text!r} ({role}) in {question!r}")
    kind, text = marker if marker else (None, None)
    return Ref(name=name, marker=kind, text=text, phrase=phrase)


@dataclass(frozen=True)
class Asked:
    """One question as the question types' ``parse`` sees it, with the shared parts."""

    question: str  # whitespace-normalised
    extra: Mapping[Key, str] = field(default_factory=dict)  # the dataset's own names

    def ref(self, phrase: str, role: str) -> Ref:
        """A structure and/or marker reference; ParseError names ``role`` if unknown."""
        return _parse_ref(phrase, self.question, role, self.extra)

    @cached_property
    def body(self) -> str:
        """The question without its lead ("Is", "In this slice, are", "Can you tell me if")
        and tail ("in this image", "yes or no", "?"); ParseError if it has no such lead."""
        body = self.question.rstrip(" ?.!")
        while (tail := _TAIL_RE.search(body)) and tail.start() > 0:
            body = body[: tail.start()].rstrip(" ?.!")
        lead = _LEAD_RE.match(body)
        if not lead:
            raise ParseError(f"not a yes/no question (Is/Are/Does ...): {self.question!r}")
        return body[lead.end() :]

    @cached_property
    def plain(self) -> str:
        """``body`` without "in this image" anywhere in it."""
        return _IN_VIEW.sub("", self.body)

    @staticmethod
    def strip_verb(text: str) -> str:
        """'the liver located' -> 'the liver'."""
        return _VERB_TAIL.sub("", text, count=1)

    def distinct(self, refs: Sequence[Ref]) -> None:
        """ParseError if one structure is referred to twice."""
        keys = [(r.name, r.marker, r.text) for r in refs]
        if len(set(keys)) != len(keys):
            raise ParseError(f"the same structure twice in {self.question!r}")
