"""``vllm:<local path or hub id>``: a vision-language model run offline with vLLM (GPU only).

All requests go to one ``LLM.chat`` call, which batches and schedules them itself. Each request is
one OpenAI-format user message: the image as a base64 ``data:image/png`` URL, then the prompt
text; vLLM applies the model's own chat template. Decoding comes from ``Decoding`` through
``SamplingParams(temperature, max_tokens, top_p, seed)``.

Extra options go to ``vllm.LLM`` unchanged, e.g.
``create_backend("vllm:Qwen/Qwen2.5-VL-7B-Instruct", max_model_len=8192,
gpu_memory_utilization=0.85, tensor_parallel_size=2)``. The ``concurrency`` argument is unused.

Needs ``pip install radspatial[vllm]`` on a machine with a GPU; without vLLM, creating the
backend raises ``ImportError`` saying so. Listing backend specs never imports vLLM.

This module cannot be exercised in CI (no GPU, no vLLM): its test only checks registration and
the missing-vLLM error.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from typing import Any

from radspatial.models.base import (
    Decoding,
    MissingDependency,
    OnReply,
    Reply,
    Request,
    register_backend,
)
from radspatial.models.families import settings

MISSING_VLLM = "the vllm backend needs vLLM: install radspatial[vllm] on a machine with a GPU"


@register_backend("vllm", ray="data")
def create_vllm_backend(
    rest: str, *, decoding: Decoding, concurrency: int = 8, **llm_options: Any
) -> VLLMBackend:
    if not rest:
        raise ValueError("vllm backend needs a model: 'vllm:<local path or hub id>'")
    return VLLMBackend(rest, decoding=decoding, **llm_options)


def chat_message(req: Request) -> list[dict[str, Any]]:
    """One request as a chat: the prompt and the image (in the request's order)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": req.prompt}]
    if req.image_png is not None:
        url = "data:image/png;base64," + base64.b64encode(req.image_png).decode("ascii")
        part = {"type": "image_url", "image_url": {"url": url}}
        content.insert(len(content) if req.text_first else 0, part)
    return [{"role": "user", "content": content}]


def vllm_sampling(decoding: Decoding) -> dict[str, Any]:
    """``SamplingParams`` keyword arguments: ours, or a MIRP family's (what it left unset, e.g.
    Pixtral's temperature, stays vLLM's default)."""
    d = settings(decoding)
    given = {"temperature": d.temperature, "max_tokens": d.max_tokens, "top_p": d.top_p}
    return {**{k: v for k, v in given.items() if v is not None}, "seed": d.seed}


class VLLMBackend:
    """One ``vllm.LLM`` engine; ``generate`` sends every request in one ``chat`` call."""

    def __init__(self, model: str, *, decoding: Decoding, **llm_options: Any) -> None:
        try:
            import vllm
        except ImportError as exc:
            raise MissingDependency(MISSING_VLLM) from exc

        self.spec = f"vllm:{model}"
        self.model_path = model
        self.decoding = decoding
        self.llm_options = dict(llm_options)
        options = {"limit_mm_per_prompt": {"image": 1}, **llm_options}
        if settings(decoding).seed is not None:
            options.setdefault("seed", decoding.seed)
        self.llm = vllm.LLM(model=model, **options)
        self._version = vllm.__version__

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "spec": self.spec,
            "model": self.model_path,
            "llm_options": {k: repr(v) for k, v in self.llm_options.items()},
            "decoding": self.decoding.to_json(),
            "versions": {"vllm": self._version},
        }

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        from vllm import SamplingParams

        if not requests:
            return
        params = SamplingParams(**vllm_sampling(self.decoding))
        t0 = time.perf_counter()
        try:
            outputs = self.llm.chat([chat_message(r) for r in requests], params, use_tqdm=False)
        except Exception as exc:  # noqa: BLE001 - recorded per request, run goes on
            error = f"{type(exc).__name__}: {exc}"
            for req in requests:
                on_reply(req, Reply(text=None, error=error, latency_s=time.perf_counter() - t0))
            return
        elapsed = time.perf_counter() - t0
        for req, out in zip(requests, outputs, strict=True):
            completion = out.outputs[0]
            meta = {
                "prompt_tokens": len(getattr(out, "prompt_token_ids", None) or ()),
                "new_tokens": len(completion.token_ids),
                "finish_reason": completion.finish_reason,
            }
            on_reply(req, Reply(text=completion.text, latency_s=elapsed, meta=meta))
