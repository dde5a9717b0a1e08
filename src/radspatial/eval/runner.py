"""Evaluation runs: repeats, a write-ahead call log, resume, and the final files.

Every call is keyed by a hash of everything that determines it (model spec, decoding, prompt,
image bytes, run index) and appended to ``calls.jsonl`` as soon as it returns. Rerunning the same
command skips every successful call in the log, so Ctrl-C or kill -9 followed by the same command
ends with the same ``results.jsonl`` and ``metrics.json`` as an uninterrupted run. The folder is
locked for the run (``runguard.run_lock``); Ctrl-C or SIGTERM leaves ``run.json`` saying
``interrupted``. Calls still failing after the backend's retries are errors: kept out of
accuracy, counted in ``run.json`` and ``metrics.json``, retried by the same command.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from radspatial import __version__
from radspatial.core.io import (
    atomic_write_json,
    atomic_write_jsonl,
    jsonl_line,
    open_append,
    read_call_log,
)
from radspatial.core.jobspec import ParamError
from radspatial.core.progress import Progress
from radspatial.core.records import ResultRow
from radspatial.core.redact import redact, redact_json
from radspatial.core.safepath import check_disjoint, check_image_bytes
from radspatial.core.textsafe import utf8_clean
from radspatial.eval.items import EvalItem, load_items, sample_items
from radspatial.eval.mirp import draw_examples
from radspatial.eval.prompts import MIRP, MIRP_PROTOCOL, PromptTemplate
from radspatial.eval.requests import item_meta, item_truth
from radspatial.eval.results import result_row
from radspatial.eval.runguard import LOCK_NAME, run_lock
from radspatial.eval.usage import Price, forged_numbers, usage_block
from radspatial.models.base import (
    Backend,
    Decoding,
    MissingDependency,
    Reply,
    Request,
    create_backend,
    reads_truth,
    remote_provenance,
)
from radspatial.models.families import Family, clean_reply, family_of, settings

CALLS = "calls.jsonl"
MAX_CONCURRENCY = 4096  # calls in flight; more only builds connection slots nobody uses
PROTOCOLS = ("radspatial", "mirp")


@dataclass(frozen=True)
class EvalConfig:
    model: str
    runs: int = 3
    concurrency: int = 8
    limit: int | None = None  # N items spread over setups/markers/types (items.sample_items)
    limit_seed: int = 0
    setups: tuple[str, ...] | None = None
    markers: tuple[str, ...] | None = None
    question_types: tuple[str, ...] | None = None
    decoding: Decoding = field(default_factory=Decoding)
    template: PromptTemplate | None = None  # None: MIRP's prompts (per protocol)
    protocol: str = "radspatial"  # or "mirp": MIRP's examples, order, prompt and parser
    backend_options: dict[str, Any] = field(default_factory=dict)  # e.g. timeout_s, max_attempts
    judge: str | None = None  # backend spec of the LLM judge for open answers (grading.judge)
    judge_all: bool = False  # judge every open answer, not only those the rules leave open
    family: str | None = None  # a MIRP family name or "none" (--model-args family=); None: by name
    price: Price | None = None  # --price: USD per million tokens, for the usage block's cost

    @property
    def mirp_family(self) -> Family | None:
        """The MIRP model family whose decoding ``--protocol mirp`` applies (None: ours)."""
        return family_of(self.model, self.family) if self.protocol == "mirp" else None

    @property
    def effective_decoding(self) -> Decoding:
        """``decoding``, or under ``--protocol mirp`` the model family's (models/families.py)."""
        family = self.mirp_family
        return self.decoding if family is None else replace(self.decoding, family=family.name)

    @property
    def prompt_template(self) -> PromptTemplate:
        if self.template is not None:
            return self.template
        return MIRP_PROTOCOL if self.protocol == "mirp" else MIRP

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ParamError("protocol", f"{{param}} must be one of {', '.join(PROTOCOLS)}")
        if self.limit is not None and self.limit < 1:
            raise ParamError("limit", f"{{param}} must be >= 1, got {self.limit}")
        if self.runs < 1:
            raise ParamError("runs", f"{{param}} must be >= 1, got {self.runs}")
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise ParamError(
                "concurrency", f"{{param}} must be 1-{MAX_CONCURRENCY}, got {self.concurrency}"
            )
        family_of(self.model, self.family)  # an unknown family= fails here


def call_key(
    spec: str,
    decoding: Decoding,
    prompt: str,
    image_sha256: str,
    run: int,
    text_first: bool = True,
) -> str:
    fields = {
        "model": spec,
        "decoding": decoding.to_json(),
        "prompt": prompt,
        "image": image_sha256,
        "run": run,
    }
    if text_first:  # always now; keys of runs made image-first (without it) are not reused
        fields["text_first"] = True
    blob = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def mirp_examples(items: Sequence[EvalItem], runs: int) -> dict[tuple[str, int], tuple[str, int]]:
    """MIRP's protocol: each (item, run) gets another item's question and answer as example."""
    groups: dict[tuple[str, str, str], list[tuple[str, str, int | str]]] = {}
    for item in sorted(items, key=lambda i: (i.extra.get("order", 0), i.id)):
        key = (item.setup, item.marker, item.question_type)
        groups.setdefault(key, []).append((item.id, item.question, item.expected))
    return draw_examples(groups, runs)


PromptOf = Callable[[EvalItem, int], str]


def prompts_for(items: Sequence[EvalItem], config: EvalConfig) -> PromptOf:
    """``prompt(item, run)``: the rendered prompt of a call, rendered when asked (only MIRP's
    per-run examples are drawn up front: a question and an answer per call)."""
    template = config.prompt_template
    if config.protocol == "mirp":
        examples = mirp_examples(items, config.runs)
        return lambda item, run: template.render(item, examples[(item.id, run)])
    return lambda item, run: template.render(item)


def _chunks(
    items: Sequence[EvalItem],
    config: EvalConfig,
    prompts: PromptOf,
    done: dict[str, dict],
    size: int,
    where: dict[str, list[tuple[str, int]]],
    oracle: bool = False,
) -> Iterator[list[Request]]:
    """Pending requests in chunks, reading each image once (bounded memory on big datasets).

    Fills ``where``: key -> [(item id, run), ...]; items asking alike share one call. Only an
    ``oracle`` backend's requests carry the items' truth.
    """
    batch: list[Request] = []
    decoding = config.effective_decoding
    for item in items:
        png = item.image.read_bytes()
        check_image_bytes(item.image, png)
        sha = hashlib.sha256(png).hexdigest()
        for run in range(config.runs):
            prompt = prompts(item, run)
            key = call_key(config.model, decoding, prompt, sha, run)
            where.setdefault(key, []).append((item.id, run))
            row = done.get(key)
            if len(where[key]) > 1 or (row is not None and row.get("error") is None):
                continue
            meta = {**item_meta(item), "run": run}
            truth = item_truth(item) if oracle else {}
            batch.append(Request(key, prompt, png, meta, truth=truth))
            if len(batch) >= size:
                yield batch
                batch = []
    yield batch


def run_eval(
    data: Path,
    out: Path,
    config: EvalConfig,
    *,
    backend: Backend | None = None,
    progress: bool = True,
    on_open: Callable[[], None] | None = None,
) -> list[dict]:
    """Evaluate ``config.model`` on the dataset at ``data``; write results under ``out``.
    ``on_open`` runs once the backend is open, before the first call (the CLI's remote note)."""
    data = Path(os.path.abspath(data))  # run.json and rows name it from any working folder
    items = load_items(
        data, setups=config.setups, markers=config.markers, question_types=config.question_types
    )
    if config.limit is not None:
        items = sample_items(items, config.limit, seed=config.limit_seed)
    out = Path(out)
    check_disjoint(out, {"--data": data})  # a run's files never land in (or around) its dataset
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    with run_lock(out):
        done = read_call_log(out / CALLS, check=forged_numbers)
        opened = backend is None  # closed here only if opened here (e.g. Ray replicas)
        if backend is None:
            try:
                backend = open_backend(config)
            except BaseException:
                if created:  # a bad model spec leaves no empty run folder behind
                    (out / LOCK_NAME).unlink(missing_ok=True)
                    with contextlib.suppress(OSError):
                        out.rmdir()
                raise
        try:
            if on_open is not None:
                on_open()
            return _run_locked(data, out, config, items, backend, done, progress)
        finally:
            if opened and (close := getattr(backend, "close", None)) is not None:
                close()


def open_backend(config: EvalConfig) -> Backend:
    """The backend ``config.model`` names, with the run's decoding and concurrency."""
    try:
        return create_backend(
            config.model,
            decoding=config.effective_decoding,
            concurrency=config.concurrency,
            **config.backend_options,
        )
    except MissingDependency as exc:
        raise ValueError(f"{config.model}: {exc}") from None


def _run_locked(
    data: Path,
    out: Path,
    config: EvalConfig,
    items: list[EvalItem],
    backend: Backend,
    done: dict[str, dict],
    progress: bool,
) -> list[dict]:
    run_info = _run_info(data, config, backend, len(items))
    atomic_write_json(out / "run.json", {**run_info, "status": "running"})
    prompts = prompts_for(items, config)
    try:
        where = _call_all(out, config, items, backend, prompts, done, progress)
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        n_done = sum(1 for r in done.values() if r.get("error") is None)
        atomic_write_json(out / "run.json", {**run_info, "status": status, "calls_done": n_done})
        raise
    by_pos = {pos: done.get(key) for key, places in where.items() for pos in places}
    records = [
        result_row(item, run, by_pos.get((item.id, run)), prompts(item, run), config.protocol)
        for run in range(config.runs)
        for item in items
    ]
    # each call once (items asking alike share one), with the usage it had when it returned
    usage = usage_block((done[k] for k in where if k in done), config.price)
    rows = _write_results(out, config, list(records), usage)
    n_err = sum(1 for r in rows if r["error"])
    status = "complete" if n_err == 0 else "incomplete"
    info = {**run_info, "status": status, "n_errors": n_err, "usage": usage}
    atomic_write_json(out / "run.json", info)
    return rows


def _run_info(data: Path, config: EvalConfig, backend: Backend, n_items: int) -> dict[str, Any]:
    """What run.json records about the run (its status is added as it goes); secrets in any
    URL are redacted (``core.redact``)."""
    return redact_json(
        {
            "data": str(data),
            "model": redact(config.model),
            "backend": redact_json(backend.describe()),
            **remote_provenance(config.model, config.judge, config.backend_options),
            "runs": config.runs,
            "concurrency": config.concurrency,
            "limit": config.limit,
            **({"limit_seed": config.limit_seed} if config.limit is not None else {}),
            "setups": list(config.setups) if config.setups else None,
            "markers": list(config.markers) if config.markers else None,
            "question_types": list(config.question_types) if config.question_types else None,
            "decoding": config.effective_decoding.to_json(),
            "decoding_source": _decoding_source(config),
            "protocol": config.protocol,
            "template": config.prompt_template.to_json(),
            **({"judge": config.judge, "judge_all": config.judge_all} if config.judge else {}),
            "n_items": n_items,
            "versions": {"radspatial": __version__, "python": platform.python_version()},
        }
    )


def _decoding_source(config: EvalConfig) -> dict[str, Any]:
    """Which decoding the run used: a MIRP family's (its script, its settings) or ours."""
    family = config.mirp_family
    if family is None:
        return {"family": None, "source": "radspatial defaults (--temperature, --max-tokens)"}
    used = settings(config.effective_decoding).to_json()
    return {"family": family.name, "source": f"MIRP {family.source}", "settings": used}


def _call_all(
    out: Path,
    config: EvalConfig,
    items: list[EvalItem],
    backend: Backend,
    prompts: PromptOf,
    done: dict[str, dict],
    progress: bool,
) -> dict[str, list[tuple[str, int]]]:
    """Every pending call through the backend, each reply appended to the call log (and to
    ``done``) as it returns; key -> [(item id, run), ...] of every call, pending or done."""
    # a bar on a terminal, a line every few seconds when piped (radspatial.core.progress)
    bar = Progress(
        len(items) * config.runs, f"eval {redact(config.model)}: calls", "call", enabled=progress
    )
    bar.update(sum(1 for r in done.values() if r.get("error") is None))
    where: dict[str, list[tuple[str, int]]] = {}
    decoding = config.effective_decoding
    with open_append(out / CALLS) as log:

        def on_reply(req: Request, reply: Reply) -> None:
            text, error = reply.text, reply.error
            if error is None and not isinstance(text, str):  # a backend bug, not an answer
                text, error = None, f"the backend returned {type(text).__name__}, not text"
            row = {
                "key": req.key,
                "id": req.meta["id"],
                "run": req.meta["run"],
                "reply": None if text is None else utf8_clean(clean_reply(decoding, text)),
                "error": None if error is None else redact(utf8_clean(str(error))),
                "latency_s": round(reply.latency_s, 4),
                "meta": reply.meta,
            }
            log.write(jsonl_line(row))
            log.flush()
            done[req.key] = row
            if bar.note:
                bar.set_note("")
            if error is None:
                bar.update()

        try:
            chunk = getattr(backend, "chunk_size", None) or max(256, 16 * config.concurrency)
            # a local model loads on its first call (the agent's network: a minute when cold):
            # say so, and keep a line coming until the first reply
            bar.set_note("waiting for the first reply (a local model loads on its first call)")
            with bar.keepalive():
                for batch in _chunks(
                    items, config, prompts, done, chunk, where, reads_truth(backend)
                ):
                    if batch:
                        backend.generate(batch, on_reply)
        finally:
            log.flush()
            os.fsync(log.fileno())
            bar.close()
    return where


def _write_results(
    out: Path, config: EvalConfig, rows: list[ResultRow], usage: dict[str, Any]
) -> list[dict]:
    """results.jsonl (after the judge, if any) and metrics.json (with the calls' ``usage``);
    the rows as written."""
    from radspatial.core.metrics_blocks import Usage
    from radspatial.core.metrics_open import JudgeSummary
    from radspatial.eval.aggregate import compute_metrics
    from radspatial.grading.judge import apply_judge, needs_judge

    judge = None
    if config.judge and needs_judge(rows):
        rows, judge = apply_judge(
            rows, out, config.judge, judge_all=config.judge_all, concurrency=config.concurrency
        )
    written = [r.to_json() for r in rows]
    atomic_write_jsonl(out / "results.jsonl", written)
    metrics = compute_metrics(rows, model=redact(config.model), runs=config.runs)
    metrics = metrics.with_blocks(usage=Usage.from_json(usage, "usage"))
    if judge is not None:
        without_prompt = {k: v for k, v in judge.items() if k != "prompt"}
        metrics = metrics.with_blocks(judge=JudgeSummary.from_json(without_prompt, "judge"))
    atomic_write_json(out / "metrics.json", redact_json(metrics.to_json()))
    return written
