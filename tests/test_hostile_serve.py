"""Hostile requests to ``radspatial serve`` (issue 24): one table row per request body, its
status and the words of its error; control characters in request lines never reach the log
raw. A real server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import socket
import time

import httpx
import pytest

from radspatial.agent.server.server import build_agents, make_server

_PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x00\x00\x00\x00:~"
    b"\x9bU\x00\x00\x00\nIDATx\x9cc\xf8\x0f\x00\x01\x01\x01\x00\x18\xdd\x8d\xb0\x00\x00\x00\x00"
    b"IEND\xaeB`\x82"
)


def _body(**extra) -> dict:
    import base64

    url = "data:image/png;base64," + base64.b64encode(_PNG).decode()
    parts = [
        {"type": "text", "text": "Is 1 left of 2?"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    return {"messages": [{"role": "user", "content": parts}], **extra}


@pytest.fixture(scope="module")
def server():
    with make_server(agents=build_agents(("markers",)), default_model="agent:markers") as srv:
        yield srv


# (name, extra body fields, status, words of the error message); 200 rows are accepted
ROWS = [
    ("n=3", {"n": 3}, 400, ("'n' must be 1",)),
    ("n a string", {"n": "1"}, 400, ("'n'",)),
    ("temperature hot", {"temperature": "hot"}, 400, ("'temperature'",)),
    ("temperature NaN-like", {"temperature": 1e308 * 10}, 400, ("'temperature'",)),
    ("max_tokens -1", {"max_tokens": -1}, 400, ("'max_tokens'",)),
    ("max_tokens true", {"max_tokens": True}, 400, ("'max_tokens'",)),
    ("top_p 5", {"top_p": 5}, 400, ("'top_p'",)),
    ("stream the string false", {"stream": "false"}, 400, ("'stream' must be true or false",)),
    ("stream false", {"stream": False}, 200, ()),
    ("n=1 temperature 0 max_tokens 8", {"n": 1, "temperature": 0, "max_tokens": 8}, 200, ()),
]


@pytest.mark.parametrize("name, extra, status, words", ROWS, ids=[r[0] for r in ROWS])
def test_hostile_request_fields(server, name, extra, status, words) -> None:
    content = json.dumps(_body(**extra), allow_nan=True).encode()
    r = httpx.post(f"{server.url}/chat/completions", content=content, timeout=120)
    assert r.status_code == status, r.text
    if status != 200:
        message = r.json()["error"]["message"]
        assert all(w in message for w in words), message


def test_control_characters_in_request_lines_are_escaped_in_the_log(server, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="radspatial.agent.server.server")
    evil = (
        b"GET /v1/\x1b[2J\x1b]0;pwned\x07x\xe2\x80\xae HTTP/1.1\r\n"
        b"Host: x\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=120) as s:
        s.sendall(evil)
        assert s.recv(65536).startswith(b"HTTP/1.1 ")  # answered (404), then logged
    deadline = time.monotonic() + 120  # the line is logged just after the reply is sent
    while "/v1/" not in (logged := "\n".join(r.getMessage() for r in caplog.records)):
        assert time.monotonic() < deadline, logged
        time.sleep(0.05)
    assert "\x1b" not in logged and "\x07" not in logged and "\u202e" not in logged
    assert "\\x1b" in logged
