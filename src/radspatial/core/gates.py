"""The one gate for names and numbers taken from files (issue 49): a file's text or number
is refused with one line naming the file and the field, never passed on.

- ``file_text(s, source=..., field=...)``: a name (a segment or structure name, a label):
  stripped, at most ``MAX_NAME_CHARS`` characters, no control character
  (``core.textsafe.text_problem``); ``core.labels.structure_name`` then maps a structure name
  to the label tables' vocabulary.
- ``model_name``: the same with room for a backend spec (``MAX_MODEL_CHARS``).
- ``number_from_file``: finite, within a range, an integer where one is meant; booleans and
  strings are no numbers.

Each raises ``error`` (default :class:`~radspatial.core.errors.InputError`; the readers of
dataset files pass their ``DataFileError``).
"""

from __future__ import annotations

import math

from radspatial.core.errors import InputError
from radspatial.core.textsafe import (
    MAX_FILE_NUMBER,
    MAX_MODEL_CHARS,
    MAX_NAME_CHARS,
    log_text,
    text_problem,
)


def file_text(
    text: object,
    *,
    source: object,
    field: str,
    limit: int = MAX_NAME_CHARS,
    error: type[Exception] | None = None,
) -> str:
    """``text`` (a name read from ``source``'s ``field``) stripped, or ``error`` (InputError)
    naming both."""
    if (why := text_problem(text, limit)) is not None:
        raise (error or InputError)(f"{source}: {field} {why}")
    return str(text).strip()


def model_name(
    text: object, *, source: object, field: str, error: type[Exception] | None = None
) -> str:
    """A model name read from a file (metrics.json, run.json, an inspect log): the text gate
    with room for a backend spec (``MAX_MODEL_CHARS``)."""
    return file_text(text, source=source, field=field, limit=MAX_MODEL_CHARS, error=error)


def number_from_file(
    value: object,
    *,
    source: object,
    field: str,
    low: float = -MAX_FILE_NUMBER,
    high: float = MAX_FILE_NUMBER,
    integer: bool = False,
    error: type[Exception] | None = None,
) -> float:
    """``value`` (read from ``source``'s ``field``) as a finite number in ``low..high`` (an
    integer if ``integer``), or ``error`` (InputError) naming the file, the field and the
    value. Booleans and strings are not numbers (``"1e30"`` is refused as text, not parsed)."""
    error = error or InputError
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    number = float(value) if ok else math.nan  # type: ignore[arg-type]
    if ok and integer and isinstance(value, float):
        ok = math.isfinite(number) and number.is_integer()
    if not ok or not math.isfinite(number) or not low <= number <= high:
        kind = "an integer" if integer else "a finite number"
        shown = log_text(repr(value))[:40]
        raise error(f"{source}: {field} {shown} is not {kind} in {low:g}..{high:g}")
    return int(number) if integer else number
