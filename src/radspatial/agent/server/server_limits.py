"""Shared limits of ``radspatial serve``: a first-come budget (decoded pixels, body bytes) and
the connection table that lets a new client in by evicting the oldest one still waiting for a
request (not yet authenticated), so slow or unauthenticated sockets cannot lock clients out.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ServerLimits:
    """How much one server takes at once. ``resolved()`` fills the defaults that follow from the
    others: ``max_pixels`` (one image) ``min(4096**2, max_total_pixels)``, ``max_total_pixels``
    (decoded at once) ``max(2 * 4096**2, max_pixels)`` (about 0.5 GB at the ~14 bytes a pixel
    decoding and the markers agent take), ``max_total_body_bytes`` ``4 * max_body_bytes``,
    ``max_connections`` ``4 * threads``. The header deadline is
    ``min(header_timeout_s, read_timeout_s)``."""

    max_body_bytes: int = 20 * 2**20
    max_pixels: int | None = None
    max_total_pixels: int | None = None
    max_total_body_bytes: int | None = None
    threads: int = 32
    header_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    queue_timeout_s: float = 60.0
    max_connections: int | None = None

    def resolved(self) -> ServerLimits:
        """Every limit set and checked (> 0; the totals at least the per-request limits)."""
        one = self.max_pixels or min(4096 * 4096, self.max_total_pixels or 4096 * 4096)
        out = replace(
            self,
            max_pixels=one,
            max_total_pixels=self.max_total_pixels or max(2 * 4096 * 4096, one),
            max_total_body_bytes=self.max_total_body_bytes or 4 * self.max_body_bytes,
            max_connections=self.max_connections or 4 * self.threads,
        )
        numbers = (out.threads, out.max_body_bytes, one, out.header_timeout_s, out.read_timeout_s)
        if not min(numbers + (out.queue_timeout_s, out.max_connections)) > 0:  # NaN fails too
            raise ValueError("every limit and timeout of the server must be > 0")
        if out.max_total_pixels < one or out.max_total_body_bytes < out.max_body_bytes:
            raise ValueError("max_total_pixels / max_total_body_bytes must be at least the "
                             "per-request max_pixels / max_body_bytes")  # fmt: skip
        return out


class Budget:
    """``total`` units shared by the requests in flight, handed out in arrival order.

    ``take(n, timeout_s)`` waits until ``n`` units are free and every earlier request has been
    served (no starvation of a large request by small ones), or returns False after the timeout.
    """

    def __init__(self, total: int) -> None:
        self.total, self.used, self.peak = total, 0, 0
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()

    @contextlib.contextmanager
    def hold(self, n: int, timeout_s: float) -> Iterator[bool]:
        """``with budget.hold(n, t) as ok``: ok is False if ``n`` units were not free in time."""
        ok = self.take(n, timeout_s)
        try:
            yield ok
        finally:
            if ok:
                self.give(n)

    def take(self, n: int, timeout_s: float) -> bool:
        if n > self.total:
            return False
        ticket, deadline = object(), time.monotonic() + timeout_s
        with self._cond:
            self._queue.append(ticket)
            try:
                while self._queue[0] is not ticket or self.used + n > self.total:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
                self.used += n
                self.peak = max(self.peak, self.used)
                return True
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()  # the next in line may fit now

    def give(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


class Connections:
    """The open connections, each either waiting for a request or working on one.

    ``admit`` makes room for a new connection when ``limit`` are open by shutting down the one
    that has waited longest for its request line and headers (it has not authenticated, or is an
    idle keep-alive); only when every connection is working is the newcomer refused.
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.evicted = limit, 0
        self._lock = threading.Lock()
        self._open: dict[socket.socket, tuple[bool, float]] = {}  # sock -> (working, since)

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, sock: socket.socket) -> bool:
        with self._lock:
            if len(self._open) >= self.limit:
                waiting = [(since, id(s), s) for s, (work, since) in self._open.items() if not work]
                if not waiting:
                    return False
                victim = min(waiting)[2]
                del self._open[victim]
                self.evicted += 1
                with contextlib.suppress(OSError):  # its thread sees EOF and ends
                    victim.shutdown(socket.SHUT_RDWR)
            self._open[sock] = (False, time.monotonic())
            return True

    def waiting(self, sock: socket.socket) -> bool:
        """Mark ``sock`` as waiting for its next request; False if it was evicted."""
        return self._mark(sock, False)

    def working(self, sock: socket.socket) -> bool:
        """Mark ``sock`` as working (no longer evictable); False if it was evicted."""
        return self._mark(sock, True)

    def _mark(self, sock: socket.socket, working: bool) -> bool:
        with self._lock:
            if sock not in self._open:
                return False
            self._open[sock] = (working, time.monotonic())
            return True

    def remove(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.pop(sock, None)


def return_freed_buffers(threshold: int = 2**20) -> bool:
    """Have glibc allocate blocks of ``threshold`` bytes and more with mmap, so a freed image
    buffer goes back to the OS at once. By default glibc raises this threshold (up to 32 MiB)
    as large blocks are freed and then keeps them in each thread's arena: with 32 threads the
    RSS grew to ~900 MB although at most ~500 MB of decoded images were alive (measured with
    ``benchmarks/bench_server_dos.py``). Process-wide, so ``serve()`` calls it, not the tests.
    False where there is no glibc ``mallopt`` (macOS, Windows)."""
    import ctypes

    try:
        return bool(ctypes.CDLL(None).mallopt(-3, threshold))  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError, TypeError):
        return False
