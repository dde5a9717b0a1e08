"""Strict readers for the files a dataset is made of; every problem is a ``DataFileError`` that
names the file, the line or entry, and what is wrong.

- ``manifest.jsonl`` (written atomically by ``radspatial generate``): every line must be a JSON
  object (``read_json_lines``; a torn or garbage line anywhere is refused, never skipped) with
  the fields of a ``questions.manifest.ManifestRow`` (checked by ``check_fields``; its answers by
  the question type, ``questions.check_answer``).
- other JSON side files (``dataset.json``, MIRP's centres file): valid JSON of the right shape.

Every reader is bounded: the file must be a regular file (a FIFO or ``/dev/zero`` is refused,
never waited on or read forever) of at most ``max_json_bytes()`` (env ``RADSPATIAL_MAX_JSON_MB``,
default 64), a JSON-lines file at most ``max_jsonl_bytes()`` (``RADSPATIAL_MAX_JSONL_MB``,
default 512) and one of its lines at most ``max_line_bytes()`` (env ``RADSPATIAL_MAX_LINE_MB``,
default 32), and nesting deeper than the interpreter allows, integers of more than 4300 digits
and non-UTF-8 bytes are each one ``DataFileError`` naming the file.

Answers are 0/1 (``answer01``: also ``"0"``/``"1"`` and booleans, as some exports write them);
anything else (``"maybe"``, 2, null) is refused. Rows of the open question types hold a word,
a name or an integer instead: each type checks its own (``questions.check_answer``).
"""

from __future__ import annotations

import json
import os
import re
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radspatial.core.gates import file_text, number_from_file
from radspatial.core.textsafe import MAX_FILE_NUMBER, MAX_PROSE_CHARS


class DataFileError(ValueError):
    """A dataset file that cannot be read as what it claims to be."""


_TYPE_NAMES = {
    str: "a string",
    dict: "an object",
    list: "a list",
    int: "an integer",
    float: "a number",
    bool: "true or false",
}


def answer01(value: Any, where: str, key: str = "answer") -> int:
    """0 or 1 from ``value`` (int, bool, "0"/"1"), else a ``DataFileError``."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise DataFileError(f"{where}: {key!r} must be 0 or 1, got {value!r}")


def answers01(row: dict, where: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    """The row's 0/1 fields (``required`` present, ``optional`` absent or null), each checked
    by :func:`answer01`: a null or 2 ``expected`` names the file, line and field."""
    out = {}
    for key in required:
        if key not in row:
            raise DataFileError(f"{where}: missing required field {key!r}")
        out[key] = answer01(row[key], where, key)
    for key in optional:
        if row.get(key) is not None:
            out[key] = answer01(row[key], where, key)
    return out


def one_of(value: Any, allowed: tuple, where: str, key: str = "answer") -> Any:
    """``value`` if it is one of ``allowed`` (an open type's classes), else a ``DataFileError``."""
    if value not in allowed:
        words = "/".join(str(a) for a in allowed)
        raise DataFileError(f"{where}: {key!r} must be one of {words}, got {value!r}")
    return value


# the number gate's range of a field wherever a dataset or run file has it (imaging.nifti's
# grid bounds for positions); any other number: finite and within +-2^53
FIELD_RANGES = {"slice_index": (0, 1e6), "z_mm": (-1e7, 1e7)}


def check_fields(
    row: dict,
    where: str,
    required: dict,
    optional: dict,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> None:
    """Required fields present, of their type (strings non-empty); optional ones of their type
    or null. ``required``/``optional``: field -> allowed types (the first one names them).
    Numbers pass the number gate (``core.gates.number_from_file``): finite, no boolean,
    within ``ranges[field]`` (default: ``FIELD_RANGES``, else +-2^53)."""
    for key, types in required.items():
        if key not in row:
            raise DataFileError(f"{where}: missing required field {key!r}")
        text = types == (str,)
        if not isinstance(row[key], types) or (text and not row[key].strip()):
            what = _TYPE_NAMES[types[0]] + (" (non-empty)" if text else "")
            raise DataFileError(f"{where}: {key!r} must be {what}, got {row[key]!r}")
    for key, types in optional.items():
        if row.get(key) is not None and not isinstance(row[key], types):
            raise DataFileError(
                f"{where}: {key!r} must be {_TYPE_NAMES[types[0]]} or null, got {row[key]!r}"
            )
    for key, types in (required | optional).items():
        value = row.get(key)
        if isinstance(value, int | float) and not (isinstance(value, bool) and bool in types):
            low, high = (ranges or FIELD_RANGES).get(key, (-MAX_FILE_NUMBER, MAX_FILE_NUMBER))
            number_from_file(value, source=where, field=repr(key), low=low, high=high,
                             integer=float not in types, error=DataFileError)  # fmt: skip


def _mb_env(name: str, default: float) -> int:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        value = default
    return int(max(value, 0.001) * 2**20)


def max_json_bytes() -> int:
    """The size cap of a JSON or JSON-lines file read whole (env ``RADSPATIAL_MAX_JSON_MB``)."""
    return _mb_env("RADSPATIAL_MAX_JSON_MB", 64)


def max_jsonl_bytes() -> int:
    """The size cap of a JSON-lines file read whole: manifests, results, call logs (env
    ``RADSPATIAL_MAX_JSONL_MB``, default 512)."""
    return _mb_env("RADSPATIAL_MAX_JSONL_MB", 512)


def max_line_bytes() -> int:
    """The size cap of one JSON-lines line (env ``RADSPATIAL_MAX_LINE_MB``)."""
    return _mb_env("RADSPATIAL_MAX_LINE_MB", 32)


def read_bytes_bounded(path: Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (default
    ``max_json_bytes()``); a FIFO, device or folder, a bigger file or an unreadable one is a
    ``DataFileError`` naming it. Opened non-blocking, so a FIFO is refused, not waited on."""
    path = Path(path)
    cap = max_json_bytes() if max_bytes is None else max_bytes
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DataFileError(f"{path}: not a regular file (a folder, FIFO or device)")
        if info.st_size > cap:
            raise DataFileError(f"{path}: {info.st_size} bytes, over the {_mb(cap)} limit")
        chunks, total = [], 0
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
            total += len(block)
            if total > cap:  # grew while read
                raise DataFileError(f"{path}: over the {_mb(cap)} limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _mb(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def read_text_bounded(path: Path, max_bytes: int | None = None) -> str:
    """:func:`read_bytes_bounded` as UTF-8 text (else a ``DataFileError``)."""
    try:
        return read_bytes_bounded(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def loads(text: str | bytes, where: object) -> Any:
    """``json.loads`` whose every failure is one ``DataFileError`` starting with ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(
            f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise DataFileError(f"{where}: JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:  # e.g. an integer of over 4300 digits
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataFileError(f"{where}: not valid JSON ({text})") from None


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def check_names(row: dict, where: str, keys: tuple[str, ...], *, ids: tuple[str, ...] = ()) -> None:
    """``keys`` (setup, marker, question type: they become folder and file names) must be plain
    names (letters, digits, ``_.-``, no ``..``); ``ids`` may hold ``/`` but no control or
    format character (newline, ESC, U+202E), which would forge lines or reorder text."""
    for key in keys:
        value = row.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not _NAME.fullmatch(value) or ".." in value:
            raise DataFileError(f"{where}: {key!r} must be a plain name, got {value!r}")
    for key in ids:
        value = row.get(key)
        if isinstance(value, str) and any(unicodedata.category(c)[0] == "C" for c in value):
            raise DataFileError(f"{where}: {key!r} holds a control character: {value!r}")


def check_reason(reason: object, where: str) -> None:
    """A ``decidable_reason`` (a manifest row's, an exported MIRP entry's): absent, or text
    through the text gate with room for a sentence (``MAX_PROSE_CHARS``)."""
    if reason is not None:
        file_text(reason, source=where, field="'decidable_reason'", limit=MAX_PROSE_CHARS,
                  error=DataFileError)  # fmt: skip


def read_json_lines(path: Path) -> list[tuple[str, dict]]:
    """``(where, row)`` per JSON object line of a file written whole (``manifest.jsonl``): a torn
    or garbage line anywhere is refused; ``where`` is ``"<path>: line <n>"``. The row's fields
    are checked by its record (``questions.manifest.ManifestRow.from_json``)."""
    path = Path(path)
    text = read_text_bounded(path, max_jsonl_bytes())
    return list(json_objects(path, text, "row"))


def json_objects(path: Path, text: str, what: str) -> Iterator[tuple[str, dict]]:
    """``(where, object)`` per non-blank line of the JSON-lines ``text`` of ``path``; ``where`` is
    ``"<path>: line <n>"``. A line that is not a JSON object (``what``: a row, a mark) is a
    ``DataFileError``; a cut last line is called torn."""
    cap = max_line_bytes()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}: line {n}"
        if len(line) > cap:
            raise DataFileError(f"{where}: longer than the {_mb(cap)} line limit")
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            torn = " (torn: the file was cut mid-line)" if n == text.count("\n") + 1 else ""
            raise DataFileError(f"{where}: not valid JSON{torn}") from None
        if not isinstance(obj, dict):
            kind = type(obj).__name__
            raise DataFileError(f"{where}: a {what} must be a JSON object, got {kind}")
        yield where, obj


def read_json(path: Path, *, want: type) -> Any:
    """JSON document of type ``want`` (list or dict) from ``path``."""
    path = Path(path)
    data = loads(read_text_bounded(path), path)
    if not isinstance(data, want):
        raise DataFileError(
            f"{path}: expected {_TYPE_NAMES[want]} at the top level, got {type(data).__name__}"
        )
    return data


def check_unique_ids(ids: list[str], root: Path) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise DataFileError(f"{root}: item id {i!r} appears twice")
        seen.add(i)
