"""``radspatial serve`` as a new user starts it, read by the official ``openai`` SDK: the same
answer with ``stream=True`` (server-sent events, ``[DONE]``) as without; oracles listed only
when named, and marked (issue 25, item 7)."""

from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from served import serve_cli

if importlib.util.find_spec("openai") is None:  # imported where used: collecting stays quick
    pytest.skip("openai is not installed", allow_module_level=True)

MIRP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mirp_sample"
IMAGE = MIRP / "RQ2" / "image_numbers" / "amos_img2_slice45.png"
QUESTION = "Is the aorta (52) above the spleen (1)?"  # MIRP's own item; its answer is 1


def _serve(*args: str) -> Iterator[str]:
    """``radspatial serve --port 0 ARGS`` in a subprocess (no API key); yields its base URL."""
    with serve_cli(*args, env={"RADSPATIAL_API_KEY": None}) as (url, _):
        yield url


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    yield from _serve()


def _messages() -> list[dict]:
    data = base64.b64encode(IMAGE.read_bytes()).decode()
    parts = [
        {"type": "text", "text": QUESTION},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
    ]
    return [{"role": "user", "content": parts}]


def test_openai_sdk_streams_the_same_answer(url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    plain = client.chat.completions.create(model="agent", messages=_messages())
    chunks = list(
        client.chat.completions.create(
            model="agent",
            messages=_messages(),
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert plain.choices[0].message.content == streamed == "1"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1


def test_stream_is_server_sent_events_ending_in_done(url: str) -> None:
    body = {"model": "agent:markers", "messages": _messages(), "stream": True}
    reply = httpx.post(f"{url}/chat/completions", json=body, timeout=600)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = [e for e in reply.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    last = json.loads(events[-2].removeprefix("data: "))
    assert last["choices"][0]["finish_reason"] == "stop" and "decision" in last["radspatial_trace"]


def test_models_lists_only_what_answers_a_plain_request(url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == ["agent", "agent:markers"]


def test_mask_oracle_served_only_when_named_and_marked() -> None:
    for url in _serve("--localizer", "markers", "--localizer", "mask"):
        cards = httpx.get(f"{url}/models", timeout=120).json()["data"]
        by_id = {c["id"]: c for c in cards}
        assert set(by_id) == {"agent:markers", "agent:mask"}
        assert by_id["agent:mask"]["radspatial_oracle"] is True
        assert by_id["agent:mask"]["radspatial_requires"] == ["radspatial_mask"]
        assert "radspatial_oracle" not in by_id["agent:markers"]


def test_serve_help_says_the_defaults() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "radspatial.cli", "serve", "--help"],
        capture_output=True,
        text=True,
    )
    text = " ".join(res.stdout.split())
    assert "default: auto as 'agent', and markers" in text and "oracle" in text
    assert "address to listen on" in text and "TCP port" in text and "agent calls" in text
