"""Shared parts of the hostile-input tables (tests/test_hostile_*.py): a tiny dataset and run
built once, a raw HTTP server whose reply bytes a row chooses, and the row runner that checks
the exit code and the one-line message.

A row is a ``Case``: its name, ``setup(tmp, base) -> argv`` (writes the hostile input under
``tmp`` and returns the command as typed), the expected exit code, the words the message must
hold (the file and the problem), and an optional ``check(tmp)`` run afterwards (nothing
outside written, the source intact, ...). Add a row to extend the table.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from radspatial.cli import main


@dataclass(frozen=True)
class Base:
    """What every row may start from: a dataset and a finished baseline run of it."""

    ds: Path
    run: Path


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Path, Base], list[str]]
    code: int
    words: tuple[str, ...] = ()
    check: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


def run_case(case: Case, tmp: Path, base: Base, capsys, monkeypatch) -> str:
    """Run one row; returns stdout + stderr. The error (if any) is one line naming the file."""
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    argv = case.setup(tmp, base)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == case.code, f"{case.name}: exit {code}, stderr: {err}"
    if case.code == 2:
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "error:" in lines[0], err
    for word in case.words:
        assert word in out + err, f"{case.name}: {word!r} not in {err!r}"
    assert "Traceback" not in out + err
    if case.check is not None:
        case.check(tmp)
    return out + err


def rewrite_jsonl(path: Path, change: Callable[[list[dict]], list]) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps(r) + "\n" for r in change(rows)))


# ---------------------------------------------------------------- a raw reply server


def completion(text: object) -> bytes:
    body = {"choices": [{"message": {"role": "assistant", "content": text}}]}
    return json.dumps(body).encode()


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up on a capped reply is expected here


class RawServer:
    """HTTP on 127.0.0.1 answering every POST with ``body`` (bytes) and ``status``, optionally
    gzip-encoded and sent ``drip_s`` seconds per byte."""

    def __init__(
        self, body: bytes, *, gzipped: bool = False, drip_s: float = 0.0, status: int = 200
    ) -> None:
        self.body, self.gzipped, self.drip_s, self.status = body, gzipped, drip_s, status
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                data = gzip.compress(server.body) if server.gzipped else server.body
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if server.gzipped:
                    self.send_header("Content-Encoding", "gzip")
                self.end_headers()
                try:
                    if server.drip_s:
                        for i in range(min(len(data), 50)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(server.drip_s)
                        return
                    self.wfile.write(data)
                except OSError:
                    pass

        self.httpd = _Quiet(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> RawServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def small_run(tmp: Path) -> Base:
    """A tiny synthetic dataset (rq1, 96 px, masks exported) and a 4-item ``baseline:yes`` run
    of it under ``tmp``: what the run-reading hostile tables edit."""
    from synth import write_case

    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.imaging.volumes import Case as CtCase

    ct, seg = write_case(tmp / "in")
    ds = tmp / "ds"
    config = GenerateConfig(seed=3, size=96, as_count=0, setups=("rq1",), export_masks=True)
    build_dataset([CtCase("synth", ct, seg)], config, ds, log=lambda _: None)
    run = tmp / "run"
    assert main(["eval", "--data", str(ds), "--model", "baseline:yes", "--runs", "1",
                 "--out", str(run), "--limit", "4"]) == 0  # fmt: skip
    return Base(ds, run)
