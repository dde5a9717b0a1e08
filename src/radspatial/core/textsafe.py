"""Text from files made safe for where it is shown: one markdown line, a log line, UTF-8.

- ``md_text(s)``: any string from a file (a model label, a status, a path) as literal
  markdown on one line: control characters and newlines become spaces and the characters that
  make links, images, emphasis, code, HTML or table cells are backslash-escaped, so
  ``![t](http://host/x.png)`` prints as text and a newline cannot split a table row.
- ``md_table(header, rows)``: a pipe table of such cells.
- ``md_code(s)``: the same string as an inline code span (backticks inside are replaced);
  returns ``Markup``, which ``md_text`` passes through unchanged.
- ``log_text(s)``: a request line or header for a log: control characters (ESC, CR, U+202E
  and the other bidi controls) shown as ``\\xNN``/``\\uNNNN`` escapes, so a log shows what was
  sent and a terminal cannot be driven by it.
- ``fig_text(s)``: a label for a figure: ``log_text``'s escapes, and ``$`` kept literal (not
  matplotlib's math mode, whose parse errors and missing-glyph warnings would echo the text).
- ``text_problem(s)``: why a name taken from a file (a segment or structure name, a label, a
  model name) cannot be one: over ``MAX_NAME_CHARS`` characters, or holding a control or format
  character (ESC, newline, U+202E, NUL). ``core.gates`` turns it into the one gate that
  refuses with a line naming the file and field.
- ``utf8_clean(s)``: lone surrogates (``"\\ud800"``, valid in JSON, not in UTF-8) replaced by
  U+FFFD, so a reply can always be written to a UTF-8 log.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])")  # links, images, emphasis, code, HTML, cells
_SPACE = re.compile(r"\s+")


class Markup(str):
    """A markdown fragment built by our code (already safe); ``md_text`` leaves it as it is."""


def _visible(text: str) -> str:
    """Control and format characters (C0, C1, bidi overrides, zero-width) as spaces."""
    return "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)


def md_text(text: object) -> str:
    """``text`` as literal one-line markdown (see the module docstring)."""
    if isinstance(text, Markup):
        return text
    one_line = _SPACE.sub(" ", _visible(str(text))).strip()
    return _MD_SPECIAL.sub(r"\\\1", one_line)


def md_code(text: object) -> Markup:
    """``text`` as an inline code span on one line."""
    one_line = _SPACE.sub(" ", _visible(str(text))).strip().replace("`", "'")
    return Markup(f"`{one_line}`")


def md_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """A pipe table; every cell through :func:`md_text` (``Markup`` cells pass as built)."""
    lines = ["| " + " | ".join(md_text(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def log_text(text: str) -> str:
    """``text`` with control and format characters escaped (``\\x1b``, ``\\u202e``)."""
    out = []
    for c in text:
        if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            out.append(f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def fig_text(text: object) -> str:
    """``text`` for a figure label (see the module docstring)."""
    return log_text(str(text)).replace("$", r"\$")


def utf8_clean(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (only when there are any)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


MAX_NAME_CHARS = 64  # DICOM's LO (a SegmentLabel, an ROIName) holds 64: no structure is longer
_UNSAFE = ("Cc", "Cf", "Zl", "Zp", "Cs")


def text_problem(text: object, limit: int = MAX_NAME_CHARS) -> str | None:
    """Why ``text`` cannot be a name from a file (None: it can)."""
    if not isinstance(text, str):
        return f"is a {type(text).__name__}, not text"
    if len(text) > limit:
        return f"is {len(text)} characters long (at most {limit})"
    bad = next((c for c in text if unicodedata.category(c) in _UNSAFE), None)
    if bad is not None:
        return f"holds the control character {log_text(bad)} (a terminal escape or line break?)"
    if not text.strip():
        return "is empty"
    return None


MAX_PROSE_CHARS = 1000  # a sentence from a file: a decidable_reason, a landmark's source
MAX_MODEL_CHARS = 200  # "openai-compat:org/model-name@https://host/v1" with room to spare
MAX_FILE_NUMBER = 2.0**53  # beyond it a JSON number has lost its digits: no count or size is
