"""The ``eval`` job spec: every option of ``radspatial eval`` and ``radspatial.evaluate``,
declared once (``core/jobspec``), and what turns a job into the runner's ``EvalConfig``:
backend options from ``--model-args`` (passed through as written, read by ``models/options``)
and the dedicated backend flags, checked up front.

Light on purpose: the command line builds its parser from this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial.bench.job import question_types
from radspatial.core.jobspec import ParamError, csv_lower, option

if TYPE_CHECKING:
    from radspatial.eval.runner import EvalConfig
    from radspatial.eval.usage import Price


def _model_args_help() -> str:
    from radspatial.models.options import MODEL_ARGS_HELP

    return MODEL_ARGS_HELP + " (default: none)"


def price(text: str) -> Price:
    """``input=X,output=Y``: USD per million tokens."""
    from radspatial.eval.usage import parse_price

    try:
        return parse_price(text)
    except ValueError as exc:
        # argparse names the flag itself, the API the keyword (``core/jobspec._read``)
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--price ")) from None


PROTOCOL_HELP = (
    "radspatial: fixed balanced example per item, our parser; mirp: MIRP's replication protocol "
    "(example drawn from another item per run, MIRP's prompt for every setup, MIRP's answer "
    "parser, and the decoding MIRP's code used for GPT-4o, Pixtral, Llama 3.2 Vision and "
    "Janus-Pro, recognised from the model name or --model-args "
    "family=gpt-4o|pixtral|llama-3.2-vision|janus-pro|none); text comes before the image in both"
)
_PATH = "str | Path"


# fmt: off
@dataclass(frozen=True, kw_only=True)
class EvalJob:
    """What one ``eval`` is asked: the dataset, the model, the run folder, which items, how
    they are asked and graded, and the backend's options."""

    data: Path = option(type=Path, positional=True, annotation=_PATH, help="dataset folder")
    model: str = option(positional=True, nargs="+", action="extend", metavar="SPEC",
        help="model spec(s); with several, each gets its run folder OUT/<spec> and one report "
        "is written to OUT/report")
    out: Path = option(type=Path, positional=True, annotation=_PATH,
        help="run folder (with several models: parent folder)")
    model_args: str | Mapping[str, Any] | None = option(None, metavar="K=V,...",
        help=_model_args_help)
    runs: int = option(3, type=int, help="repeats of every item")
    concurrency: int = option(8, type=int, help="calls in flight at once")
    # which items: a balanced --limit sample, setups, markers, question types
    limit: int | None = option(None, type=int,
        help="evaluate N items sampled across setups, markers and question types, answers "
        "balanced, seeded by --limit-seed (default: all items)")
    limit_seed: int = option(0, type=int, help="seed of the --limit sample")
    setups: tuple[str, ...] | None = option(None, type=csv_lower, csv=True,
        annotation="Sequence[str] | None",
        help="only these setups, e.g. rq1,rq2 (default: all)")
    markers: tuple[str, ...] | None = option(None, type=csv_lower, csv=True,
        annotation="Sequence[str] | None",
        help="only these marker types, e.g. dots,letters (default: all)")
    questions: tuple[str, ...] | None = option(None, type=question_types, csv=True,
        annotation="Sequence[str] | None",
        help="only these question types, e.g. spar or size,distance (default: all)")
    # how items are asked and answers read: prompt, protocol, decoding, the judge
    prompt: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="custom prompt template file ({question} etc.; default: MIRP's prompts)")
    protocol: str = option("radspatial", choices=("radspatial", "mirp"), help=PROTOCOL_HELP)
    temperature: float = option(0.0, type=float, help="sampling temperature")
    max_tokens: int = option(1024, type=int, help="new tokens per reply")
    judge: str | None = option(None,
        help="LLM judge for open answers the rules cannot read, any model spec "
        "(e.g. openai-compat:MODEL@URL); verdicts cached in judge_calls.jsonl "
        "(default: no judge, the rules alone)")
    judge_all: bool = option(False, action="store_true",
        help="judge every open answer, not only undecided")
    price: Price | None = option(None, type=price, annotation="str | Price | None",
        help="USD per million tokens, input=X,output=Y (e.g. input=2.5,output=10): adds a cost "
        "estimate to metrics.json's usage block and the report (default: no cost)")
    # the dedicated backend flags (besides --model-args)
    timeout: float | None = option(None, type=float,
        help="openai/openai-compat: seconds per HTTP call (default: 120)")
    retries: int | None = option(None, type=int,
        help="openai/openai-compat: retries of a failed call (default: 5)")
    api_key_env: str | None = option(None, metavar="NAME",
        help="send the API key in this environment variable (default: OPENAI_API_KEY for "
        "openai:, no key for openai-compat:)")
    hf_allow_download: bool = option(False, action="store_true",
        help="hf: fetch a hub id missing from the local cache (default: local files only)")
    hf_trust_remote_code: bool = option(False, action="store_true",
        help="hf: run Python code shipped with the model repository, only for models you "
        "trust (default: never)")
    executor: str = option("local", choices=("local", "ray"),
        help="hf/vllm: ray runs hf: replicas on Ray actors and vllm: through Ray Data (pip "
        "install 'radspatial[ray]'); same calls, same call log (default: local)")
    replicas: int | None = option(None, type=int,
        help="with --executor ray: model replicas (default: one per GPU, else one per CPU)")
    ray_address: str | None = option(None,
        help="with --executor ray: join this cluster (default: RAY_ADDRESS)")
    progress: bool = option(False, cli=False,
        help="show a progress line (the command line always does)")
# fmt: on


def model_args(job: Any) -> dict[str, Any]:
    """``--model-args`` as given: a ``K=V,...`` string (parsed) or, from Python, a mapping."""
    from radspatial.models.options import parse_model_args

    value = getattr(job, "model_args", None)
    return dict(value) if isinstance(value, Mapping) else parse_model_args(value)


def _flag_args(job: Any) -> dict[str, object]:
    """The dedicated backend flags, as model args."""
    flags = {
        "timeout": job.timeout,
        "retries": job.retries,
        "api_key_env": job.api_key_env,
        "allow_download": True if job.hf_allow_download else None,
        "trust_remote_code": True if job.hf_trust_remote_code else None,
    }
    return {k: v for k, v in flags.items() if v is not None}


def backend_options(job: Any, spec: str | None = None) -> dict:
    """Backend options for ``spec`` (default: the job's model) from ``model_args`` and the
    backend flags (``models.options.backend_options``), plus the executor options. ``job``:
    an :class:`EvalJob` or the parsed flags."""
    from radspatial.models.options import backend_options as checked_options

    spec = spec or job.model
    given = model_args(job)
    given.pop("family", None)  # not a backend option: EvalConfig.family (model_family)
    options = checked_options(spec, given, _flag_args(job))
    return {**options, **_executor_options(job, spec)}


def model_family(job: Any) -> str | None:
    """``model_args`` ``family=NAME``: the MIRP model family whose decoding ``--protocol mirp``
    uses (``none``: ours); None: recognised from the model name."""
    value = model_args(job).get("family")
    return None if value is None else str(value).lower()


def _executor_options(job: Any, spec: str) -> dict:
    """``executor="ray"`` with ``replicas``/``ray_address``: hf and vllm only."""
    executor = getattr(job, "executor", "local")
    replicas, address = getattr(job, "replicas", None), getattr(job, "ray_address", None)
    if executor != "ray":
        if replicas is not None or address is not None:
            why = "{replicas} and {ray_address} need {executor} ray"
            raise ParamError(("replicas", "ray_address", "executor"), why)
        return {}
    from radspatial.models.base import ray_backends, traits  # what each backend declares

    if traits(spec.partition(":")[0]).ray is None:
        runs = "/".join(ray_backends())
        raise ParamError("executor", f"{spec}: {{param}} ray applies to {runs} models only")
    if replicas is not None and replicas < 1:
        raise ParamError("replicas", f"{{param}} must be >= 1, got {replicas}")
    return {"executor": "ray", "replicas": replicas, "address": address}


def eval_config(job: EvalJob, template: Any = None) -> EvalConfig:
    """The runner's config for ``job`` (one model); ``template``: the prompt already loaded
    (default: read from ``job.prompt``)."""
    from radspatial.eval.prompts import load_template
    from radspatial.eval.runner import EvalConfig
    from radspatial.models.base import Decoding

    if template is None and job.prompt is not None:
        template = load_template(Path(job.prompt))
    return EvalConfig(
        model=job.model, runs=job.runs, concurrency=job.concurrency, limit=job.limit,
        limit_seed=job.limit_seed, setups=job.setups, markers=job.markers,
        question_types=job.questions,
        decoding=Decoding(temperature=job.temperature, max_tokens=job.max_tokens),
        template=template, protocol=job.protocol, backend_options=backend_options(job),
        judge=job.judge, judge_all=job.judge_all, family=model_family(job), price=job.price,
    )  # fmt: skip
