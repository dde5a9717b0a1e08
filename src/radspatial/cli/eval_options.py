"""``radspatial eval``'s backend flags and ``--model-args``, checked up front.

``--timeout``/``--retries``/``--api-key-env`` go to ``openai:`` and ``openai-compat:``;
``--hf-allow-download``/``--hf-trust-remote-code`` to ``hf:``; ``--executor ray`` (with
``--replicas``, ``--ray-address``) to ``hf:`` and ``vllm:``. A flag given for a spec it does
not apply to is an error, not silently ignored.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=float,
        help="openai/openai-compat: seconds per HTTP call (default: 120)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        help="openai/openai-compat: retries of a failed call (default: 5)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="send the API key in this environment variable (default: OPENAI_API_KEY for "
        "openai:, no key for openai-compat:)",
    )
    parser.add_argument(
        "--hf-allow-download",
        action="store_true",
        help="hf: fetch a hub id missing from the local cache (default: local files only)",
    )
    parser.add_argument(
        "--hf-trust-remote-code",
        action="store_true",
        help="hf: run Python code shipped with the model repository, only for models you "
        "trust (default: never)",
    )
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="hf/vllm: ray runs hf: replicas on Ray actors and vllm: through Ray Data "
        "(pip install 'radspatial[ray]'); same calls, same call log (default: local)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        help="with --executor ray: model replicas (default: one per GPU, else one per CPU)",
    )
    parser.add_argument(
        "--ray-address", help="with --executor ray: join this cluster (default: RAY_ADDRESS)"
    )


_HTTP_PREFIXES = ("openai", "openai-compat")
_HTTP_ARGS = {
    "timeout": "timeout_s",
    "connect_timeout": "connect_timeout_s",
    "retries": "max_attempts",
    "api_key_env": "api_key_env",
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
    "openai/openai-compat: timeout, connect_timeout, retries, api_key_env; "
    "vllm: any vllm.LLM argument (e.g. tensor_parallel_size=2)"
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


def _flag_args(args: argparse.Namespace) -> dict[str, object]:
    """The dedicated backend flags, as model args."""
    flags = {
        "timeout": args.timeout,
        "retries": args.retries,
        "api_key_env": args.api_key_env,
        "allow_download": True if args.hf_allow_download else None,
        "trust_remote_code": True if args.hf_trust_remote_code else None,
    }
    return {k: v for k, v in flags.items() if v is not None}


_FLAG_NAMES = {
    "timeout": "--timeout",
    "retries": "--retries",
    "api_key_env": "--api-key-env",
    "allow_download": "--hf-allow-download",
    "trust_remote_code": "--hf-trust-remote-code",
}


def backend_options(args: argparse.Namespace, spec: str | None = None) -> dict:
    """Backend options for ``spec`` from ``--model-args`` and the backend flags.

    A flag or key that does not apply to the spec's backend is an error, not silently ignored.
    """
    spec = spec or args.model
    prefix = spec.partition(":")[0]
    known = MODEL_ARGS.get(prefix, {})
    model_args = parse_model_args(getattr(args, "model_args", None))
    flags = _flag_args(args)
    for key, value in flags.items():
        if known is not None and key not in known:
            wants = "hf" if key in _HF_ARGS else "/".join(_HTTP_PREFIXES)
            raise ValueError(f"{spec}: {_FLAG_NAMES[key]} applies to {wants} models only")
        if key in model_args and model_args[key] != value:
            raise ValueError(f"{_FLAG_NAMES[key]} and --model-args {key}= disagree")
    given = {**model_args, **flags}
    executor = _executor_options(args, spec)
    if known is None:  # vllm: passed through as given
        return {**given, **executor}
    bad = [k for k in given if k not in known]
    if bad:
        names = ", ".join(known) or "none"
        raise ValueError(f"{spec}: --model-args {bad[0]} is not an option here (known: {names})")
    return {**{known[k]: _checked(k, v) for k, v in given.items()}, **executor}


def _executor_options(args: argparse.Namespace, spec: str) -> dict:
    """``--executor ray`` with ``--replicas``/``--ray-address``: hf and vllm only."""
    executor = getattr(args, "executor", "local")
    replicas, address = getattr(args, "replicas", None), getattr(args, "ray_address", None)
    if executor != "ray":
        if replicas is not None or address is not None:
            raise ValueError("--replicas and --ray-address need --executor ray")
        return {}
    if spec.partition(":")[0] not in ("hf", "vllm"):
        raise ValueError(f"{spec}: --executor ray applies to hf/vllm models only")
    if replicas is not None and replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {replicas}")
    return {"executor": "ray", "replicas": replicas, "address": address}


def _checked(key: str, value: object) -> object:
    numeric = {"timeout", "connect_timeout", "max_pixels", "batch_size", "retries"}
    if key in numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError(f"--{key.replace('_', '-')} / {key}= must be a number, got {value!r}")
    if key in ("timeout", "connect_timeout"):
        if not (math.isfinite(value) and value > 0):  # type: ignore[arg-type]
            raise ValueError(f"--timeout must be a finite number > 0 (seconds), got {value}")
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


def run_dir_for(out: Path, spec: str) -> Path:
    """One run folder per model under ``out``: the spec with ``:/@`` and spaces made ``_``."""
    name = "".join("_" if c in ":/@\\ " else c for c in spec).strip("._") or "model"
    return out / name


def show_retries() -> None:
    """Backend warnings (retries of failed calls) go to stderr as ``radspatial: ...`` lines."""
    logger = logging.getLogger("radspatial")
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("radspatial: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)


class _Stderr(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - logging must never break the run
            self.handleError(record)
