"""Tables and figures from one or more eval run folders: ``summary.md``, ``summary.json``, PNGs
and ``index.html`` (the same tables and figures plus an item gallery, ``html``).

The numbers are those of each run's ``metrics.json`` (see ``aggregate.compute_metrics``), laid
out side by side; the only new statistics are McNemar's test between models, from the per-item
correctness of run 0 in ``results.jsonl``, and the per-modality setup/marker table (accuracy
with Wilson 95% CI, runs pooled, from ``results.jsonl``). Everything is written atomically and
overwrites a previous report in the same folder.

Example:
    >>> build_report([Path("runs/gpt"), Path("runs/qwen")], Path("report"))  # doctest: +SKIP
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from radspatial import __version__
from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.errors import InputError
from radspatial.core.io import atomic_write_bytes, atomic_write_json
from radspatial.core.metrics_blocks import GroupMetrics
from radspatial.core.metrics_record import METRICS_FILE, Metrics, read_metrics
from radspatial.core.records import ResultRow, read_results
from radspatial.core.redact import redact
from radspatial.core.safepath import recorded_root
from radspatial.core.textsafe import log_text
from radspatial.eval.metrics import mcnemar
from radspatial.eval.subgroups import grouped_accuracy
from radspatial.models.base import ORACLE_MARK, is_oracle
from radspatial.reports.common import (
    DASH,
    RELPOS,
    TRANSFORMS,
)
from radspatial.reports.common import rank as _rank


@dataclass(frozen=True)
class ReportSummary:
    out: Path
    summary_md: Path
    summary_json: Path
    index_html: Path  # tables, figures and the item gallery
    figures: list[Path]  # the figures written; skipped ones are explained in summary.md
    models: list[str]  # row labels, in the order of the run folders given
    # gallery items whose image was not found in the dataset folder their run.json names
    missing_images: int = 0


@dataclass(frozen=True)
class RunData:
    """What the report reads from one run folder."""

    path: Path
    label: str
    info: dict[str, Any]  # run.json ({} if missing)
    metrics: Metrics
    correct0: dict[str, bool] | None  # item id -> correct in run 0; None without results.jsonl
    # modality -> setup/marker -> accuracy with Wilson CI, all runs pooled (from results.jsonl)
    by_modality: dict[str, Any] = field(default_factory=dict)
    # family panel -> transform -> counts with chance (``rotation``, from results.jsonl)
    rotation: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- loading


def load_run(path: Path, label: str | None = None) -> RunData:
    path = Path(path)
    metrics_path = path / METRICS_FILE
    if not metrics_path.exists():
        raise ValueError(f"{path}: no metrics.json (did the eval finish?)")
    metrics = read_metrics(metrics_path)
    info_path = path / "run.json"
    info = read_json(info_path, want=dict) if info_path.is_file() else {}
    for key in ("data", "status", "model"):
        if info.get(key) is not None and not isinstance(info[key], str):
            raise DataFileError(f"{info_path}: {key!r} must be a string")
    results = path / "results.jsonl"
    correct0, by_modality, rotation = None, {}, {}
    if not results.is_file() and (results.exists() or results.is_symlink()):
        raise DataFileError(f"{results}: not a regular file (a folder, FIFO or broken link)")
    if results.is_file():
        from radspatial.reports.rotation import transform_groups

        rows = read_results(results)
        correct0 = {r.id: r.correct for r in rows if r.run == 0}
        by_modality, rotation = modality_groups(rows), transform_groups(rows)
    model = log_text(redact(str(metrics.model or info.get("model") or path.name)))
    return RunData(path, label or model, info, metrics, correct0, by_modality, rotation)


def modality_groups(rows: Sequence[ResultRow]) -> dict[str, Any]:
    """modality -> setup/marker (and "all") -> accuracy with Wilson 95% CI, errors left out.
    "all" pools every question type; the setup/marker groups are MIRP's relative-position
    questions only (Table 1's), so the two tables never disagree on the same cell."""
    from radspatial.core.records import DEFAULT_TYPE

    answered = [r for r in rows if not r.error]
    out = {}
    for m in sorted({r.modality or "unknown" for r in answered}):
        mine = [r for r in answered if (r.modality or "unknown") == m]
        relpos = [r for r in mine if r.question_type == DEFAULT_TYPE]
        groups = grouped_accuracy(relpos, lambda r: f"{r.setup}/{r.marker}")
        groups |= grouped_accuracy(mine, lambda r: "all")
        out[m] = {k: g.to_json() for k, g in sorted(groups.items())}
    return out


def _labels(specs: Sequence[str], paths: Sequence[Path]) -> list[str]:
    """Model spec as the label; a spec given twice gets its run folder name (or path) added."""
    labels = [
        f"{s} ({p.name})" if specs.count(s) > 1 else s for s, p in zip(specs, paths, strict=True)
    ]
    dup = {lab for lab in labels if labels.count(lab) > 1}  # same spec, same folder name
    return [
        f"{s} ({p})" if lab in dup else lab for s, p, lab in zip(specs, paths, labels, strict=True)
    ]


def load_runs(run_dirs: Sequence[Path]) -> list[RunData]:
    if not run_dirs:
        raise ValueError("no run folders given")
    runs = [load_run(Path(p)) for p in run_dirs]
    labels = _labels([r.label for r in runs], [r.path for r in runs])
    labels = [lab + ORACLE_MARK * is_oracle(r.label) for r, lab in zip(runs, labels, strict=True)]
    return [
        RunData(r.path, lab, r.info, r.metrics, r.correct0, r.by_modality, r.rotation)
        for r, lab in zip(runs, labels, strict=True)
    ]


# ---------------------------------------------------------------- numbers


def _strip(obj: Any) -> Any:
    """Drop the bulky per-run lists (they stay in each metrics.json)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "per_run"}
    return obj


def _group(group: GroupMetrics | None) -> dict[str, Any]:
    """A group as summary.json shows it (no per-run lists; absent: no items)."""
    return {"n_items": 0} if group is None else _strip(group.to_json())


def _groups(section: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _strip(g.to_json()) for k, g in section.items()}


def _block(block: Any) -> dict[str, Any]:
    return {} if block is None else block.to_json()


def _keys(runs: Sequence[RunData], section: str, order: Iterable[str] = ()) -> list[str]:
    present = {k for r in runs for k, g in r.metrics.section(section).items() if g.n_items}
    known = [k for k in order if k in present]
    return known + sorted(present - set(known), key=_rank)


def _section(runs: Sequence[RunData], section: str, keys: Sequence[str]) -> dict[str, Any]:
    return {r.label: {k: _group(r.metrics.section(section).get(k)) for k in keys} for r in runs}


def _rq1_transforms(runs: Sequence[RunData]) -> dict[str, Any]:
    out = {}
    for r in runs:
        by = r.metrics.by_setup_transform
        out[r.label] = {t: _group(by.get(f"rq1/none/{t}")) for t in TRANSFORMS}
    return out


def _relpos_keys(runs: Sequence[RunData]) -> list[str]:
    """setup/marker keys that hold relative-position items, in table order."""
    present = {
        k.partition("|")[2]
        for r in runs
        for k, g in r.metrics.by_question_type_setup_marker.items()
        if k.startswith(f"{RELPOS}|") and g.n_items
    }
    return sorted(present, key=_rank)


def mcnemar_pairs(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """McNemar's test between each pair of models on the items both answered in run 0."""
    pairs = []
    for a, b in combinations(runs, 2):
        row: dict[str, Any] = {"model_a": a.label, "model_b": b.label}
        if a.correct0 is None or b.correct0 is None:
            pairs.append({**row, "n_shared": 0, "note": "results.jsonl missing"})
            continue
        ids = sorted(set(a.correct0) & set(b.correct0))
        if not ids:
            pairs.append({**row, "n_shared": 0, "note": "no shared items"})
            continue
        t = mcnemar([a.correct0[i] for i in ids], [b.correct0[i] for i in ids])
        row.update(n_shared=len(ids), b=t.b, c=t.c, statistic=t.statistic, p_value=t.p_value)
        pairs.append({**row, "method": t.method})
    return pairs


def summarize(runs: Sequence[RunData]) -> dict[str, Any]:
    """Everything the report shows, as JSON-ready data (numbers copied from metrics.json)."""
    setup_markers = _keys(runs, "by_setup_marker")
    transforms = _keys(runs, "by_transform", TRANSFORMS)
    variants = [v for v in _keys(runs, "by_variant") if v != "blank"]
    question_types = _keys(runs, "by_question_type")
    has_rq1 = any(k.startswith("rq1/none/") for r in runs for k in r.metrics.by_setup_transform)
    return {
        "radspatial": __version__,
        "data": sorted({str(r.info.get("data", DASH)) for r in runs}),
        "models": [
            {
                "label": r.label,
                "model": r.metrics.model,
                "run_dir": str(r.path),
                "data": r.info.get("data"),
                "status": r.info.get("status"),
                "protocol": r.info.get("protocol"),
                "runs": r.metrics.runs,
                "n_items": r.metrics.overall.n_items,
                "n_errors": r.metrics.n_errors,
                "overall": _group(r.metrics.overall),
            }
            for r in runs
        ],
        "setup_markers": setup_markers,
        "by_setup_marker": _section(runs, "by_setup_marker", setup_markers),
        "transforms": transforms,
        "by_transform": _section(runs, "by_transform", transforms),
        "by_transform_rq1": _rq1_transforms(runs) if has_rq1 and transforms else {},
        "rotation": {r.label: r.rotation for r in runs if r.rotation},
        "question_types": question_types,
        "by_question_type": (
            _section(runs, "by_question_type", question_types) if len(question_types) > 1 else {}
        ),
        "by_question_type_setup_marker": (
            {r.label: _groups(r.metrics.by_question_type_setup_marker) for r in runs}
            if len(question_types) > 1
            else {}
        ),
        "modalities": sorted({m for r in runs for m in r.by_modality}),
        "by_modality": {r.label: r.by_modality for r in runs},
        "variants": variants,
        "by_variant": _section(runs, "by_variant", variants) if len(variants) > 1 else {},
        "frames": {
            r.label: {s: _groups(axes) for s, axes in r.metrics.frames.items()} for r in runs
        },
        "headline": {r.label: _group(r.metrics.headline) for r in runs},
        "rq1_plain": {r.label: _block(r.metrics.rq1_plain) for r in runs},
        "relpos_setup_markers": _relpos_keys(runs),
        "mirp": {r.label: dict(r.metrics.mirp) for r in runs},
        "mcnemar": {
            "basis": "per-item correctness of run 0, items joined by id; two-sided",
            "pairs": mcnemar_pairs(runs),
        },
        **_planes_and_groups(runs),
    }


def _planes_and_groups(runs: Sequence[RunData]) -> dict[str, Any]:
    """Runs with coronal/sagittal items: every table again per plane (``by_plane``: a summary
    of each plane's metrics); runs with consistency groups: their classes per model."""
    out: dict[str, Any] = {}
    planes = sorted({p for r in runs for p in r.metrics.by_plane or {}})
    if planes:
        out["planes"] = planes
        out["by_plane"] = {
            p: summarize(
                [
                    RunData(r.path, r.label, r.info, plane, None)
                    for r in runs
                    if (plane := (r.metrics.by_plane or {}).get(p)) is not None
                ]
            )
            for p in planes
        }
    if any(r.metrics.consistency for r in runs):
        out["consistency"] = {r.label: _groups(r.metrics.consistency or {}) for r in runs}
    if planes:  # an axis means another direction in another plane: never pooled
        out["frames"] = out["by_plane"].get("axial", {}).get("frames", {})
        out["frames_scope"] = "axial"
    return out


# ---------------------------------------------------------------- entry point


def build_report(
    run_dirs: Sequence[Path],
    out: Path,
    *,
    review: Path | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> ReportSummary:
    """Write summary.md, summary.json and figures for ``run_dirs`` into ``out``; with
    ``review`` (a marks JSONL, ``grading/review.py``) also ``review.json`` and its section.
    ``log`` is told each step as it starts (for progress on big runs).

    The folder is built in ``OUT.partial`` and renamed to ``OUT`` only when complete (a full
    disk or a kill leaves no half report, and an earlier report at ``OUT`` stays until the new
    one replaces it). ``OUT`` must not be or hold a run folder, and an existing non-empty
    ``OUT`` must be a report (its ``summary.json``): anything else there is refused, not
    replaced."""
    from radspatial.core.executor import sigterm_as_interrupt
    from radspatial.core.staging import swap_in
    from radspatial.reports.open_answers import review_for

    log(f"reading {len(run_dirs)} run folder(s)")
    runs = load_runs(run_dirs)
    reviewed = review_for(runs, review) if review is not None else None
    out = Path(out)
    stage = _report_stage(out, run_dirs, review)
    try:
        with sigterm_as_interrupt():
            made, missing = _write_report(runs, reviewed, stage, out, log)
        swap_in(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    written = [out / name for name, skipped in made.items() if not skipped]
    labels = [r.label for r in runs]
    md, js, index = out / "summary.md", out / "summary.json", out / "index.html"
    return ReportSummary(out, md, js, index, written, labels, missing)


def _report_stage(out: Path, run_dirs: Sequence[Path], review: Path | None) -> Path:
    """A fresh ``OUT.partial`` beside ``out``, after refusing an ``out`` that would replace an
    input or something that is not a report."""
    from radspatial.core.safepath import check_disjoint
    from radspatial.core.staging import check_out_folder, prepare_out

    inputs: dict[str, Path | None] = {f"run {p}": Path(p) for p in run_dirs}
    check_disjoint(out, {**inputs, "--review": review})
    check_out_folder(out, overwrite=True)
    if out.is_dir() and any(out.iterdir()) and not (out / "summary.json").is_file():
        raise InputError(
            f"--out {out}: exists and is not a radspatial report (no summary.json); remove it "
            "or choose another --out"
        )
    return prepare_out(out, overwrite=True)


def _write_report(
    runs: Sequence[RunData],
    reviewed: Any,
    folder: Path,
    final: Path,
    log: Callable[[str], None],
) -> tuple[dict[str, str | None], int]:
    """Every file of the report into ``folder`` (to be renamed to ``final``); the figures
    made (name -> None if written, else why it was skipped) and how many gallery items show
    no image."""
    from radspatial.reports import figures as fig
    from radspatial.reports.decidable import FIGURE as DECIDABLE_FIGURE
    from radspatial.reports.decidable import decidable_markdown
    from radspatial.reports.html import render_html
    from radspatial.reports.md import render_markdown
    from radspatial.reports.open_answers import open_markdown
    from radspatial.reports.planes import groups_markdown, planes_markdown
    from radspatial.reports.probe import probe_markdown
    from radspatial.reports.usage import clustered_markdown, usage_markdown

    log(f"summarizing {len(runs)} run(s)")
    s = summarize(runs)
    log("drawing the figures")
    made = fig.write_all(s, folder)
    decided, drawn = decidable_markdown(runs, folder)  # what the image decides (decidable.py)
    if drawn:
        made[DECIDABLE_FIGURE] = None
    markdown = render_markdown(s, made) + planes_markdown(s) + groups_markdown(s) + decided
    markdown += clustered_markdown(runs) + usage_markdown(runs) + open_markdown(runs, reviewed)
    markdown += probe_markdown([r.path for r in runs], folder)  # probe vlm folders in the runs
    atomic_write_json(folder / "summary.json", {**s, "figures": made})
    if reviewed is not None:
        atomic_write_json(folder / "review.json", reviewed)
    atomic_write_bytes(folder / "summary.md", markdown.encode())
    labels = [r.label for r in runs]
    log("writing index.html (tables, figures, item gallery)")
    roots = [recorded_root(r.path, r.info.get("data")) for r in runs]
    paths = [r.path for r in runs]
    page = render_html(markdown, labels, paths, folder, roots=roots, final=final)
    atomic_write_bytes(folder / "index.html", page.encode())
    return made, page.count('<div class="missing">')
