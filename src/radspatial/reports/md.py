"""The report's markdown (``summary.md``): tables laid out from ``report.summarize``'s data.

Missing values print as a dash; every number is copied from the runs' ``metrics.json``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from radspatial.core.metrics_blocks import GroupMetrics, Share
from radspatial.core.textsafe import Markup, md_code, md_table, md_text
from radspatial.models.base import ORACLE_MARK
from radspatial.reports.common import (
    AXES,
    DASH,
    FRAME_COLUMNS,
    FRAME_HEADER,
    RELPOS,
    SETUPS,
    TRANSFORM_KEY,
    Group,
    frame_groups,
    group_of,
)
from radspatial.reports.common import rank as _rank


def _num(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def pct(x: Any) -> str:
    v = _num(x)
    return DASH if v is None else f"{100 * v:.1f}"


def acc(group: Group | GroupMetrics | None) -> str:
    """``acc_mean ± std`` in %, a dash when the group is empty, or "abstains" when every
    answer was an abstention or invalid (a 0.0 there would read as always wrong)."""
    g = group_of(group)
    if not g.n_items:
        return DASH
    if g.invalid_rate == 1.0:
        return "abstains"
    mean, std = pct(g.accuracy_mean), pct(g.accuracy_std)
    return mean if std == DASH else f"{mean} ± {std}"


def _p(x: Any) -> str:
    v = _num(x)
    return DASH if v is None else (f"{v:.3g}" if v >= 1e-4 else f"{v:.1e}")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A pipe table; every cell is escaped as literal markdown (labels come from files)."""
    return md_table(header, rows)


def column_name(key: str) -> str:
    setup, _, marker = key.partition("/")
    return setup.upper() if marker in ("", "none") else f"{setup.upper()} {marker}"


def _table1(s: dict[str, Any]) -> str:
    """Relative position per setup/marker, the headline over RQ1-RQ3 (MIRP's "Overall"), then
    the blank-image ablation; the other question types are in their families' tables."""
    cols = s["relpos_setup_markers"] or s["setup_markers"]
    main = [c for c in cols if not c.startswith("as/")]
    ablation = [c for c in cols if c.startswith("as/")]
    header = ["Model", *map(column_name, main), "Overall (RQ1-3)", "95% CI"]
    header += [*map(column_name, ablation), "Invalid", "Yes-rate"]
    rows = []
    for m in s["models"]:
        label = m["label"]
        o = group_of(s["headline"].get(label))
        by_qt = s["by_question_type_setup_marker"].get(label, {})
        by_sm = s["by_setup_marker"][label]

        def cell(c: str, by_qt: dict = by_qt, by_sm: dict = by_sm) -> str:
            return acc(by_qt.get(f"{RELPOS}|{c}") if by_qt else by_sm.get(c))

        ci = Markup(f"[{pct(o.ci_low)}, {pct(o.ci_high)}]") if o.n_items else DASH
        rows.append(
            [label, *(cell(c) for c in main), acc(o), ci, *(cell(c) for c in ablation)]
            + [pct(o.invalid_rate), pct(o.yes_rate)]
        )
    rows.append(["chance", *(["50.0"] * len(main)), "50.0", DASH, *(["50.0"] * len(ablation))])
    rows[-1] += [DASH, DASH]
    others = [q for q in s["question_types"] if q != RELPOS]
    more = " The other question types are in their families' tables below." if others else ""
    return (
        "## Accuracy by setup and marker (cf. MIRP Table 1)\n\n"
        "MIRP's relative-position questions (balanced yes/no: chance 50%), accuracy in %, mean "
        "± standard deviation across runs. Overall: RQ1-RQ3 (MIRP's headline); the blank-image "
        "ablation (AS) has its own columns and is not pooled into it. 95% CI: Wilson interval "
        "on all runs' answers pooled. Invalid: unparseable answers and abstentions (scored "
        f"wrong). Yes-rate: share of valid answers that are 'yes' (answer bias).{more}\n\n"
        + table(header, rows)
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
    protocols = {m["label"]: m.get("protocol") or DASH for m in s["models"]}
    header = [
        "Model",
        "Protocol",
        *(column_name(k.lower()) for k in keys),
        "RQ3(1) image",
        "RQ3(1) anatomical",
    ]
    rows = [
        [label, protocols.get(label, DASH), *(_mirp_cell(b.get(k)) for k in keys)]
        + [_mirp_cell(b.get("RQ1/none"), f) for f in ("anatomy_image", "anatomy_left_right")]
        for label, b in s["mirp"].items()
    ]
    return (
        "## MIRP Table 1 view (MIRP's rules)\n\n"
        "Accuracy as a fraction, mean ± standard deviation (statistics.stdev) across runs, "
        "relative position only, computed with MIRP's answer cascade (an unsure reply counts as "
        "the wrong answer), so these equal what MIRP's published scripts give on "
        "`radspatial export mirp` of the same run. Protocol: `radspatial` (ours) or `mirp` "
        "(MIRP's inference code, `--protocol mirp`); the paper's numbers are the latter. RQ3(1): "
        "MIRP's anatomy script on RQ1, image frame on its left/right questions and anatomical "
        "frame ('left' is the patient's left) on those whose structures it can place; these are "
        "the only RQ3(1) numbers in this report.\n\n" + table(header, rows)
    )


def _runs_table(s: dict[str, Any]) -> str:
    header = ["Model", "Items", "Runs", "Errors", "Status", "Run folder", "Data"]
    rows = [
        [m["label"], m["n_items"], m["runs"], m["n_errors"], m["status"] or DASH]
        + [md_code(m["run_dir"]), md_code(m["data"]) if m["data"] else DASH]
        for m in s["models"]
    ]
    note = "" if len(s["data"]) < 2 else "\n**The runs used different data folders.**\n"
    return "## Runs\n\n" + table(header, rows) + note


def _frames_tables(s: dict[str, Any]) -> str:
    parts = ["## Image vs standard view vs anatomical frame\n"]
    if s.get("frames_scope") == "axial":  # the planes' own tables are under "By plane"
        parts.append(
            "Axial items only: on a sagittal slice left/right is anterior/posterior, on "
            "coronal and sagittal slices above/below is superior/inferior (By plane, below).\n"
        )
    for axis, title in AXES.items():
        rows: list[list[Any]] = []
        for label, frames in frame_groups(s["frames"]).items():
            for setup in SETUPS:
                f = frames.get(setup, {}).get(axis)
                if f is not None and f.views:
                    n = group_of(f.get("conflict_image")).n_items
                    cells = [acc(f.get(c)) for c in FRAME_COLUMNS]
                    rows.append([label, setup.upper(), *cells, n])
        if not rows:
            parts.append(f"### {title}\n\nNo items with a known standard-view answer.\n")
            continue
        header = ["Model", "Setup", *FRAME_HEADER, "Not-aligned items"]
        parts.append(f"### {title}\n\n" + table(header, rows))
    parts.append(
        "Image: scored against what the shown (rotated/flipped) image shows. Standard view: the "
        "same words read on the un-rotated, un-flipped radiological image (patient's right on the "
        "image left). Anatomical: the patient's frame as MIRP defines it ('A to the left of B' "
        "when A lies on the patient's left; above/below = anterior/posterior). Not aligned: items "
        "where the image and the anatomical answer differ (MIRP's split). A model that recites "
        "anatomy scores high in the anatomical columns and low in the image column on "
        "not-aligned items; a model that reads the image does the opposite. These use our "
        "parser on every setup; MIRP's RQ3(1) (its parser, RQ1) is in the MIRP Table 1 view.\n"
    )
    return "\n".join(parts)


def _transform_tables(s: dict[str, Any]) -> str:
    """Per question-type family against chance (``rotation``, from results.jsonl);
    without results, every type pooled as metrics.json has it."""
    from radspatial.reports.rotation import rotation_markdown

    if text := rotation_markdown(s, table):
        return text
    cols = s["transforms"]
    if not cols:
        return "## Rotation and flip\n\nNo rotation/flip codes in these runs.\n"
    parts = [
        f"## Rotation and flip\n\nAccuracy in % per shown variant ({TRANSFORM_KEY}), every "
        "question type pooled (metrics.json's by_transform).\n"
    ]
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
        "(all setups except AS, every question type pooled).\n\n" + table(["Model", *cols], rows)
    )


def _ci(group: Group | None) -> str:
    """``accuracy [low, high] (n)`` in % from a Wilson group (a ``Share``), or a dash."""
    g = Share.from_json(group or {}, "summary: by_modality")
    if not g.n:
        return DASH
    return f"{pct(g.accuracy)} [{pct(g.ci_low)}, {pct(g.ci_high)}] (n={g.n})"


def _modality_tables(s: dict[str, Any]) -> str:
    """Accuracy per modality (one column each), then each modality's setup/marker table."""
    mods, by = s.get("modalities") or [], s.get("by_modality") or {}
    if not mods:
        return ""
    rows = [[label, *(_ci(g.get(m, {}).get("all")) for m in mods)] for label, g in by.items()]
    parts = [
        "## Modality\n\nAccuracy in % with Wilson 95% CI, all runs pooled, per modality of the "
        "case (answers = items x runs; from results.jsonl); every question type pooled. Each "
        "modality's setup/marker table below holds MIRP's relative-position questions only, "
        "as Table 1 does.\n\n" + table(["Model", *mods], rows)
    ]
    for m in mods:
        keys = sorted({k for g in by.values() for k in g.get(m, {}) if k != "all"}, key=_rank)
        body = [[label, *(_ci(g.get(m, {}).get(k)) for k in keys)] for label, g in by.items()]
        body = [r for r in body if any(c != DASH for c in r[1:])]
        if not keys:  # no relative-position questions
            continue
        parts.append(f"### {m}\n\n" + table(["Model", *map(column_name, keys)], body))
    return "\n".join(parts)


def _question_type_table(s: dict[str, Any]) -> str:
    from radspatial.reports.families import family_tables

    if not s["by_question_type"]:
        return ""
    cols = s["question_types"]
    parts = [
        "## Question types by family\n\nAccuracy in % per question type, all setups pooled, "
        "one table per family. Chance: a uniform guess, 50% on a balanced yes/no type, 1/k on "
        "a type with k balanced options (SPAR-VQA's multiple choice: 20%, 25%, 33.3%); open "
        "types answer with a word or a number (identification: chance depends on the item). "
        "*abstains*: every answer an abstention or invalid (scored wrong, not a wrong "
        "answer).\n",
        family_tables(s, acc, pct, table),
    ]
    setups = [c for c in s["setup_markers"] if not c.startswith("as/")]
    for label, by in s["by_question_type_setup_marker"].items():
        body = [
            [qt, *(acc(by.get(f"{qt}|{c}")) for c in setups)]
            for qt in cols
            if any(group_of(by.get(f"{qt}|{c}")).n_items for c in setups)
        ]
        header = ["Question type", *map(column_name, setups)]
        title = f"### {md_text(label)}: question type by setup and marker\n\n"
        parts.append(title + table(header, body))
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
        parts.append(
            f"{md_code(name)} skipped: {md_text(skipped)}." if skipped else f"![{name}]({name})"
        )
    return "\n\n".join(parts) + "\n"


def render_markdown(s: dict[str, Any], figures: dict[str, str | None]) -> str:
    data = ", ".join(md_code(d) for d in s["data"])
    head = (
        f"# radspatial report\n\n{len(s['models'])} model(s) on data {data}; "
        f"radspatial {s['radspatial']}. Missing values print as {DASH}.\n"
    )
    if any(m["label"].endswith(ORACLE_MARK) for m in s["models"]):
        head += (
            "\n*(oracle)*: reads the truth instead of the image (`agent:mask` the true label "
            "image, `baseline:standard-view` the true centres): a check of the data and the "
            "scoring, not a result to compare models with.\n"
        )
    from radspatial.eval.rq1_plain import plain_rq1_markdown

    sections = [_table1(s), plain_rq1_markdown(s.get("rq1_plain", {}))]
    sections += [_mirp_table(s), _runs_table(s), _frames_tables(s)]
    sections.append(_transform_tables(s))
    sections += [_question_type_table(s), _modality_tables(s), _variant_table(s)]
    sections.append(_mcnemar_table(s))
    sections.append(_figures_section(figures))
    return "\n".join([head, *(x for x in sections if x)])
