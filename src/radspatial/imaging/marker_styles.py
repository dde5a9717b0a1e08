"""The built-in marker styles (MIRP's): numbers, letters and dots, each one ``MarkerStyle``.

numbers: the label id ("52"), "the number 52"; letters: MIRP's two-letter code of the label id
("BZ" = 52), "the letters BZ"; dots: a red, blue (and, for a third object, green) disc, "the red
dot", whose colour names no structure (the agent finds it by colour). See ``MarkerStyle`` in
``imaging/markers.py`` for what each field is for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import partial
from string import ascii_uppercase, digits
from typing import Any

import numpy as np

from radspatial.core.labels import letter_code, letter_to_id
from radspatial.imaging.markers import DOT_ORDER, MarkerStyle, draw_dot, register_marker_style

# --- numbers and letters: a code of the label id, one scheme with two codings -------------------


def _coded_texts(code: Callable[[int], str], label_ids: Sequence[int], colours: Sequence[str]):
    """Each object's marker: its label id, coded."""
    return tuple(code(int(i)) for i in label_ids)


def _coded_blank(code: Callable[[int], str], n_codes: int, rng: np.random.Generator):
    """A blank page's two markers: two different codes of ids 1..n_codes."""
    a, b = rng.choice(np.arange(1, n_codes + 1), size=2, replace=False)
    return code(int(a)), code(int(b))


def _coded_label(decode: Callable[[str], int], text: str) -> int | None:
    """The label id a marker text names, None where the text is no code."""
    try:
        return decode(text)
    except ValueError:
        return None


def _coded_style(
    name: str,
    noun: str,
    code: Callable[[int], str],
    decode: Callable[[str], int],
    n_codes: int,
    **fields: Any,
) -> MarkerStyle:
    """A registered style whose marker text codes the label id (ids 1..``n_codes``): ``noun``
    stands before a marker in a question ("the number 52") and names how a localizer found it
    (``marker-number``); the coding's fields are partials, so the style pickles."""
    return register_marker_style(
        MarkerStyle(
            name=name,
            phrase=f"the {noun} {{}}",
            how=f"marker-{noun}",
            texts=partial(_coded_texts, code),
            blank_texts=partial(_coded_blank, code, n_codes),
            label_of=partial(_coded_label, decode),
            **fields,
        )
    )


# numbers: the label id


def _decimal(text: str) -> int:
    text = text.strip()
    if not text.isdecimal():
        raise ValueError(text)
    return int(text)


def _number_classify(text: str, strict: bool) -> str | None:
    return str(int(text)) if text.isdecimal() else None


def _number_mirp(label_id: int | None, text: str, blank: bool) -> tuple[str, Any]:
    """MIRP's numbers files hold ints: the label id, or (blank page) the drawn number."""
    return "gray", int(text) if blank else label_id


NUMBERS = _coded_style(
    "numbers",
    "number",
    str,
    _decimal,
    117,
    examples=("52", "1", "7"),
    reference=r"(?:number|no\.|#)\s*(\d+)",
    token=r"\d+",
    classify=_number_classify,
    nouns=("number", "numbers"),
    glyphs=(digits[1:], digits, (1, 2, 3)),
    mirp=_number_mirp,
)

# letters: MIRP's two-letter code of the label id


def _letter_classify(text: str, strict: bool) -> str | None:
    return text.upper() if re.fullmatch(r"[A-Z]{2}" if strict else r"[A-Za-z]{2}", text) else None


def _letter_mirp(label_id: int | None, text: str, blank: bool) -> tuple[str, Any]:
    """MIRP's quirk: RQ1-RQ3 letters files say ``object*_label``, the blank page ``_gray``."""
    return "gray" if blank else "label", text


LETTERS = _coded_style(
    "letters",
    "letters",
    letter_code,
    letter_to_id,
    676,
    plural=True,
    examples=("BZ", "AA", "CD"),
    reference=r"letters?\s+([a-z]{2})",
    token=r"[a-z]{2}",
    classify=_letter_classify,
    nouns=("letter", "letters"),
    glyphs=(ascii_uppercase, ascii_uppercase, (2,)),
    mirp=_letter_mirp,
)

# --- dots: a colour per object, drawn at random per slice ----------------------------------------


def _dot_texts(label_ids: Sequence[int], colours: Sequence[str]) -> tuple[str, ...]:
    return tuple(colours)


def _dot_blank(rng: np.random.Generator) -> tuple[str, str]:
    return ("red", "blue") if rng.random() < 0.5 else ("blue", "red")


def _dot_classify(text: str, strict: bool) -> str | None:
    return text.lower() if text.lower() in DOT_ORDER else None


DOTS = register_marker_style(
    MarkerStyle(
        name="dots",
        phrase="the {} dot",
        examples=DOT_ORDER,
        texts=_dot_texts,
        blank_texts=_dot_blank,
        reference=r"(red|blue|green)\s+(?:dot|point|circle|marker)",
        token=r"red|blue|green",
        classify=_dot_classify,
        nouns=("dot", "point"),
        reader="colour",
        draw=draw_dot,
    )
)
