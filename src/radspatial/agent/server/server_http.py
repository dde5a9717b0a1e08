"""HTTP request handling of ``radspatial serve`` (see ``server.py`` for what it guarantees):
request line and headers under a short deadline, auth before a connection counts as working,
bodies within the server's budget, routes, OpenAI-style JSON errors, one log line a request.
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import re
import socket
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from radspatial.agent.server.chat_format import (
    ApiError,
    ChatCall,
    completion,
    completion_chunks,
    json_default,
    parse_chat,
    sse_body,
)
from radspatial.core.textsafe import log_text

if TYPE_CHECKING:
    from radspatial.agent.server.server_limits import Budget, Connections, ServerLimits


class Served(Protocol):
    """What a request handler reads of its server (``agent/server/server.AgentServer``)."""

    limits: ServerLimits
    connections: Connections
    body_budget: Budget
    api_key: str | None
    created: int
    agents: dict[str, Any]
    default_model: str

    def run_agent(self, call: ChatCall) -> Any: ...


log = logging.getLogger("radspatial.agent.server.server")  # one logger for the whole server
_METHOD_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n")  # what a request line starts with


class _DeadlineReader(io.RawIOBase):
    """Socket reads sharing one deadline, so a request cannot be dribbled in forever."""

    def __init__(self, sock: socket.socket, idle_s: float) -> None:
        self.sock, self.idle_s, self.deadline = sock, idle_s, None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.idle_s if self.deadline is None else self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request read deadline passed")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


def _oracle_card(agent: Any) -> dict[str, Any]:
    """What a client must know of an oracle model (it reads the truth, not the image): served
    only when named (``--localizer mask``), answering only with a ``radspatial_mask``."""
    if getattr(agent.localizer, "name", "") != "mask":
        return {}
    return {"radspatial_oracle": True, "radspatial_requires": ["radspatial_mask"]}


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    default_request_version = "HTTP/1.0"  # errors before the version is read get a status line
    disable_nagle_algorithm = True
    server_version, sys_version = "radspatial", ""
    server: Served  # type: ignore[assignment]  # an AgentServer

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # replaced by a reader with a per-request deadline
        self._raw = _DeadlineReader(self.connection, self.server.limits.read_timeout_s)
        self.rfile = io.BufferedReader(self._raw, 65536)

    def handle_one_request(self) -> None:
        """One request; the header deadline also bounds an idle keep-alive connection."""
        srv = self.server
        self._status: int | None = None
        self._body_read, self._working, self._held, self._expects = False, False, 0, False
        self._headers_out, self._t0 = {}, time.perf_counter()
        self.command, self.path, self.requestline = None, "", ""
        self.request_version = self.default_request_version
        if not srv.connections.waiting(self.connection):  # evicted while idle
            self.close_connection = True
            return
        limits = srv.limits
        self._raw.deadline = time.monotonic() + min(limits.header_timeout_s, limits.read_timeout_s)
        try:
            self._one_request()
        except OSError:  # a deadline passed (TimeoutError) or the client went away
            self.close_connection = True
        finally:
            srv.body_budget.give(self._held)
        if self._status is not None:
            ms = 1000 * (time.perf_counter() - self._t0)
            path = log_text(urlsplit(self.path or "").path[:200])  # no query, no ESC
            who, method = self.client_address[0], log_text(self.command or "-")
            log.info("%s %s %s %d %.1f ms", who, method, path, self._status, ms)

    def _one_request(self) -> None:
        first = self.rfile.peek(1)[:1]
        if not first:  # the client closed, or we evicted it
            self.close_connection = True
            return
        if first[0] not in _METHOD_START:  # e.g. a TLS handshake: no need to wait for a newline
            self.send_error(400, "not an HTTP request")
            return
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = getattr(self, f"do_{self.command}", None)
        if handler is None:
            self.send_error(501, f"unsupported method {self.command[:20]!r}")
            return
        handler()
        self.wfile.flush()

    def parse_request(self) -> bool:
        self._t0 = time.perf_counter()  # time from the request line, not from keep-alive idling
        words = self.raw_requestline.split()
        if len(words) != 3 or not words[2].startswith(b"HTTP/") or not words[0].isalpha():
            self.send_error(400, "malformed request line; expected 'METHOD /path HTTP/1.1'")
            return False
        if not super().parse_request():
            return False
        self._raw.deadline = time.monotonic() + self.server.limits.read_timeout_s  # for the body
        return True

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: the 100 is sent only once the body is wanted (after auth),
        so an unauthenticated client never sends its body at all."""
        self._expects = True
        return True

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def log_message(self, format: str, *args: Any) -> None:
        safe = [log_text(a) if isinstance(a, str) else a for a in args]
        log.debug("%s " + format, self.client_address[0], *safe)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (bad request line, 414, 431, 505) and ours, as JSON."""
        self.close_connection = True
        phrase = HTTPStatus(code).phrase
        code_name = re.sub(r"\W+", "_", phrase.lower())
        self._send_json(code, ApiError(code, message or phrase, code_name).body())

    def do_GET(self) -> None:
        try:
            self._route()
        except ApiError as exc:
            self._fail(exc)
        except Exception:
            where = log_text(urlsplit(self.path).path[:200])
            log.exception("internal error on %s %s", log_text(self.command or "-"), where)
            self._fail(ApiError(500, "internal server error", "internal_error"))

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def _route(self) -> None:
        self._check_auth()
        if not self.server.connections.working(self.connection):  # evicted meanwhile
            self.close_connection = True
            return
        self._working = True
        path = urlsplit(self.path).path.rstrip("/")
        routes = {"/v1/models": ("GET", self._models), "/v1/chat/completions": ("POST", self._chat)}
        if path not in routes:
            raise ApiError(404, f"no route {path or '/'}", "not_found", "not_found_error")
        method, handler = routes[path]
        allowed = (method, "HEAD") if method == "GET" else (method,)
        if self.command not in allowed:
            self._headers_out = {"Allow": ", ".join(allowed)}
            raise ApiError(405, f"use {method} on {path}", "method_not_allowed")
        handler()

    def _check_auth(self) -> None:
        if len(self.headers.get_all("Authorization") or []) > 1:
            msg = "the request has several Authorization headers; send one"
            raise ApiError(400, msg, "duplicate_authorization")
        key = self.server.api_key
        if key is None:
            return
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        token_ok = hmac.compare_digest(token.strip().encode("latin-1", "replace"), key.encode())
        if not (token_ok and scheme.lower() == "bearer"):
            self._headers_out = {"WWW-Authenticate": "Bearer"}
            msg = "missing or wrong API key (send 'Authorization: Bearer <key>')"
            raise ApiError(401, msg, "invalid_api_key", "authentication_error")

    def _declared_length(self) -> int:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raise ApiError(411, "chunked bodies are not accepted; send Content-Length", "length")
        values = set(self.headers.get_all("Content-Length") or [])
        if not values:
            if self.command in ("POST", "PUT", "PATCH"):
                raise ApiError(411, "Content-Length is required", "length_required")
            return 0
        text = values.pop().strip()
        if values or not (text.isascii() and text.isdigit()):
            raise ApiError(400, "invalid Content-Length header", "invalid_content_length")
        most = self.server.limits.max_body_bytes
        if int(text) > most:
            msg = f"body of {int(text)} bytes is over the limit of {most}"
            raise ApiError(413, msg, "body_too_large")
        return int(text)

    def _read_body(self, *, keep: bool = True) -> bytes:
        """The body (``keep``: held within the server's body budget), or skipped unread."""
        length = self._declared_length()
        if keep and length:
            if not self.server.body_budget.take(length, self.server.limits.queue_timeout_s):
                raise ApiError(503, "the server is busy receiving other requests", "busy")
            self._held = length
        try:
            if self._expects and length:
                self._expects = False
                self.send_response_only(HTTPStatus.CONTINUE)
                self.end_headers()
            if keep:
                data = self.rfile.read(length)
                short = len(data) < length
            else:  # skipped in chunks, never held whole
                data, left = b"", length
                while left > 0 and (chunk := self.rfile.read(min(left, 65536))):
                    left -= len(chunk)
                short = left > 0
        except TimeoutError:
            raise ApiError(408, "timed out reading the request body", "timeout") from None
        if short:
            raise ApiError(400, "the body is shorter than Content-Length", "truncated_body")
        self._body_read = True
        self._raw.deadline = None
        self.connection.settimeout(self.server.limits.read_timeout_s)  # for writing the reply
        return data

    def _models(self) -> None:
        self._read_body(keep=False)
        card = {"object": "model", "created": self.server.created, "owned_by": "radspatial"}
        data = [{"id": m} | card | _oracle_card(a) for m, a in self.server.agents.items()]
        self._send_json(200, {"object": "list", "data": data})

    def _chat(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # ValueError covers JSON and UTF-8 errors
            raise ApiError(400, f"the body is not valid JSON: {exc}", "invalid_json") from None
        del raw
        call = parse_chat(body, list(self.server.agents), self.server.default_model)
        del body
        result = self.server.run_agent(call)
        if call.stream:  # whole events, so a Content-Length and keep-alive as for JSON
            chunks = completion_chunks(
                call.model, result, call.text, include_usage=call.include_usage
            )
            self._send(200, sse_body(chunks), "text/event-stream", {"Cache-Control": "no-cache"})
            return
        self._send_json(200, completion(call.model, result, call.text))

    def _fail(self, exc: ApiError) -> None:
        if exc.status == 503:
            self._headers_out = {"Retry-After": "1"}
        if not self._body_read:  # keep the connection only if the unread body can be skipped
            has_body = self.headers.get("Content-Length", "0").strip() != "0"
            if self._expects or (
                not self._working and (has_body or "Transfer-Encoding" in self.headers)
            ):  # never read an unauthenticated body, nor ask for one only to skip it
                self.close_connection = True
            else:
                try:
                    self._read_body(keep=False)
                except (ApiError, OSError):
                    self.close_connection = True
        self._send_json(exc.status, exc.body())

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        self._send(status, json.dumps(payload, default=json_default).encode(), "application/json")

    def _send(
        self, status: int, data: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        headers = {"Content-Type": content_type, "Content-Length": str(len(data))}
        headers |= getattr(self, "_headers_out", {}) | (extra or {})
        if self.close_connection:
            headers["Connection"] = "close"
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:  # the client went away
            self.close_connection = True
