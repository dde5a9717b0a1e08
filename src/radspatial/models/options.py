"""Backend options: ``--model-args`` text and the backend flags, checked against the options
each backend prefix takes (the command line and the Python API both come here).

``parse_model_args("batch_size=4,device=cuda:1")`` reads the lmms-eval style text;
``backend_options(spec, model_args, flags)`` maps keys onto the backend's option names and
checks their values. A key that does not apply to the spec's backend is an error, not silently
ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

_HTTP_PREFIXES = ("openai", "openai-compat")
_HTTP_ARGS = {
    "timeout": "timeout_s",
    "connect_timeout": "connect_timeout_s",
    "retries": "max_attempts",
    "api_key_env": "api_key_env",
    "max_reply_mb": "max_reply_mb",
}
_HF_ARGS = {
    "batch_size": "batch_size",
    "device": "device",
    "dtype": "dtype",
    "max_pixels": "max_pixels",
    "allow_download": "allow_download",
    "trust_remote_code": "trust_remote_code",
}
# key=value names per backend prefix -> backend option; None: any key goes to the backend
# as given (vLLM's LLM(...) arguments, e.g. tensor_parallel_size=2,max_model_len=8192).
MODEL_ARGS: dict[str, dict[str, str] | None] = {
    "openai": _HTTP_ARGS,
    "openai-compat": _HTTP_ARGS,
    "hf": _HF_ARGS,
    "vllm": None,
}
MODEL_ARGS_HELP = (
    "backend options as key=value,... (lmms-eval style), for every --model: "
    "hf: batch_size, device, dtype, max_pixels, allow_download, trust_remote_code; "
    "openai/openai-compat: timeout, connect_timeout, retries, api_key_env, max_reply_mb "
    "(reply body cap, default 8, recorded in run.json); "
    "vllm: any vllm.LLM argument (e.g. tensor_parallel_size=2); every backend: "
    "family=gpt-4o|pixtral|llama-3.2-vision|janus-pro|none (the decoding --protocol mirp uses)"
)


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
            raise ValueError(f"--model-args: expected key=value, got {part.strip()!r}")
        if key in out:
            raise ValueError(f"--model-args: {key} given twice")
        out[key] = _value(value.strip())
    return out


FLAG_NAMES = {
    "timeout": "--timeout",
    "retries": "--retries",
    "api_key_env": "--api-key-env",
    "allow_download": "--hf-allow-download",
    "trust_remote_code": "--hf-trust-remote-code",
}


def backend_options(
    spec: str, model_args: Mapping[str, object] | None = None, flags: Mapping[str, object] = {}
) -> dict:
    """Backend options for ``spec`` from ``model_args`` (key=value pairs, already parsed) and
    ``flags`` (the dedicated command-line flags, keyed like model args)."""
    known = MODEL_ARGS.get(spec.partition(":")[0], {})
    model_args = dict(model_args or {})
    for key, value in flags.items():
        if known is not None and key not in known:
            wants = "hf" if key in _HF_ARGS else "/".join(_HTTP_PREFIXES)
            raise ValueError(f"{spec}: {FLAG_NAMES[key]} applies to {wants} models only")
        if key in model_args and model_args[key] != value:
            raise ValueError(f"{FLAG_NAMES[key]} and --model-args {key}= disagree")
    given = {**model_args, **flags}
    if known is None:  # vllm: passed through as given
        return given
    bad = [k for k in given if k not in known]
    if bad:
        names = ", ".join(known) or "none"
        raise ValueError(f"{spec}: --model-args {bad[0]} is not an option here (known: {names})")
    return {known[k]: _checked(k, v) for k, v in given.items()}


def _checked(key: str, value: object) -> object:
    numeric = {"timeout", "connect_timeout", "max_pixels", "batch_size", "retries", "max_reply_mb"}
    if key in numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError(f"--{key.replace('_', '-')} / {key}= must be a number, got {value!r}")
    if key in ("timeout", "connect_timeout", "max_reply_mb"):
        if not (math.isfinite(value) and value > 0):  # type: ignore[arg-type]
            what = "--timeout" if "timeout" in key else key
            raise ValueError(f"{what} must be a finite number > 0, got {value}")
        return float(value)  # type: ignore[arg-type]
    if key == "retries":
        if value < 0 or value != int(value):  # type: ignore[operator]
            raise ValueError(f"--retries must be an integer >= 0, got {value}")
        return int(value) + 1  # type: ignore[call-overload]
    if key in ("batch_size", "max_pixels") and (value < 1 or value != int(value)):  # type: ignore[operator]
        raise ValueError(f"{key} must be an integer >= 1, got {value}")
    if key in ("allow_download", "trust_remote_code") and not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return str(value) if key in ("device", "dtype", "api_key_env") else value
