"""``radspatial serve``: the agent behind an OpenAI-compatible chat-completions API.

    with make_server(port=0) as server:  # serves in a background thread
        backend = create_backend("openai-compat:agent:markers@" + server.url)

``GET /v1/models`` lists the agents; ``POST /v1/chat/completions`` answers the last user message:
its text (a bare question or a whole MIRP prompt ending in ``Q: <question>``) and exactly one
inline ``data:image/png|jpeg;base64`` image (nothing is ever fetched). ``model`` picks the agent.
The reply content is ``"1"``, ``"0"`` or ``"abstain: <reason>"``, with the agent's trace in the
extra field ``radspatial_trace``. ``stream: true`` is refused (400). Extension: a top-level
``radspatial_mask`` data URL (label PNG in the shown frame) feeds the ``mask`` localizer.

Safety: optional Bearer key on every route (constant-time compare, never logged); Content-Length
checked before the body is read (411/413); one deadline per request for its line, headers and
body (slowloris: 408 or close); text over ``MAX_TEXT_CHARS`` and images over ``max_pixels``
refused before parsing / decoding; at most ``threads`` agent calls and ``max_connections``
connections at once. Errors are OpenAI-style JSON ``{"error": {"message", "type", "code"}}``.
One log line per request (method, path, status, ms), never a body or a header.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from radspatial.agent.chat_format import (
    ApiError,
    ChatCall,
    completion,
    json_default,
    open_image,
    parse_chat,
)
from radspatial.agent.core import Agent, AgentAnswer
from radspatial.agent.types import Context

log = logging.getLogger(__name__)
THREAD_SAFE_LOCALIZERS = frozenset({"markers", "mask", "unet"})  # others get a lock each
_DRAIN_BYTES = 2**20  # unread body read before a close, so the client sees our reply, not a RST


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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    server_version, sys_version = "radspatial", ""
    server: AgentServer

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # replaced by a reader with a per-request deadline
        self._raw = _DeadlineReader(self.connection, self.server.read_timeout_s)
        self.rfile = io.BufferedReader(self._raw, 65536)

    def handle_one_request(self) -> None:
        self._raw.deadline = time.monotonic() + self.server.read_timeout_s
        self._status: int | None = None
        self._body_read, self._headers_out, self._t0 = False, {}, time.perf_counter()
        super().handle_one_request()
        if self._status is not None:
            ms = 1000 * (time.perf_counter() - self._t0)
            path = urlsplit(getattr(self, "path", "")).path[:200]  # no query string
            who, method = self.client_address[0], getattr(self, "command", None) or "-"
            log.info("%s %s %s %d %.1f ms", who, method, path, self._status, ms)

    def parse_request(self) -> bool:
        self._t0 = time.perf_counter()  # time from the request line, not from keep-alive idling
        return super().parse_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (bad request line, 414, 431, unknown method 501) as JSON."""
        self.close_connection = True
        phrase = HTTPStatus(code).phrase
        self._send_json(code, ApiError(code, message or phrase, phrase.lower()).body())

    def do_GET(self) -> None:
        try:
            self._route()
        except ApiError as exc:
            self._fail(exc)
        except Exception:
            log.exception("internal error on %s %s", self.command, urlsplit(self.path).path)
            self._fail(ApiError(500, "internal server error", "internal_error"))

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = do_GET

    def _route(self) -> None:
        self._check_auth()
        path = urlsplit(self.path).path.rstrip("/")
        routes = {"/v1/models": ("GET", self._models), "/v1/chat/completions": ("POST", self._chat)}
        if path not in routes:
            raise ApiError(404, f"no route {path or '/'}", "not_found", "not_found_error")
        method, handler = routes[path]
        if self.command != method:
            self._headers_out = {"Allow": method}
            raise ApiError(405, f"use {method} on {path}", "method_not_allowed")
        handler()

    def _check_auth(self) -> None:
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
        if int(text) > self.server.max_body_bytes:
            msg = f"body of {int(text)} bytes is over the limit of {self.server.max_body_bytes}"
            raise ApiError(413, msg, "body_too_large")
        return int(text)

    def _read_body(self) -> bytes:
        length = self._declared_length()
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            raise ApiError(408, "timed out reading the request body", "timeout") from None
        if len(data) < length:
            raise ApiError(400, "the body is shorter than Content-Length", "truncated_body")
        self._body_read = True
        self._raw.deadline = None
        self.connection.settimeout(self.server.read_timeout_s)  # for writing the reply
        return data

    def _models(self) -> None:
        self._read_body()
        card = {"object": "model", "created": self.server.created, "owned_by": "radspatial"}
        data = [{"id": model} | card for model in self.server.agents]
        self._send_json(200, {"object": "list", "data": data})

    def _chat(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # ValueError covers JSON and UTF-8 errors
            raise ApiError(400, f"the body is not valid JSON: {exc}", "invalid_json") from None
        call = parse_chat(body, list(self.server.agents), self.server.default_model)
        result = self.server.run_agent(call)
        self._send_json(200, completion(call.model, result, call.text))

    def _fail(self, exc: ApiError) -> None:
        if not self._body_read:  # keep the connection only if the unread body can be skipped
            try:
                self._read_body()
            except (ApiError, OSError):
                self.close_connection = True
        self._send_json(exc.status, exc.body())

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, default=json_default).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        headers |= getattr(self, "_headers_out", {})
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


class AgentServer(ThreadingHTTPServer):
    """A bound server: ``serve_forever()`` blocks, ``with`` serves in a background thread.

    One thread per connection (at most ``max_connections``; more get a 503), at most ``threads``
    agent calls at once; an agent whose localizer is not known to be thread-safe is locked.
    """

    daemon_threads, block_on_close = True, False  # a stalled connection must not block shutdown
    request_queue_size = 1024
    agents: dict[str, Agent]
    default_model: str
    api_key: str | None
    max_body_bytes: int
    max_pixels: int
    read_timeout_s: float
    max_connections: int

    def __init__(self, address: tuple[str, int], **config: Any) -> None:
        self.__dict__.update(config)
        self.created = int(time.time())
        self.slots = threading.BoundedSemaphore(config["threads"])
        self.guards = {m: _guard_for(a) for m, a in self.agents.items()}
        self._active, self._count_lock = 0, threading.Lock()
        self._serving = False
        self._background: threading.Thread | None = None
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}/v1"

    def serve_forever(self, poll_interval: float = 0.05) -> None:
        self._serving = True
        try:
            super().serve_forever(poll_interval)
        finally:
            self._serving = False

    def shutdown(self) -> None:
        """Stop serving, close the socket, join the background thread (idempotent)."""
        if self._serving:
            super().shutdown()
        self.server_close()
        if self._background is not None:
            self._background.join()
            self._background = None

    def __enter__(self) -> AgentServer:
        self._serving = True  # before the thread starts, so an early shutdown() still waits
        self._background = threading.Thread(target=self.serve_forever, daemon=True)
        self._background.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def run_agent(self, call: ChatCall) -> AgentAnswer:
        with self.slots:  # decoding inside the slot bounds the memory of decoded images too
            image = open_image(call.image, self.max_pixels)
            mask = (
                None if call.mask is None else open_image(call.mask, self.max_pixels, labels=True)
            )
            if mask is not None and mask.shape != image.shape[:2]:
                msg = f"label image shape {mask.shape} != image shape {image.shape[:2]}"
                raise ApiError(400, msg, "invalid_mask")
            agent, context = self.agents[call.model], Context(mask=mask)
            with self.guards[call.model]:
                try:
                    return agent.answer(image, call.text, context=context, from_prompt=True)
                except ValueError as exc:  # e.g. the mask localizer without a label image
                    raise ApiError(400, f"the agent cannot answer: {exc}", "agent_error") from None

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count_lock:
            busy = self._active >= self.max_connections
            if not busy:
                self._active += 1
        if not busy:
            super().process_request(request, client_address)  # a thread per connection
            return
        body = json.dumps(ApiError(503, "too many connections", "busy").body()).encode()
        head = f"HTTP/1.1 503 Service Unavailable\r\nContent-Length: {len(body)}\r\n"
        with contextlib.suppress(OSError):  # on the accept thread: never wait for this client
            request.settimeout(0)
            tail = "Content-Type: application/json\r\nConnection: close\r\n\r\n"
            request.sendall(f"{head}{tail}".encode() + body)
            request.shutdown(socket.SHUT_WR)
        self.close_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count_lock:
                self._active -= 1

    def shutdown_request(self, request: Any) -> None:
        """Half-close, then read a little of what the client still sends: closing a socket
        with unread data resets it, and the client could lose our reply (e.g. a 413)."""
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_WR)
            request.settimeout(0.5)
            left = _DRAIN_BYTES
            while left > 0 and (chunk := request.recv(min(left, 65536))):
                left -= len(chunk)
        self.close_request(request)


def _guard_for(agent: Agent) -> contextlib.AbstractContextManager[Any]:
    localizer = agent.localizer
    safe = getattr(localizer, "thread_safe", localizer.name in THREAD_SAFE_LOCALIZERS)
    return contextlib.nullcontext() if safe else threading.Lock()


def build_agents(
    localizers: Sequence[str] = ("markers", "mask"), *, model_dir: str | Path | None = None
) -> dict[str, Agent]:
    """``{"agent:<name>": Agent(name)}``, ``auto`` served as plain ``agent`` (the best built-in
    pipeline); ``model_dir`` goes to the ``unet`` localizer."""
    options = {"unet": {"model_dir": model_dir}} if model_dir is not None else {}
    return {
        "agent" if name == "auto" else f"agent:{name}": Agent(name, **options.get(name, {}))
        for name in localizers
    }


def make_server(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    agents: dict[str, Agent] | None = None,
    default_model: str = "agent:markers",
    max_body_bytes: int = 20 * 2**20,
    max_pixels: int = 4096 * 4096,
    threads: int = 32,
    read_timeout_s: float = 30.0,
    max_connections: int | None = None,
) -> AgentServer:
    """Bind now (port 0: a free port), serve later. ``agents`` defaults to markers + mask;
    ``max_connections`` to ``4 * threads``."""
    agents = build_agents() if agents is None else dict(agents)
    if default_model not in agents:
        raise ValueError(f"default model {default_model!r} is not one of {', '.join(agents)}")
    if min(threads, max_body_bytes, max_pixels, read_timeout_s) <= 0:
        raise ValueError("threads, max_body_bytes, max_pixels and read_timeout_s must be > 0")
    return AgentServer(
        (host, port),
        agents=agents,
        default_model=default_model,
        api_key=api_key or None,
        max_body_bytes=max_body_bytes,
        max_pixels=max_pixels,
        threads=threads,
        read_timeout_s=read_timeout_s,
        max_connections=max_connections or 4 * threads,
    )


def serve(
    *,
    localizers: Sequence[str] | None = None,
    model_dir: str | Path | None = None,
    **kwargs: Any,
) -> None:
    """Serve until Ctrl-C: one agent per name in ``localizers``, else agent (auto), markers and
    mask (+ unet with ``model_dir``). Other keywords go to :func:`make_server`."""
    names = list(localizers or ["auto", "markers", "mask"] + ["unet"] * (model_dir is not None))
    agents = build_agents(names, model_dir=model_dir)
    kwargs.setdefault("default_model", next(iter(agents)))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    server = make_server(agents=agents, **kwargs)
    auth = "API key required" if kwargs.get("api_key") else "no API key"
    print(f"radspatial: serving {', '.join(agents)} at {server.url} ({auth})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("radspatial: stopped", flush=True)
    finally:
        server.shutdown()
