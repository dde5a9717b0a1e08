"""``hf:<local path or hub id>``: a vision-language model run in-process with transformers.

Loads ``AutoModelForImageTextToText`` + ``AutoProcessor``, formats each request with the
processor's chat template (one user message: the prompt text and the image, in the request's
order; a processor without a chat template, e.g. PaliGemma's, gets the image token and the prompt
and formats them itself), and generates in batches with left padding. Which families run:
docs/backends.md. Greedy by default; ``Decoding.temperature > 0`` samples with that
temperature and ``top_p``. Decoding is set from ``Decoding`` alone (top-k off, repetition penalty
1.0), not from the model's ``generation_config``, so it matches the other backends.

Options (``create_backend("hf:...", batch_size=4, device="cuda:1", dtype="float16")``):

- ``batch_size`` (default 8): requests per ``generate`` call;
- ``device`` (default ``"auto"``: cuda, else mps, else cpu);
- ``dtype`` (default ``"auto"``: bfloat16 on cuda, float32 elsewhere);
- ``allow_download`` (default False, or env ``RADSPATIAL_HF_ALLOW_DOWNLOAD=1``): fetch a hub id
  that is not in the local cache; off by default, so an eval never reaches the network unasked
  (``local_files_only=True``);
- ``trust_remote_code`` (default False): run Python code shipped with the model repository; only
  for models you trust;
- ``max_pixels`` (default None: as given): an image with more pixels is downscaled (aspect kept,
  bicubic) to at most this many before the processor sees it.

A batch that raises (e.g. CUDA out of memory) is retried one request at a time; a request that
still fails gets ``Reply(text=None, error=...)``. Needs ``pip install radspatial[hf]``.

Example::

    backend = create_backend("hf:Qwen/Qwen2.5-VL-3B-Instruct", decoding=Decoding(max_tokens=8))
    backend.generate(requests, on_reply=lambda req, rep: print(req.key, rep.text))
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from radspatial.models.base import Decoding, OnReply, Reply, Request, register_backend
from radspatial.models.families import settings
from radspatial.models.options import Opt, at_least

_DTYPES = ("bfloat16", "float16", "float32")
ALLOW_DOWNLOAD_ENV = "RADSPATIAL_HF_ALLOW_DOWNLOAD"


@register_backend("hf", ray="replicas")
def create_hf_backend(
    rest: str,
    *,
    decoding: Decoding,
    concurrency: int = 8,  # unused: batching replaces concurrency in-process
    batch_size: Annotated[int, Opt(check=at_least(1))] = 8,
    device: str = "auto",
    dtype: str = "auto",
    max_pixels: Annotated[int | None, Opt(check=at_least(1))] = None,
    allow_download: Annotated[bool | None, Opt(flag="--hf-allow-download")] = None,
    trust_remote_code: Annotated[bool, Opt(flag="--hf-trust-remote-code")] = False,
) -> HFBackend:
    """``hf:<local path or hub id>``; the options are :class:`HFBackend`'s (see the module
    docstring). Downloads only when allowed here or by ``RADSPATIAL_HF_ALLOW_DOWNLOAD``."""
    if not rest:
        raise ValueError("hf backend needs a model: 'hf:<local path or hub id>'")
    if rest.startswith(("/", "./", "../", "~")) and not Path(rest).expanduser().is_dir():
        raise ValueError(f"hf:{rest}: no such model folder")
    if allow_download is None:
        allow_download = os.environ.get(ALLOW_DOWNLOAD_ENV, "") not in ("", "0")
    return HFBackend(
        rest,
        decoding=decoding,
        batch_size=batch_size,
        device=device,
        dtype=dtype,
        allow_download=allow_download,
        trust_remote_code=trust_remote_code,
        max_pixels=max_pixels,
    )


def _fit(image: Any, max_pixels: int | None) -> Any:
    """``image`` downscaled (aspect kept) to at most ``max_pixels`` pixels; as is if smaller."""
    import math

    from PIL import Image

    if max_pixels is None or image.width * image.height <= max_pixels:
        return image
    scale = math.sqrt(max_pixels / (image.width * image.height))
    size = (max(1, math.floor(image.width * scale)), max(1, math.floor(image.height * scale)))
    return image.resize(size, Image.Resampling.BICUBIC)


def _resolve_device(device: str) -> str:
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _resolve_dtype(dtype: str, device: str) -> str:
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in _DTYPES:
        raise ValueError(f"hf backend: dtype {dtype!r} not in {('auto', *_DTYPES)}")
    return dtype


def _batch_seed(seed: int, keys: Sequence[str]) -> int:
    # Derived from the batch's own keys, so a batch samples the same wherever it falls in a run.
    digest = hashlib.sha256(("\n".join([str(seed), *keys])).encode()).hexdigest()
    return int(digest[:12], 16)


class HFBackend:
    """A transformers image-text-to-text model, batched, on one device."""

    def __init__(
        self,
        model: str,
        *,
        decoding: Decoding,
        batch_size: int = 8,
        device: str = "auto",
        dtype: str = "auto",
        allow_download: bool = False,
        trust_remote_code: bool = False,
        max_pixels: int | None = None,
    ) -> None:
        import torch
        import transformers
        from transformers import AutoModelForImageTextToText, AutoProcessor

        if batch_size < 1:
            raise ValueError(f"hf backend: batch_size must be >= 1, got {batch_size}")
        self.spec = f"hf:{model}"
        self.model_path = model
        self.decoding = decoding
        self.batch_size = batch_size
        if max_pixels is not None and max_pixels < 1:
            raise ValueError(f"hf backend: max_pixels must be >= 1, got {max_pixels}")
        self.max_pixels = max_pixels
        self.device = _resolve_device(device)
        self.dtype = _resolve_dtype(dtype, self.device)
        torch_dtype = getattr(torch, self.dtype)

        # transformers renamed ``torch_dtype`` to ``dtype`` in 4.56.
        major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
        dtype_kw = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
        self.allow_download = allow_download
        self.trust_remote_code = trust_remote_code
        load = {"local_files_only": not allow_download, "trust_remote_code": trust_remote_code}
        try:
            self.model = AutoModelForImageTextToText.from_pretrained(
                model, **{dtype_kw: torch_dtype}, **load
            )
            self.processor = AutoProcessor.from_pretrained(model, **load)
        except ImportError as exc:  # e.g. a processor that needs torchvision (docs/backends.md)
            first = " ".join(str(exc).split()).split(". ")[0] or type(exc).__name__
            raise ValueError(f"hf:{model}: cannot load the model: {first.rstrip('.')}") from None
        except (OSError, ValueError) as exc:
            hint = "" if allow_download else " (downloads are off: see --hf-allow-download)"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"hf:{model}: cannot load the model{hint}: {first}") from None
        self.model.to(self.device).eval()
        self.tokenizer = self.processor.tokenizer
        self.encoder_decoder = bool(getattr(self.model.config, "is_encoder_decoder", False))
        if not self.encoder_decoder:
            self.tokenizer.padding_side = "left"  # new tokens must follow every prompt directly
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # A processor with no chat template (PaliGemma) formats the prompt itself.
        self.chat_template = bool(getattr(self.processor, "chat_template", None))
        self._versions = {"transformers": transformers.__version__, "torch": torch.__version__}

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "hf",
            "spec": self.spec,
            "model": self.model_path,
            "model_class": type(self.model).__name__,
            "device": self.device,
            "dtype": self.dtype,
            "batch_size": self.batch_size,
            "max_pixels": self.max_pixels,
            "allow_download": self.allow_download,
            "trust_remote_code": self.trust_remote_code,
            "prompt_format": "chat_template" if self.chat_template else "processor",
            "decoding": self.decoding.to_json(),
            "versions": dict(self._versions),
        }

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        for start in range(0, len(requests), self.batch_size):
            batch = list(requests[start : start + self.batch_size])
            t0 = time.perf_counter()
            try:
                results = self._generate_batch(batch)
            except Exception:  # noqa: BLE001 - e.g. OOM: retry alone below
                self._free_memory()
                results = None
            if results is not None:
                elapsed = time.perf_counter() - t0
                for req, (text, n_new, n_prompt) in zip(batch, results, strict=True):
                    meta = {
                        "batch_size": len(batch),
                        "prompt_tokens": n_prompt,
                        "new_tokens": n_new,
                    }
                    on_reply(req, Reply(text=text, latency_s=elapsed, meta=meta))
                continue
            for req in batch:
                on_reply(req, self._generate_alone(req))

    def _generate_alone(self, req: Request) -> Reply:
        t0 = time.perf_counter()
        try:
            [(text, n_new, n_prompt)] = self._generate_batch([req])
        except Exception as exc:  # noqa: BLE001 - recorded in the reply, run goes on
            self._free_memory()
            error = f"{type(exc).__name__}: {exc}"
            return Reply(text=None, error=error, latency_s=time.perf_counter() - t0)
        meta = {"batch_size": 1, "prompt_tokens": n_prompt, "new_tokens": n_new}
        meta["retried_alone"] = True
        return Reply(text=text, latency_s=time.perf_counter() - t0, meta=meta)

    def _free_memory(self) -> None:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def _encode(self, batch: Sequence[Request]) -> Any:
        from PIL import Image

        conversations = []
        images: list[list[Any]] = []
        for req in batch:
            content: list[dict[str, Any]] = [{"type": "text", "text": req.prompt}]
            if req.image_png is not None:
                content.insert(len(content) if req.text_first else 0, {"type": "image"})
                image = Image.open(io.BytesIO(req.image_png)).convert("RGB")
                images.append([_fit(image, self.max_pixels)])
            else:
                images.append([])
            conversations.append([{"role": "user", "content": content}])
        if self.chat_template:
            texts = self.processor.apply_chat_template(
                conversations, add_generation_prompt=True, tokenize=False
            )
        else:  # e.g. PaliGemma: the image token first, the processor adds BOS and "\n"
            token = getattr(self.processor, "image_token", None) or ""
            texts = [token * (req.image_png is not None) + req.prompt for req in batch]
        # A template that writes the BOS itself must not get a second one from the tokenizer.
        bos = self.tokenizer.bos_token
        add_special = not (bos and all(t.startswith(bos) for t in texts))
        kwargs: dict[str, Any] = {"images": images} if any(images) else {}
        encoded = self.processor(
            text=texts,
            padding=True,
            add_special_tokens=add_special,
            return_tensors="pt",
            **kwargs,
        )
        encoded.pop("labels", None)  # PaliGemma's processor adds training labels
        return encoded

    def _generate_batch(self, batch: Sequence[Request]) -> list[tuple[str, int, int]]:
        """(reply, new tokens, prompt tokens: image tokens included, padding not) per request."""
        import torch

        inputs = self._encode(batch).to(self.device)
        torch_dtype = getattr(torch, self.dtype)
        for name, value in inputs.items():
            if torch.is_tensor(value) and torch.is_floating_point(value):
                inputs[name] = value.to(torch_dtype)

        d = settings(self.decoding)
        gen_kwargs: dict[str, Any] = {
            "repetition_penalty": 1.0,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if d.max_tokens is not None:
            gen_kwargs["max_new_tokens"] = d.max_tokens
        if d.temperature is None:  # a MIRP family's: the model's own generation config
            gen_kwargs.pop("repetition_penalty")
        elif d.temperature > 0:
            gen_kwargs.update(do_sample=True, temperature=d.temperature, top_p=d.top_p, top_k=0)
        else:
            gen_kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)

        # generate() takes no torch.Generator, so sampling seeds a forked global RNG instead.
        seeded = bool(d.temperature) and d.seed is not None
        cuda = [torch.device(self.device)] if self.device.startswith("cuda") else []
        with torch.inference_mode(), torch.random.fork_rng(devices=cuda, enabled=seeded):
            if seeded:
                torch.manual_seed(_batch_seed(d.seed, [r.key for r in batch]))
            output = self.model.generate(**inputs, **gen_kwargs)

        new = output if self.encoder_decoder else output[:, inputs["input_ids"].shape[1] :]
        texts = self.processor.batch_decode(new, skip_special_tokens=True)
        pad = self.tokenizer.pad_token_id
        counts = (new != pad).sum(dim=1).tolist() if pad is not None else [new.shape[1]] * len(new)
        mask = inputs.get("attention_mask")
        ids = inputs["input_ids"]
        prompt = mask.sum(dim=1).tolist() if mask is not None else [ids.shape[1]] * len(ids)
        return [
            (text.strip(), int(n), int(p)) for text, n, p in zip(texts, counts, prompt, strict=True)
        ]
