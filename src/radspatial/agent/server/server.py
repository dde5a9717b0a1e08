"""``radspatial serve``: the agent behind an OpenAI-compatible chat-completions API.

    with make_server(port=0) as server:  # serves in a background thread
        backend = create_backend("openai-compat:agent:markers@" + server.url)

``GET /v1/models`` lists the agents; ``POST /v1/chat/completions`` answers the last user message:
its text (a bare question or a whole MIRP prompt ending in ``Q: <question>``) and exactly one
inline ``data:image/png|jpeg;base64`` image (nothing is ever fetched). ``model`` picks the agent.
The reply content is ``"1"``, ``"0"`` or ``"abstain: <reason>"``, with the agent's trace in the
extra field ``radspatial_trace``. ``stream: true`` answers the same reply as server-sent events
(``chat.completion.chunk`` objects, then ``data: [DONE]``; ``stream_options.include_usage``
adds the usage chunk). Extension: a top-level ``radspatial_mask`` data URL (label PNG in the
shown frame) feeds the ``mask`` localizer, an oracle served only when named and listed as such.

Safety: optional Bearer key on every route (constant-time compare, never logged), checked before
the body is read or a connection counts as working; Content-Length checked before the body is
read (411/413); a short deadline for the request line and headers (``header_timeout_s``, then
close) and one for the body (``read_timeout_s``, then 408); text over ``MAX_TEXT_CHARS`` and
images over ``max_pixels`` refused before parsing / decoding. Shared budgets, waited for in
arrival order (503 with Retry-After after ``queue_timeout_s``): ``max_total_pixels`` decoded
pixels and ``max_total_body_bytes`` of bodies in flight, ``threads`` agent calls. At most
``max_connections`` connections: when full, the one waiting longest for its request (slow or
unauthenticated headers, idle keep-alive) is closed to let a newcomer in; 503 only when all
are working. A request line that is not ``METHOD /path HTTP/x.y`` gets a 400; ``HEAD`` works
where ``GET`` does. Errors are OpenAI-style JSON ``{"error": {"message", "type", "code"}}``.
One log line per request (method, path, status, ms), never a body or a header.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from radspatial.agent.pipeline.agent import Agent, AgentAnswer
from radspatial.agent.pipeline.types import Context
from radspatial.agent.server.chat_format import ApiError, ChatCall, decode_image, probe_image
from radspatial.agent.server.server_http import RequestHandler
from radspatial.agent.server.server_limits import (
    Budget,
    Connections,
    ServerLimits,
    return_freed_buffers,
)

log = logging.getLogger(__name__)
_DRAIN_BYTES, _DRAIN_S = 2**20, 1.0  # read at most this before a close, so the client sees our
# reply, not a reset


class AgentServer(ThreadingHTTPServer):
    """A bound server: ``serve_forever()`` blocks, ``with`` serves in a background thread.

    One thread per connection (at most ``max_connections``, see :class:`Connections`), at most
    ``threads`` agent calls and ``max_total_pixels`` decoded pixels at once; an agent whose
    localizer is not known to be thread-safe is locked.
    """

    daemon_threads, block_on_close = True, False  # a stalled connection must not block shutdown
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        *,
        agents: dict[str, Agent],
        default_model: str,
        api_key: str | None,
        limits: ServerLimits,
    ) -> None:
        self.agents, self.default_model, self.api_key = agents, default_model, api_key
        self.limits = limits = limits.resolved()
        self.created = int(time.time())
        self.slots = threading.BoundedSemaphore(limits.threads)
        self.pixels = Budget(limits.max_total_pixels)
        self.body_budget = Budget(limits.max_total_body_bytes)
        self.connections = Connections(limits.max_connections)
        self.guards = {m: _guard_for(a) for m, a in self.agents.items()}
        self._serving = False
        self._background: threading.Thread | None = None
        super().__init__(address, RequestHandler)

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
        """Sizes from the image headers, then decoded pixels from the shared budget, then a
        work slot: memory for decoded images is bounded however many requests arrive."""
        most = self.limits.max_pixels
        image = probe_image(call.image, most)
        mask = None if call.mask is None else probe_image(call.mask, most, labels=True)
        if mask is not None and mask.size != image.size:
            shapes = (mask.height, mask.width), (image.height, image.width)
            msg = "label image shape {} != image shape {}".format(*shapes)
            raise ApiError(400, msg, "invalid_mask")
        pixels = image.width * image.height + (0 if mask is None else mask.width * mask.height)
        if pixels > self.pixels.total:
            msg = f"{pixels} px of images is over the server's limit of {self.pixels.total} px"
            raise ApiError(400, msg, "image_too_large")
        with self.pixels.hold(pixels, self.limits.queue_timeout_s) as ok:
            if not ok:
                raise ApiError(503, "the server is busy decoding other images", "busy")
            with self.slots:
                decoded = decode_image(image)
                labels = None if mask is None else decode_image(mask, labels=True)
                del image, mask  # their decoded cores: only the arrays are kept
                agent, context = self.agents[call.model], Context(mask=labels)
                with self.guards[call.model]:
                    try:
                        return agent.answer(decoded, call.text, context=context, from_prompt=True)
                    except ValueError as exc:  # e.g. the mask localizer without a label image
                        msg = f"the agent cannot answer: {exc}"
                        raise ApiError(400, msg, "agent_error") from None

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.connections.admit(request):
            super().process_request(request, client_address)  # a thread per connection
            return
        body = json.dumps(ApiError(503, "too many connections", "busy").body()).encode()
        head = f"HTTP/1.1 503 Service Unavailable\r\nContent-Length: {len(body)}\r\n"
        with contextlib.suppress(OSError):  # on the accept thread: never wait for this client
            request.settimeout(0)
            tail = "Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
            request.sendall(f"{head}{tail}".encode() + body)
            request.shutdown(socket.SHUT_WR)
        self.close_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("error on a connection from %s", client_address[0])

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.remove(request)

    def shutdown_request(self, request: Any) -> None:
        """Half-close, then read a little of what the client still sends (at most 1 MiB for
        1 s): closing a socket with unread data resets it, and the client could lose our reply."""
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_WR)
            left, deadline = _DRAIN_BYTES, time.monotonic() + _DRAIN_S
            while left > 0 and (wait := deadline - time.monotonic()) > 0:
                request.settimeout(wait)
                if not (chunk := request.recv(min(left, 65536))):
                    break
                left -= len(chunk)
        self.close_request(request)


def _guard_for(agent: Agent) -> contextlib.AbstractContextManager[Any]:
    localizer = agent.localizer
    safe = getattr(localizer, "thread_safe", False) is True  # as it declares; else a lock
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
    max_body_bytes: int = ServerLimits.max_body_bytes,
    max_pixels: int | None = None,
    max_total_pixels: int | None = None,
    max_total_body_bytes: int | None = None,
    threads: int = ServerLimits.threads,
    header_timeout_s: float = ServerLimits.header_timeout_s,
    read_timeout_s: float = ServerLimits.read_timeout_s,
    queue_timeout_s: float = ServerLimits.queue_timeout_s,
    max_connections: int | None = None,
) -> AgentServer:
    """Bind now (port 0: a free port), serve later. ``agents`` defaults to markers + mask; the
    limits' defaults are :class:`ServerLimits`' (read from it, so they are stated once)."""
    agents = build_agents() if agents is None else dict(agents)
    if default_model not in agents:
        raise ValueError(f"default model {default_model!r} is not one of {', '.join(agents)}")
    limits = ServerLimits(
        max_body_bytes, max_pixels, max_total_pixels, max_total_body_bytes, threads,
        header_timeout_s, read_timeout_s, queue_timeout_s, max_connections,
    )  # fmt: skip
    return AgentServer(
        (host, port), agents=agents, default_model=default_model, api_key=api_key or None,
        limits=limits,
    )  # fmt: skip


def _warm_up(agents: dict[str, Agent]) -> None:
    """Load each localizer's network before listening (``warm_up``, where it has one): a cold
    load (importing PyTorch and MONAI) took most of a minute and a half of the first call."""
    for name, agent in agents.items():
        warm = getattr(agent.localizer, "warm_up", None)
        if callable(warm):
            t0 = time.monotonic()
            # stderr: stdout's first line stays "serving ... at URL" (scripts wait for it)
            print(f"radspatial: {name}: loading its network ...", file=sys.stderr, flush=True)
            warm()
            took = f"radspatial: {name}: loaded in {time.monotonic() - t0:.0f} s"
            print(took, file=sys.stderr, flush=True)


def serve(
    *,
    localizers: Sequence[str] | None = None,
    model_dir: str | Path | None = None,
    **kwargs: Any,
) -> None:
    """Serve until Ctrl-C: one agent per name in ``localizers``, else agent (auto) and markers
    (+ unet with ``model_dir``); the ``mask`` oracle, which needs every request's label image,
    only when named. Other keywords go to :func:`make_server`."""
    names = list(localizers or ["auto", "markers"] + ["unet"] * (model_dir is not None))
    agents = build_agents(names, model_dir=model_dir)
    kwargs.setdefault("default_model", next(iter(agents)))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    server = make_server(agents=agents, **kwargs)
    _warm_up(agents)
    return_freed_buffers()
    auth = "API key required" if kwargs.get("api_key") else "no API key"
    print(f"radspatial: serving {', '.join(agents)} at {server.url} ({auth})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("radspatial: stopped", flush=True)
    finally:
        server.shutdown()
