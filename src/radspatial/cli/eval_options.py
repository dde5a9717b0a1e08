"""``radspatial eval``'s backend flags and ``--model-args``, checked up front.

``--timeout``/``--retries``/``--api-key-env`` go to ``openai:`` and ``openai-compat:``;
``--hf-allow-download``/``--hf-trust-remote-code`` to ``hf:``; ``--executor ray`` (with
``--replicas``, ``--ray-address``) to ``hf:`` and ``vllm:``. A flag given for a spec it does
not apply to is an error, not silently ignored.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from radspatial.models.options import MODEL_ARGS_HELP, parse_model_args
from radspatial.models.options import backend_options as checked_options

__all__ = ["MODEL_ARGS_HELP", "backend_options", "parse_model_args"]  # the CLI's names


# The dedicated backend flags: (flag, argparse keywords), declared in this order.
_BACKEND_FLAGS: tuple[tuple[str, dict[str, object]], ...] = (
    ("--timeout", {"type": float,
                   "help": "openai/openai-compat: seconds per HTTP call (default: 120)"}),
    ("--retries", {"type": int,
                   "help": "openai/openai-compat: retries of a failed call (default: 5)"}),
    ("--api-key-env", {"metavar": "NAME",
                       "help": "send the API key in this environment variable (default: "
                       "OPENAI_API_KEY for openai:, no key for openai-compat:)"}),
    ("--hf-allow-download", {"action": "store_true",
                             "help": "hf: fetch a hub id missing from the local cache "
                             "(default: local files only)"}),
    ("--hf-trust-remote-code", {"action": "store_true",
                                "help": "hf: run Python code shipped with the model "
                                "repository, only for models you trust (default: never)"}),
    ("--executor", {"choices": ("local", "ray"), "default": "local",
                    "help": "hf/vllm: ray runs hf: replicas on Ray actors and vllm: through "
                    "Ray Data (pip install 'radspatial[ray]'); same calls, same call log "
                    "(default: local)"}),
    ("--replicas", {"type": int,
                    "help": "with --executor ray: model replicas (default: one per GPU, else "
                    "one per CPU)"}),
    ("--ray-address", {"help": "with --executor ray: join this cluster (default: RAY_ADDRESS)"}),
)  # fmt: skip


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every eval backend option has besides ``--model-args``."""
    for flag, keywords in _BACKEND_FLAGS:
        parser.add_argument(flag, **keywords)  # type: ignore[arg-type]


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


def backend_options(args: argparse.Namespace, spec: str | None = None) -> dict:
    """Backend options for ``spec`` from ``--model-args`` and the backend flags
    (``models.options.backend_options``), plus the executor options."""
    spec = spec or args.model
    model_args = parse_model_args(getattr(args, "model_args", None))
    model_args.pop("family", None)  # not a backend option: EvalConfig.family (model_family)
    options = checked_options(spec, model_args, _flag_args(args))
    return {**options, **_executor_options(args, spec)}


def model_family(args: argparse.Namespace) -> str | None:
    """``--model-args family=NAME``: the MIRP model family whose decoding ``--protocol mirp``
    uses (``none``: ours); None: recognised from the model name."""
    value = parse_model_args(getattr(args, "model_args", None)).get("family")
    return None if value is None else str(value).lower()


def _executor_options(args: argparse.Namespace, spec: str) -> dict:
    """``--executor ray`` with ``--replicas``/``--ray-address``: hf and vllm only."""
    executor = getattr(args, "executor", "local")
    replicas, address = getattr(args, "replicas", None), getattr(args, "ray_address", None)
    if executor != "ray":
        if replicas is not None or address is not None:
            raise ValueError("--replicas and --ray-address need --executor ray")
        return {}
    from radspatial.models.base import ray_backends, traits  # what each backend declares

    if traits(spec.partition(":")[0]).ray is None:
        runs = "/".join(ray_backends())
        raise ValueError(f"{spec}: --executor ray applies to {runs} models only")
    if replicas is not None and replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {replicas}")
    return {"executor": "ray", "replicas": replicas, "address": address}


def run_dir_for(out: Path, spec: str) -> Path:
    """One run folder per model under ``out``: the spec with ``:/@`` and spaces made ``_``."""
    from radspatial.core.redact import redact  # a password in a URL never names a folder

    name = "".join("_" if c in ":/@\\ " else c for c in redact(spec)).strip("._") or "model"
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
