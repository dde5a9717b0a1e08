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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial.agent.job import AnswerJob, ServeJob
from radspatial.bench.job import GenerateJob, MirrorJob
from radspatial.core.jobspec import api_function, caller_terms
from radspatial.eval.job import EvalJob
from radspatial.formats.job import (
    ExportHFJob,
    ExportLmmsJob,
    ExportMirpJob,
    ImportInspectJob,
    ImportLmmsJob,
)
from radspatial.phantoms.job import PhantomJob
from radspatial.probes.job import ProbeBuildJob, ProbeEvalJob, ProbeTableJob, ProbeTrainJob
from radspatial.reports.job import ReportJob, SparTableJob
from radspatial.training.job import TrainUnetJob

if TYPE_CHECKING:
    from radspatial.agent.pipeline.agent import AgentAnswer
    from radspatial.bench.dataset import DatasetSummary
    from radspatial.formats.hf_export import HFExport
    from radspatial.formats.inspect_import import InspectImport
    from radspatial.formats.lmms_export import LmmsExport
    from radspatial.formats.lmms_import import LmmsImport
    from radspatial.formats.mirp_export import MirpExport
    from radspatial.reports.build import ReportSummary

PathLike = str | Path


@api_function(GenerateJob)
def generate(job: GenerateJob) -> DatasetSummary:
    """Generate a MIRP-style benchmark into folder ``out``; returns its summary.

    Takes every option of ``radspatial generate`` as a keyword of the same name and default
    (``bench/job.GenerateJob`` declares both; ``--no-group`` is ``group=False``). Give one case
    (``ct`` + ``seg``: NIfTI or DICOM folder, multilabel NIfTI or a TotalSegmentator folder, or
    ``seg_dir``; ``labels`` names the mask's label table, ``case_id`` and ``variant`` its id
    and anatomy variant), several (``cases``: a cases CSV or a list of
    ``radspatial.imaging.volumes.Case``), or nothing for the bundled real CT. They are checked
    as ``radspatial generate`` checks its flags (``bench/inputs.py``); a refused value is named
    by its keyword (``size=``). ``questions`` are question types or groups (``relative_position``,
    ``size``, ``spar``, ...: docs/spar_vqa.md). ``rules``: "mirp" (MIRP's generation rules) or
    "strict" (docs/mirp.md); ``min_distance``, ``margin``, ``size_tolerance`` and
    ``min_component`` its thresholds. ``modality``: "CT" or "MR" (None: the label table says;
    MR for ``totalsegmentator_mr``). ``planes``, ``per_slice``, ``consistency``, ``window`` and
    ``png_level`` as ``radspatial generate --help`` says; ``verbose`` prints progress lines. Same
    inputs and seed give byte-identical output.

    Example:
        >>> summary = generate("bench", size=128, as_count=4)  # doctest: +SKIP
        >>> summary.n_questions  # doctest: +SKIP
        166
    """
    from radspatial.bench.job import run_generate

    log = print if job.verbose else (lambda _: None)
    with caller_terms(GenerateJob, "api"):
        return run_generate(job, log=log, note=lambda _: None)[0]


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


@api_function(EvalJob)
def evaluate(job: EvalJob) -> EvalRun:
    """Evaluate ``model`` (a spec: ``openai:gpt-4o``, ``hf:/models/x``, ``baseline:yes``,
    ``agent:markers``, ...) on the dataset ``data``; results go to the run folder ``out``.

    Takes every option of ``radspatial eval`` as a keyword of the same name and default
    (``eval/job.EvalJob`` declares both), one model per call. Rerunning with the same arguments
    resumes (finished calls are not repeated). ``limit`` samples that many items across setups,
    markers and question types (seeded by ``limit_seed``). ``model_args`` are backend options
    as a mapping or as ``--model-args`` takes them (``{"batch_size": 4}`` for hf:,
    ``"timeout=30"`` for openai:); ``timeout``, ``retries``, ``api_key_env``,
    ``hf_allow_download``, ``hf_trust_remote_code``, ``executor``, ``replicas`` and
    ``ray_address`` as their flags. ``prompt``: a prompt template file; ``judge``: a model spec
    that grades open answers the rules cannot read (``judge_all``: every open answer);
    ``price``: ``"input=X,output=Y"`` USD per million tokens. A refused value is named by its
    keyword (``runs=``).

    Example:
        >>> run = evaluate("bench", "baseline:yes", "runs/yes", runs=1)  # doctest: +SKIP
        >>> round(run.accuracy, 3)  # doctest: +SKIP
    """
    from radspatial.eval.job import eval_config
    from radspatial.eval.runner import run_eval

    with caller_terms(EvalJob, "api"):  # a refusal below (out= on data=) in Python's terms
        config = eval_config(job)
        rows = run_eval(Path(job.data), Path(job.out), config, progress=job.progress)
    metrics = json.loads((Path(job.out) / "metrics.json").read_text())
    return EvalRun(Path(job.out), job.model, metrics, rows)


@api_function(ReportJob)
def report(job: ReportJob) -> ReportSummary:
    """Write the report of eval run folders ``runs`` into ``out``: ``summary.md``,
    ``summary.json``, figures and ``index.html`` (tables, figures, item gallery); ``review``: a
    human review marks file (JSONL), as ``radspatial report --review`` takes it.

    Example:
        >>> report(["runs/prior", "runs/yes"], "report").index_html  # doctest: +SKIP
        PosixPath('report/index.html')
    """
    from radspatial.reports.job import run_report

    with caller_terms(ReportJob, "api"):
        return run_report(job)


@api_function(SparTableJob)
def spar_table(job: SparTableJob) -> Path:
    """SPAR-VQA over dataset seeds as SPAR-Bench's Table 2, from eval run folders ``runs`` (one
    per seed and model) into ``out`` (.md and .json); returns the .md path."""
    from radspatial.reports.job import run_spar_table

    with caller_terms(SparTableJob, "api"):
        return run_spar_table(job)


@api_function(ExportMirpJob)
def export_mirp(job: ExportMirpJob) -> MirpExport:
    """An eval run folder ``run`` in MIRP's inference-output layout under ``out``, as
    ``radspatial export mirp`` writes it (MIRP's evaluation scripts run on it)."""
    from radspatial.formats.job import run_export_mirp

    with caller_terms(ExportMirpJob, "api"):
        return run_export_mirp(job)


@api_function(ExportHFJob)
def export_hf(job: ExportHFJob) -> HFExport:
    """A generated dataset ``data`` as Hugging Face parquet shards + dataset card under ``out``,
    with the options of ``radspatial export hf`` (``license``, ``name``, ``max_shard_mb``,
    ``overwrite``)."""
    from radspatial.formats.job import run_export_hf

    with caller_terms(ExportHFJob, "api"):
        return run_export_hf(job)


@api_function(PhantomJob)
def phantom(job: PhantomJob) -> Path:
    """Synthetic CT phantoms with TotalSegmentator masks into ``out``, with the options and
    defaults of ``radspatial phantom`` (``n``, ``seed``, ``shape``, ``spacing``, ``variant``: a
    name, a list or a comma list, ``workers``, ``executor``, ``ray_address``); returns the path
    of ``out/cases.csv`` for ``generate(cases=...)``. ``write_phantoms`` is the library
    function underneath (docs/phantoms.md).

    Example:
        >>> cases = phantom("phantoms", n=2, shape=(96, 96, 24))  # doctest: +SKIP
    """
    from radspatial.phantoms.job import run_phantom

    with caller_terms(PhantomJob, "api"):
        return run_phantom(job)


@api_function(MirrorJob)
def mirror_case(job: MirrorJob) -> tuple[Path, Path]:
    """The case ``ct`` + ``seg`` mirrored left-right (paired structures relabelled to their new
    side) as NIfTI in ``out``, plus ``out/cases.csv`` listing the original and the mirror, as
    ``radspatial counterfactual mirror`` writes them; returns the mirrored CT's and mask's
    paths. ``labels``: the mask's label table (default: TotalSegmentator's)."""
    from radspatial.bench.job import run_mirror

    with caller_terms(MirrorJob, "api"):
        return run_mirror(job)


@api_function(ExportLmmsJob)
def export_lmms(job: ExportLmmsJob) -> LmmsExport:
    """A generated dataset ``data`` as an lmms-eval task folder ``out`` (one task per setup and
    the group ``name``; ``protocol`` "radspatial" or "mirp"), as ``radspatial export lmms-eval``
    writes it (docs/howto/lmms_eval.md)."""
    from radspatial.formats.job import run_export_lmms

    with caller_terms(ExportLmmsJob, "api"):
        return run_export_lmms(job)


@api_function(ImportLmmsJob)
def import_lmms(job: ImportLmmsJob) -> LmmsImport:
    """lmms-eval sample logs ``samples`` of an exported task as the run folder ``out``, each
    row scored again against the dataset ``data``, as ``radspatial import lmms-eval`` does."""
    from radspatial.formats.job import run_import_lmms

    with caller_terms(ImportLmmsJob, "api"):
        return run_import_lmms(job)


@api_function(ImportInspectJob)
def import_inspect(job: ImportInspectJob) -> InspectImport:
    """inspect_ai logs ``log`` of a ``radspatial/<task>`` run on ``data`` as the run folder
    ``out``, each reply scored again, as ``radspatial import inspect`` does
    (docs/howto/inspect.md)."""
    from radspatial.formats.job import run_import_inspect

    with caller_terms(ImportInspectJob, "api"):
        return run_import_inspect(job)


@api_function(AnswerJob)
def answer(job: AnswerJob) -> AgentAnswer:
    """The modular agent's answer to ``question`` about the PNG/JPEG ``image``, with the
    options of ``radspatial agent`` (``localizer``, ``model``, ``mask`` + ``labels`` for the
    mask oracle, ``margin``; ``trace`` / ``overlay``: files to write the trace JSON / an overlay
    PNG to); returns the ``AgentAnswer`` (``.trace``; ``agent.core.verdict`` words it). For many
    questions build one ``radspatial.Agent`` and call its ``answer`` (the network loads once).

    Example:
        >>> result = answer("slice.png", "Is the liver left of the spleen?")  # doctest: +SKIP
        >>> result.trace["decision"]  # doctest: +SKIP
    """
    from radspatial.agent.job import run_answer

    with caller_terms(AnswerJob, "api"):
        return run_answer(job)


@api_function(ServeJob)
def serve(job: ServeJob) -> None:
    """Serve the agent as an OpenAI-compatible API until Ctrl-C, with the options of
    ``radspatial serve`` (``host``, ``port``, ``api_key`` or ``api_key_env``, ``localizers``,
    ``model``, ``threads``, ``max_connections``, ``max_pixels``, ``max_total_pixels``;
    docs/howto/serve_agent.md). ``agent/server/server.make_server`` builds a server without
    blocking."""
    from radspatial.agent.job import run_serve

    with caller_terms(ServeJob, "api"):
        run_serve(job)


@api_function(TrainUnetJob)
def train_unet(job: TrainUnetJob) -> dict[str, Any]:
    """Train the unet localizer on ``data`` (a dataset generated with ``export_masks=True``)
    into the model folder ``out``, with the options of ``radspatial train unet`` (``epochs``,
    ``size``, ``seed``, ``threads``); returns the validation metrics (also ``out/metrics.json``).
    ``training/unet_train.train_unet(data, out, TrainConfig(...))`` is the library function
    underneath, with every training setting (docs/unet.md). Needs ``radspatial[agent]``."""
    from radspatial.training.job import run_train_unet

    with caller_terms(TrainUnetJob, "api"):
        return run_train_unet(job)


@api_function(ProbeBuildJob)
def probe_build(job: ProbeBuildJob) -> dict[str, Any]:
    """A SPAR probe dataset into ``out``, with the options of ``radspatial probe build``;
    ``cases``: a cases CSV, a list of ``radspatial.imaging.volumes.Case``, or None (the bundled
    CT). Returns its ``probes.json`` info (``n_cases`` added). ``build_probes(cases, out, ...)``
    is the library function underneath (``slice_samples`` too; docs/probes.md)."""
    from radspatial.probes.job import run_probe_build

    with caller_terms(ProbeBuildJob, "api"):
        return run_probe_build(job)


@api_function(ProbeTrainJob)
def probe_train(job: ProbeTrainJob) -> dict[str, Any]:
    """Probe heads on ``encoder`` trained on the probe dataset ``data`` into ``out``, with the
    options of ``radspatial probe train``; returns results.json (``train_probe`` underneath)."""
    from radspatial.probes.job import run_probe_train

    with caller_terms(ProbeTrainJob, "api"):
        return run_probe_train(job)


@api_function(ProbeEvalJob)
def probe_eval(job: ProbeEvalJob) -> dict[str, Any]:
    """Zero-shot transfer of the probe run ``model`` to the probe dataset ``data`` (written to
    ``out`` when given), as ``radspatial probe eval`` (``evaluate_probe`` underneath)."""
    from radspatial.probes.job import run_probe_eval

    with caller_terms(ProbeEvalJob, "api"):
        return run_probe_eval(job)


@api_function(ProbeTableJob)
def probe_table(job: ProbeTableJob) -> Path:
    """Table 1 (``table1.md`` and ``table1.png``) of probe run or transfer folders
    ``result_dirs`` into ``out``, for ``split``, as ``radspatial probe table`` writes it;
    returns the markdown's path (``probes/table.write_table`` underneath)."""
    from radspatial.probes.job import run_probe_table

    with caller_terms(ProbeTableJob, "api"):
        return run_probe_table(job)
