"""Decoding as MIRP's inference code ran each of its four model families (``--protocol mirp``).

A family is recognised from the model spec (``gpt-4o``, ``pixtral``, ``llama-3.2-...-vision``,
``janus-pro``) or named with ``--model-args family=...`` (``family=none``: our decoding). Its
settings replace our ``Decoding`` only under ``--protocol mirp``; other models, and every model
under our protocol, keep ours. ``None`` in a setting means MIRP's code did not set it: the API's
default (no ``max_tokens`` sent to OpenAI) or the model's own generation config (Llama's
``generate()``). Sources are MIRP's ``2_inference_code/`` files (docs/mirp.md cites the lines).

    >>> family_of("openai:gpt-4o-2024-08-06").detail
    'high'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Protocol, overload

from radspatial.core.jobspec import ParamError


class Decoding(Protocol):
    """The decoding settings these functions read (``models/base.Decoding``)."""

    @property
    def temperature(self) -> float: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def top_p(self) -> float: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def family(self) -> str | None: ...


OURS = "none"  # --model-args family=none: our decoding even under --protocol mirp


@dataclass(frozen=True)
class Family:
    name: str
    pattern: str  # matched (case-insensitive) against the model spec
    source: str  # MIRP's script
    temperature: float | None  # None: not set (the model's generation config)
    max_tokens: int | None  # None: not set (the API's default)
    detail: str | None = None  # OpenAI image detail
    strip_newlines: bool = False  # MIRP removed "\n" from the reply before scoring


FAMILIES: tuple[Family, ...] = (
    Family("gpt-4o", r"gpt-?4o", "2_inference_code/gpt4o.py", 0.0, None, detail="high"),
    # vLLM's SamplingParams(max_tokens=8192): its temperature default (1.0) stays
    Family("pixtral", r"pixtral", "2_inference_code/pixtral.py", 1.0, 8192),
    Family(
        "llama-3.2-vision",
        r"llama[-_ ]?3\.2.*vision|mllama",
        "2_inference_code/llama.py",
        None,
        1024,
        strip_newlines=True,
    ),
    Family("janus-pro", r"janus", "2_inference_code/januspro.py", 0.0, 512),
)
_BY_NAME = {f.name: f for f in FAMILIES}


def family_of(spec: str, named: str | None = None) -> Family | None:
    """The MIRP family of a model: ``named`` (a family name, or "none"), else the first whose
    pattern the spec matches; None for any other model."""
    if named is not None:
        if named == OURS:
            return None
        if named not in _BY_NAME:
            known = ", ".join((*_BY_NAME, OURS))
            why = f"{{param}} family={named}: unknown family (known: {known})"
            raise ParamError("model_args", why)
        return _BY_NAME[named]
    return next((f for f in FAMILIES if re.search(f.pattern, spec, re.IGNORECASE)), None)


def get_family(name: str) -> Family:
    return _BY_NAME[name]


@dataclass(frozen=True)
class Settings:
    """What a backend sends: None = leave it to the API / the model's generation config."""

    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    seed: int | None
    detail: str | None = None
    strip_newlines: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def settings(decoding: Decoding) -> Settings:
    """The decoding a backend applies: ours, or the family's that ``decoding.family`` names."""
    if decoding.family is None:
        return Settings(decoding.temperature, decoding.top_p, decoding.max_tokens, decoding.seed)
    f = get_family(decoding.family)
    return Settings(f.temperature, None, f.max_tokens, None, f.detail, f.strip_newlines)


@overload
def clean_reply(decoding: Decoding, text: str) -> str: ...
@overload
def clean_reply(decoding: Decoding, text: None) -> None: ...
def clean_reply(decoding: Decoding, text: str | None) -> str | None:
    """The reply as MIRP scored it (Llama: newlines removed); ours unchanged."""
    if text is None or not settings(decoding).strip_newlines:
        return text
    return text.replace("\n", "")
