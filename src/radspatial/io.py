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


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
