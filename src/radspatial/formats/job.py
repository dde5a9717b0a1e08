"""The job specs of the commands that read or write other tools' formats: every option of
``radspatial export mirp|hf|lmms-eval`` and ``radspatial import lmms-eval|inspect`` and of
``radspatial.export_mirp`` / ``export_hf`` / ``export_lmms`` / ``import_lmms`` /
``import_inspect``, declared once (``core/jobspec``), and the runs both faces call.

Light on purpose: the command line builds its parser from this module, so nothing heavy is
imported at module level.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial.core.jobspec import option
from radspatial.eval.job import price

if TYPE_CHECKING:
    from radspatial.eval.usage import Price
    from radspatial.formats.hf_export import HFExport
    from radspatial.formats.imported_run import ImportTarget
    from radspatial.formats.inspect_import import InspectImport
    from radspatial.formats.lmms_export import LmmsExport
    from radspatial.formats.lmms_import import LmmsImport
    from radspatial.formats.mirp_export import MirpExport

_PATH = "str | Path"
OVERWRITE_HELP = "replace a non-empty --out"


def _path(help: str, *, positional: bool = True) -> Any:  # noqa: A002 - option's own name
    """A folder or file: a positional argument (unless said), read as a ``Path``."""
    return option(type=Path, positional=positional, annotation=_PATH, help=help)


def _overwrite() -> Any:
    return option(False, action="store_true", help=OVERWRITE_HELP)


def _model_name(default_from: str) -> Any:
    return option(None, help=f"model name in metrics.json (default: {default_from})")


def _price(help: str) -> Any:  # noqa: A002 - option's own name
    return option(None, type=price, annotation="str | Price | None", help=help)


# fmt: off
@dataclass(frozen=True, kw_only=True)
class ExportMirpJob:
    """What one ``export mirp`` is asked: an eval run, written in MIRP's layout."""

    run: Path = _path("run folder written by radspatial eval")
    out: Path = _path("output folder")
    overwrite: bool = _overwrite()


@dataclass(frozen=True, kw_only=True)
class ExportHFJob:
    """What one ``export hf`` is asked: a dataset, written as parquet shards and a card."""

    data: Path = _path("dataset folder (radspatial generate)")
    out: Path = _path("output folder")
    overwrite: bool = _overwrite()
    license: str | None = option(None,
        help="licence id for the card, e.g. cc-by-4.0 (default: apache-2.0 for the bundled "
        "example CT, else 'other' and the card says it is not stated)")
    name: str | None = option(None,
        help="dataset name in the card (default: the --data folder name)")
    max_shard_mb: float = option(256.0, type=float,
        help="image bytes per parquet shard (MB)")


@dataclass(frozen=True, kw_only=True)
class ExportLmmsJob:
    """What one ``export lmms-eval`` is asked: a dataset, written as an lmms-eval task folder."""

    data: Path = _path("dataset folder (radspatial generate)")
    out: Path = _path("task folder to write")
    overwrite: bool = _overwrite()
    name: str = option("radspatial", help="group name; the tasks are NAME_<setup>")
    protocol: str = option("radspatial", choices=("radspatial", "mirp"),
        help="prompt protocol: ours, or MIRP's (its examples, text first, its parser)")


@dataclass(frozen=True, kw_only=True)
class ImportLmmsJob:
    """What one ``import lmms-eval`` is asked: sample logs, scored again against the dataset."""

    samples: Path = _path(
        "an lmms-eval *_samples_<task>.jsonl file, or its --output_path folder")
    out: Path = _path("run folder to write")
    overwrite: bool = _overwrite()
    model: str | None = _model_name("the log's folder")
    price: Price | None = _price(
        "USD per million tokens, input=X,output=Y: the usage block's cost, as eval --price "
        "(lmms-eval logs no token counts: the cost stays unknown; default: no cost)")
    data: Path = _path(positional=False,
        help="the dataset the task was exported from: every logged row is scored again "
        "against its answers (a row that differs is refused)")


@dataclass(frozen=True, kw_only=True)
class ImportInspectJob:
    """What one ``import inspect`` is asked: inspect logs, scored again against the dataset."""

    log: Path = _path("an inspect log (.eval or .json), or its --log-dir folder")
    data: Path = _path(
        "the dataset the task ran on (-T data=...): every reply is scored again against it")
    out: Path = _path("run folder to write")
    overwrite: bool = _overwrite()
    model: str | None = _model_name("the log's model")
    price: Price | None = _price(
        "USD per million tokens, input=X,output=Y: the usage block's cost from the log's "
        "token counts, as eval --price (default: no cost)")
# fmt: on


def run_export_mirp(job: ExportMirpJob) -> MirpExport:
    """Writes the run in MIRP's inference-output layout (``formats/mirp_export``)."""
    from radspatial.formats.mirp_export import export_mirp

    return export_mirp(Path(job.run), Path(job.out), overwrite=job.overwrite)


def run_export_hf(job: ExportHFJob) -> HFExport:
    """Writes the dataset as parquet shards and a card (``formats/hf_export``)."""
    from radspatial.formats.hf_export import export_hf

    return export_hf(
        Path(job.data), Path(job.out), license=job.license, name=job.name,
        max_shard_mb=job.max_shard_mb, overwrite=job.overwrite,
    )  # fmt: skip


def run_export_lmms(job: ExportLmmsJob) -> LmmsExport:
    """Writes the dataset as an lmms-eval task folder (``formats/lmms_export``)."""
    from radspatial.formats.lmms_export import export_lmms

    return export_lmms(
        Path(job.data), Path(job.out), name=job.name, protocol=job.protocol,
        overwrite=job.overwrite,
    )  # fmt: skip


def run_import_lmms(job: ImportLmmsJob) -> LmmsImport:
    """Writes the run folder from lmms-eval's sample logs (``formats/lmms_import``)."""
    from radspatial.formats.lmms_import import import_lmms

    return import_lmms(Path(job.samples), _target(job))


def run_import_inspect(job: ImportInspectJob) -> InspectImport:
    """Writes the run folder from inspect_ai logs (``formats/inspect_import``)."""
    from radspatial.formats.inspect_import import import_inspect

    return import_inspect(Path(job.log), _target(job))


def _target(job: ImportLmmsJob | ImportInspectJob) -> ImportTarget:
    """The run an import writes, as both import specs declare it."""
    from radspatial.formats.imported_run import ImportTarget

    return ImportTarget(Path(job.out), Path(job.data), job.overwrite, job.model, job.price)
