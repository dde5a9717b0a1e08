"""``radspatial eval``'s backend flags and ``--model-args``, checked up front (the flags are
declared in the job spec, ``eval/job.EvalJob``; the checks live there, shared with the API).

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

from radspatial.core.jobspec import caller_terms
from radspatial.eval.job import EvalJob, model_family
from radspatial.eval.job import backend_options as job_backend_options
from radspatial.models.options import MODEL_ARGS_HELP, parse_model_args

__all__ = ["MODEL_ARGS_HELP", "backend_options", "model_family", "parse_model_args"]


def backend_options(args: argparse.Namespace, spec: str | None = None) -> dict:
    """Backend options for ``spec`` from ``--model-args`` and the backend flags, checked as
    ``radspatial.evaluate`` checks its keywords (``eval/job.backend_options``)."""
    with caller_terms(EvalJob, "cli"):
        return job_backend_options(args, spec)


def note_remote(specs: list[str], judge: str | None, options: dict | None = None) -> None:
    """One stderr line per model (or judge) whose backend sends the items off this machine
    (its ``remote`` trait: ``openai:``, ``openai-compat:`` to another host), or whose backend
    ``options`` (by spec) run it on a Ray cluster that may span machines, before it runs."""
    from radspatial.core.redact import redact
    from radspatial.core.textsafe import log_text
    from radspatial.models.base import is_remote

    for spec in [*specs, *([judge] if judge else [])]:
        if is_remote(spec):
            where = "a server off this machine"
        elif is_remote(spec, (options or {}).get(spec) if spec in specs else None):
            where = "the Ray cluster's machines"
        else:
            continue
        print(
            f"radspatial: note: {log_text(redact(spec))} sends the dataset's images and "
            f"questions to {where}",
            file=sys.stderr,
        )


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
