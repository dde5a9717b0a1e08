"""Sending chat-completions calls: one asyncio event loop, at most ``concurrency`` calls in
flight over shared keep-alive connections, retries with backoff (see
:mod:`radspatial.models.openai_compat` for the specs, keys and the behaviour in full).

Bounds: ``timeout_s`` is the whole HTTP attempt (connect, send, every read), not each read, so
a server dribbling a byte a second cannot hold a call longer; a reply body (after gzip or
deflate decoding, read as it arrives) over ``max_reply_mb`` is a failed call, so a huge or
inflating reply never lands in memory or the call log whole. Both are in ``describe()`` and so
in run.json. Connection slots are built for the calls of a batch only, never more.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import json
import logging
import random
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from radspatial.core.aio import run_async
from radspatial.core.errors import first_line
from radspatial.core.redact import redact
from radspatial.core.textsafe import log_text
from radspatial.models.base import Decoding, OnReply, Reply, Request
from radspatial.models.families import settings

RETRY_STATUSES = frozenset({408, 409, 429})  # plus every 5xx
RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
# httpcore's pool does O(connections^2) work per request: 256 requests through one client with
# 64 connections took 3.9 s against 1.0 s with 32; a few smaller clients avoid that cost.
SLOTS_PER_CLIENT = 16
# the logger keeps the old module's name: ``radspatial.models.openai_compat`` shows the retries
log = logging.getLogger("radspatial.models.openai_compat")


@dataclass(frozen=True)
class Endpoint:
    """Where calls go and as whom: the spec (its prefix names the backend), the model, the base
    URL and the API key (kept out of repr)."""

    spec: str
    model: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: wait ``uniform(0, min(cap_s, base_s * 2**n))``.

    A ``Retry-After`` (or ``retry-after-ms``) header replaces the jittered wait, capped at
    ``cap_s``. ``max_attempts`` counts the first call too.
    """

    max_attempts: int = 6
    base_s: float = 1.0
    cap_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_s < 0 or self.cap_s < 0:
            raise ValueError(f"backoff times must be >= 0, got {self.base_s}, {self.cap_s}")

    def delay(self, retry_index: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry_index`` (0 for the first retry)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.cap_s)
        return rng.uniform(0.0, min(self.cap_s, self.base_s * 2.0**retry_index))

    def to_json(self) -> dict[str, Any]:
        return {"max_attempts": self.max_attempts, "base_s": self.base_s, "cap_s": self.cap_s}


def parse_retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP-date), else None."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # HTTP-dates are GMT; a naive result means the zone was missing
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def build_payload(model: str, request: Request, decoding: Decoding) -> dict[str, Any]:
    """The JSON body of one chat-completions call (a MIRP family's settings where
    ``decoding.family`` names one: what it left unset is not sent)."""
    d = settings(decoding)
    content: list[dict[str, Any]] = [{"type": "text", "text": request.prompt}]
    if request.image_png is not None:
        b64 = base64.b64encode(request.image_png).decode("ascii")
        image: dict[str, Any] = {"url": f"data:image/png;base64,{b64}"}
        if d.detail is not None:
            image["detail"] = d.detail
        content.append({"type": "image_url", "image_url": image})
    payload: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": content}]}
    for key in ("temperature", "max_tokens", "top_p", "seed"):  # some servers reject nulls
        if (value := getattr(d, key)) is not None:
            payload[key] = value
    return payload


def parse_completion(body: Any) -> tuple[str, dict[str, Any]]:
    """Reply text and meta (finish_reason, usage) from a chat-completions response body.

    Raises ValueError for any body that is not shaped like a chat completion.
    """
    try:
        choice = body["choices"][0]
        content = choice["message"].get("content")
        finish_reason = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError("response has no choices[0].message") from exc
    if isinstance(content, list):  # list-of-parts content
        parts = [p["text"] for p in content if isinstance(p, dict) and "text" in p]
        if not all(isinstance(p, str) for p in parts):
            raise ValueError("choices[0].message.content has a text part that is not a string")
        text = "".join(parts)
    elif content is None or isinstance(content, str):
        text = content or ""
    elif isinstance(content, int | float) and not isinstance(content, bool):
        text = str(content)  # a bare number is read as its text ("1")
    else:  # a JSON object or boolean is not a reply's text: str() of it must not be scored
        raise ValueError(f"choices[0].message.content is a JSON {type(content).__name__}, not text")
    meta: dict[str, Any] = {"finish_reason": finish_reason}
    if isinstance(body.get("usage"), dict):
        meta["usage"] = body["usage"]
    return text, meta


class OpenAIChatBackend:
    """Sends each Request as one chat-completions call; see the module docstring."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        decoding: Decoding,
        concurrency: int,
        timeout_s: float,
        connect_timeout_s: float,
        retry: RetryPolicy,
        max_reply_mb: float,
    ) -> None:
        """The bounds and the retry policy are the factory's options (``openai_compat``)."""
        if concurrency < 1:
            raise ValueError(f"{endpoint.spec}: concurrency must be >= 1, got {concurrency}")
        self.spec = endpoint.spec
        self.backend = endpoint.spec.partition(":")[0]
        self.model = endpoint.model
        self.base_url = endpoint.base_url.rstrip("/")
        self.decoding = decoding
        self.concurrency = concurrency
        self.retry = retry
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_reply_bytes = int(max_reply_mb * 2**20)
        self._api_key = endpoint.api_key
        self._rng = random.Random()

    def __repr__(self) -> str:  # explicit so the key can never appear
        return f"OpenAIChatBackend(spec={self.spec!r}, concurrency={self.concurrency})"

    def describe(self) -> dict[str, Any]:
        return {
            "spec": redact(self.spec),
            "backend": self.backend,
            "model": self.model,
            "base_url": redact(self.base_url),
            "concurrency": self.concurrency,
            "decoding": self.decoding.to_json(),
            "retries": self.retry.to_json(),
            "timeout_s": self.timeout_s,
            "timeout_per": "call",
            "max_reply_bytes": self.max_reply_bytes,
        }

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        """Answer every request; ``on_reply`` runs on the event-loop thread as each finishes."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run_async(self.agenerate(requests, on_reply))
            return
        # Called from inside a running loop (e.g. Jupyter): run ours on a helper thread.
        errors: list[BaseException] = []

        def target() -> None:
            try:
                asyncio.run(self.agenerate(requests, on_reply))
            except BaseException as exc:  # re-raised in the caller's thread
                errors.append(exc)

        thread = threading.Thread(target=target, name="radspatial-openai")
        thread.start()
        thread.join()
        if errors:
            raise errors[0]

    async def agenerate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        """Async form of :meth:`generate`, for callers that already run an event loop."""
        # A window of tasks keeps memory flat for huge runs while retries sleep outside a slot.
        in_flight = max(1, min(self.concurrency, len(requests)))  # no slot nobody can use
        window = 2 * in_flight
        todo: Iterator[Request] = iter(requests)
        pending: set[asyncio.Task[tuple[Request, Reply]]] = set()
        async with contextlib.AsyncExitStack() as stack:
            slots: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
            for size in _split(in_flight, SLOTS_PER_CLIENT):
                client = await stack.enter_async_context(self._client(size))
                for _ in range(size):
                    slots.put_nowait(client)
            try:
                while True:
                    for request in todo:
                        pending.add(asyncio.create_task(self._one(slots, request)))
                        if len(pending) >= window:
                            break
                    if not pending:
                        return
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        on_reply(*task.result())
            finally:
                await _settle(pending)  # before the clients close under them

    def _client(self, connections: int) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        # the whole call is bounded by ``timeout_s`` in ``_attempt``; httpx's per-read limit
        # stays as a backstop a little above it, so the whole-call limit is what fires
        timeout = httpx.Timeout(self.timeout_s + 1.0, connect=self.connect_timeout_s, pool=None)
        # Loading the CA bundle costs ~30 ms per client; plain http needs none. A bare
        # PROTOCOL_TLS_CLIENT context still verifies, so it could never accept an https peer.
        verify = (
            True if self.base_url.startswith("https:") else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        )
        return httpx.AsyncClient(
            headers=self._headers(), limits=limits, timeout=timeout, verify=verify
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    async def _one(
        self, slots: asyncio.Queue[httpx.AsyncClient], request: Request
    ) -> tuple[Request, Reply]:
        payload = build_payload(self.model, request, self.decoding)
        start = time.perf_counter()
        for attempt in range(1, self.retry.max_attempts + 1):
            client = await slots.get()  # a slot covers the HTTP call only, not the backoff
            try:
                t0 = time.perf_counter()
                outcome = await self._attempt(client, payload)
            finally:
                slots.put_nowait(client)
            now = time.perf_counter()
            if outcome.text is not None:
                meta = {"attempts": attempt, "status": 200, **outcome.meta, "total_s": now - start}
                return request, Reply(text=outcome.text, latency_s=now - t0, meta=meta)
            if not outcome.retryable or attempt == self.retry.max_attempts:
                break
            wait = self.retry.delay(attempt - 1, outcome.retry_after, self._rng)
            log.warning(
                "%s: %s (attempt %d of %d), retrying in %.1f s",
                request.meta.get("id", request.key[:12]),
                self._redact(outcome.reason),
                attempt,
                self.retry.max_attempts,
                wait,
            )
            await asyncio.sleep(wait)
        total = time.perf_counter() - start
        error = self._redact(f"{outcome.reason} after {attempt} attempt{'s' * (attempt > 1)}")
        meta = {"attempts": attempt, "status": outcome.status, "total_s": total}
        return request, Reply(text=None, error=error, latency_s=total, meta=meta)

    async def _attempt(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> _Outcome:
        try:
            status, headers, body = await asyncio.wait_for(
                self._post(client, payload), timeout=self.timeout_s
            )
        except TimeoutError:
            return _Outcome(
                reason=f"Timeout (no whole reply within {self.timeout_s:g} s)", retryable=True
            )
        except _TooBig:
            cap = self.max_reply_bytes / 2**20
            return _Outcome(reason=f"reply body over the {cap:g} MiB cap (max_reply_mb)")
        except RETRY_ERRORS as exc:
            return _Outcome(reason=type(exc).__name__, retryable=True)
        except Exception as exc:  # e.g. an unsupported URL: retrying cannot help
            return _Outcome(reason=log_text(f"{type(exc).__name__}: {exc}"[:300]))
        if status == 200:
            try:
                text, meta = parse_completion(json.loads(body))
            except (ValueError, RecursionError) as exc:  # JSON decode errors are ValueErrors
                why = f" ({first_line(exc)})" if str(exc).startswith("choices[0]") else ""
                return _Outcome(status=status, reason=f"HTTP 200 with an unparseable body{why}")
            return _Outcome(status=status, text=text, meta=meta)
        retryable = status in RETRY_STATUSES or status >= 500
        snippet = log_text(body[:200].decode("utf-8", "replace"))  # a server's text: no escapes
        reason = f"HTTP {status}" if retryable else f"HTTP {status}: {snippet}"
        retry_after = parse_retry_after(headers)
        return _Outcome(status=status, reason=reason, retryable=retryable, retry_after=retry_after)

    async def _post(
        self, client: httpx.AsyncClient, payload: dict[str, Any]
    ) -> tuple[int, httpx.Headers, bytes]:
        """Status, headers and the decoded body, read in chunks up to ``max_reply_bytes``."""
        url = f"{self.base_url}/chat/completions"
        async with client.stream("POST", url, json=payload) as response:
            chunks, total = [], 0
            async for chunk in response.aiter_bytes():
                total += len(chunk)
                if total > self.max_reply_bytes:
                    raise _TooBig()
                chunks.append(chunk)
            return response.status_code, response.headers, b"".join(chunks)


async def _settle(tasks: set[asyncio.Task]) -> None:
    """Cancel the calls still running and wait until they have let go of their connections."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
    _retrieve(tasks)


def _retrieve(tasks: set[asyncio.Task]) -> None:
    """Take the outcome of every finished task that nobody will read: a SIGTERM or Ctrl-C that
    lands while a call's task runs ends that task with the interrupt and leaves the loop; the
    caller reports the interrupt, and asyncio must not print it again as a "Task exception was
    never retrieved" traceback when the task is collected."""
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()


class _TooBig(Exception):
    """A reply body over the cap."""


@dataclass(frozen=True)
class _Outcome:
    """One HTTP attempt: ``text`` is set on success, else ``reason`` says what went wrong."""

    status: int | None = None
    text: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    retryable: bool = False
    retry_after: float | None = None


def _split(total: int, part: int) -> list[int]:
    """``_split(40, 16) -> [16, 16, 8]``."""
    return [min(part, total - start) for start in range(0, total, part)]
