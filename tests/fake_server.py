"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

In a test::

    with FakeChatServer(latency_s=0.05, answer=lambda body: "1") as server:
        backend = create_backend(f"openai-compat:fake@{server.base_url}")
        ...
        assert server.calls == 3

As a script (prints the base URL, then serves until interrupted)::

    python tests/fake_server.py --port 8000 --latency-ms 100

Speaks POST /v1/chat/completions and GET /v1/models. Behaviour knobs are plain attributes, so a
test may change them between calls:

- ``latency_s``: fixed delay before every reply;
- ``answer(body) -> str | None``: the reply text (None -> null content, finish_reason "length");
- ``fail_first`` calls answered with ``fail_status``, plus ``Retry-After: retry_after`` when set;
- ``always_status``: every call answered with this status (e.g. 500, 400);
- ``error_message``: the error text of failed calls;
- ``slow_first`` calls delayed by a further ``slow_s`` (e.g. past the client timeout).

Every request body and its headers are recorded (``bodies``, ``headers``, arrival ``times``);
``calls`` counts them and ``max_in_flight`` is the most calls being answered at once.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], str | None]


def answer_yes(body: dict[str, Any]) -> str | None:
    return "yes"


def prompt_text(body: dict[str, Any]) -> str:
    """The text part of the (first) user message of a chat-completions body."""
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler must not block shutdown
    request_queue_size = 1024  # listen backlog: many clients connect at once
    fake: FakeChatServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so a client pool reuses connections
    disable_nagle_algorithm = True  # headers and body go out as two writes: avoid a 40 ms stall
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        fake = self.server.fake
        index = fake._enter(body, dict(self.headers))
        try:
            status, payload, headers = fake._respond(index, body)
        finally:
            fake._leave()
        self._send(status, payload, headers)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None):
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True


class FakeChatServer:
    """Chat-completions server in a background thread; a context manager."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        answer: Answer = answer_yes,
        fail_first: int = 0,
        fail_status: int = 429,
        retry_after: str | None = None,
        error_message: str | None = None,
        always_status: int | None = None,
        slow_first: int = 0,
        slow_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.latency_s = latency_s
        self.answer = answer
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.retry_after = retry_after
        self.error_message = error_message
        self.always_status = always_status
        self.slow_first = slow_first
        self.slow_s = slow_s
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # lower-cased names
        self.times: list[float] = []  # time.monotonic() at arrival of each call
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.bodies)

    def start(self) -> FakeChatServer:
        # A short poll interval makes stop() (shutdown) return in ~10 ms rather than ~0.5 s.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def _enter(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        with self._lock:
            self.bodies.append(body)
            self.headers.append({k.lower(): v for k, v in headers.items()})
            self.times.append(time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return len(self.bodies) - 1

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _respond(
        self, index: int, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        delay = self.latency_s + (self.slow_s if index < self.slow_first else 0.0)
        if delay > 0:
            time.sleep(delay)
        status = self.always_status
        if status is None and index < self.fail_first:
            status = self.fail_status
        if status is not None and status != 200:
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            message = self.error_message or f"fake error {status}"
            return status, {"error": {"message": message, "code": status}}, headers
        text = self.answer(body)
        return 200, _completion(body, text, index), {}


def _completion(body: dict[str, Any], text: str | None, index: int) -> dict[str, Any]:
    prompt_tokens = len(prompt_text(body).split())
    completion_tokens = 0 if text is None else len(text.split())
    return {
        "id": f"chatcmpl-fake-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length" if text is None else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeChatServer(latency_s=args.latency_ms / 1000.0, host=args.host, port=args.port)
    print(f"http://{args.host}:{server.port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
