"""The Python API: one call per job, the same jobs as the command line (docs/python_api.md).

``radspatial.generate``, ``radspatial.evaluate`` and ``radspatial.report`` are these functions,
reached lazily from the package so ``import radspatial`` stays instant; everything heavy is
imported inside them.

Example:
    >>> import radspatial
    >>> bench = radspatial.generate("bench", size=128)  # doctest: +SKIP
    >>> run = radspatial.evaluate("bench", "baseline:anatomy-prior", "runs/prior")  # doctest: +SKIP
    >>> radspatial.report(["runs/prior"], "report").index_html  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from radspatial.bench.dataset import DatasetSummary
    from radspatial.imaging.volumes import Case
    from radspatial.reports.build import ReportSummary

PathLike = str | Path


def generate(
    out: PathLike,
    *,
    ct: PathLike | None = None,
    seg: PathLike | None = None,
    labels: str | None = None,
    case_id: str | None = None,
    cases: PathLike | Sequence[Case] | None = None,
    seg_dir: PathLike | None = None,
    variant: str | None = None,
    seed: int = 0,
    size: int = 512,
    setups: Sequence[str] = ("rq1", "rq2", "rq3", "as"),
    markers: Sequence[str] = ("numbers", "letters", "dots"),  # imaging.markers.MARKER_TYPES
    questions: Sequence[str] = ("relative_position",),
    as_count: int = 100,
    rules: str = "mirp",
    export_masks: bool = False,
    modality: str | None = None,
    workers: int = 1,
    overwrite: bool = False,
    verbose: bool = False,
) -> DatasetSummary:
    """Generate a MIRP-style benchmark into folder ``out``; returns its summary.

    Give one case (``ct`` + ``seg``: NIfTI or DICOM folder, multilabel NIfTI or a
    TotalSegmentator folder, or ``seg_dir``; ``labels`` names the mask's label table, ``case_id``
    and ``variant`` its id and anatomy variant), several (``cases``: a cases CSV or a list of
    ``radspatial.imaging.volumes.Case``), or nothing for the bundled real CT. They are checked
    as ``radspatial generate`` checks its flags (``bench/inputs.py``).
    ``questions`` are question types (``relative_position``, ``size``, ...: docs/spar_vqa.md).
    ``rules``: "mirp" (MIRP's generation rules) or "strict" (docs/mirp.md). ``modality``: "CT"
    or "MR" (None: the label table says; MR for ``totalsegmentator_mr``). Same inputs and seed
    give byte-identical output.

    Example:
        >>> summary = generate("bench", size=128, as_count=4)  # doctest: +SKIP
        >>> summary.n_questions  # doctest: +SKIP
        166
    """
    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.bench.inputs import CaseInputs, cases_modality, resolve_cases
    from radspatial.core.rules import QuestionRules

    mod = modality and modality.upper()
    given = CaseInputs(ct, seg, seg_dir, labels, mod, case_id, variant, cases)
    case_list = resolve_cases(given)
    config = GenerateConfig(
        seed=seed, size=size, setups=tuple(setups), markers=tuple(markers),
        question_types=tuple(questions), as_count=as_count, rules=QuestionRules(profile=rules),
        export_masks=export_masks, modality=cases_modality(given, case_list)[0],
    )  # fmt: skip
    log = print if verbose else (lambda _: None)
    return build_dataset(
        case_list, config, Path(out), workers=workers, overwrite=overwrite, log=log
    )


@dataclass(frozen=True)
class EvalRun:
    """What one ``evaluate`` call wrote: the run folder and its metrics."""

    out: Path
    model: str
    metrics: dict[str, Any]  # metrics.json
    rows: list[dict[str, Any]]  # results.jsonl, one row per item and run

    @property
    def accuracy(self) -> float | None:
        """Mean accuracy across runs (relative position on RQ1-RQ3 when present, else all)."""
        head = self.metrics.get("headline") or {}
        group = head if head.get("n_items") else self.metrics["overall"]
        return group.get("accuracy_mean")

    @property
    def n_errors(self) -> int:
        """Calls that failed after their retries (not counted in accuracy)."""
        from radspatial.core.records import error_count

        return error_count(self.metrics)


def evaluate(
    data: PathLike,
    model: str,
    out: PathLike,
    *,
    runs: int = 3,
    limit: int | None = None,
    limit_seed: int = 0,
    setups: Sequence[str] | None = None,
    markers: Sequence[str] | None = None,
    questions: Sequence[str] | None = None,
    protocol: str = "radspatial",
    model_args: Mapping[str, Any] | None = None,
    concurrency: int = 8,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    progress: bool = False,
) -> EvalRun:
    """Evaluate ``model`` (a spec: ``openai:gpt-4o``, ``hf:/models/x``, ``baseline:yes``,
    ``agent:markers``, ...) on the dataset ``data``; results go to the run folder ``out``.

    Rerunning with the same arguments resumes (finished calls are not repeated). ``limit``
    samples that many items across setups, markers and question types (seeded by
    ``limit_seed``). ``model_args`` are backend options as ``radspatial eval --model-args``
    takes them (``{"batch_size": 4}`` for hf:, ``{"timeout": 30}`` for openai:).

    Example:
        >>> run = evaluate("bench", "baseline:yes", "runs/yes", runs=1)  # doctest: +SKIP
        >>> round(run.accuracy, 3)  # doctest: +SKIP
    """
    from radspatial.eval.runner import EvalConfig, run_eval
    from radspatial.models.base import Decoding
    from radspatial.models.options import backend_options

    config = EvalConfig(
        model=model,
        runs=runs,
        concurrency=concurrency,
        limit=limit,
        limit_seed=limit_seed,
        setups=tuple(setups) if setups else None,
        markers=tuple(markers) if markers else None,
        question_types=tuple(questions) if questions else None,
        decoding=Decoding(temperature=temperature, max_tokens=max_tokens),
        protocol=protocol,
        backend_options=backend_options(model, model_args),
    )
    rows = run_eval(Path(data), Path(out), config, progress=progress)
    metrics = json.loads((Path(out) / "metrics.json").read_text())
    return EvalRun(Path(out), model, metrics, rows)


def report(runs: Sequence[PathLike], out: PathLike) -> ReportSummary:
    """Write the report of eval run folders ``runs`` into ``out``: ``summary.md``,
    ``summary.json``, figures and ``index.html`` (tables, figures, item gallery).

    Example:
        >>> report(["runs/prior", "runs/yes"], "report").index_html  # doctest: +SKIP
        PosixPath('report/index.html')
    """
    from radspatial.reports.build import build_report

    return build_report([Path(r) for r in runs], Path(out))


def export_hf(data: PathLike, out: PathLike, **options: Any) -> Any:
    """A generated dataset as Hugging Face parquet shards + dataset card (``hf_export``)."""
    from radspatial.bench.hf_export import export_hf as _export

    return _export(Path(data), Path(out), **options)
