"""Backend options: ``--model-args`` text and the backend flags, checked against the keyword
parameters of the backend's own factory (the command line and the Python API both come here).

A backend's factory signature is its contract, as lmms-eval's ``create_from_arg_string`` builds
a model from its constructor's keyword arguments: every keyword-only parameter (besides
``decoding`` and ``concurrency``, which every backend gets) is an option, its annotation says
the value's type, its default the default; ``Annotated[float, Opt("timeout", ...)]`` names the
key it is given under where that differs from the parameter, the flag that also sets it, a
range check and a conversion. A factory with ``**options`` takes any key as given (vLLM's
``LLM(...)`` arguments). A key the backend does not take is an error, not silently ignored::

    parse_model_args("batch_size=4,device=cuda:1")  # {"batch_size": 4, "device": "cuda:1"}
    backend_options("hf:/m", {"batch_size": 4})     # {"batch_size": 4}
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from radspatial.core.jobspec import ParamError

Check = Callable[[Any], str | None]  # the value -> what is wrong with it ("must be ..."), or None

MODEL_ARGS_HELP = (
    "backend options as key=value,... (lmms-eval style), for every --model: "
    "hf: batch_size, device, dtype, max_pixels, allow_download, trust_remote_code; "
    "openai/openai-compat: timeout, connect_timeout, retries, api_key_env, max_reply_mb "
    "(reply body cap, default 8, recorded in run.json), backoff_base_s, backoff_cap_s; "
    "vllm: any vllm.LLM argument (e.g. tensor_parallel_size=2); every backend: "
    "family=gpt-4o|pixtral|llama-3.2-vision|janus-pro|none (the decoding --protocol mirp uses)"
)  # tests/test_backend_contract.py checks it names what the factories take


@dataclass(frozen=True)
class Opt:
    """What a factory parameter declares beyond its type: ``key`` (its --model-args name, if
    not the parameter's), ``flag`` (the command-line flag that also sets it), ``check`` and
    ``convert`` (applied to the checked value, e.g. retries -> attempts)."""

    key: str | None = None
    flag: str | None = None
    check: Check | None = None
    convert: Callable[[Any], Any] | None = None


def positive(value: float) -> str | None:
    return None if math.isfinite(value) and value > 0 else "must be a finite number > 0"


def at_least(low: int) -> Check:
    """An integer ``>= low`` (an integral float such as 2.0 counts)."""

    def check(value: float) -> str | None:
        ok = math.isfinite(value) and value == int(value) and value >= low
        return None if ok else f"must be an integer >= {low}"

    return check


@dataclass(frozen=True)
class Option:
    """One option of one backend, read from its factory's signature."""

    key: str  # the --model-args name
    param: str  # the factory's keyword
    kind: type  # bool, int, float or str (``X | None``: X)
    opt: Opt

    @property
    def what(self) -> str:  # how errors name it: the flag where there is one
        return self.opt.flag or self.key


def _kind(hint: Any) -> tuple[type, Opt]:
    opt = Opt()
    for _ in range(2):  # Annotated[X | None, Opt] and Annotated[X, Opt] | None alike
        if typing.get_origin(hint) is typing.Annotated:
            hint, *meta = typing.get_args(hint)
            opt = next((m for m in meta if isinstance(m, Opt)), opt)
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return (hint if hint in (bool, int, float, str) else str), opt


def factory_options(factory: Callable[..., Any]) -> tuple[list[Option], bool]:
    """(the options ``factory`` declares, whether it also takes any other key as given)."""
    hints = typing.get_type_hints(factory, include_extras=True)
    found, any_key = [], False
    for p in inspect.signature(factory).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            any_key = True
        elif p.kind is p.KEYWORD_ONLY and p.name not in ("decoding", "concurrency"):
            kind, opt = _kind(hints.get(p.name, str))
            found.append(Option(opt.key or p.name, p.name, kind, opt))
    return found, any_key


def backend_contract(prefix: str) -> tuple[list[Option], bool]:
    """The options of the backend registered as ``prefix`` (none for an unknown prefix)."""
    from radspatial.models.base import BACKENDS

    return factory_options(BACKENDS.get(prefix)) if prefix in BACKENDS else ([], False)


def _value(text: str) -> bool | int | float | str:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_model_args(text: str | None) -> dict[str, bool | int | float | str]:
    """``"batch_size=4,device=cuda:1"`` -> ``{"batch_size": 4, "device": "cuda:1"}``.

    Values read as true/false, int, float, else text. A pair without ``=``, an empty key or a
    key given twice is an error.
    """
    out: dict[str, bool | int | float | str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ParamError("model_args", f"{{param}}: expected key=value, got {part.strip()!r}")
        if key in out:
            raise ParamError("model_args", f"{{param}}: {key} given twice")
        out[key] = _value(value.strip())
    return out


def _flag_home(key: str) -> tuple[str, str]:
    """(the flag that sets model arg ``key``, the backends taking it: 'openai/openai-compat')."""
    from radspatial.models.base import list_backends

    flag, takers = f"--{key.replace('_', '-')}", []
    for prefix in list_backends():
        option = next((o for o in backend_contract(prefix)[0] if o.key == key), None)
        if option is not None:
            flag, takers = option.opt.flag or flag, [*takers, prefix]
    return flag, "/".join(takers) or "no"


def _field(flag: str) -> str:
    """The job field a backend flag sets (``--hf-allow-download``: ``hf_allow_download``)."""
    return flag.removeprefix("--").replace("-", "_")


def backend_options(
    spec: str, model_args: Mapping[str, object] | None = None, flags: Mapping[str, object] = {}
) -> dict:
    """Backend options for ``spec`` from ``model_args`` (key=value pairs, already parsed) and
    ``flags`` (the dedicated command-line flags, keyed like model args), as the keywords of
    the backend's factory."""
    declared, any_key = backend_contract(spec.partition(":")[0])
    known = {o.key: o for o in declared}
    model_args = dict(model_args or {})
    for key, value in flags.items():
        flag, takers = _flag_home(key)
        if not any_key and key not in known:
            raise ParamError(_field(flag), f"{spec}: {{param}} applies to {takers} models only")
        if key in model_args and model_args[key] != value:
            why = f"{{param}} and {{model_args}} {key}= disagree"
            raise ParamError((_field(flag), "model_args"), why)
    given = {**model_args, **flags}
    bad = [k for k in given if k not in known and not any_key]
    if bad:
        names = ", ".join(known) or "none"
        why = f"{spec}: {{param}} {bad[0]} is not an option here (known: {names})"
        raise ParamError("model_args", why)
    out = {}
    for key, value in given.items():  # a key no parameter declares: **options, as given
        option = known.get(key)
        out[option.param if option else key] = _checked(option, value) if option else value
    return out


def _checked(option: Option, value: object) -> object:
    """``value`` as ``option``'s type, checked and converted; else one line naming it."""
    kind, key = option.kind, option.key
    if kind is bool and not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"--{key.replace('_', '-')} / {key}= must be a number, got {value!r}")
        integral = math.isfinite(value) and value == int(value)
        if kind is int and not integral and option.opt.check is None:
            raise ValueError(f"{option.what} must be an integer, got {value}")
    if option.opt.check is not None and (why := option.opt.check(value)):
        raise ValueError(f"{option.what} {why}, got {value}")
    if kind in (int, float, str):
        value = kind(value)  # type: ignore[call-overload]
    return option.opt.convert(value) if option.opt.convert else value
