"""``radspatial demo``: generate, evaluate the baselines and report on the bundled CT."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from radspatial.cli.common import Command, question_types
from radspatial.cli.eval import _print_eval
from radspatial.core.jobspec import ParamError, add_arguments, caller_terms, from_namespace, option
from radspatial.core.runtime import bundled_example

DEMO_MODELS = (
    "baseline:random",
    "baseline:yes",
    "baseline:anatomy-prior",
    "baseline:standard-view",
    "agent",  # the README's agent: markers where the question names them, organs otherwise
    "agent:mask",
)
# The mask oracle needs each slice's label image: blank ablation images have none.
DEMO_SETUPS = {"agent:mask": ("rq1", "rq2", "rq3")}
# The plain agent runs its U-Net on every plain slice (~8x the marker reader's time per call):
# the demo asks it a spread sample. Every deterministic backend (``is_deterministic``: the
# agent, agent:markers, agent:mask, baseline:yes) runs once: repeats would answer the same.
DEMO_SAMPLE = {"agent": (300, 1)}  # spec -> (items, runs)


# fmt: off
@dataclass(frozen=True, kw_only=True)
class DemoJob:
    """What one ``demo`` is asked (its job spec, ``core/jobspec``; the demo has no Python API
    function: it is ``generate``, ``evaluate`` per model and ``report`` in a row)."""

    out: Path = option(Path("runs/demo"), type=Path, help="output folder")
    runs: int = option(3, type=int, help="repeats of every item")
    model: tuple[str, ...] | None = option(None, action="append",
        help=f"model spec to evaluate (repeatable; default: {', '.join(DEMO_MODELS)})")
    questions: tuple[str, ...] = option("all", type=question_types,
        help="question types, comma-separated, or spar, open, all (every type: MIRP relative "
        "position, the SPAR-VQA and the open types)")
# fmt: on


def _arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, DemoJob)


def _runnable(specs: tuple[str, ...]) -> list[str]:
    """The demo's models; the plain agent's U-Net needs PyTorch, which ``pip install -e .``
    does not bring: then the marker reader runs in its place, and the demo says so."""
    import importlib.util

    if "agent" not in specs or importlib.util.find_spec("torch") is not None:
        return list(specs)
    _stage(
        "the plain agent needs PyTorch (pip install 'radspatial[agent]'): running "
        "agent:markers (the marker reader alone; it abstains on plain RQ1 slices) instead"
    )
    return ["agent:markers" if s == "agent" else s for s in specs]


def _stage(text: str) -> None:
    print(f"demo: {text}", file=sys.stderr, flush=True)


def _evaluate(
    spec: str, data: Path, job: DemoJob, step: str, start: float, total: int | None = None
) -> Path:
    """One model's run folder under OUT/eval; a deterministic backend runs once. ``total``:
    the dataset's items, so a model asked fewer says how many and why."""
    import time
    from dataclasses import replace

    from radspatial.eval.runner import EvalConfig, open_backend, run_eval
    from radspatial.models.base import is_deterministic

    run_dir = job.out / "eval" / spec.replace(":", "_").replace("/", "_").replace("@", "_")
    limit, runs = DEMO_SAMPLE.get(spec, (None, job.runs))
    config = EvalConfig(model=spec, runs=runs, setups=DEMO_SETUPS.get(spec), limit=limit)
    backend = open_backend(config)
    once = is_deterministic(backend)
    config = replace(config, runs=1) if once else config  # repeats would answer the same
    what = f"{limit} items spread over the types, " if limit else ""
    what += f"{config.runs} run{'s' * (config.runs > 1)}" + " (deterministic)" * once
    _stage(f"{step} evaluating {spec}, {what} ({time.monotonic() - start:.0f} s so far)")
    try:
        rows = run_eval(data, run_dir, config, backend=backend)
    finally:
        close = getattr(backend, "close", None)  # opened here, so closed here (Ray replicas)
        if close is not None:
            close()
    _print_eval(run_dir, rows, scope=_scope(spec, rows, total, limit))
    sys.stdout.flush()
    return run_dir


def _scope(spec: str, rows: list[dict], total: int | None, limit: int | None) -> str | None:
    """What a model's summary line covers when it is not every item: the mask oracle skips
    the AS items (blank images: no label image, no anatomy to read), the plain agent is asked
    a spread sample. None: every item."""
    n = len({r["id"] for r in rows})
    if total is None:
        return None
    if limit:
        return f"a spread sample of {n} of {total} items"
    if spec in DEMO_SETUPS and n < total:
        return f"{n} of {total} items: {total - n} AS blank images skipped, no anatomy to read"
    return None


def cmd_demo(args: argparse.Namespace) -> int:
    import time

    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.imaging.volumes import Case
    from radspatial.reports.build import build_report

    job = from_namespace(DemoJob, args)
    if job.runs < 1:
        with caller_terms(DemoJob, "cli"):
            raise ParamError("runs", f"{{param}} must be >= 1, got {job.runs}")
    ct, seg = bundled_example()
    data = job.out / "dataset"
    specs = list(job.model or _runnable(DEMO_MODELS))
    n_steps = len(specs) + 2
    start = time.monotonic()
    _stage(f"[1/{n_steps}] generating the benchmark from the bundled CT into {data}")
    summary = build_dataset(
        [Case("example_ct_sm", ct, seg, "totalsegmentator")],
        GenerateConfig(export_masks=True, question_types=job.questions),
        data,
        overwrite=True,
    )
    print(f"dataset: {data} ({summary.n_questions} questions)", flush=True)
    run_dirs = []
    for k, spec in enumerate(specs, start=2):
        step = f"[{k}/{n_steps}]"
        run_dirs.append(_evaluate(spec, data, job, step, start, summary.n_questions))
    _stage(f"[{n_steps}/{n_steps}] writing the report ({time.monotonic() - start:.0f} s so far)")
    report = build_report(run_dirs, job.out / "report", log=_stage)
    print(f"report: {report.summary_md}")
    print(f"report (HTML, open in a browser): {report.index_html}")
    for fig in report.figures:
        print(f"figure: {fig}")
    _stage(f"done in {time.monotonic() - start:.0f} s")
    return 0


COMMANDS = (
    Command(
        "demo",
        "the main job on the bundled real CT: generate, evaluate the baselines, report",
        "Generates OUT/dataset from the bundled real CT, evaluates each model into "
        "OUT/eval/<model> and writes OUT/report. Progress goes to stderr (plain lines every "
        "RADSPATIAL_PROGRESS_SECONDS, default 5, when not a terminal).",
        _arguments,
        cmd_demo,
    ),
)
