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

from radspatial.agent.core import Agent, AgentAnswer
from radspatial.agent.server import AgentServer, build_agents, make_server
from radspatial.agent.types import Context, Found
from radspatial.cli import bundled_example
from radspatial.dataset import build_dataset
from radspatial.generate import GenerateConfig
from radspatial.items import EvalItem, load_items
from radspatial.models import Reply, Request, create_backend
from radspatial.prompts import MIRP
from radspatial.scoring import parse_answer
from radspatial.volumes import Case

KEY = "sk-agent-SECRET-0123456789"


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ct, seg = bundled_example()
    out = tmp_path_factory.mktemp("agent_server") / "data"
    config = GenerateConfig(
        seed=1, size=512, as_count=4, setups=("rq2", "rq3", "as"), export_masks=True
    )
    case = Case("example_ct_sm", ct, seg, "totalsegmentator")
    build_dataset([case], config, out, log=lambda message: None)
    return out


@pytest.fixture(scope="module")
def items(dataset: Path) -> list[EvalItem]:
    return load_items(dataset)


@pytest.fixture(scope="module")
def server() -> Iterator[AgentServer]:
    with make_server(agents=build_agents(("markers", "mask"))) as srv:
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
    return httpx.post(f"{server.url}/chat/completions", content=content, timeout=30, **kwargs)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["message"]
    return error


def raw(server: AgentServer, data: bytes, *, timeout: float = 10.0) -> tuple[int, bytes]:
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
    response = httpx.get(f"{server.url}/models")
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


def test_long_texts_are_bounded_before_parsing(server: AgentServer, items: list[EvalItem]) -> None:
    item = next(i for i in items if i.setup == "rq2" and i.marker == "dots")
    image = data_url(item.image.read_bytes())
    padded = f"Q: {item.question}" + " " * 1_000_000 + "\t\n A"  # whitespace runs: collapsed
    t0 = time.perf_counter()
    reply = post(server, chat(padded, image))
    assert reply.status_code == 200 and time.perf_counter() - t0 < 5
    assert reply.json()["choices"][0]["message"]["content"] == str(item.expected)
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
    caplog.set_level(logging.DEBUG, logger="radspatial.agent.server")
    item = next(i for i in items if i.marker == "dots" and i.setup == "rq3")
    body = chat(item.question, data_url(item.image.read_bytes()))
    with make_server(api_key=KEY, agents=build_agents(("markers",))) as server:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            error = error_of(httpx.get(f"{server.url}/models", headers=headers), 401)
            assert error["type"] == "authentication_error" and KEY not in error["message"]
            error_of(post(server, body, headers=headers), 401)
            error_of(httpx.get(f"{server.url}/nowhere", headers=headers), 401)
        good = {"Authorization": f"Bearer {KEY}"}
        assert httpx.get(f"{server.url}/models", headers=good).status_code == 200
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
    with make_server(max_body_bytes=64 * 1024, agents=build_agents(("markers",))) as server:
        request = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        t0 = time.perf_counter()
        status, body = raw(server, request)  # no body is sent: the reply must not wait for one
        assert status == 413 and time.perf_counter() - t0 < 2
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


def test_image_bomb_is_refused_before_decoding(server: AgentServer) -> None:
    bomb = huge_png()
    assert len(bomb) < 200_000
    t0 = time.perf_counter()
    error = error_of(post(server, chat("Is the red dot above the blue dot?", data_url(bomb))), 400)
    assert error["code"] == "image_too_large" and time.perf_counter() - t0 < 5


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
    "stream": (chat("q", PNG_URL, stream=True), "stream"),
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
    assert error_of(httpx.get(f"{server.url}/nowhere"), 404)["code"] == "not_found"
    assert error_of(httpx.post(f"{server.url[:-3]}/chat/completions", json={}), 404)
    response = httpx.get(f"{server.url}/chat/completions")
    assert error_of(response, 405)["code"] == "method_not_allowed"
    assert response.headers["allow"] == "POST"
    assert httpx.post(f"{server.url}/models", json={}).headers["allow"] == "GET"
    error_of(httpx.delete(f"{server.url}/models"), 405)
    status, body = raw(server, b"BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 501 and json.loads(body)["error"]["message"]
    status, body = raw(server, b"GET /a b HTTP/1.1\r\n\r\n")
    assert status == 400 and json.loads(body)["error"]


def test_slow_clients_are_cut_off() -> None:
    with make_server(read_timeout_s=1.0, agents=build_agents(("markers",))) as server:
        port, closed_after = server.server_address[1], None
        with socket.create_connection(("127.0.0.1", port), timeout=0.1) as s:  # slow headers
            t0 = time.perf_counter()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            for i in range(50):  # one header line every 0.1 s, until the server hangs up
                try:
                    s.sendall(f"X-Drip-{i}: y\r\n".encode())
                    if s.recv(1024) == b"":
                        closed_after = time.perf_counter() - t0
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed_after = time.perf_counter() - t0
                    break
        assert closed_after is not None and 0.8 < closed_after < 3
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        t0 = time.perf_counter()
        status, body = raw(server, request)  # slow body: 408 after the deadline
        assert status == 408 and 0.8 < time.perf_counter() - t0 < 4
        assert json.loads(body)["error"]["code"] == "timeout"
        assert httpx.get(f"{server.url}/models").status_code == 200  # still serving


# --------------------------------------------------------------------------------- concurrency


def test_connections_over_the_cap_get_503() -> None:
    with make_server(max_connections=2, agents=build_agents(("markers",))) as server:
        address = ("127.0.0.1", server.server_address[1])
        idle = [socket.create_connection(address) for _ in range(2)]
        try:
            time.sleep(0.2)  # both accepted, each holding a thread
            status, body = raw(server, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == 503 and json.loads(body)["error"]["code"] == "busy"
        finally:
            for s in idle:
                s.close()
        time.sleep(0.2)
        assert httpx.get(f"{server.url}/models").status_code == 200


class SlowAgent(Agent):
    """The real agent after a fixed delay, counting the calls in flight."""

    def __init__(self, delay_s: float) -> None:
        super().__init__("markers")
        self.delay_s, self.in_flight, self.max_in_flight = delay_s, 0, 0
        self._lock = threading.Lock()

    def answer(self, image: Any, question: str, **kwargs: Any) -> AgentAnswer:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.delay_s)
        with self._lock:
            self.in_flight -= 1
        return super().answer(image, question, **kwargs)


def test_fifty_parallel_requests_are_correct_and_concurrent(items: list[EvalItem]) -> None:
    # dots and letters: the markers localizer reads them fastest, so the delay dominates
    chosen = [i for i in items if i.setup != "as" and i.marker != "numbers"][::2][:50]
    assert len(chosen) == 50
    delay = 0.5
    agent = SlowAgent(delay)
    with make_server(agents={"agent:slow": agent}, default_model="agent:slow") as server:
        t0 = time.perf_counter()
        replies = run_backend(f"openai-compat:agent:slow@{server.url}", mirp_requests(chosen), 50)
        wall = time.perf_counter() - t0
    assert all(r.error is None and r.meta["attempts"] == 1 for r in replies.values())
    assert [parse_answer(replies[i.id].text) for i in chosen] == [i.expected for i in chosen]
    assert 16 <= agent.max_in_flight <= 32  # served in parallel, bounded by threads=32
    assert wall < 50 * delay / 3, f"{wall:.1f} s for 50 requests of {delay} s each"


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
