"""The OpenAI-compatible HTTP backends against a real local server (tests/fake_server.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from fake_server import FakeChatServer, prompt_text
from PIL import Image

from radspatial.models import Decoding, Reply, Request, create_backend, list_backends
from radspatial.models.openai_client import RetryPolicy, parse_completion, parse_retry_after
from radspatial.models.openai_compat import parse_compat_spec

SECRET = "sk-test-SECRET-0123456789"
FAST_RETRY = {"backoff_base_s": 0.001, "backoff_cap_s": 0.01}
WAIT_S = 120.0  # how long a wait may take on a loaded machine before the test gives up


def png(value: int = 0) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (8, 8), color=value).save(buf, format="PNG")
    return buf.getvalue()


def requests(n: int, *, image: bool = True) -> list[Request]:
    return [
        Request(key=f"k{i}", prompt=f"q{i}", image_png=png(i) if image else None) for i in range(n)
    ]


def run(backend, reqs: list[Request]) -> dict[str, Reply]:
    got: list[tuple[Request, Reply]] = []
    backend.generate(reqs, lambda req, reply: got.append((req, reply)))
    keys = [req.key for req, _ in got]
    assert sorted(keys) == sorted(r.key for r in reqs), "on_reply must run once per request"
    return {req.key: reply for req, reply in got}


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_happy_path_sends_image_and_decoding() -> None:
    decoding = Decoding(temperature=0.5, max_tokens=7, top_p=0.9, seed=3)
    with FakeChatServer(answer=lambda body: f"echo {prompt_text(body)}") as server:
        backend = create_backend(f"openai-compat:qwen2-vl@{server.base_url}", decoding=decoding)
        reqs = requests(3) + [Request(key="t", prompt="text only", image_png=None)]
        replies = run(backend, reqs)
    assert {k: r.text for k, r in replies.items()} == {
        "k0": "echo q0",
        "k1": "echo q1",
        "k2": "echo q2",
        "t": "echo text only",
    }
    assert all(r.error is None and r.meta["attempts"] == 1 for r in replies.values())
    assert replies["k0"].meta["finish_reason"] == "stop"
    assert replies["k0"].meta["usage"]["total_tokens"] >= 1
    by_prompt = {prompt_text(b): b for b in server.bodies}
    body = by_prompt["q1"]
    assert body["model"] == "qwen2-vl"
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["seed"]) == (
        0.5,
        7,
        0.9,
        3,
    )
    text_part, image_part = body["messages"][0]["content"]
    assert text_part == {"type": "text", "text": "q1"}
    url = image_part["image_url"]["url"]
    assert image_part["type"] == "image_url" and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png(1)
    assert by_prompt["text only"]["messages"][0]["content"] == [
        {"type": "text", "text": "text only"}
    ]
    assert "authorization" not in server.headers[0]


def test_replies_match_requests_whatever_the_completion_order() -> None:
    delivered = {f"k{i}": threading.Event() for i in range(9)}
    delivered["k8"].set()

    def last_first(body: dict) -> str:
        i = int(prompt_text(body)[1:])
        # the first request submitted finishes last: each reply waits for the next one's
        assert delivered[f"k{i + 1}"].wait(WAIT_S), f"reply k{i + 1} never delivered"
        return f"a{i}"

    order: list[str] = []
    threads: set[int] = set()

    def on_reply(req: Request, reply: Reply) -> None:
        assert reply.text == f"a{req.key[1:]}"
        order.append(req.key)
        threads.add(threading.get_ident())
        delivered[req.key].set()

    with FakeChatServer(answer=last_first) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", concurrency=8)
        backend.generate(requests(8), on_reply)
    assert sorted(order) == sorted(f"k{i}" for i in range(8)) and len(order) == 8
    assert order == [f"k{i}" for i in range(7, -1, -1)]
    assert len(threads) == 1  # always the event-loop thread


@pytest.mark.parametrize("concurrency", [4, 20])  # 20 spans two pooled clients (16 + 4)
def test_concurrency_is_bounded(concurrency: int) -> None:
    full = threading.Event()  # set once `concurrency` calls were in flight together

    def after_all_slots_filled(body: dict) -> str:
        deadline = time.monotonic() + WAIT_S
        while not full.is_set():
            if server.in_flight >= concurrency:
                time.sleep(0.1)  # (one more call would arrive now if the bound were broken)
                full.set()
            assert time.monotonic() < deadline, f"only {server.in_flight} calls at once"
            time.sleep(0.005)
        return "yes"

    with FakeChatServer(answer=after_all_slots_filled) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", concurrency=concurrency)
        replies = run(backend, requests(3 * concurrency))
    assert server.calls == 3 * concurrency and all(r.text == "yes" for r in replies.values())
    assert server.max_in_flight == concurrency  # every slot used at once, never more


def test_no_requests_no_calls() -> None:
    with FakeChatServer() as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}")
        assert run(backend, []) == {}
    assert server.calls == 0


def test_describe_lists_settings() -> None:
    backend = create_backend(
        "openai-compat:qwen2-vl@http://127.0.0.1:9/v1",
        concurrency=5,
        timeout_s=30.0,
        max_attempts=2,
        backoff_base_s=0.5,
    )
    assert backend.describe() == {
        "spec": "openai-compat:qwen2-vl@http://127.0.0.1:9/v1",
        "backend": "openai-compat",
        "model": "qwen2-vl",
        "base_url": "http://127.0.0.1:9/v1",
        "concurrency": 5,
        "decoding": Decoding().to_json(),
        "retries": {"max_attempts": 2, "base_s": 0.5, "cap_s": 60.0},
        "timeout_s": 30.0,
        "timeout_per": "call",
        "max_reply_bytes": 8 * 2**20,
    }


def test_429_retry_after_is_honoured() -> None:
    with FakeChatServer(fail_first=1, fail_status=429, retry_after="1") as server:
        # Jittered backoff alone would wait <= 1 ms here; only Retry-After explains a 1 s gap.
        backend = create_backend(
            f"openai-compat:m@{server.base_url}", backoff_base_s=0.001, backoff_cap_s=5.0
        )
        reply = run(backend, requests(1))["k0"]
    assert reply.text == "yes" and reply.meta["attempts"] == 2
    waited = server.times[1] - server.times[0]
    assert waited >= 0.95
    # latency = the successful attempt only, not the second waited before it
    assert reply.latency_s + 0.95 <= reply.meta["total_s"]


def test_500_then_success() -> None:
    with FakeChatServer(fail_first=2, fail_status=500) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", **FAST_RETRY)
        reply = run(backend, requests(1))["k0"]
    assert reply.text == "yes" and reply.error is None
    assert reply.meta["attempts"] == 3 and server.calls == 3


def test_persistent_500_gives_error_replies_not_exceptions() -> None:
    with FakeChatServer(always_status=500) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", max_attempts=3, **FAST_RETRY)
        replies = run(backend, requests(2))
    for reply in replies.values():
        assert reply.text is None and reply.error == "HTTP 500 after 3 attempts"
        assert reply.meta["status"] == 500 and reply.meta["attempts"] == 3
    assert server.calls == 6


def test_400_is_not_retried() -> None:
    with FakeChatServer(always_status=400) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", **FAST_RETRY)
        reply = run(backend, requests(1))["k0"]
    assert server.calls == 1 and reply.text is None
    assert reply.error.startswith("HTTP 400: ") and reply.error.endswith("after 1 attempt")


def test_timeout_is_retried_then_error() -> None:
    release = threading.Event()  # the server answers nothing until the client has given up
    with FakeChatServer(answer=lambda body: release.wait(WAIT_S) and "late") as server:
        backend = create_backend(
            f"openai-compat:m@{server.base_url}", timeout_s=0.2, max_attempts=2, **FAST_RETRY
        )
        try:
            reply = run(backend, requests(1))["k0"]
            assert server.calls == 2
        finally:
            release.set()
    assert reply.text is None
    assert reply.error == "Timeout (no whole reply within 0.2 s) after 2 attempts"
    assert reply.latency_s == pytest.approx(reply.meta["total_s"])


def test_timeout_then_success() -> None:
    release = threading.Event()

    def first_never(body: dict) -> str:
        if server.calls == 1:  # the first call: no reply until the client has given up on it
            release.wait(WAIT_S)
        return "yes"

    # 3 s: generous for a local reply on a loaded machine; the first call never makes it
    with FakeChatServer(answer=first_never) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", timeout_s=3.0, **FAST_RETRY)
        try:
            reply = run(backend, requests(1))["k0"]
        finally:
            release.set()
    assert reply.text == "yes" and reply.meta["attempts"] == 2


def test_connection_refused_is_retried_then_error() -> None:
    with socket.socket() as sock:  # a port held by us, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        backend = create_backend(
            f"openai-compat:m@http://127.0.0.1:{port}/v1", max_attempts=2, **FAST_RETRY
        )
        reply = run(backend, requests(1))["k0"]
    assert reply.text is None and reply.error == "ConnectError after 2 attempts"


def test_api_key_sent_but_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    leaky = f"Incorrect API key provided: {SECRET}"  # real servers do echo the key back
    with FakeChatServer(fail_first=1, fail_status=401, error_message=leaky) as server:
        backend = create_backend(  # openai-compat sends a key only when asked (issue 11)
            f"openai-compat:m@{server.base_url}", api_key_env="OPENAI_API_KEY", **FAST_RETRY
        )
        replies = run(backend, requests(2))
    assert {h["authorization"] for h in server.headers} == {f"Bearer {SECRET}"}
    errors = [r.error for r in replies.values() if r.error]
    assert len(errors) == 1 and errors[0].startswith("HTTP 401: ") and "***" in errors[0]
    shown = json.dumps(backend.describe()) + repr(backend) + str(replies)
    assert SECRET not in shown
    assert backend.describe()["base_url"] == server.base_url


def test_api_key_env_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_VLLM_KEY", SECRET)
    with FakeChatServer() as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", api_key_env="MY_VLLM_KEY")
        run(backend, requests(1))
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in json.dumps(backend.describe())


def test_openai_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        create_backend("openai:gpt-4o")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = create_backend("openai:gpt-4o", concurrency=3)
    description = backend.describe()
    assert description["base_url"] == "https://api.openai.com/v1"
    assert description["model"] == "gpt-4o" and description["concurrency"] == 3
    assert description["spec"] == "openai:gpt-4o" and description["backend"] == "openai"
    assert description["retries"] == RetryPolicy().to_json()
    assert SECRET not in json.dumps(description)


def test_both_http_backends_take_one_option_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """openai: and openai-compat: declare the same options (http_factory); only the key
    variable's default differs, and the options reach the client."""
    import inspect

    from radspatial.models.openai_compat import create_openai, create_openai_compat
    from radspatial.models.options import backend_contract

    assert [o.key for o in backend_contract("openai")[0]] == [
        o.key for o in backend_contract("openai-compat")[0]
    ]
    defaults = [inspect.signature(f).parameters["api_key_env"].default
                for f in (create_openai, create_openai_compat)]  # fmt: skip
    assert defaults == ["OPENAI_API_KEY", None]
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    backend = create_backend("openai:gpt-4o", max_attempts=3, backoff_cap_s=5.0, timeout_s=7.0)
    description = backend.describe()
    assert description["retries"] == RetryPolicy(3, cap_s=5.0).to_json()
    assert description["timeout_s"] == 7.0


@pytest.mark.parametrize(
    "spec",
    ["openai-compat:model", "openai-compat:", "openai-compat:@http://127.0.0.1:1/v1", "openai:"],
)
def test_bad_specs_raise_clear_errors(spec: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        create_backend(spec)


def test_spec_parsing() -> None:
    assert parse_compat_spec("llava:7b@http://127.0.0.1:11434/v1/") == (
        "llava:7b",
        "http://127.0.0.1:11434/v1",
    )
    assert parse_compat_spec("Qwen/Qwen2-VL-7B@https://h.example/v1")[0] == "Qwen/Qwen2-VL-7B"
    assert {"openai", "openai-compat"} <= set(list_backends())


def test_content_parts_and_null_content() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": [{"type": "text", "text": "Ye"}, {"type": "text", "text": "s"}]
                }
            }
        ]
    }
    assert parse_completion(body)[0] == "Yes"
    with FakeChatServer(answer=lambda body: None) as server:
        reply = run(create_backend(f"openai-compat:m@{server.base_url}"), requests(1))["k0"]
    assert reply.text == "" and reply.error is None and reply.meta["finish_reason"] == "length"


@pytest.mark.parametrize("body", [[], "x", {}, {"choices": []}, {"choices": [{"message": "x"}]}])
def test_malformed_completions_raise_value_error(body: object) -> None:
    with pytest.raises(ValueError, match="choices"):
        parse_completion(body)


def test_parse_retry_after() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    now = 1445412480.0 - 5  # five seconds before that date
    assert parse_retry_after(httpx.Headers({"Retry-After": date}), now=now) == pytest.approx(5.0)
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


def test_generate_works_inside_a_running_loop() -> None:
    with FakeChatServer() as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}")

        async def notebook_cell() -> dict[str, Reply]:
            return run(backend, requests(2))

        replies = asyncio.run(notebook_cell())
    assert all(r.text == "yes" for r in replies.values())


def test_models_endpoint() -> None:
    with FakeChatServer() as server:
        data = httpx.get(f"{server.base_url}/models", timeout=WAIT_S).json()
    assert data["data"][0]["id"] == "fake"


def test_import_does_not_load_httpx() -> None:
    code = "import sys, radspatial, radspatial.models; assert 'httpx' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_interrupt_inside_a_call_reaches_the_caller_and_asyncio_prints_nothing(caplog) -> None:
    """SIGTERM (Terminated) or Ctrl-C landing while a call's task runs ends that task with the
    interrupt; it must reach the caller once, not also as asyncio's "Task exception was never
    retrieved" traceback (seen on stderr after `eval` was stopped)."""
    import gc

    from radspatial.core.executor import Terminated

    with FakeChatServer(latency_s=0.05) as server:
        backend = create_backend(f"openai-compat:m@{server.base_url}", concurrency=2)
        calls, plain = [], backend._one

        async def one(slots, request):
            calls.append(request.key)
            if len(calls) == 2:
                raise Terminated  # as the SIGTERM handler raises it, inside a task's step
            return await plain(slots, request)

        backend._one = one
        with caplog.at_level("ERROR", logger="asyncio"), pytest.raises(Terminated):
            backend.generate(requests(4), lambda req, reply: None)
        gc.collect()
    assert "never retrieved" not in caplog.text
