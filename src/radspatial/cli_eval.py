"""``radspatial eval``'s backend flags: which apply to which model spec, checked up front.

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


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout", type=float, help="openai/openai-compat: seconds per HTTP call (default 120)"
    )
    parser.add_argument(
        "--retries", type=int, help="openai/openai-compat: retries of a failed call (default 5)"
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="send the API key in this environment variable (openai: default OPENAI_API_KEY; "
        "openai-compat: no key unless given)",
    )
    parser.add_argument(
        "--hf-allow-download",
        action="store_true",
        help="hf: fetch a hub id missing from the local cache (default: local files only)",
    )
    parser.add_argument(
        "--hf-trust-remote-code",
        action="store_true",
        help="hf: run Python code shipped with the model repository (only for models you trust)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="hf/vllm: requests per model call (default: hf 8, vllm with --executor ray 16)",
    )
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="hf/vllm: ray runs hf: replicas on Ray actors and vllm: through Ray Data "
        "(pip install 'radspatial[ray]'); same calls, same call log",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        help="with --executor ray: model replicas (default: one per GPU, else one per CPU)",
    )
    parser.add_argument(
        "--ray-address", help="with --executor ray: join this cluster (default RAY_ADDRESS)"
    )


_HTTP_PREFIXES = ("openai", "openai-compat")


def backend_options(args: argparse.Namespace) -> dict:
    """Backend options from the eval flags; a flag that does not apply to the spec is an error."""
    prefix = args.model.partition(":")[0]
    given = {
        "--timeout": args.timeout is not None,
        "--retries": args.retries is not None,
        "--api-key-env": args.api_key_env is not None,
        "--hf-allow-download": args.hf_allow_download,
        "--hf-trust-remote-code": args.hf_trust_remote_code,
    }
    for flag, on in given.items():
        wants = ("hf",) if flag.startswith("--hf-") else _HTTP_PREFIXES
        if on and prefix not in wants:
            raise ValueError(f"{args.model}: {flag} applies to {'/'.join(wants)} models only")
    options: dict = {}
    if args.timeout is not None:
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise ValueError(f"--timeout must be a finite number > 0 (seconds), got {args.timeout}")
        options["timeout_s"] = args.timeout
    if args.retries is not None:
        if args.retries < 0:
            raise ValueError(f"--retries must be >= 0, got {args.retries}")
        options["max_attempts"] = args.retries + 1
    if args.api_key_env is not None:
        options["api_key_env"] = args.api_key_env
    if args.hf_allow_download:
        options["allow_download"] = True
    if args.hf_trust_remote_code:
        options["trust_remote_code"] = True
    batch_size = getattr(args, "batch_size", None)
    if batch_size is not None:
        if prefix not in ("hf", "vllm") or (prefix == "vllm" and args.executor != "ray"):
            raise ValueError(f"{args.model}: --batch-size applies to hf models (and vllm on ray)")
        if batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
        options["batch_size"] = batch_size
    return {**options, **_executor_options(args, prefix)}


def _executor_options(args: argparse.Namespace, prefix: str) -> dict:
    executor = getattr(args, "executor", "local")
    replicas, address = getattr(args, "replicas", None), getattr(args, "ray_address", None)
    if executor != "ray":
        if replicas is not None or address is not None:
            raise ValueError("--replicas and --ray-address need --executor ray")
        return {}
    if prefix not in ("hf", "vllm"):
        raise ValueError(f"{args.model}: --executor ray applies to hf/vllm models only")
    if replicas is not None and replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {replicas}")
    return {"executor": "ray", "replicas": replicas, "address": address}


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
