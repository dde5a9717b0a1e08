"""Small I/O helpers: atomic writes, JSON lines, file hashes.

Nothing a command writes follows a symlink: whole files are written to a temp file and renamed
over the name (a symlink there is replaced, its target untouched), and files appended to or
locked (``calls.jsonl``, ``.lock``) are opened with ``O_NOFOLLOW`` and must be regular files
(``open_nofollow``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from radspatial.core.textsafe import utf8_clean


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
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a full disk raises from write() without a name
        raise


def _umask() -> int:
    """The process umask (read by setting and restoring it; there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def dumps(obj: Any) -> str:
    """Deterministic JSON (sorted keys) for files that must be byte-identical across runs."""
    return utf8_clean(json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=2)) + "\n"


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, dumps(obj).encode())


def atomic_write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_bytes(path, utf8_clean(text).encode())


def jsonl_line(row: dict) -> str:
    """One JSON-lines line for an append-only log, always valid UTF-8 (lone surrogates of a
    reply become U+FFFD instead of killing the write)."""
    return utf8_clean(json.dumps(row, ensure_ascii=False)) + "\n"


def open_append(path: Path) -> IO[str]:
    """An append-only log (``calls.jsonl``) opened with :func:`open_nofollow`."""
    return os.fdopen(open_nofollow(path, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a file a command writes (``flags``: e.g. ``O_WRONLY | O_APPEND``), never
    through a symlink, and only if it is a regular file; else an ``InputError`` naming it."""
    from radspatial.core.errors import InputError

    flags |= os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, mode)
    except OSError as exc:
        if Path(path).is_symlink():
            raise InputError(
                f"{path}: is a symlink; refusing to write through it (remove it and rerun)"
            ) from None
        raise InputError(f"{path}: cannot open for writing ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path}: not a regular file; refusing to write to it")
    os.set_blocking(fd, True)
    return fd


def read_jsonl(path: Path) -> list[dict]:
    """Read JSON lines; a torn last line (a crash mid-append) is ignored, others must be JSON
    objects. Bounded and named as ``core.datafiles`` reads (``DataFileError``)."""
    return [row for _, row in read_jsonl_where(path)]


def read_jsonl_where(path: Path) -> list[tuple[str, dict]]:
    """:func:`read_jsonl`'s rows with where each is (``"<path>: line <n>"``)."""
    from radspatial.core.datafiles import json_objects, max_jsonl_bytes, read_text_bounded

    text = read_text_bounded(Path(path), max_jsonl_bytes())
    if text and not text.endswith("\n"):  # a torn last line (a crash mid-append)
        last = text.rfind("\n") + 1
        try:
            json.loads(text[last:])
        except (ValueError, RecursionError):
            text = text[:last]
    return list(json_objects(Path(path), text, "row"))


def read_call_log(
    path: Path, what: str = "call", check: Callable[[dict], str | None] | None = None
) -> dict[str, dict]:
    """Latest row per key of a write-ahead call log (model calls, judge verdicts).

    A torn last line (a crash mid-append) is cut so the next append starts clean; any other
    line that is not a record with a ``key``, is not UTF-8 (we write only UTF-8: a byte that
    is not is an edit, never turned into U+FFFD unsaid) or fails ``check`` (which says why, e.g.
    a forged usage number) is corruption: refused, naming the line. A successful row is never
    replaced by a later failed one.
    """
    from radspatial.core.datafiles import max_jsonl_bytes, read_bytes_bounded

    if not path.exists() and not path.is_symlink():
        return {}
    fd = open_nofollow(path, os.O_RDWR)  # a symlinked log is refused, never read or cut
    try:
        raw = read_bytes_bounded(path, max_jsonl_bytes())
        if raw and not raw.endswith(b"\n"):  # torn append: cut it so the next append is clean
            cut = raw.rfind(b"\n") + 1
            os.ftruncate(fd, cut)
            raw = raw[:cut]
    finally:
        os.close(fd)
    latest: dict[str, dict] = {}
    for n, data in enumerate(raw.split(b"\n"), 1):
        try:
            line = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{path}: line {n}: byte 0x{data[exc.start]:02x} at column {exc.start + 1} is not "
                "UTF-8 (the log was edited; move the file aside to start the run over)"
            ) from None
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            row = None
        bad_reply = isinstance(row, dict) and not isinstance(row.get("reply"), str | None)
        if not isinstance(row, dict) or not isinstance(row.get("key"), str) or bad_reply:
            raise ValueError(
                f"{path}: line {n}: not a {what} record (corrupt log; move the file aside to "
                "start the run over)"
            )
        if check is not None and (why := check(row)) is not None:
            raise ValueError(f"{path}: line {n}: {why} (a forged or corrupt {what} record)")
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


def place_file(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (a copy where linking fails), swapped in atomically."""
    if dst.is_file() and dst.stat().st_size == src.stat().st_size:
        with contextlib.suppress(OSError):
            if dst.samefile(src) or dst.read_bytes() == src.read_bytes():
                return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
