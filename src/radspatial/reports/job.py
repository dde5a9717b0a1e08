"""The ``report`` and ``spar-table`` job specs: every option of ``radspatial report`` /
``radspatial spar-table`` and of ``radspatial.report`` / ``radspatial.spar_table``, declared once
(``core/jobspec``), and the runs both faces call.

Light on purpose: the command line builds its parser from this module, so nothing heavy is
imported at module level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from radspatial.core.jobspec import option

if TYPE_CHECKING:
    from radspatial.reports.build import ReportSummary

_RUNS = "Sequence[str | Path]"


# fmt: off
@dataclass(frozen=True, kw_only=True)
class ReportJob:
    """What one ``report`` is asked: which run folders, where to, and review marks."""

    runs: tuple[Path, ...] = option(type=Path, nargs="+", argument=True, positional=True,
        annotation=_RUNS, help="run folders written by radspatial eval")
    out: Path = option(type=Path, positional=True, annotation="str | Path", help="report folder")
    review: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="human review marks (JSONL, e.g. downloaded from the gallery; "
        "docs/open_questions.md): folded in beside the automatic grades, never over them "
        "(default: none)")


@dataclass(frozen=True, kw_only=True)
class SparTableJob:
    """What one ``spar-table`` is asked: the run folders (one per dataset seed and model)."""

    runs: tuple[Path, ...] = option(type=Path, nargs="+", argument=True, positional=True,
        annotation=_RUNS,
        help="eval run folders, one per dataset seed (generate --questions spar --seed S) and "
        "model; grouped by model")
    out: Path = option(type=Path, positional=True, annotation="str | Path",
        help="table path (writes .md and .json)")
# fmt: on


def run_report(job: ReportJob, log: Callable[[str], None] = lambda _: None) -> ReportSummary:
    """Builds the report ``job`` asks for (``reports/build.build_report``)."""
    from radspatial.reports.build import build_report

    runs = [Path(r) for r in job.runs]
    review = None if job.review is None else Path(job.review)
    return build_report(runs, Path(job.out), review=review, log=log)


def run_spar_table(job: SparTableJob) -> Path:
    """Writes the table ``job`` asks for; returns the .md path (the .json beside it)."""
    from radspatial.reports.spar_table import write_seed_table

    return write_seed_table([Path(r) for r in job.runs], Path(job.out))
