"""Bounded reading of an untrusted NRRD file: its header text and its voxel data.

pynrrd parses the header fields (their syntax is its job); where the bytes come from and how
many are read is decided here, before anything is allocated:

- the header is at most ``MAX_HEADER_BYTES`` of text ending at the first blank line;
- ``data file:`` (a detached header, ``.nhdr``) must name one regular file inside the header's
  folder: no absolute path, no ``..``, no symlink, no FIFO or device; the multi-file forms
  (``LIST``, ``name%03d.raw 1 10 1``) are refused;
- ``line skip`` is 0..``MAX_LINE_SKIP`` lines and must end inside the file;
- ``byte skip`` is 0 or more (bounded by the file, or for compressed data by the size limit),
  or -1 (NRRD's "the data are the last bytes"): raw data must then still start after the header
  and any skipped lines; compressed data takes the last declared bytes of a stream inflated to
  at most the declared size plus 1 MiB;
- gzip and bzip2 streams are inflated incrementally and refused as soon as they pass the
  declared size (plus the byte skip): a 1 MB bomb costs what its header admits, no more.

Every refusal is an :class:`InputError` naming the file; text taken from the file is escaped.
"""

from __future__ import annotations

import bz2
import os
import zlib
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np

from radspatial.core.errors import InputError, first_line
from radspatial.core.textsafe import log_text
from radspatial.imaging.nifti import max_volume_bytes

MAX_HEADER_BYTES = 1 << 20
MAX_LINE_SKIP = 10_000
_CHUNK = 1 << 20
_SLACK = 1 << 20  # inflated bytes tolerated before the data when byte skip is -1
_ASCII = ("ascii", "text", "txt")
_GZIP, _BZIP2 = ("gzip", "gz"), ("bzip2", "bz2")


def split_header(path: Path) -> tuple[list[bytes], int]:
    """(header lines, offset of the first byte after the header's blank line)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(MAX_HEADER_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read NRRD ({exc.strerror or first_line(exc)})") from None
    lines: list[bytes] = []
    offset = 0
    for line in head.splitlines(keepends=True):
        if offset + len(line) > MAX_HEADER_BYTES:
            raise InputError(f"{path}: NRRD header is longer than {MAX_HEADER_BYTES} bytes")
        offset += len(line)
        if lines and not line.rstrip():  # the blank line that ends the header
            return lines, offset
        lines.append(line)
    if len(head) > MAX_HEADER_BYTES:
        raise InputError(f"{path}: NRRD header is longer than {MAX_HEADER_BYTES} bytes")
    return lines, offset  # the whole file is header (a detached .nhdr)


def declared(path: Path, header: dict) -> tuple[tuple[int, ...], np.dtype, int]:
    """(sizes, dtype, bytes of data) the header declares; refused above the size limit."""
    try:
        sizes = tuple(int(s) for s in np.atleast_1d(header["sizes"]))
        dtype = _dtype(header)
    except Exception as exc:  # a missing field, an unknown type (pynrrd: KeyError, NRRDError)
        raise InputError(f"{path}: NRRD header is incomplete ({first_line(exc)})") from None
    if dtype.kind not in "uif" or dtype.itemsize == 0:  # "block": opaque bytes, no numbers
        shown = log_text(repr(str(header.get("type", ""))))[:40]
        raise InputError(f"{path}: NRRD type {shown} is not a number type (a label map needs one)")
    if not sizes or min(sizes) < 1:
        raise InputError(f"{path}: NRRD sizes {list(sizes)} must all be at least 1")
    n = int(np.prod(sizes, dtype=object)) * dtype.itemsize
    limit = max_volume_bytes()
    if n > limit or n // dtype.itemsize * 2 > limit:
        raise InputError(
            f"{path}: {' x '.join(map(str, sizes))} voxels exceed the size limit "
            f"({limit} bytes; set RADSPATIAL_MAX_VOLUME_BYTES to allow more)"
        )
    return sizes, dtype, n


def _dtype(header: dict) -> np.dtype:
    from nrrd.reader import _determine_datatype  # pynrrd's own type names and endian rule

    return _determine_datatype(header)


def data_file(path: Path, header: dict) -> Path | None:
    """The detached data file a header names (None: the data follow the header), checked."""
    name = header.get("data file", header.get("datafile"))
    if name is None:
        return None
    name, shown = str(name).strip(), log_text(repr(str(name)))
    if name.split(" ")[0].upper() == "LIST" or len(name.split()) > 1:
        raise InputError(
            f"{path}: NRRD data file {shown} names several files (LIST or a numbered "
            "pattern); only one data file beside the header is read"
        )
    where = f"{path}: NRRD data file {shown}"
    if not name or PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute():
        raise InputError(f"{where} must be a relative name inside the header's folder")
    if ".." in PurePosixPath(name).parts or "\x00" in name:
        raise InputError(f"{where} leads out of the header's folder ('..')")
    root = Path(os.path.realpath(path.parent))
    target = root / name
    if os.path.realpath(target) != os.path.normpath(target):
        raise InputError(f"{where} is or passes through a symlink; give the file itself")
    if not target.exists():
        raise InputError(f"{where}: no such file beside the header")
    if not target.is_file():
        raise InputError(f"{where} is not a regular file (a FIFO, device or folder)")
    return path.parent / name


def read_data(path: Path, header: dict, header_end: int) -> np.ndarray:
    """The voxel array (Fortran index order, as ``nrrd.read``) of a header read from ``path``."""
    sizes, dtype, n = declared(path, header)
    detached = data_file(path, header)
    source = detached or path
    encoding = str(header.get("encoding", "")).strip().lower()
    if encoding not in ("raw", *_ASCII, *_GZIP, *_BZIP2):
        raise InputError(f"{path}: NRRD encoding {log_text(repr(encoding))} is not supported")
    line_skip = _skip(path, header, ("line skip", "lineskip"), 0, MAX_LINE_SKIP)
    byte_skip = _skip(path, header, ("byte skip", "byteskip"), -1, max_volume_bytes())
    try:
        with open(source, "rb") as fh:
            fh.seek(0 if detached else header_end)
            _skip_lines(source, fh, line_skip)
            if encoding == "raw":
                buf = _raw(source, fh, n, byte_skip)
            elif encoding in _ASCII:
                return _ascii(source, fh, sizes, dtype, byte_skip)
            else:
                buf = _inflated(source, fh, encoding, n, byte_skip)
    except OSError as exc:
        raise InputError(f"{source}: cannot read NRRD data ({exc.strerror or exc})") from None
    data = np.frombuffer(buf, dtype=dtype)
    return np.reshape(data, sizes[::-1]).T


def _skip(path: Path, header: dict, keys: tuple[str, str], low: int, high: int) -> int:
    value = header.get(keys[0], header.get(keys[1], 0))
    try:
        skip = int(value)
    except (TypeError, ValueError):
        skip = None
    if skip is None or not low <= skip <= high:
        raise InputError(
            f"{path}: NRRD {keys[0]} {log_text(repr(value))} is out of range ({low}..{high})"
        )
    return skip


def _skip_lines(path: Path, fh, n: int) -> None:
    for i in range(n):
        line = fh.readline(MAX_HEADER_BYTES + 1)
        if not line.endswith(b"\n"):
            raise InputError(f"{path}: NRRD line skip {n} passes the end of the file (line {i})")


def _raw(path: Path, fh, n: int, skip: int) -> bytearray:
    start, size = fh.tell(), os.fstat(fh.fileno()).st_size
    offset = size - n if skip == -1 else start + skip
    if offset < start or size - offset != n:
        have = size - max(offset, start)
        raise InputError(
            f"{path}: NRRD raw data is {have} bytes after the header and skips, "
            f"the header declares {n}"
        )
    fh.seek(offset)
    buf = bytearray(n)
    if fh.readinto(buf) != n:
        raise InputError(f"{path}: NRRD raw data is truncated (file changed while read?)")
    return buf


def _inflated(path: Path, fh, encoding: str, n: int, skip: int) -> bytearray:
    """Inflate at most (declared + skip) bytes; the data are the last ``n`` of them."""
    cap = n + (_SLACK if skip == -1 else skip)
    gzip = encoding in _GZIP
    d = zlib.decompressobj(zlib.MAX_WBITS | 16) if gzip else bz2.BZ2Decompressor()
    out = bytearray()
    try:
        while not d.eof:
            if isinstance(d, bz2.BZ2Decompressor):  # exactly when not gzip
                chunk = fh.read(_CHUNK) if d.needs_input else b""
            else:
                chunk = d.unconsumed_tail or fh.read(_CHUNK)
            if not chunk and (not isinstance(d, bz2.BZ2Decompressor) or d.needs_input):
                break
            out += d.decompress(chunk, cap + 1 - len(out))
            if len(out) > cap:
                raise InputError(
                    f"{path}: NRRD {encoding} data inflate to more than the header declares "
                    f"({n} bytes{f' + byte skip {skip}' if skip > 0 else ''})"
                )
    except InputError:
        raise
    except (zlib.error, OSError, EOFError, ValueError) as exc:
        raise InputError(f"{path}: corrupt NRRD {encoding} data ({first_line(exc)})") from None
    if not d.eof:
        raise InputError(f"{path}: truncated NRRD {encoding} stream (compressed data ends early)")
    if skip == -1:
        return out[-n:] if len(out) >= n else _short(path, len(out), n)
    if len(out) != n + skip:
        _short(path, len(out) - skip, n)
    return out[skip:]


def _short(path: Path, have: int, n: int) -> bytearray:
    raise InputError(f"{path}: NRRD data hold {max(have, 0)} bytes, the header declares {n}")


def _ascii(path: Path, fh, sizes: tuple[int, ...], dtype: np.dtype, skip: int) -> np.ndarray:
    count = int(np.prod(sizes))
    if skip == -1:
        raise InputError(f"{path}: NRRD byte skip -1 has no meaning for ASCII data")
    fh.seek(skip, os.SEEK_CUR)
    cap = count * 32 + _SLACK  # generous for any number's text
    text = fh.read(cap + 1)
    if len(text) > cap:
        raise InputError(f"{path}: NRRD ASCII data is longer than {count} numbers can be")
    tokens = text.split()
    if len(tokens) != count:
        raise InputError(f"{path}: NRRD ASCII data hold {len(tokens)} numbers, declared {count}")
    try:
        data = np.array(tokens).astype(dtype)
    except (ValueError, OverflowError):
        raise InputError(f"{path}: NRRD ASCII data hold a value that is not a {dtype}") from None
    return np.reshape(data, sizes[::-1]).T
