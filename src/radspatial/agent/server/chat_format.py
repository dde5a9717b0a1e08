"""OpenAI chat-completions wire format for the agent server: request parsing, inline images,
replies and OpenAI-style errors. Pure functions; the HTTP handling lives in ``server.py``.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from radspatial.agent.pipeline.agent import AgentAnswer

_DATA_URL = re.compile(r"data:image/(?:png|jpeg|jpg);base64,(.*)", re.IGNORECASE | re.DOTALL)
# Prompts are short (MIRP's: ~700 characters); text is bounded before parsing, and whitespace
# runs are collapsed (newlines kept): the parser normalises whitespace itself.
MAX_TEXT_CHARS = 4096
_SPACE_RUNS = re.compile(r"[^\S\n]+")


class ApiError(Exception):
    """An error answered as OpenAI-style JSON with HTTP ``status``."""

    def __init__(self, status: int, message: str, code: str, kind: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.kind = kind or ("server_error" if status >= 500 else "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "code": self.code}}


@dataclass(frozen=True)
class ChatCall:
    model: str
    text: str
    image: bytes
    mask: bytes | None
    stream: bool = False  # reply as server-sent events (chat.completion.chunk)
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_sampling(body: dict) -> None:
    """The sampling fields' types and ranges (the agent is deterministic, but a request it
    cannot honour is refused, not answered as if it were): ``n`` 1, ``temperature`` 0-2,
    ``top_p`` 0-1, ``max_tokens`` an integer >= 1, ``stream`` true or false."""
    n = body.get("n")
    if n is not None and (not _number(n) or n != 1):
        raise ApiError(400, f"'n' must be 1 (one choice per request), got {n!r}", "invalid_n")
    t = body.get("temperature")
    if t is not None and (not _number(t) or not 0 <= t <= 2):
        raise ApiError(400, f"'temperature' must be a number 0-2, got {t!r}", "invalid_temperature")
    top_p = body.get("top_p")
    if top_p is not None and (not _number(top_p) or not 0 <= top_p <= 1):
        raise ApiError(400, f"'top_p' must be a number 0-1, got {top_p!r}", "invalid_top_p")
    m = body.get("max_tokens")
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
        raise ApiError(
            400, f"'max_tokens' must be an integer >= 1, got {m!r}", "invalid_max_tokens"
        )
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ApiError(400, f"'stream' must be true or false, got {stream!r}", "invalid_stream")
    check_unhonoured(body)


# what the agent cannot do: asked for, it is refused rather than silently left out
_NO_TOOLS = "the agent calls no tools"
_UNHONOURED = {
    "logprobs": "the agent has no token log-probabilities",
    "top_logprobs": "the agent has no token log-probabilities",
}


def check_unhonoured(body: dict) -> None:
    """Refuse (400, the field named) what the agent cannot honour: ``logprobs``, a
    ``tool_choice`` that demands a call (``required`` or a named function), ``tools`` with a
    forced call, and ``stream_options`` other than an object of booleans of which only
    ``include_usage`` may be true."""
    for key, why in _UNHONOURED.items():
        value = body.get(key)
        if value not in (None, False, 0):
            raise ApiError(400, f"'{key}' cannot be honoured: {why}", f"unsupported_{key}")
    choice = body.get("tool_choice")
    if choice not in (None, "none", "auto"):
        shown = choice if isinstance(choice, str) else type(choice).__name__
        msg = f"'tool_choice' {shown[:40]!r} cannot be honoured: {_NO_TOOLS}"
        raise ApiError(400, msg, "unsupported_tool_choice")
    options = body.get("stream_options")
    if options is None:
        return
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", "invalid_stream_options")
    for key, value in options.items():
        name = f"'stream_options.{str(key)[:40]}'"
        if not isinstance(value, bool):
            msg = f"{name} must be true or false, got {type(value).__name__} {str(value)[:20]!r}"
            raise ApiError(400, msg, "invalid_stream_options")
        if value and key != "include_usage":
            raise ApiError(
                400, f"{name} cannot be honoured (unknown option)", "invalid_stream_options"
            )


def parse_chat(body: Any, models: Sequence[str], default: str) -> ChatCall:
    """Validate a chat-completions body; raise ApiError naming what is wrong."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", "invalid_body")
    model = body.get("model") or default
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be a string", "invalid_model")
    if model not in models:
        msg = f"model {model!r} not found; available: {', '.join(models)}"
        raise ApiError(404, msg, "model_not_found", "not_found_error")
    check_sampling(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "'messages' must be a list of message objects", "invalid_messages")
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        raise ApiError(400, "no user message in 'messages'", "invalid_messages")
    texts, images = split_content(users[-1].get("content"))
    if len(images) != 1:
        msg = f"the last user message must carry exactly one image, got {len(images)}"
        raise ApiError(400, msg, "image_count")
    mask = body.get("radspatial_mask")
    if mask is not None and not isinstance(mask, str):
        raise ApiError(400, "'radspatial_mask' must be a data URL string", "invalid_mask")
    text = _SPACE_RUNS.sub(" ", "\n".join(texts)).strip()
    if len(text) > MAX_TEXT_CHARS:
        msg = f"the text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}"
        raise ApiError(400, msg, "text_too_long")
    image = decode_data_url(images[0])
    options = body.get("stream_options")
    usage = isinstance(options, dict) and options.get("include_usage") is True
    mask_bytes = None if mask is None else decode_data_url(mask)
    return ChatCall(model, text, image, mask_bytes, body.get("stream") is True, usage)


def split_content(content: Any) -> tuple[list[str], list[str]]:
    """Texts and image URLs of a message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise ApiError(400, "message 'content' must be a string or a list of parts", "content")
    texts, images = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        ref = part.get("image_url") if kind == "image_url" else None
        url = ref.get("url") if isinstance(ref, dict) else ref
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(url, str):
            images.append(url)
        else:
            raise ApiError(400, f"unsupported or malformed content part {kind!r}", "content")
    return texts, images


def decode_data_url(url: str) -> bytes:
    if url[:8].lower().startswith(("http://", "https://")):
        msg = "image URLs are not fetched; send the image inline as a data:image/png;base64 URL"
        raise ApiError(400, msg, "image_url_not_supported")
    match = _DATA_URL.fullmatch(url.strip())
    if not match:
        msg = "an image must be a data:image/png or data:image/jpeg base64 URL"
        raise ApiError(400, msg, "invalid_image_url")
    try:
        return base64.b64decode("".join(match[1].split()), validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "the image data URL is not valid base64", "invalid_image") from None


def probe_image(data: bytes, max_pixels: int, *, labels: bool = False) -> Image.Image:
    """The image with only its header read: format and size checked, no pixel decoded yet."""
    what = "label image" if labels else "image"
    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise ApiError(400, f"{what} too large: {exc}", "image_too_large") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise ApiError(400, f"the {what} is not a readable PNG or JPEG", "invalid_image") from None
    if img.format not in ("PNG", "JPEG"):
        raise ApiError(400, f"the {what} is {img.format}, not PNG or JPEG", "invalid_image")
    if img.width * img.height > max_pixels:
        msg = f"{what} of {img.width} x {img.height} px is over the limit of {max_pixels} px"
        raise ApiError(400, msg, "image_too_large")
    return img


def decode_image(img: Image.Image, *, labels: bool = False) -> np.ndarray:
    """Decode the pixels of a :func:`probe_image` result."""
    what = "label image" if labels else "image"
    try:
        img.load()
        arr = np.asarray(img) if labels else np.asarray(img.convert("RGB"))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        raise ApiError(400, f"the {what} could not be decoded", "invalid_image") from None
    if labels and arr.ndim != 2:
        raise ApiError(400, "the label image must have one channel", "invalid_mask")
    return arr


def _usage(prompt: str, answer: str) -> dict[str, int]:
    """Token counts, estimated (about 4 characters a token)."""
    tokens = (max(1, len(prompt) // 4), max(1, len(answer) // 4))
    return {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "total_tokens": sum(tokens)}


def completion(model: str, result: AgentAnswer, prompt: str) -> dict[str, Any]:
    """A chat.completion body."""
    message = {"role": "assistant", "content": result.text}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _usage(prompt, result.text),
        "radspatial_trace": result.trace,
    }


def completion_chunks(
    model: str, result: AgentAnswer, prompt: str, *, include_usage: bool = False
) -> list[dict[str, Any]]:
    """The same reply as :func:`completion` as ``chat.completion.chunk`` objects, OpenAI's
    streaming order: the role, the content (whole: the agent decides before it answers), the
    finish reason with the trace, then (``include_usage``) the usage with no choices."""
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return head | {"choices": [choice]}

    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": result.text}),
        chunk({}, "stop") | {"radspatial_trace": result.trace},
    ]
    if include_usage:
        chunks.append(head | {"choices": [], "usage": _usage(prompt, result.text)})
    return chunks


def sse_body(chunks: Sequence[dict[str, Any]]) -> bytes:
    """Server-sent events: one ``data: <json>`` event a chunk, then ``data: [DONE]``."""
    events = [f"data: {json.dumps(c, default=json_default)}\n\n" for c in chunks]
    return ("".join(events) + "data: [DONE]\n\n").encode()


def json_default(value: Any) -> Any:
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
