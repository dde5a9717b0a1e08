"""The built-in marker styles (MIRP's): numbers, letters and dots, each one ``MarkerStyle``.

numbers: the label id ("52"), "the number 52"; letters: MIRP's two-letter code of the label id
("BZ" = 52), "the letters BZ"; dots: a red, blue (and, for a third object, green) disc, "the red
dot", whose colour names no structure (the agent finds it by colour). See ``MarkerStyle`` in
``imaging/markers.py`` for what each field is for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from string import ascii_uppercase, digits
from typing import Any

import numpy as np

from radspatial.core.labels import letter_code, letter_to_id
from radspatial.imaging.markers import DOT_ORDER, MarkerStyle, draw_dot, register_marker_style

# --- numbers: the label id -----------------------------------------------------------------------


def _number_texts(label_ids: Sequence[int], colours: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(i) for i in label_ids)


def _number_blank(rng: np.random.Generator) -> tuple[str, str]:
    a, b = rng.choice(np.arange(1, 118), size=2, replace=False)
    return str(a), str(b)


def _number_classify(text: str, strict: bool) -> str | None:
    return str(int(text)) if text.isdecimal() else None


def _number_label(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdecimal() else None


def _number_mirp(label_id: int | None, text: str, blank: bool) -> tuple[str, Any]:
    """MIRP's numbers files hold ints: the label id, or (blank page) the drawn number."""
    return "gray", int(text) if blank else label_id


NUMBERS = register_marker_style(
    MarkerStyle(
        name="numbers",
        phrase="the number {}",
        examples=("52", "1", "7"),
        texts=_number_texts,
        blank_texts=_number_blank,
        reference=r"(?:number|no\.|#)\s*(\d+)",
        token=r"\d+",
        classify=_number_classify,
        nouns=("number", "numbers"),
        label_of=_number_label,
        how="marker-number",
        glyphs=(digits[1:], digits, (1, 2, 3)),
        mirp=_number_mirp,
    )
)

# --- letters: MIRP's two-letter code of the label id ---------------------------------------------


def _letter_texts(label_ids: Sequence[int], colours: Sequence[str]) -> tuple[str, ...]:
    return tuple(letter_code(i) for i in label_ids)


def _letter_blank(rng: np.random.Generator) -> tuple[str, str]:
    a, b = rng.choice(np.arange(1, 677), size=2, replace=False)
    return letter_code(int(a)), letter_code(int(b))


def _letter_classify(text: str, strict: bool) -> str | None:
    return text.upper() if re.fullmatch(r"[A-Z]{2}" if strict else r"[A-Za-z]{2}", text) else None


def _letter_label(text: str) -> int | None:
    try:
        return letter_to_id(text)
    except ValueError:
        return None


def _letter_mirp(label_id: int | None, text: str, blank: bool) -> tuple[str, Any]:
    """MIRP's quirk: RQ1-RQ3 letters files say ``object*_label``, the blank page ``_gray``."""
    return "gray" if blank else "label", text


LETTERS = register_marker_style(
    MarkerStyle(
        name="letters",
        phrase="the letters {}",
        plural=True,
        examples=("BZ", "AA", "CD"),
        texts=_letter_texts,
        blank_texts=_letter_blank,
        reference=r"letters?\s+([a-z]{2})",
        token=r"[a-z]{2}",
        classify=_letter_classify,
        nouns=("letter", "letters"),
        label_of=_letter_label,
        how="marker-letters",
        glyphs=(ascii_uppercase, ascii_uppercase, (2,)),
        mirp=_letter_mirp,
    )
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
