"""Tables and figures from one or more eval run folders: ``summary.md``, ``summary.json``, PNGs.

The numbers are those of each run's ``metrics.json`` (see ``aggregate.compute_metrics``), laid
out side by side; the only new statistic is McNemar's test between models, from the per-item
correctness of run 0 in ``results.jsonl``. Everything is written atomically and overwrites a
previous report in the same folder.

Example:
    >>> build_report([Path("runs/gpt"), Path("runs/qwen")], Path("report"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from radspatial import __version__
from radspatial.io import atomic_write_bytes, atomic_write_json, read_jsonl
from radspatial.scoring import mcnemar

SETUPS = ("rq1", "rq2", "rq3", "as")
MARKERS = ("none", "dots", "letters", "numbers")
TRANSFORMS = ("A1", "A2", "A3", "A4", "B1", "B2", "B3", "B4")
TRANSFORM_KEY = "A = horizontally flipped, B = not flipped; 1-4 = rotated 0°, 90°, 180°, 270°"
AXES = {"left_right": "Left/right (MIRP RQ3(1))", "above_below": "Above/below (our extension)"}
FRAME_COLUMNS = (
    "image",
    "standard",
    "anatomical",
    "aligned_image",
    "conflict_image",
    "conflict_anatomical",
)
FRAME_HEADER = (
    "Image (all)",
    "Standard view (all)",
    "Anatomical (all)",
    "Image (aligned)",
    "Image (not aligned)",
    "Anatomical (not aligned)",
)
RELPOS = "relative_position"
DASH = "–"
Group = dict[str, Any]


@dataclass(frozen=True)
class ReportSummary:
    out: Path
    summary_md: Path
    summary_json: Path
    figures: list[Path]  # the figures written; skipped ones are explained in summary.md
    models: list[str]  # row labels, in the order of the run folders given


@dataclass(frozen=True)
class RunData:
    """What the report reads from one run folder."""

    path: Path
    label: str
    info: dict[str, Any]  # run.json ({} if missing)
    metrics: dict[str, Any]
    correct0: dict[str, bool] | None  # item id -> correct in run 0; None without results.jsonl


# ---------------------------------------------------------------- loading


def load_run(path: Path, label: str | None = None) -> RunData:
    path = Path(path)
    metrics_path = path / "metrics.json"
    if not metrics_path.is_file():
        raise ValueError(f"{path}: no metrics.json (did the eval finish?)")
    metrics = json.loads(metrics_path.read_text())
    info_path = path / "run.json"
    info = json.loads(info_path.read_text()) if info_path.is_file() else {}
    results = path / "results.jsonl"
    correct0 = None
    if results.is_file():
        correct0 = {r["id"]: bool(r["correct"]) for r in read_jsonl(results) if r["run"] == 0}
    model = str(metrics.get("model") or info.get("model") or path.name)
    return RunData(path, label or model, info, metrics, correct0)


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
    return [
        RunData(r.path, lab, r.info, r.metrics, r.correct0)
        for r, lab in zip(runs, labels, strict=True)
    ]


# ---------------------------------------------------------------- numbers


def _strip(obj: Any) -> Any:
    """Drop the bulky per-run lists (they stay in each metrics.json)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "per_run"}
    return obj


def _rank(key: str) -> tuple[int, int, str]:
    setup, _, marker = key.partition("/")
    s = SETUPS.index(setup) if setup in SETUPS else len(SETUPS)
    m = MARKERS.index(marker) if marker in MARKERS else len(MARKERS)
    return s, m, key


def _keys(runs: Sequence[RunData], section: str, order: Iterable[str] = ()) -> list[str]:
    present = {k for r in runs for k, g in r.metrics.get(section, {}).items() if g.get("n_items")}
    known = [k for k in order if k in present]
    return known + sorted(present - set(known), key=_rank)


def _section(runs: Sequence[RunData], section: str, keys: Sequence[str]) -> dict[str, Any]:
    return {
        r.label: {k: _strip(r.metrics.get(section, {}).get(k, {"n_items": 0})) for k in keys}
        for r in runs
    }


def _rq1_transforms(runs: Sequence[RunData]) -> dict[str, Any]:
    out = {}
    for r in runs:
        by = r.metrics.get("by_setup_transform", {})
        out[r.label] = {t: _strip(by.get(f"rq1/none/{t}", {"n_items": 0})) for t in TRANSFORMS}
    return out


def _relpos_keys(runs: Sequence[RunData]) -> list[str]:
    """setup/marker keys that hold relative-position items, in table order."""
    present = {
        k.partition("|")[2]
        for r in runs
        for k, g in r.metrics.get("by_question_type_setup_marker", {}).items()
        if k.startswith(f"{RELPOS}|") and g.get("n_items")
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
    has_rq1 = any(
        k.startswith("rq1/none/") for r in runs for k in r.metrics.get("by_setup_transform", {})
    )
    return {
        "radspatial": __version__,
        "data": sorted({str(r.info.get("data", DASH)) for r in runs}),
        "models": [
            {
                "label": r.label,
                "model": r.metrics.get("model"),
                "run_dir": str(r.path),
                "data": r.info.get("data"),
                "status": r.info.get("status"),
                "runs": r.metrics.get("runs"),
                "n_items": r.metrics.get("overall", {}).get("n_items", 0),
                "errors": r.metrics.get("errors"),
                "overall": _strip(r.metrics.get("overall", {})),
            }
            for r in runs
        ],
        "setup_markers": setup_markers,
        "by_setup_marker": _section(runs, "by_setup_marker", setup_markers),
        "transforms": transforms,
        "by_transform": _section(runs, "by_transform", transforms),
        "by_transform_rq1": _rq1_transforms(runs) if has_rq1 and transforms else {},
        "question_types": question_types,
        "by_question_type": (
            _section(runs, "by_question_type", question_types) if len(question_types) > 1 else {}
        ),
        "by_question_type_setup_marker": (
            {r.label: _strip(r.metrics.get("by_question_type_setup_marker", {})) for r in runs}
            if len(question_types) > 1
            else {}
        ),
        "variants": variants,
        "by_variant": _section(runs, "by_variant", variants) if len(variants) > 1 else {},
        "frames": {r.label: _strip(r.metrics.get("frames", {})) for r in runs},
        "headline": {r.label: _strip(r.metrics.get("headline", {})) for r in runs},
        "relpos_setup_markers": _relpos_keys(runs),
        "mirp": {r.label: r.metrics.get("mirp", {}) for r in runs},
        "mcnemar": {
            "basis": "per-item correctness of run 0, items joined by id; two-sided",
            "pairs": mcnemar_pairs(runs),
        },
    }


# ---------------------------------------------------------------- markdown


def _num(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def pct(x: Any) -> str:
    v = _num(x)
    return DASH if v is None else f"{100 * v:.1f}"


def acc(group: Group | None) -> str:
    """``acc_mean ± std`` in %, or a dash when the group is empty."""
    if not group or not group.get("n_items"):
        return DASH
    mean, std = pct(group.get("accuracy_mean")), pct(group.get("accuracy_std"))
    return mean if std == DASH else f"{mean} ± {std}"


def _p(x: Any) -> str:
    v = _num(x)
    return DASH if v is None else (f"{v:.3g}" if v >= 1e-4 else f"{v:.1e}")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def column_name(key: str) -> str:
    setup, _, marker = key.partition("/")
    return setup.upper() if marker in ("", "none") else f"{setup.upper()} {marker}"


def _table1(s: dict[str, Any]) -> str:
    """Relative position per setup/marker, the headline over RQ1-RQ3 (MIRP's "Overall"), then
    the blank-image ablation and each SPAR-VQA type in their own columns."""
    cols = s["relpos_setup_markers"] or s["setup_markers"]
    main = [c for c in cols if not c.startswith("as/")]
    ablation = [c for c in cols if c.startswith("as/")]
    spar = [q for q in s["question_types"] if q != RELPOS]
    header = ["Model", *map(column_name, main), "Overall (RQ1-3)", "95% CI"]
    header += [*map(column_name, ablation), *spar, "Invalid", "Yes-rate"]
    rows = []
    for m in s["models"]:
        label = m["label"]
        o = s["headline"].get(label) or {}
        by_qt = s["by_question_type_setup_marker"].get(label, {})
        by_sm = s["by_setup_marker"][label]

        def cell(c: str, by_qt: dict = by_qt, by_sm: dict = by_sm) -> str:
            return acc(by_qt.get(f"{RELPOS}|{c}") if by_qt else by_sm.get(c))

        ci = f"[{pct(o.get('ci_low'))}, {pct(o.get('ci_high'))}]" if o.get("n_items") else DASH
        qt = s["by_question_type"].get(label, {})
        rows.append(
            [label, *(cell(c) for c in main), acc(o), ci, *(cell(c) for c in ablation)]
            + [acc(qt.get(q)) for q in spar]
            + [pct(o.get("invalid_rate")), pct(o.get("yes_rate"))]
        )
    return (
        "## Accuracy by setup and marker (cf. MIRP Table 1)\n\n"
        "Relative position, accuracy in %, mean ± standard deviation across runs. Overall: "
        "relative position on RQ1-RQ3 (MIRP's headline); the blank-image ablation (AS) and the "
        "SPAR-VQA types (all setups) have their own columns and are not pooled into it. 95% CI: "
        "Wilson interval on all runs' answers pooled. Invalid: unparseable answers (scored "
        "wrong). Yes-rate: share of valid answers that are 'yes' (answer bias; generated "
        "datasets are balanced, 50% yes).\n\n" + table(header, rows)
    )


def _mirp_cell(group: Group | None, frame: str = "image") -> str:
    g = (group or {}).get(frame)
    if not g:
        return DASH
    return f"{g['accuracy_mean']:.2f} ± {g['accuracy_std']:.2f}"


def _mirp_table(s: dict[str, Any]) -> str:
    """MIRP's own statistics (its parser and rules, ``metrics.json`` ``mirp``) as fractions."""
    keys = sorted({k for b in s["mirp"].values() for k in b}, key=lambda k: _rank(k.lower()))
    if not keys:
        return ""
    header = ["Model", *(column_name(k.lower()) for k in keys), "RQ3(1) anatomy L/R"]
    rows = [
        [label, *(_mirp_cell(b.get(k)) for k in keys)]
        + [_mirp_cell(b.get("RQ1/none"), "anatomy_left_right")]
        for label, b in s["mirp"].items()
    ]
    return (
        "## MIRP Table 1 view (MIRP's rules)\n\n"
        "Accuracy as a fraction, mean ± standard deviation (statistics.stdev) across runs, "
        "relative position only, computed with MIRP's answer cascade (an unsure reply counts as "
        "the wrong answer), so these equal what MIRP's published scripts give on "
        "`radspatial export mirp` of the same run. RQ3(1) anatomy L/R: MIRP's anatomical frame "
        "(RQ1 left/right questions; 'left' is the patient's left).\n\n" + table(header, rows)
    )


def _runs_table(s: dict[str, Any]) -> str:
    header = ["Model", "Items", "Runs", "Errors", "Status", "Run folder", "Data"]
    rows = [
        [m["label"], m["n_items"], m["runs"], m["errors"], m["status"] or DASH]
        + [f"`{m['run_dir']}`", f"`{m['data']}`" if m["data"] else DASH]
        for m in s["models"]
    ]
    note = "" if len(s["data"]) < 2 else "\n**The runs used different data folders.**\n"
    return "## Runs\n\n" + table(header, rows) + note


def _frames_tables(s: dict[str, Any]) -> str:
    parts = ["## Image vs standard view vs anatomical frame\n"]
    for axis, title in AXES.items():
        rows = []
        for label, frames in s["frames"].items():
            for setup in SETUPS:
                f = frames.get(setup, {}).get(axis)
                if f:
                    n = f.get("conflict_image", {}).get("n_items", 0)
                    cells = [acc(f.get(c)) for c in FRAME_COLUMNS]
                    rows.append([label, setup.upper(), *cells, n])
        if not rows:
            parts.append(f"### {title}\n\nNo items with a known standard-view answer.\n")
            continue
        header = ["Model", "Setup", *FRAME_HEADER, "Not-aligned items"]
        header[4] = "Anatomical = MIRP RQ3(1) (all)" if axis == "left_right" else header[4]
        parts.append(f"### {title}\n\n" + table(header, rows))
    parts.append(
        "Image: scored against what the shown (rotated/flipped) image shows. Standard view: the "
        "same words read on the un-rotated, un-flipped radiological image (patient's right on the "
        "image left). Anatomical: the patient's frame as MIRP defines it ('A to the left of B' "
        "when A lies on the patient's left; above/below = anterior/posterior). Not aligned: items "
        "where the image and the anatomical answer differ (MIRP's split). A model that recites "
        "anatomy scores high in the anatomical columns and low in the image column on "
        "not-aligned items; a model that reads the image does the opposite.\n"
    )
    return "\n".join(parts)


def _transform_tables(s: dict[str, Any]) -> str:
    cols = s["transforms"]
    if not cols:
        return "## Rotation and flip\n\nNo rotation/flip codes in these runs.\n"
    parts = [f"## Rotation and flip\n\nAccuracy in % per shown variant ({TRANSFORM_KEY}).\n"]
    blocks = [("RQ1", s["by_transform_rq1"]), ("All setups", s["by_transform"])]
    for title, by in blocks:
        if by:
            rows = [[label, *(acc(g.get(c)) for c in cols)] for label, g in by.items()]
            parts.append(f"### {title}\n\n" + table(["Model", *cols], rows))
    return "\n".join(parts)


def _variant_table(s: dict[str, Any]) -> str:
    if not s["by_variant"]:
        return ""
    cols = s["variants"]
    rows = [[label, *(acc(g[c]) for c in cols)] for label, g in s["by_variant"].items()]
    return (
        "## Normal vs counterfactual anatomy\n\nAccuracy in % per anatomy variant of the case "
        "(all setups except AS).\n\n" + table(["Model", *cols], rows)
    )


def _question_type_table(s: dict[str, Any]) -> str:
    if not s["by_question_type"]:
        return ""
    cols = s["question_types"]
    chance = {}
    for by in s["by_question_type"].values():
        chance.update({c: g["chance"] for c, g in by.items() if g and g.get("chance") is not None})
    rows = [[label, *(acc(g.get(c)) for c in cols)] for label, g in s["by_question_type"].items()]
    rows.append(["chance", *(pct(chance.get(c)) for c in cols)])
    parts = [
        "## Question types (MIRP relative position and SPAR-VQA)\n\nAccuracy in % per question "
        "type, all setups pooled; every type is a balanced yes/no question.\n\n"
        + table(["Model", *cols], rows)
    ]
    setups = [c for c in s["setup_markers"] if not c.startswith("as/")]
    for label, by in s["by_question_type_setup_marker"].items():
        body = [
            [qt, *(acc(by.get(f"{qt}|{c}")) for c in setups)]
            for qt in cols
            if any(by.get(f"{qt}|{c}", {}).get("n_items") for c in setups)
        ]
        header = ["Question type", *map(column_name, setups)]
        parts.append(f"### {label}: question type by setup and marker\n\n" + table(header, body))
    return "\n".join(parts)


def _mcnemar_table(s: dict[str, Any]) -> str:
    pairs = s["mcnemar"]["pairs"]
    if not pairs:
        return ""
    header = ["Model A", "Model B", "Shared items", "b (A right, B wrong)", "c (A wrong, B right)"]
    rows = [
        [p["model_a"], p["model_b"], p["n_shared"], p.get("b", DASH), p.get("c", DASH)]
        + [_p(p.get("p_value")), p.get("method") or p.get("note", DASH)]
        for p in pairs
    ]
    caveat = (
        " **The runs used different data folders: items are matched by id only.**"
        if len(s["data"]) > 1
        else ""
    )
    return (
        "## Paired comparison (McNemar)\n\nOn per-item correctness of run 0 only, items joined "
        "by id. Exact binomial test when b + c < 25, else chi-square with continuity correction; "
        f"p-values are two-sided and not corrected for multiple comparisons.{caveat}\n\n"
        + table([*header, "p", "Test"], rows)
    )


def _figures_section(figures: dict[str, str | None]) -> str:
    parts = ["## Figures"]
    for name, skipped in figures.items():
        parts.append(f"`{name}` skipped: {skipped}." if skipped else f"![{name}]({name})")
    return "\n\n".join(parts) + "\n"


def render_markdown(s: dict[str, Any], figures: dict[str, str | None]) -> str:
    data = ", ".join(f"`{d}`" for d in s["data"])
    head = (
        f"# radspatial report\n\n{len(s['models'])} model(s) on data {data}; "
        f"radspatial {s['radspatial']}. Missing values print as {DASH}.\n"
    )
    sections = [_table1(s), _mirp_table(s), _runs_table(s), _frames_tables(s)]
    sections.append(_transform_tables(s))
    sections += [_question_type_table(s), _variant_table(s), _mcnemar_table(s)]
    sections.append(_figures_section(figures))
    return "\n".join([head, *(x for x in sections if x)])


# ---------------------------------------------------------------- entry point


def build_report(
    run_dirs: Sequence[Path], out: Path, *, review: Path | None = None
) -> ReportSummary:
    """Write summary.md, summary.json and figures for ``run_dirs`` into ``out``; with
    ``review`` (a marks JSONL, ``grading/review.py``) also ``review.json`` and its section."""
    from radspatial import figures as fig
    from radspatial.report_open import open_markdown, review_for

    runs = load_runs(run_dirs)
    reviewed = review_for(runs, review) if review is not None else None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    s = summarize(runs)
    made = fig.write_all(s, out)  # name -> None if written, else why it was skipped
    written = [out / name for name, skipped in made.items() if not skipped]
    md, js = out / "summary.md", out / "summary.json"
    atomic_write_json(js, {**s, "figures": made})
    if reviewed is not None:
        atomic_write_json(out / "review.json", reviewed)
    text = render_markdown(s, made) + open_markdown(runs, reviewed)
    atomic_write_bytes(md, text.encode())
    return ReportSummary(out, md, js, written, [r.label for r in runs])
