"""``radspatial serve`` in a subprocess for tests: bound to a port the OS picks (``--port 0``)
and kept, its URL read back from the line the command prints; stopped with Ctrl-C."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

START_S = 300.0  # a loaded 2-core machine imports torch slowly: generous, never a speed check


@contextmanager
def serve_cli(
    *args: str, env: dict[str, str | None] | None = None
) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(base_url, output)``: ``output`` collects stdout and stderr lines as they come
    (complete once the block has ended). ``env`` adds to the environment; None removes."""
    merged = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    env = {k: v for k, v in merged.items() if v is not None}
    proc = subprocess.Popen(
        [sys.executable, "-m", "radspatial.cli", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            try:
                line = lines.get(timeout=START_S)
            except queue.Empty:
                raise AssertionError(f"serve printed no URL in {START_S} s: {output}") from None
            assert line is not None, f"serve ended before serving: {''.join(output)}"
            output.append(line)
            if match := re.search(r" at (http://127\.0\.0\.1:\d+/v1)", line):
                url = match[1]
        yield url, output
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=60)
            while not lines.empty():
                if (line := lines.get_nowait()) is not None:
                    output.append(line)
