"""``radspatial serve`` over real HTTP on 127.0.0.1: our own client backend, the MIRP prompt,
auth, limits (body, image bombs, slowloris), routes, errors and parallel serving."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from radspatial.agent.pipeline.agent import Agent, AgentAnswer
from radspatial.agent.pipeline.types import Context, Found
from radspatial.agent.server.chat_format import MAX_TEXT_CHARS
from radspatial.agent.server.server import AgentServer, build_agents, make_server
from radspatial.eval.items import EvalItem, load_items
from radspatial.eval.prompts import MIRP
from radspatial.eval.scoring import parse_answer
from radspatial.models import Reply, Request, create_backend

KEY = "sk-agent-SECRET-0123456789"


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shared_datasets import example_512

    return example_512(tmp_path_factory)  # the bundled CT, 512 px, label images exported


@pytest.fixture(scope="module")
def items(dataset: Path) -> list[EvalItem]:
    return [i for i in load_items(dataset) if i.setup in ("rq2", "rq3", "as")]  # with markers


@pytest.fixture(scope="module")
def server() -> Iterator[AgentServer]:
    with make_server(agents=build_agents(("markers", "mask"))) as srv:
        yield srv


@pytest.fixture(scope="module")
def patient_server() -> Iterator[AgentServer]:
    """Deadlines of an hour: a reply that waited for one would hang the test, not pass it."""
    with make_server(
        agents=build_agents(("markers",)), header_timeout_s=3600.0, read_timeout_s=3600.0
    ) as srv:
        yield srv


def some(items: list[EvalItem], per_group: int) -> list[EvalItem]:
    """``per_group`` items of every (setup, marker)."""
    groups: dict[tuple[str, str], list[EvalItem]] = {}
    for item in items:
        groups.setdefault((item.setup, item.marker), []).append(item)
    return [i for group in groups.values() for i in group[:per_group]]


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def chat(text: str, image: str | None, **extra: Any) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if image is not None:
        parts.append({"type": "image_url", "image_url": {"url": image}})
    return {"messages": [{"role": "user", "content": parts}], **extra}


def post(server: AgentServer, body: Any, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{server.url}/chat/completions", content=content, timeout=WAIT_S, **kwargs)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["message"]
    return error


WAIT_S = 120.0  # how long a wait may take on a loaded machine before the test gives up


def raw(server: AgentServer, data: bytes, *, timeout: float = WAIT_S) -> tuple[int, bytes]:
    """Send raw bytes, read until the server closes; (status, body)."""
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def run_backend(
    spec: str, reqs: list[Request], concurrency: int = 8, **opts: Any
) -> dict[str, Reply]:
    got: dict[str, Reply] = {}
    backend = create_backend(spec, concurrency=concurrency, max_attempts=1, **opts)
    backend.generate(reqs, lambda req, reply: got.__setitem__(req.key, reply))
    return got


def mirp_requests(items: list[EvalItem]) -> list[Request]:
    return [Request(i.id, MIRP.render(i), i.image.read_bytes()) for i in items]


def huge_png(width: int = 20_000, height: int = 20_000) -> bytes:
    """A valid 1-bit PNG declaring width x height px (400 Mpx) in about 50 kB."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    packer, row = zlib.compressobj(9), bytes(1 + (width + 7) // 8)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    signature = b"\x89PNG\r\n\x1a\n"
    return signature + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


# ------------------------------------------------------------------------------- the happy path


def test_models_lists_every_agent(server: AgentServer) -> None:
    response = httpx.get(f"{server.url}/models", timeout=WAIT_S)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["agent:markers", "agent:mask"]
    assert all(m["object"] == "model" and m["owned_by"] == "radspatial" for m in body["data"])


def test_our_client_backend_gets_correct_answers_from_mirp_prompts(
    server: AgentServer, items: list[EvalItem]
) -> None:
    chosen = some(items, 2)  # every setup x marker, AS blanks included
    replies = run_backend(f"openai-compat:agent:markers@{server.url}", mirp_requests(chosen))
    for item in chosen:
        reply = replies[item.id]
        assert reply.error is None, reply.error
        assert MIRP.render(item).endswith(f"Q: {item.question}")
        assert parse_answer(reply.text) == item.expected, (item.id, reply.text)
        assert reply.meta["finish_reason"] == "stop" and reply.meta["usage"]["total_tokens"] > 0


def test_reply_format_bare_question_and_trace(server: AgentServer, items: list[EvalItem]) -> None:
    item = next(i for i in items if i.setup == "rq2" and i.marker == "letters")
    image = data_url(item.image.read_bytes())
    body = {  # image part first, the bare question as a plain string part, no model: the default
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": [{"type": "image_url", "image_url": image}]},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": image}},
                    {"type": "text", "text": item.question},
                ],
            },
        ]
    }
    reply = post(server, body)
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    assert out["model"] == "agent:markers" and isinstance(out["created"], int)
    choice = out["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": str(item.expected)}
    assert choice["finish_reason"] == "stop"
    assert out["usage"]["total_tokens"] == sum(
        out["usage"][k] for k in ("prompt_tokens", "completion_tokens")
    )
    trace = out["radspatial_trace"]
    assert trace["localizer"] == "markers" and trace["image_size"] == [512, 512]
    assert trace["parsed"]["relation"] == item.relation
    assert trace["decision"]["answer"] == item.expected


def test_unparseable_question_abstains(server: AgentServer, items: list[EvalItem]) -> None:
    reply = post(server, chat("What colour is the sky?", data_url(items[0].image.read_bytes())))
    assert reply.status_code == 200
    text = reply.json()["choices"][0]["message"]["content"]
    assert text.startswith("abstain: ") and parse_answer(text) is None


def test_long_texts_are_bounded_before_parsing(
    server: AgentServer, items: list[EvalItem], monkeypatch: pytest.MonkeyPatch
) -> None:
    item = next(i for i in items if i.setup == "rq2" and i.marker == "dots")
    image = data_url(item.image.read_bytes())
    padded = f"Q: {item.question}" + " " * 1_000_000 + "\t\n A"  # whitespace runs: collapsed
    agent, seen = server.agents["agent:markers"], []
    answer = agent.answer
    monkeypatch.setattr(agent, "answer", lambda im, q, **kw: seen.append(q) or answer(im, q, **kw))
    reply = post(server, chat(padded, image))
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == str(item.expected)
    assert len(seen) == 1 and len(seen[0]) <= MAX_TEXT_CHARS  # the parser got the collapsed text
    error = error_of(post(server, chat("Is the aorta above " + "x" * 20_000 + "?", image)), 400)
    assert error["code"] == "text_too_long"


def test_jpeg_images_are_accepted(server: AgentServer, items: list[EvalItem]) -> None:
    item = next(i for i in items if i.marker == "numbers")
    buf = io.BytesIO()
    Image.open(item.image).convert("RGB").save(buf, format="JPEG", quality=95)
    reply = post(server, chat(item.question, data_url(buf.getvalue(), "image/jpeg")))
    assert reply.status_code == 200, reply.text
    assert reply.json()["radspatial_trace"]["parsed"]["relation"] == item.relation


def test_mask_agent_uses_the_label_image_extension(
    server: AgentServer, items: list[EvalItem]
) -> None:
    chosen = [i for i in some(items, 3) if i.setup != "as"]
    for item in chosen:
        mask = data_url(Path(item.extra["mask"]).read_bytes())
        image = data_url(item.image.read_bytes())
        reply = post(
            server, chat(MIRP.render(item), image, model="agent:mask", radspatial_mask=mask)
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == str(item.expected), item.id
    error = error_of(post(server, chat(item.question, image, model="agent:mask")), 400)
    assert error["code"] == "agent_error" and "label image" in error["message"]


# ---------------------------------------------------------------------------------------- auth


def test_api_key_required_on_every_route(
    items: list[EvalItem], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="radspatial.agent.server.server")
    item = next(i for i in items if i.marker == "dots" and i.setup == "rq3")
    body = chat(item.question, data_url(item.image.read_bytes()))
    with make_server(api_key=KEY, agents=build_agents(("markers",))) as server:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            models = httpx.get(f"{server.url}/models", headers=headers, timeout=WAIT_S)
            error = error_of(models, 401)
            assert error["type"] == "authentication_error" and KEY not in error["message"]
            error_of(post(server, body, headers=headers), 401)
            error_of(httpx.get(f"{server.url}/nowhere", headers=headers, timeout=WAIT_S), 401)
        good = {"Authorization": f"Bearer {KEY}"}
        assert httpx.get(f"{server.url}/models", headers=good, timeout=WAIT_S).status_code == 200
        assert post(server, body, headers=good).json()["choices"][0]["message"]["content"] == (
            str(item.expected)
        )
        spec = f"openai-compat:agent:markers@{server.url}"
        assert run_backend(spec, mirp_requests([item]))[item.id].error.startswith("HTTP 401")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)  # not sent implicitly to openai-compat
        assert run_backend(spec, mirp_requests([item]))[item.id].error.startswith("HTTP 401")
        keyed = run_backend(spec, mirp_requests([item]), api_key_env="OPENAI_API_KEY")
        assert parse_answer(keyed[item.id].text) == item.expected
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert KEY not in logged and "wrong" not in logged
    assert "POST /v1/chat/completions 401" in logged and "GET /v1/models 200" in logged


# ---------------------------------------------------------------------------- limits and errors


def test_body_limit_is_checked_before_reading() -> None:
    limits = {"max_body_bytes": 64 * 1024, "read_timeout_s": 3600.0}  # a wait would hang
    with make_server(**limits, agents=build_agents(("markers",))) as server:
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        status, body = raw(server, request)  # no body is sent: waiting for one would end in 408
        assert status == 413
        assert json.loads(body)["error"]["code"] == "body_too_large"
        error = error_of(post(server, b"x" * 100_000), 413)  # a real client sending it all
        assert "over the limit" in error["message"]


@pytest.mark.parametrize(
    ("header", "status"),
    [(b"", 411), (b"Content-Length: abc\r\n", 400), (b"Content-Length: -5\r\n", 400),
     (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400),
     (b"Transfer-Encoding: chunked\r\n", 411)],
)  # fmt: skip
def test_bad_content_length(server: AgentServer, header: bytes, status: int) -> None:
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n"
    got, body = raw(server, request)
    assert got == status and json.loads(body)["error"]["message"]


def test_image_bomb_is_refused_before_decoding(
    server: AgentServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import radspatial.agent.server.server as server_module

    bomb = huge_png()
    assert len(bomb) < 200_000
    decoded: list[object] = []
    decode = server_module.decode_image
    spy = lambda *a, **k: decoded.append(a) or decode(*a, **k)  # noqa: E731
    monkeypatch.setattr(server_module, "decode_image", spy)
    error = error_of(post(server, chat("Is the red dot above the blue dot?", data_url(bomb))), 400)
    assert error["code"] == "image_too_large" and decoded == []  # the header was enough


def test_max_pixels_is_configurable(items: list[EvalItem]) -> None:
    with make_server(max_pixels=256 * 256, agents=build_agents(("markers",))) as server:
        image = data_url(items[0].image.read_bytes())
        error = error_of(post(server, chat(items[0].question, image)), 400)
        assert error["code"] == "image_too_large" and "512 x 512" in error["message"]


def _gif() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="GIF")
    return buf.getvalue()


PNG_URL = data_url(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)  # a PNG signature, then garbage
BAD_BODIES = {
    "malformed JSON": (b'{"messages": [', "invalid_json"),
    "not UTF-8": (b"\xff\xfe\xfa", "invalid_json"),
    "JSON array": ([1, 2], "invalid_body"),
    "no messages": ({"model": "agent:markers"}, "invalid_messages"),
    "messages not a list": ({"messages": "hi"}, "invalid_messages"),
    "no user message": ({"messages": [{"role": "system", "content": "x"}]}, "invalid_messages"),
    "content not text": ({"messages": [{"role": "user", "content": 5}]}, "content"),
    "no image": (chat("Is the red dot above the blue dot?", None), "image_count"),
    "two images": (
        {
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": PNG_URL}] * 2}
            ]
        },
        "image_count",
    ),
    "unknown part": ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}, "content"),
    "http image": (chat("q", "http://example.com/a.png"), "image_url_not_supported"),
    "https image": (chat("q", "HTTPS://example.com/a.png"), "image_url_not_supported"),
    "file url": (chat("q", "file:///etc/passwd"), "invalid_image_url"),
    "bad base64": (chat("q", "data:image/png;base64,@@@@"), "invalid_image"),
    "not an image": (chat("q", data_url(b"hello world")), "invalid_image"),
    "truncated PNG": (chat("q", PNG_URL), "invalid_image"),
    "GIF": (chat("q", data_url(_gif(), "image/png")), "invalid_image"),
    "GIF mime": (chat("q", data_url(_gif(), "image/gif")), "invalid_image_url"),
    "model not a string": (chat("q", PNG_URL, model=3), "invalid_model"),
    "mask not a string": (chat("q", PNG_URL, radspatial_mask=1), "invalid_mask"),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_requests_are_400_json(server: AgentServer, case: str) -> None:
    body, code = BAD_BODIES[case]
    assert error_of(post(server, body), 400)["code"] == code


def test_unknown_model_is_404_listing_the_models(server: AgentServer) -> None:
    error = error_of(post(server, chat("q", PNG_URL, model="gpt-4o")), 404)
    assert error["code"] == "model_not_found"
    assert "agent:markers" in error["message"] and "agent:mask" in error["message"]


def test_routes_and_methods(server: AgentServer) -> None:
    assert error_of(httpx.get(f"{server.url}/nowhere", timeout=WAIT_S), 404)["code"] == "not_found"
    assert error_of(httpx.post(f"{server.url[:-3]}/chat/completions", json={}, timeout=WAIT_S), 404)
    response = httpx.get(f"{server.url}/chat/completions", timeout=WAIT_S)
    assert error_of(response, 405)["code"] == "method_not_allowed"
    assert response.headers["allow"] == "POST"
    response = httpx.post(f"{server.url}/models", json={}, timeout=WAIT_S)
    assert response.headers["allow"] == "GET, HEAD"
    error_of(httpx.delete(f"{server.url}/models", timeout=WAIT_S), 405)
    head = httpx.head(f"{server.url}/models", timeout=WAIT_S)
    get = httpx.get(f"{server.url}/models", timeout=WAIT_S)
    assert head.status_code == 200 and head.content == b""  # HEAD works where GET does
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))
    assert head.headers["content-type"] == "application/json"
    assert httpx.head(f"{server.url}/chat/completions", timeout=WAIT_S).status_code == 405
    assert httpx.head(f"{server.url}/nowhere", timeout=WAIT_S).status_code == 404
    status, body = raw(server, b"BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 501 and json.loads(body)["error"]["message"]
    status, body = raw(server, b"GET /a b HTTP/1.1\r\n\r\n")
    assert status == 400 and json.loads(body)["error"]


def test_slow_clients_are_cut_off() -> None:
    """Cut off at the deadline, never before it; how long after it depends on the machine."""
    with make_server(read_timeout_s=1.0, agents=build_agents(("markers",))) as server:
        port, closed_after = server.server_address[1], None
        with socket.create_connection(("127.0.0.1", port), timeout=0.1) as s:  # slow headers
            t0 = time.perf_counter()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            i = 0
            while time.perf_counter() - t0 < WAIT_S:  # a header line every 0.1 s until cut off
                try:
                    s.sendall(f"X-Drip-{i}: y\r\n".encode())
                    i += 1
                    if s.recv(1024) == b"":
                        closed_after = time.perf_counter() - t0
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed_after = time.perf_counter() - t0
                    break
        assert closed_after is not None and closed_after > 0.8
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        t0 = time.perf_counter()
        status, body = raw(server, request)  # slow body: 408 after the deadline
        assert status == 408 and time.perf_counter() - t0 > 0.8
        assert json.loads(body)["error"]["code"] == "timeout"
        assert httpx.get(f"{server.url}/models", timeout=WAIT_S).status_code == 200  # still serving


# --------------------------------------------------------------------------------- concurrency


class GatedAgent(Agent):
    """The real agent, held at a gate until the test opens it, counting the calls in flight."""

    def __init__(self) -> None:
        super().__init__("markers")
        self.in_flight, self.max_in_flight = 0, 0
        self.gate = threading.Event()
        self._lock = threading.Lock()

    def answer(self, image: Any, question: str, **kwargs: Any) -> AgentAnswer:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        opened = self.gate.wait(WAIT_S)
        with self._lock:
            self.in_flight -= 1
        assert opened, "the test never opened the gate"
        return super().answer(image, question, **kwargs)

    def wait_in_flight(self, n: int) -> None:
        """Until ``n`` calls wait at the gate (the test fails after ``WAIT_S``)."""
        deadline = time.monotonic() + WAIT_S
        while self.in_flight < n:
            assert time.monotonic() < deadline, f"{self.in_flight} of {n} calls arrived"
            time.sleep(0.01)


def test_fifty_parallel_requests_are_correct_and_concurrent(items: list[EvalItem]) -> None:
    # dots and letters: the markers localizer reads them fastest
    chosen = [i for i in items if i.setup != "as" and i.marker != "numbers"][::2][:50]
    assert len(chosen) == 50
    agent = GatedAgent()
    got: dict[str, Reply] = {}
    with make_server(agents={"agent:slow": agent}, default_model="agent:slow") as server:
        client = threading.Thread(
            target=lambda: got.update(
                run_backend(f"openai-compat:agent:slow@{server.url}", mirp_requests(chosen), 50)
            )
        )
        client.start()
        try:
            agent.wait_in_flight(32)  # 32 calls at once: served in parallel ...
            time.sleep(0.2)  # (a 33rd would arrive now if the bound were broken)
            assert agent.max_in_flight == 32  # ... bounded by threads=32
        finally:
            agent.gate.set()
            client.join()
    assert all(r.error is None and r.meta["attempts"] == 1 for r in got.values())
    assert [parse_answer(got[i.id].text) for i in chosen] == [i.expected for i in chosen]


class CountingLocalizer:
    """Not thread-safe by declaration: the server must never call it twice at once."""

    name = "counting"
    thread_safe = False

    def __init__(self) -> None:
        self.in_flight = self.max_in_flight = 0

    def locate(self, image: np.ndarray, refs: Any, context: Context) -> list[Found | None]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(0.02)
        self.in_flight -= 1
        return [Found((10.0, 10.0), 1.0, "t"), Found((10.0, 90.0), 1.0, "t")]


def test_thread_unsafe_localizers_are_serialized(items: list[EvalItem]) -> None:
    localizer = CountingLocalizer()
    agents = {"agent:counting": Agent(localizer)}
    item = next(i for i in items if i.setup == "rq2" and i.relation in ("above", "below"))
    with make_server(agents=agents, default_model="agent:counting") as server:
        replies = run_backend(
            f"openai-compat:agent:counting@{server.url}",
            [Request(f"k{n}", item.question, item.image.read_bytes()) for n in range(12)],
            12,
        )
    assert {r.text for r in replies.values()} == {"1" if item.relation == "above" else "0"}
    assert localizer.max_in_flight == 1


# ------------------------------------------------------------------ denial of service (issue 11)


def one_bit_png(width: int, height: int) -> bytes:
    """A blank 1-bit PNG: a few kB that decode to width x height RGB pixels."""
    buf = io.BytesIO()
    Image.new("1", (width, height)).save(buf, format="PNG")
    return buf.getvalue()


def slow_sockets(server: AgentServer, count: int) -> list[socket.socket]:
    """``count`` connections that send a request line and one header, and never finish."""
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=WAIT_S)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    return socks


def wait_until(condition: Any, what: str = "the condition") -> None:
    """Poll ``condition()`` until true; fail after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} not met after {WAIT_S} s"
        time.sleep(0.02)


def closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slow_sockets_cannot_lock_out_an_authenticated_client(items: list[EvalItem]) -> None:
    item = next(i for i in items if i.marker == "dots" and i.setup == "rq3")
    body = chat(item.question, data_url(item.image.read_bytes()))
    good = {"Authorization": f"Bearer {KEY}"}
    with make_server(api_key=KEY, agents=build_agents(("markers",))) as server:
        assert server.limits.max_connections == 128  # 4 x 32 threads
        socks = slow_sockets(server, 130)  # more than the cap, none authenticated
        try:
            wait_until(lambda: closed_by_server(socks[0]) and closed_by_server(socks[1]))
            for _ in range(3):  # fresh connections, as a new client would make
                reply = post(server, body, headers=good)
                assert reply.status_code == 200, reply.text
                assert reply.json()["choices"][0]["message"]["content"] == str(item.expected)
                models = httpx.get(f"{server.url}/models", headers=good, timeout=WAIT_S)
                assert models.status_code == 200
            # unauthenticated complete requests are answered, and never count as working
            error_of(post(server, body, headers={"Authorization": "Bearer nope"}), 401)
            evicted = [closed_by_server(s) for s in socks]
            assert evicted[:2] == [True, True] and sum(evicted) >= 2  # the oldest went first
            assert len(server.connections) <= server.limits.max_connections
        finally:
            for s in socks:
                s.close()


def test_unauthenticated_bodies_are_never_read() -> None:
    patient = {"read_timeout_s": 3600.0}  # waiting for the body would hang, not end in 408
    with make_server(api_key=KEY, agents=build_agents(("markers",)), **patient) as server:
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
            b"Content-Length: 10000000\r\n\r\n"
        )
        status, body = raw(server, request)  # no body follows: a 401 without waiting for it
        assert status == 401
        assert json.loads(body)["error"]["code"] == "invalid_api_key"
        expect = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        body = b'{"messages": []}'
        length = b"Content-Length: %d\r\n" % len(body)
        status, _ = raw(server, expect + b"Authorization: Bearer nope\r\n" + length + b"\r\n")
        assert status == 401  # the final answer at once: no 100 Continue asking for the body
        port = server.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as s:
            s.sendall(expect + f"Authorization: Bearer {KEY}\r\n".encode() + length + b"\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(body)
            reply = b""
            while b'"}}' not in reply and (chunk := s.recv(65536)):
                reply += chunk
        assert reply.split(b"\r\n")[0] == b"HTTP/1.1 400 Bad Request"  # after auth: read
        assert b'"invalid_messages"' in reply
    with make_server(agents=build_agents(("markers",))) as server:  # GET with a body: skipped
        request = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=WAIT_S) as s:
            s.sendall(request + b"x" * 100_000 + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while got.count(b"HTTP/1.1 200 OK") < 2 and (chunk := s.recv(65536)):
                got += chunk
        assert got.count(b"HTTP/1.1 200 OK") == 2  # both answered on one connection


def test_idle_connections_make_room_working_ones_get_503(items: list[EvalItem]) -> None:
    agent = GatedAgent()
    item = next(i for i in items if i.marker == "dots" and i.setup == "rq3")
    body = chat(item.question, data_url(item.image.read_bytes()))
    agents = {"agent:slow": agent}
    with make_server(max_connections=2, agents=agents, default_model="agent:slow") as server:
        address = ("127.0.0.1", server.server_address[1])
        idle = [socket.create_connection(address) for _ in range(2)]
        wait_until(lambda: len(server.connections) == 2, "both idle connections accepted")
        assert httpx.get(f"{server.url}/models", timeout=WAIT_S).status_code == 200  # oldest goes
        assert closed_by_server(idle[0]) and not closed_by_server(idle[1])
        for s in idle:
            s.close()
        wait_until(lambda: len(server.connections) == 0, "the closed connections gone")
        statuses: list[int] = []
        working = [
            threading.Thread(target=lambda: statuses.append(post(server, body).status_code))
            for _ in range(2)
        ]
        for t in working:
            t.start()
        try:
            agent.wait_in_flight(2)  # both inside the agent: nothing to evict
            status, payload = raw(server, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        finally:
            agent.gate.set()
            for t in working:
                t.join()
        assert status == 503 and json.loads(payload)["error"]["code"] == "busy"
        assert statuses == [200, 200]
        assert httpx.get(f"{server.url}/models", timeout=WAIT_S).status_code == 200


class PixelCountingAgent(Agent):
    """The real agent, recording the decoded pixels held by the calls in flight; each call
    waits at ``wait`` (a barrier, or an event the test sets)."""

    def __init__(self, wait: threading.Barrier | threading.Event) -> None:
        super().__init__("markers")
        self.wait, self.pixels, self.max_pixels, self.max_calls, self.calls = wait, 0, 0, 0, 0
        self._lock = threading.Lock()

    def answer(self, image: Any, question: str, **kwargs: Any) -> AgentAnswer:
        with self._lock:
            self.pixels += image.shape[0] * image.shape[1]
            self.calls += 1
            self.max_pixels, self.max_calls = (
                max(self.max_pixels, self.pixels),
                max(self.max_calls, self.calls),
            )
        passed = self.wait.wait(WAIT_S)
        time.sleep(0.05)  # (a call over the budget would show up now)
        with self._lock:
            self.pixels -= image.shape[0] * image.shape[1]
            self.calls -= 1
        assert passed is not False, "the test never opened the gate"
        return super().answer(image, question, **kwargs)


def test_decoded_pixels_stay_within_the_budget() -> None:
    side = 1024
    body = chat("Is the red dot above the blue dot?", data_url(one_bit_png(side, side)))
    agent = PixelCountingAgent(threading.Barrier(2))  # calls go through in pairs: 2 at once
    agents = {"agent:count": agent}
    with make_server(
        agents=agents, default_model="agent:count", max_total_pixels=2 * side * side
    ) as server:
        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(post(server, body).status_code))
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [200] * 8  # all served, two at a time
        assert agent.max_pixels == 2 * side * side and agent.max_calls == 2
        assert server.pixels.peak == 2 * side * side and server.pixels.used == 0
        # a request that cannot fit the budget at all is refused before decoding
        mask = data_url(one_bit_png(side, side))
        too_much = chat("q", data_url(one_bit_png(side, side + 1)), radspatial_mask=mask)
        assert error_of(post(server, too_much), 400)["code"] in ("image_too_large", "invalid_mask")


def test_waiting_for_the_budget_is_bounded() -> None:
    side = 1024
    body = chat("Is the red dot above the blue dot?", data_url(one_bit_png(side, side)))
    agent = PixelCountingAgent(threading.Event())  # the first call holds the budget until set
    with make_server(
        agents={"agent:count": agent},
        default_model="agent:count",
        max_total_pixels=side * side,
        queue_timeout_s=0.5,
    ) as server:
        replies: list[httpx.Response] = []
        threads = [
            threading.Thread(target=lambda: replies.append(post(server, body))) for _ in range(3)
        ]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(replies) == 2, "two callers turned away")
        finally:
            agent.wait.set()
            for t in threads:
                t.join()
    assert sorted(r.status_code for r in replies) == [200, 503, 503]
    for reply in replies:
        if reply.status_code == 503:
            assert error_of(reply, 503)["code"] == "busy" and reply.headers["retry-after"] == "1"
    assert agent.max_calls == 1


@pytest.mark.parametrize(
    "line",
    [b"hello\r\n\r\n", b"GET /\r\n\r\n", b"GET /v1/models HTTP/1.1 extra\r\n\r\n", b"\r\n\r\n",
     b"\x00\xff\xfe garbage\r\n\r\n", b"GET /v1/models FOO/1.1\r\n\r\n",
     b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40)],  # a TLS hello: no newline
)  # fmt: skip
def test_garbage_request_lines_get_400(patient_server: AgentServer, line: bytes) -> None:
    # the server's header deadline is an hour: a 400 at all means it answered at once
    address = ("127.0.0.1", patient_server.server_address[1])
    with socket.create_connection(address, timeout=WAIT_S) as s:
        s.sendall(line)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), got[:100]  # a status line, even for HTTP/0.9
    assert b"Content-Type: application/json" in head and b"Connection: close" in head
    assert json.loads(body)["error"]["code"] == "bad_request"


def test_cli_api_key_from_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from radspatial.cli import main

    monkeypatch.delenv("RS_TEST_KEY", raising=False)
    assert main(["serve", "--api-key-env", "RS_TEST_KEY", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "RS_TEST_KEY" in err and "not set" in err
    with pytest.raises(SystemExit):
        main(["serve", "--api-key", "x", "--api-key-env", "RS_TEST_KEY"])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_worst_case_images_stay_within_a_bounded_rss() -> None:
    """``radspatial serve`` in its own process (key from --api-key-env): 16 concurrent 1-bit
    2048^2 PNGs (~60 MB of decoding each) with a budget of two at a time."""
    import os
    import re
    import subprocess
    import sys

    side = 2048
    env = os.environ | {"RS_TEST_KEY": KEY}
    code = "import sys; from radspatial.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "serve", "--port", "0", "--localizer", "markers",
           "--api-key-env", "RS_TEST_KEY", "--max-total-pixels", str(2 * side * side)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        line = proc.stdout.readline()
        assert "API key required" in line and KEY not in " ".join(cmd), line
        url = re.search(r"(http://\S+/v1)", line).group(1)
        body = json.dumps(
            chat("Is the red dot above the blue dot?", data_url(one_bit_png(side, side)))
        )
        good = {"Authorization": f"Bearer {KEY}"}

        def rss_kb(field: str) -> int:
            text = Path(f"/proc/{proc.pid}/status").read_text()
            return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1))

        small = chat("Is the red dot above the blue dot?", data_url(one_bit_png(64, 64)))
        first = httpx.post(f"{url}/chat/completions", json=small, headers=good, timeout=WAIT_S)
        assert first.status_code == 200
        base = rss_kb("VmRSS")
        statuses: list[int] = []

        def one() -> None:
            reply = httpx.post(f"{url}/chat/completions", content=body, headers=good, timeout=600)
            statuses.append(reply.status_code)

        threads = [threading.Thread(target=one) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        grown_mb = (rss_kb("VmHWM") - base) / 1024
    finally:
        proc.terminate()
        proc.wait(60)
    assert statuses == [200] * 16
    assert grown_mb < 300, f"peak RSS grew by {grown_mb:.0f} MB"  # 16 at once: 689 MB
