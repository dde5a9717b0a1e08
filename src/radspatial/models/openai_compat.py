"""Backends for OpenAI-compatible chat-completions servers (vLLM, Ollama, LM Studio, OpenAI).

Specs::

    openai-compat:<model>@<base_url>   e.g. openai-compat:qwen2-vl@http://127.0.0.1:8000/v1
    openai:<model>                     e.g. openai:gpt-4o (base URL https://api.openai.com/v1)

Requests run on one asyncio event loop with at most ``concurrency`` HTTP calls in flight, over
keep-alive connections shared by all requests (one httpx client per 16 of them). Failed calls
are retried (429, 408, 409, 5xx, timeouts, connection errors) with exponential backoff and full
jitter, honouring ``Retry-After``; an item that still fails becomes
``Reply(text=None, error=...)`` and never raises.

``Reply.latency_s`` is the duration of the successful HTTP attempt alone (time spent on failed
attempts and backoff is excluded), or, when the item failed, the total time spent on it.
``Reply.meta["total_s"]`` is always the total, retries and backoff included.

The API key is read from the environment and sent as ``Authorization: Bearer``: ``openai:`` reads
``OPENAI_API_KEY`` (or ``api_key_env=``); ``openai-compat:`` sends a key only when asked with
``api_key_env=NAME`` (``--api-key-env NAME``), never ``OPENAI_API_KEY`` implicitly, and warns on
stderr when the key would travel over plain http to a host that is not this machine. The key is
kept out of ``describe()``, ``repr`` and errors. Each retry is logged (logger
``radspatial.models.openai_compat``, shown on stderr) so a server that never answers is visible.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Annotated
from urllib.parse import urlsplit

from radspatial.models.base import Decoding, is_loopback, register_backend
from radspatial.models.openai_client import Endpoint, OpenAIChatBackend, RetryPolicy
from radspatial.models.options import Opt, at_least, positive

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_SPEC_RE = re.compile(r"^(?P<model>[^@\s]+(?:@[^@\s]+)*?)@(?P<url>https?://\S+)$")


def parse_compat_spec(rest: str) -> tuple[str, str]:
    """``"qwen2-vl@http://host:8000/v1"`` -> ``("qwen2-vl", "http://host:8000/v1")``."""
    match = _SPEC_RE.match(rest.strip())
    if not match:
        raise ValueError(
            f"bad spec 'openai-compat:{rest}': expected 'openai-compat:<model>@<base_url>', "
            "e.g. 'openai-compat:qwen2-vl@http://127.0.0.1:8000/v1'"
        )
    return match["model"], match["url"].rstrip("/")


# the options both HTTP backends take (their factories' keywords; models/options.py reads them)
Timeout = Annotated[float, Opt("timeout", "--timeout", positive)]
ConnectTimeout = Annotated[float, Opt("connect_timeout", check=positive)]
Attempts = Annotated[int, Opt("retries", "--retries", at_least(0), lambda r: r + 1)]
KeyEnv = Annotated[str, Opt(flag="--api-key-env")]
ReplyMB = Annotated[float, Opt(check=positive)]


def _key_from_env(name: str, spec: str) -> str:
    key = os.environ.get(name)
    if not key:
        raise ValueError(f"{spec}: --api-key-env {name}: the variable {name} is not set or empty")
    return key


def compat_is_remote(rest: str) -> bool:
    """``openai-compat``'s ``remote`` trait: its URL's host is not this machine (a spec that
    names no URL counts as remote: nothing says where it would go)."""
    try:
        return not is_loopback(parse_compat_spec(rest)[1])
    except ValueError:
        return True


def compat_endpoint(rest: str, api_key_env: str | None) -> Endpoint:
    """``openai-compat:<model>@<base_url>``; sends a key only from env ``api_key_env`` if given."""
    model, base_url = parse_compat_spec(rest)
    api_key = _key_from_env(api_key_env, f"openai-compat:{rest}") if api_key_env else None
    if api_key and base_url.startswith("http:") and compat_is_remote(rest):
        print(
            f"radspatial: warning: the API key from {api_key_env} will be sent unencrypted "
            f"over plain http to {urlsplit(base_url).hostname}; use https",
            file=sys.stderr,
        )
    return Endpoint(f"openai-compat:{rest.strip()}", model, base_url, api_key)


def openai_endpoint(rest: str, api_key_env: str | None) -> Endpoint:
    """``openai:<model>`` against api.openai.com; the API key (env ``api_key_env``) is required."""
    model = rest.strip()
    if not model or "@" in model:
        raise ValueError(
            f"bad spec 'openai:{rest}': expected 'openai:<model>', e.g. 'openai:gpt-4o'; "
            "for another server use 'openai-compat:<model>@<base_url>'"
        )
    key_env = api_key_env or DEFAULT_KEY_ENV
    api_key = os.environ.get(key_env)
    if not api_key:
        raise ValueError(f"openai:{model}: needs an API key: set the {key_env} variable")
    return Endpoint(f"openai:{model}", model, OPENAI_BASE_URL, api_key)


def http_factory(
    endpoint_of: Callable[[str, str | None], Endpoint], key_env: str | None
) -> Callable[..., OpenAIChatBackend]:
    """The factory of an HTTP backend whose spec ``endpoint_of(rest, api_key_env)`` reads;
    ``key_env``: the default of its ``api_key_env``. Both HTTP backends take these options.

    Options (--model-args keys in brackets): ``timeout_s`` [timeout] (read/write, default
    120), ``connect_timeout_s`` [connect_timeout] (10), ``max_attempts`` [retries + 1] (6),
    ``max_reply_mb`` (8), ``backoff_base_s`` (1), ``backoff_cap_s`` (60).
    """

    def factory(
        rest: str,
        *,
        decoding: Decoding,
        concurrency: int,
        timeout_s: Timeout = 120.0,
        connect_timeout_s: ConnectTimeout = 10.0,
        max_attempts: Attempts = RetryPolicy.max_attempts,
        api_key_env: KeyEnv | None = key_env,
        max_reply_mb: ReplyMB = 8.0,
        backoff_base_s: float = RetryPolicy.base_s,
        backoff_cap_s: float = RetryPolicy.cap_s,
    ) -> OpenAIChatBackend:
        endpoint = endpoint_of(rest, api_key_env)
        return OpenAIChatBackend(
            endpoint,
            decoding=decoding,
            concurrency=concurrency,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            retry=RetryPolicy(max_attempts, backoff_base_s, backoff_cap_s),
            max_reply_mb=max_reply_mb,
        )

    factory.__doc__ = endpoint_of.__doc__
    return factory


create_openai_compat = register_backend("openai-compat", remote=compat_is_remote)(
    http_factory(compat_endpoint, None)
)
create_openai = register_backend("openai", remote=True)(
    http_factory(openai_endpoint, DEFAULT_KEY_ENV)
)
