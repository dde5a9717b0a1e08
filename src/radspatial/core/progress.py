"""Progress on stderr that also shows when the output is piped or logged.

On a terminal a tqdm bar; otherwise plain lines (``generate: 0/1 case(s), example_ct_sm:
rendering 12/58 [6 s]``) at most one every ``RADSPATIAL_PROGRESS_SECONDS`` (default 5), the
first after that long, and a last one when the task ends if any was shown. So ``radspatial demo
| cat`` or a batch log shows the command is alive without flooding, and a quick failure stays
one line on stderr.

Work deep inside one case (slices of a volume) reports through :func:`step`; it reaches the
display only in the process that opened it (:func:`steps_to`), never from pool workers, which
may inherit the hook when forked.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

_hook: tuple[int, Callable[[str], None]] | None = None


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("RADSPATIAL_PROGRESS_SECONDS", "5")))
    except ValueError:
        return 5.0


class Progress:
    """A counted task (``total`` units) with an optional note on the current step."""

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.total, self.desc, self.unit = total, desc, unit
        self.done, self.note = 0, ""
        self.start = time.monotonic()
        self.last = self.start
        self.shown = False
        self.every = _interval()
        isatty = getattr(self.stream, "isatty", lambda: False)
        self.bar = None
        if enabled and isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=True)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        else:
            self._line(final=self.done >= self.total)

    def set_note(self, note: str) -> None:
        self.note = note
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=True)
        else:
            self._line()

    @contextmanager
    def keepalive(self) -> Iterator[None]:
        """While the block runs, a line (or a refreshed bar) at least every interval even
        when nothing is counted: a backend loading its model for a minute still shows."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.every or 0.1):
                if self.bar is not None:
                    self.bar.refresh()
                else:
                    self._line()

        thread = threading.Thread(target=loop, daemon=True, name="radspatial-keepalive")
        if self.enabled:
            thread.start()
        try:
            yield
        finally:
            stop.set()
            if thread.is_alive():
                thread.join()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.shown:  # the end of a task whose progress was shown
            self.last = -float("inf")
            self._line()

    def _line(self, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or not (self.shown if final else now - self.last >= self.every):
            return
        self.last, self.shown = now, True
        note = f", {self.note}" if self.note else ""
        elapsed = now - self.start
        text = f"{self.desc}: {self.done}/{self.total} {self.unit}(s){note} [{elapsed:.0f} s]"
        print(text, file=self.stream, flush=True)


@contextmanager
def steps_to(progress: Progress) -> Iterator[None]:
    """Within the block, :func:`step` notes from this process go to ``progress``."""
    global _hook
    previous, _hook = _hook, (os.getpid(), progress.set_note)
    try:
        yield
    finally:
        _hook = previous


def step(note: str) -> None:
    """Report the current step of deep work (a no-op unless a display listens here)."""
    if _hook is not None and _hook[0] == os.getpid():
        _hook[1](note)


@contextmanager
def heartbeat(desc: str, *, stream: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """Yields ``note(text)`` to name the current step; every few seconds while the block runs,
    prints ``desc: <step> [t s]``. A block that ends sooner prints nothing."""
    stream = stream or sys.stderr
    current = [""]
    stop = threading.Event()
    start, every = time.monotonic(), _interval() or 0.1

    def loop() -> None:
        while not stop.wait(every):
            elapsed = time.monotonic() - start
            print(f"{desc}: {current[0]} [{elapsed:.0f} s]", file=stream, flush=True)

    thread = threading.Thread(target=loop, daemon=True, name="radspatial-heartbeat")
    thread.start()
    try:
        yield lambda text: current.__setitem__(0, text)
    finally:
        stop.set()
        thread.join()
