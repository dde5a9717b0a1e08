"""Small I/O helpers: atomic writes, JSON lines, file hashes."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; other outputs follow the umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask (read by setting and restoring it; there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def dumps(obj: Any) -> str:
    """Deterministic JSON (sorted keys) for files that must be byte-identical across runs."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, dumps(obj).encode())


def atomic_write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_bytes(path, text.encode())


def read_jsonl(path: Path) -> list[dict]:
    """Read JSON lines; a torn last line (a crash mid-append) is ignored, others must parse."""
    rows: list[dict] = []
    lines = Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: line {i + 1} is not valid JSON") from None
    return rows


def read_call_log(path: Path, what: str = "call") -> dict[str, dict]:
    """Latest row per key of a write-ahead call log (model calls, judge verdicts).

    A torn last line (a crash mid-append) is cut so the next append starts clean; any other
    line that is not a record with a ``key`` is corruption: refused, naming the line. A
    successful row is never replaced by a later failed one.
    """
    if not path.exists():
        return {}
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):  # torn append: cut it so the next append starts clean
        cut = raw.rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(cut)
        raw = raw[:cut]
    latest: dict[str, dict] = {}
    for n, line in enumerate(raw.decode("utf-8", errors="replace").split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("key"), str):
            raise ValueError(
                f"{path}: line {n}: not a {what} record (corrupt log; move the file aside to "
                "start the run over)"
            )
        prev = latest.get(row["key"])
        if prev is None or prev.get("error") is not None:  # a success is never replaced
            latest[row["key"]] = row
    return latest


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
