"""The one interface every model backend implements, and the backend registry.

A backend turns prompts (+ PNG image) into reply texts. It owns its own concurrency or batching
and calls ``on_reply`` as each request finishes, so the runner can append the result to disk
before anything else is sent (crash-safe resume).
"""

from __future__ import annotations

import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from radspatial.core.executor import EXECUTORS
from radspatial.core.jobspec import ParamError
from radspatial.core.registry import Registry


@dataclass(frozen=True)
class Decoding:
    """Decoding settings, identical across backends unless the user overrides them."""

    temperature: float = 0.0
    max_tokens: int = 1024  # a reasoning model's <think> block alone exceeds 64
    top_p: float = 1.0
    seed: int | None = 0
    # a MIRP model family (models/families.py, --protocol mirp): its settings replace the above
    family: str | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ParamError(
                "temperature", f"{{param}} must be a finite number >= 0, got {self.temperature}"
            )
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ParamError("max_tokens", f"{{param}} must be >= 1, got {self.max_tokens}")
        if self.family is not None:
            from radspatial.models.families import get_family

            get_family(self.family)  # unknown names fail here

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if out["family"] is None:  # so call keys made before families existed stay valid
            del out["family"]
        return out


@dataclass(frozen=True)
class Request:
    """One call. ``meta`` is what a model may know of the item: the question, its setup,
    marker, type and relation, the plane and modality, and the structures the question names
    (rq1/rq2). The truth (the label image, the CT, the standard-view centres, the shown
    rotation/flip, the slice index) is in ``truth``, filled only for a backend that says it
    reads it (``reads_truth = True``: the oracles); every other backend gets it empty."""

    key: str  # cache key (hash of everything that determines the call); unique per call
    prompt: str  # the full text prompt (template already applied)
    image_png: bytes | None  # PNG bytes of the shown image, or None for text-only
    meta: dict[str, Any] = field(default_factory=dict)  # what a model may know of the item
    text_first: bool = True  # text before the image in the message (MIRP's order, always sent)
    truth: Mapping[str, Any] = field(default_factory=dict)  # hidden truth, oracles only


@dataclass(frozen=True)
class Reply:
    text: str | None  # None when the call failed
    error: str | None = None  # set when the call failed after all retries
    latency_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. retries, tokens, http status


OnReply = Callable[[Request, Reply], None]


class MissingDependency(ImportError):
    """An optional dependency a backend needs is not installed (the message says what to do)."""


class Backend(Protocol):
    spec: str
    # optional: True where the backend reads ``Request.truth`` (an oracle); absent means False
    # optional: ``deterministic = True`` where every run answers an item the same

    def describe(self) -> dict[str, Any]:
        """JSON-safe description for run.json. Never includes secrets (API keys)."""

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        """Answer every request, calling ``on_reply`` once per request as it finishes."""


BackendFactory = Callable[..., Backend]


def _package_modules() -> tuple[str, ...]:
    """Every public module of ``radspatial.models`` (a backend registers itself when imported;
    helpers such as ``options`` register nothing), so a new backend is one new module."""
    found = pkgutil.iter_modules([str(Path(__file__).parent)])
    return tuple(f"radspatial.models.{m.name}" for m in found if not m.name.startswith("_"))


# Imported on first use, not at package import, so listing specs needs no torch/httpx.
# Each module keeps heavy imports (torch, transformers, vllm) inside its functions.
BACKENDS: Registry[BackendFactory] = Registry("backend", _package_modules())


Remote = bool | Callable[[str], bool]  # a backend's ``remote`` trait: fixed, or per spec


@dataclass(frozen=True)
class Traits:
    """What a backend declares about itself when it registers, read before one is built (by
    the command line, the runner, the report): ``ray``: how ``--executor ray`` runs it
    ("replicas": copies on Ray actors, "data": Ray Data's batch processor; None: not at all);
    ``oracles``: the specs after the prefix that read the truth instead of the image
    (references, never results); ``remote``: whether it sends the items (images, questions)
    off this machine: True, False, or a function of the spec after the prefix where the spec
    says (``openai-compat:m@http://127.0.0.1:8000/v1`` stays here, ``...@https://host/v1``
    does not)."""

    ray: str | None = None
    oracles: tuple[str, ...] = ()
    remote: Remote = False

    def sends_off(self, rest: str) -> bool:
        """Whether the spec ``<prefix>:<rest>`` sends the items off this machine."""
        return bool(self.remote(rest)) if callable(self.remote) else self.remote is True


def register_backend(
    prefix: str, *, ray: str | None = None, oracles: tuple[str, ...] = (), remote: Remote = False
) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator on a factory for specs ``<prefix>`` or ``<prefix>:<rest>``, called as
    ``factory(rest, decoding=..., concurrency=..., **options)``; its keyword-only parameters
    are its options (``models/options.py``), the keywords here its :class:`Traits`."""

    def deco(factory: BackendFactory) -> BackendFactory:
        factory.traits = Traits(ray, oracles, remote)  # type: ignore[attr-defined]
        return BACKENDS.add(prefix, factory)

    return deco


def traits(prefix: str) -> Traits:
    """The traits the backend registered as ``prefix`` declares (none for an unknown one)."""
    return getattr(BACKENDS.get(prefix), "traits", Traits()) if prefix in BACKENDS else Traits()


def is_remote(spec: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether evaluating model ``spec`` sends the dataset's images and questions off this
    machine: as its backend declares (``Traits.remote``: ``openai:`` always, ``openai-compat:``
    unless its URL's host is this machine; ``hf:``, ``vllm:``, baselines and the agent never),
    or because ``options`` (its backend options) run it on a Ray cluster that may span
    machines (``executor="ray"`` with a non-local ``address``: :func:`ray_sends_off`). An
    unknown prefix is not remote (it cannot be run)."""
    prefix, _, rest = spec.partition(":")
    if traits(prefix).sends_off(rest):
        return True
    options = options or {}
    return options.get("executor") == "ray" and ray_sends_off(options.get("address"))


def ray_sends_off(address: str | None) -> bool:
    """Whether Ray joined at ``address`` (None: what Ray itself reads, env ``RAY_ADDRESS``;
    neither: a Ray started on this machine) may run work on other machines: an address whose
    host is not this machine (``ray://head:10001``, ``10.0.0.5:6379``), or ``auto`` (the
    running cluster it finds may have other nodes); ``local`` and a loopback host do not."""
    import os

    address = (address or os.environ.get("RAY_ADDRESS") or "").strip()
    if address in ("", "local"):
        return False
    if address == "auto":
        return True
    return not is_loopback(address if "://" in address else "//" + address)


def is_loopback(url: str) -> bool:
    """True when ``url``'s host is this machine (localhost, 127.0.0.0/8, ::1)."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:  # a malformed address: nothing says it stays here
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remote_provenance(
    model: str, judge: str | None = None, options: Mapping[str, Any] | None = None
) -> dict[str, bool]:
    """run.json's record of where the items went: ``remote`` / ``judge_remote`` true when the
    model (run with backend ``options``) / the judge sends them off this machine
    (:func:`is_remote`); absent when not, so a local run's run.json is as it was before."""
    found = {
        "remote": is_remote(model, options),
        "judge_remote": bool(judge) and is_remote(judge or ""),
    }
    return {k: True for k, v in found.items() if v}


def ray_backends() -> list[str]:
    """The prefixes ``--executor ray`` can run."""
    return [p for p in list_backends() if traits(p).ray is not None]


list_backends = BACKENDS.names

# What runs a backend elsewhere than in this process (``--executor ray``): executor name ->
# ``factory(spec, decoding=..., **options)``, registered by its module when first used.
REMOTE_BACKENDS: Registry[BackendFactory] = Registry("remote executor", _package_modules())
MISSING_RAY = "--executor ray needs Ray: pip install 'radspatial[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or a ``MissingDependency`` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise MissingDependency(MISSING_RAY) from exc
    return ray


ORACLE_MARK = " (oracle)"


def is_deterministic(backend: Any) -> bool:
    """Whether ``backend`` says it answers an item the same on every run (``deterministic =
    True``: the agent, ``baseline:yes``/``no``); repeats of such a backend add no information,
    so ``demo`` runs it once. Absent means False (a sampling model, a seeded coin)."""
    return getattr(backend, "deterministic", False) is True


def reads_truth(backend: Any) -> bool:
    """Whether ``backend`` is to be given the items' truth (``Request.truth``)."""
    return getattr(backend, "reads_truth", False) is True


def is_oracle(spec: str) -> bool:
    """Whether a model spec names an oracle, as its backend declares (``Traits.oracles``: the
    mask localizer reads the true label image, the standard-view reader every structure's
    true centre); also an oracle served behind ``openai-compat:agent:mask@url``."""
    prefix, _, rest = spec.split("@", 1)[0].partition(":")
    return rest in traits(prefix).oracles or (":" in rest and is_oracle(rest))


def create_backend(
    spec: str,
    *,
    decoding: Decoding | None = None,
    concurrency: int = 8,
    executor: str = "local",
    **options: Any,
) -> Backend:
    """``create_backend("openai-compat:qwen@http://127.0.0.1:8000/v1")`` -> a Backend.

    ``executor="ray"`` (with ``replicas``, ``address``) spreads ``hf:`` over Ray actors and runs
    ``vllm:`` through Ray Data; the spec, and so every call key, stays the same.
    """
    if executor not in EXECUTORS:
        known = ", ".join(EXECUTORS)
        raise ParamError("executor", f"{{param}} must be one of {known}, got {executor!r}")
    if executor != "local":  # ray: models/ray_replicas.py
        return REMOTE_BACKENDS.get(executor)(spec, decoding=decoding or Decoding(), **options)
    for name in ("replicas", "address"):
        if options.get(name) is not None:
            raise ValueError(f"{spec}: {name} needs --executor ray")
        options.pop(name, None)
    prefix, colon, rest = spec.partition(":")
    if colon and not rest.strip():
        raise ValueError(
            f"model spec {spec!r}: nothing after ':'; "
            "expected <prefix>:<model>, e.g. 'hf:/models/llava'"
        )
    if prefix not in BACKENDS:
        raise ValueError(
            f"unknown model spec {spec!r}; known prefixes: {', '.join(list_backends())}"
        )
    return BACKENDS.get(prefix)(
        rest, decoding=decoding or Decoding(), concurrency=concurrency, **options
    )
