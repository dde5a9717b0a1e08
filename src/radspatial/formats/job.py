"""The ``export mirp`` and ``export hf`` job specs: every option of ``radspatial export mirp|hf``
and of ``radspatial.export_mirp`` / ``radspatial.export_hf``, declared once (``core/jobspec``),
and the runs both faces call.

Light on purpose: the command line builds its parser from this module, so nothing heavy is
imported at module level.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from radspatial.core.jobspec import option

if TYPE_CHECKING:
    from radspatial.formats.hf_export import HFExport
    from radspatial.formats.mirp_export import MirpExport

_PATH = "str | Path"
OVERWRITE_HELP = "replace a non-empty --out"


# fmt: off
@dataclass(frozen=True, kw_only=True)
class ExportMirpJob:
    """What one ``export mirp`` is asked: an eval run, written in MIRP's layout."""

    run: Path = option(type=Path, positional=True, annotation=_PATH,
        help="run folder written by radspatial eval")
    out: Path = option(type=Path, positional=True, annotation=_PATH, help="output folder")
    overwrite: bool = option(False, action="store_true", help=OVERWRITE_HELP)


@dataclass(frozen=True, kw_only=True)
class ExportHFJob:
    """What one ``export hf`` is asked: a dataset, written as parquet shards and a card."""

    data: Path = option(type=Path, positional=True, annotation=_PATH,
        help="dataset folder (radspatial generate)")
    out: Path = option(type=Path, positional=True, annotation=_PATH, help="output folder")
    overwrite: bool = option(False, action="store_true", help=OVERWRITE_HELP)
    license: str | None = option(None,
        help="licence id for the card, e.g. cc-by-4.0 (default: apache-2.0 for the bundled "
        "example CT, else 'other' and the card says it is not stated)")
    name: str | None = option(None,
        help="dataset name in the card (default: the --data folder name)")
    max_shard_mb: float = option(256.0, type=float,
        help="image bytes per parquet shard (MB)")
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
