"""Accuracy per rotation/flip variant of the shown image, per question-type family, against each
type's own chance level: the report's rotation tables and ``rotation_heatmap.png``.

``metrics.json``'s ``by_transform`` pools every question type, and the types' chance levels
differ (50% on yes/no, 20-33% on SPAR-VQA's multiple choice), so a pooled cell coloured around
50% mixes a model's skill with the mix of types. Here each family (``families``) is its
own panel, counted from ``results.jsonl`` (all runs' answers pooled, errors left out), and a
cell's colour is its accuracy minus its chance level (the answers' mean chance: white =
chance, blue above, red below). Relative position has an RQ1 panel too (MIRP's rotation
analysis is on RQ1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from radspatial.core.textsafe import fig_text
from radspatial.reports.common import DASH, TRANSFORM_KEY, TRANSFORMS
from radspatial.reports.families import FAMILIES, family_of
from radspatial.reports.plotting import new_figure, png_bytes

Cell = dict[str, float]  # n, correct, chance_sum, n_chance, invalid


def transform_groups(rows: Sequence[Any]) -> dict[str, dict[str, dict[str, Cell]]]:
    """panel -> transform -> counts, from result rows (``ResultRow``): a panel per family
    ("relpos" all setups, "relpos/rq1" RQ1 only, "spar", "open", ...)."""
    from radspatial.questions import chance_levels

    chance = chance_levels()
    out: dict[str, dict[str, dict[str, Cell]]] = {}
    for r in rows:
        if r.error or not r.transform:
            continue
        family = family_of(r.question_type)
        panels = [family] + ([f"{family}/rq1"] if family == "relpos" and r.setup == "rq1" else [])
        level = chance.get(r.question_type)
        for panel in panels:
            c = out.setdefault(panel, {}).setdefault(r.transform, _empty())
            c["n"] += 1
            c["correct"] += bool(r.correct)
            c["invalid"] += not r.answered  # an abstention or an unparseable reply
            if level is not None:
                c["chance_sum"] += level
                c["n_chance"] += 1
    return out


def _empty() -> Cell:
    return {"n": 0, "correct": 0, "chance_sum": 0.0, "n_chance": 0, "invalid": 0}


def cell_values(c: Cell | None) -> tuple[float, float, bool]:
    """(accuracy %, chance % or nan, every answer invalid/abstained) of one cell."""
    if not c or not c["n"]:
        return math.nan, math.nan, False
    level = 100 * c["chance_sum"] / c["n_chance"] if c["n_chance"] else math.nan
    return 100 * c["correct"] / c["n"], level, c["invalid"] == c["n"]


def abstained_pct(c: Cell | None) -> float:
    """The share (%) of a cell's answers that were abstentions or invalid (scored wrong): a
    family pools types a model answers with types it abstains on, so the reader is told."""
    return 100 * c["invalid"] / c["n"] if c and c["n"] else 0.0


def panels(s: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel key, title) of the panels any model has, relative position's RQ1 first."""
    have = {p for by in (s.get("rotation") or {}).values() for p in by}
    order = ["relpos/rq1", *FAMILIES]
    titles = {
        "relpos/rq1": "MIRP relative position, RQ1",
        "relpos": "MIRP relative position, all setups",
        **{k: v.split(" (")[0] for k, v in FAMILIES.items() if k != "relpos"},
    }
    return [(p, titles[p]) for p in order if p in have]  # fmt: skip


def rotation_markdown(s: dict[str, Any], table: Any) -> str:
    """The rotation/flip tables, one per panel: accuracy % (chance %) per variant."""
    by, cols = s.get("rotation") or {}, [t for t in TRANSFORMS if t in _codes(s)]
    keys = panels(s)
    if not keys or not cols:
        return ""
    parts = [
        "## Rotation and flip\n\nAccuracy in % per shown variant, per question-type family, "
        "all runs' answers pooled; in brackets the answers' chance level, then the share of "
        f"abstentions and invalid answers (scored wrong) where there are any ({TRANSFORM_KEY}).\n"
    ]
    for key, title in keys:
        rows = [
            [label, *(_md_cell(g.get(key, {}).get(t)) for t in cols)] for label, g in by.items()
        ]
        parts.append(f"### {title}\n\n" + table(["Model", *cols], rows))
    return "\n".join(parts)


def _codes(s: dict[str, Any]) -> set[str]:
    return {t for g in (s.get("rotation") or {}).values() for p in g.values() for t in p}


def _md_cell(c: Cell | None) -> str:
    value, level, none = cell_values(c)
    if math.isnan(value):
        return DASH
    if none:
        return "abstains"
    share = abstained_pct(c)
    text = f"{value:.1f}" + ("" if math.isnan(level) else f" ({level:.0f})")
    return text + (f", {share:.0f}% abst." if share >= 0.5 else "")


def draw_rotation_families(s: dict[str, Any]) -> bytes | str:
    """``rotation_heatmap.png``: a heatmap per panel, colour = accuracy minus chance."""
    cols = [t for t in TRANSFORMS if t in _codes(s)]
    keys = panels(s)
    if not cols or not keys:
        return "no rotation/flip codes in the runs, e.g. MIRP data without them or AS items only"
    import numpy as np
    from matplotlib import colormaps

    by = s["rotation"]
    models = list(by)
    cmap = colormaps["RdBu"].with_extremes(bad="0.85")
    ncols = min(2, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    label_w = 0.075 * max(len(m) for m in models)
    fig = new_figure(label_w * ncols + 0.62 * len(cols) * ncols + 1.6,
                     nrows * (0.3 * len(models) + 1.2) + 0.9)  # fmt: skip
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    image = None
    for ax, (key, title) in zip(axes, keys, strict=False):
        cells = [[cell_values(by[m].get(key, {}).get(t)) for t in cols] for m in models]
        # grey: no items, or only abstentions (no answer to weigh against chance)
        diff = np.array([[math.nan if no else v - lv for v, lv, no in row] for row in cells])
        image = ax.imshow(np.ma.masked_invalid(diff), cmap=cmap, vmin=-50, vmax=50, aspect="auto")
        for r, row in enumerate(cells):
            for c, (v, lv, none) in enumerate(row):
                text = "–" if math.isnan(v) else ("abst." if none else f"{v:.0f}")
                share = abstained_pct(by[models[r]].get(key, {}).get(cols[c]))
                if not none and share >= 0.5:  # pooled with abstentions: say how many
                    text += f"\n{share:.0f}% abst."
                dark = not math.isnan(v - lv) and abs(v - lv) > 30
                ax.text(c, r, text, ha="center", va="center", fontsize=7.5,
                        color="white" if dark else "black")  # fmt: skip
        ax.set_xticks(range(len(cols)), [_tick(t) for t in cols], fontsize=7)
        ax.set_yticks(range(len(models)), [fig_text(m) for m in models], fontsize=8)
        ax.set_title(title, fontsize=9)
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    cbar = fig.colorbar(image, ax=list(axes[: len(keys)]), shrink=0.8, pad=0.02)
    cbar.set_label("accuracy minus chance (points)", fontsize=8)
    fig.suptitle(
        "Accuracy (%) per rotation/flip variant of the shown image, per question-type family;\n"
        "colour: accuracy minus each answer's chance level (white = chance). "
        "A = flipped, B = not; 1-4 = rotated 0°, 90°, 180°, 270° (B1 = standard view)",
        fontsize=8.5,
    )
    return png_bytes(fig)


def _tick(code: str) -> str:
    flip = "flip " if code.startswith("A") else ""
    return f"{code}\n{flip}{90 * (int(code[1]) - 1)}°" if len(code) == 2 else code
