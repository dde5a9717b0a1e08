"""``vllm:`` with ``--executor ray``: Ray Data's LLM batch processor over vLLM engines (GPUs).

Each ``generate`` call turns its requests into a Ray Data dataset of flat rows (key, prompt,
base64 PNG, text order), maps them to OpenAI-format chat messages with the same
``SamplingParams`` as the in-process ``vllm:`` backend, and runs ``replicas`` vLLM engines (one
per GPU unless ``tensor_parallel_size`` in the options says more) over them. Rows stream back to
the driver, which calls ``on_reply`` per row, so ``calls.jsonl`` and resume work as with every
backend. A row the engine fails on becomes an error (``should_continue_on_error``), not a crash.

Ray Data starts the engines once per dataset: the runner hands this backend ``chunk_size``
requests at a time (default 4096, images held in memory), so a run of N calls loads the
engines about N / chunk_size times. Raise ``chunk_size`` where memory allows.

Options: ``replicas`` (engines, default 1), ``address`` (or ``RAY_ADDRESS``), ``batch_size``
(rows per engine call, default 16), ``chunk_size``; everything else goes to the vLLM engine
(``engine_kwargs``), e.g. ``max_model_len=8192``, ``tensor_parallel_size=2``.

Needs ``pip install 'ray[data,llm]' vllm`` on GPU machines; without them, creating the backend
raises :class:`MissingDependency` saying so. Not runnable in CI (no GPU): the tests cover that
error and the config, rows and messages this module builds.
"""

from __future__ import annotations

import base64
import importlib.util
from collections.abc import Sequence
from typing import Any

from radspatial.models.base import (
    Decoding,
    MissingDependency,
    OnReply,
    Reply,
    Request,
    import_ray,
)
from radspatial.models.families import settings
from radspatial.models.vllm_backend import chat_message

MISSING = (
    "vllm: with --executor ray needs Ray Data's LLM processor and vLLM: "
    "pip install 'ray[data,llm]' vllm (GPU machines)"
)


def sampling_params(decoding: Decoding) -> dict[str, Any]:
    """The same decoding as the in-process ``vllm:`` backend, as Ray Data's per-row dict (a
    MIRP family's unset values left to vLLM's defaults)."""
    d = settings(decoding)
    given = {"temperature": d.temperature, "max_tokens": d.max_tokens, "top_p": d.top_p}
    return {**{k: v for k, v in given.items() if v is not None}, "seed": d.seed}


def processor_config(
    model: str,
    *,
    decoding: Decoding,
    replicas: int = 1,
    batch_size: int = 16,
    engine_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``ray.data.llm.vLLMEngineProcessorConfig`` for this run."""
    if replicas < 1 or batch_size < 1:
        raise ValueError(f"replicas and batch_size must be >= 1, got {replicas}, {batch_size}")
    engine = {"limit_mm_per_prompt": {"image": 1}, **(engine_kwargs or {})}
    if settings(decoding).seed is not None:
        engine.setdefault("seed", decoding.seed)
    return {
        "model_source": model,
        "engine_kwargs": engine,
        "concurrency": replicas,
        "batch_size": batch_size,
        "prepare_multimodal_stage": True,  # images in the messages
        "should_continue_on_error": True,  # a failing row is an error row, not a dead run
    }


def request_row(req: Request) -> dict[str, Any]:
    """A flat dataset row for one request (Arrow-friendly: no nested message lists)."""
    png = base64.b64encode(req.image_png).decode("ascii") if req.image_png else ""
    return {"key": req.key, "prompt": req.prompt, "png_b64": png, "text_first": req.text_first}


def engine_row(row: dict[str, Any], decoding: Decoding) -> dict[str, Any]:
    """Ray Data's preprocess: a flat row -> chat messages + sampling params (runs on workers)."""
    png = base64.b64decode(row["png_b64"]) if row["png_b64"] else None
    req = Request(row["key"], row["prompt"], png, text_first=bool(row["text_first"]))
    params = sampling_params(decoding)
    return {"key": row["key"], "messages": chat_message(req), "sampling_params": params}


def reply_of(row: dict[str, Any]) -> Reply:
    """One output row of the processor -> a Reply (an engine error stays an error)."""
    error = row.get("__inference_error__")
    if error:
        return Reply(text=None, error=f"vLLM (Ray Data): {str(error).splitlines()[0]}")
    meta = {"new_tokens": int(row.get("num_generated_tokens") or 0)}
    return Reply(text=str(row.get("generated_text") or ""), meta=meta)


def _import_ray_data_llm() -> Any:
    if importlib.util.find_spec("vllm") is None:
        raise MissingDependency(MISSING)
    try:
        from ray.data import llm
    except ImportError as exc:
        raise MissingDependency(MISSING) from exc
    return llm


class RayDataVLLM:
    """``vllm:<model>`` run by Ray Data's ``vLLMEngineProcessorConfig`` + ``build_processor``."""

    def __init__(
        self,
        model: str,
        *,
        decoding: Decoding,
        replicas: int | None = None,
        address: str | None = None,
        batch_size: int = 16,
        chunk_size: int = 4096,
        **engine_kwargs: Any,
    ) -> None:
        llm = _import_ray_data_llm()
        from radspatial.core.executor import ensure_ray

        self.spec = f"vllm:{model}"
        self.model_path, self.decoding, self.chunk_size = model, decoding, chunk_size
        self.config = processor_config(
            model,
            decoding=decoding,
            replicas=replicas or 1,
            batch_size=batch_size,
            engine_kwargs=engine_kwargs,
        )
        self._ray = import_ray()
        self._started = ensure_ray(self._ray, address, None)
        build = getattr(llm, "build_processor", None) or llm.build_llm_processor
        self.processor = build(
            llm.vLLMEngineProcessorConfig(**self.config),
            preprocess=lambda row: engine_row(row, decoding),
            postprocess=lambda row: {
                "key": row["key"],
                "generated_text": row.get("generated_text"),
                "num_generated_tokens": row.get("num_generated_tokens"),
                "__inference_error__": row.get("__inference_error__"),
            },
        )

    def describe(self) -> dict[str, Any]:
        config = {k: v for k, v in self.config.items() if k != "engine_kwargs"}
        engine = {k: repr(v) for k, v in self.config["engine_kwargs"].items()}
        return {
            "backend": "vllm",
            "executor": "ray",
            "spec": self.spec,
            "model": self.model_path,
            "ray_data": {**config, "engine_kwargs": engine},
            "decoding": self.decoding.to_json(),
            "versions": {"ray": self._ray.__version__},
        }

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        if not requests:
            return
        pending = {req.key: req for req in requests}
        dataset = self._ray.data.from_items([request_row(r) for r in requests])
        for row in self.processor(dataset).iter_rows():
            req = pending.pop(row["key"], None)
            if req is not None:
                on_reply(req, reply_of(row))
        for req in pending.values():
            on_reply(req, Reply(text=None, error="vLLM (Ray Data): no output row"))

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False
