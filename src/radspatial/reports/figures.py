"""The report's figures, drawn from the summary that ``report.summarize`` returns.

matplotlib is imported inside the functions (Agg canvas, no pyplot, no global backend switch)
so importing radspatial stays fast. Each ``draw_*`` returns PNG bytes, or a string saying why
there is nothing to draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from radspatial.core.io import atomic_write_bytes
from radspatial.core.metrics_blocks import Consistency, GroupMetrics, TypeGroup
from radspatial.core.records import DEFAULT_TYPE
from radspatial.core.textsafe import fig_text
from radspatial.eval.consistency import CLASSES, TITLES
from radspatial.imaging.planes import PLANES  # PLANES[0]: axial, MIRP's plane
from radspatial.reports.common import consistency_groups, group_of, type_groups
from radspatial.reports.figures_frames import SETUP_ORDER, draw_frames, draw_plane_frames
from radspatial.reports.plotting import (
    PALETTE,
    abstains,
    chance_line,
    grouped_bars,
    legend_below,
    pct_of,
    short_label,
    style_axes,
)
from radspatial.reports.plotting import new_figure as _figure
from radspatial.reports.plotting import png_bytes as _png

RELPOS = DEFAULT_TYPE  # MIRP's type, the headline's
Summary = dict[str, Any]
Groups = dict[str, dict[str, GroupMetrics]]  # model -> column -> group


def _groups(by: dict[str, dict[str, Any]], cols: Sequence[str]) -> Groups:
    """A summary section's ``cols`` per model as records (absent: no items)."""
    return {m: {c: group_of(g.get(c)) for c in cols} for m, g in by.items()}


def _tick(key: str) -> str:
    setup, _, marker = key.partition("/")
    return setup.upper() if marker in ("", "none") else f"{setup.upper()}\n{marker}"


# ---------------------------------------------------------------- 1. accuracy by setup


def _accuracy_figure(
    by: Groups,
    cols: Sequence[str],
    min_width: float,
    *,
    values: bool = False,
    chance: Sequence[float] | None = None,
) -> tuple[Any, Any]:
    """A figure with one group of bars per column (one bar per model) and the chance line."""
    models = list(by)
    width = 1.2 + len(cols) * (0.2 * len(models) + 0.3)
    fig = _figure(min(max(width, min_width), 13.0), 4.6)
    ax = fig.add_subplot()
    series = [
        (m, [pct_of(by[m][c], "accuracy_mean") for c in cols],
         [pct_of(by[m][c], "accuracy_std") for c in cols], PALETTE[i % len(PALETTE)])
        for i, m in enumerate(models)
    ]  # fmt: skip
    grouped_bars(ax, len(cols), series, values=values, abstained=_abstained(by, cols))
    chance_line(ax, chance)
    return fig, ax


def _abstained(by: Groups, cols: Sequence[str]) -> list[list[bool]]:
    """Per model and column: every answer invalid or an abstention (drawn "abst.", not 0)."""
    return [[abstains(g[c]) for c in cols] for g in by.values()]


def _setup_scope(s: Summary) -> tuple[list[str], Groups, str]:
    """Columns, numbers and the scope of the setup figure: relative position (the questions of
    MIRP's Table 1, as in the report's table beside it) when the runs mix types, else the one
    type there is."""
    cols, by, types = s["setup_markers"], s["by_setup_marker"], s.get("question_types", [])
    per_type = s.get("by_question_type_setup_marker") or {}
    if len(types) > 1 and RELPOS in types and per_type:
        relpos = {m: {c: g.get(f"{RELPOS}|{c}") for c in cols} for m, g in per_type.items()}
        typed = _groups(relpos, cols)
        cols = [c for c in cols if any(typed[m][c].n_items for m in typed)]
        return cols, typed, "relative-position questions only (MIRP's)"
    name = types[0].replace("_", " ") if len(types) == 1 else "every question type pooled"
    return cols, _groups(by, cols), f"{name} questions" if len(types) == 1 else name


def draw_accuracy_by_setup(s: Summary) -> bytes | str:
    cols, by, scope = _setup_scope(s)
    if not cols:
        return "no setup/marker breakdown in the runs"
    fig, ax = _accuracy_figure(by, cols, 6.5, values=True)
    for i in range(1, len(cols)):  # thin separators between setups
        if cols[i].split("/")[0] != cols[i - 1].split("/")[0]:
            ax.axvline(i - 0.5, color="0.75", lw=0.8)
    ax.set_xticks(range(len(cols)), [_tick(c) for c in cols])
    style_axes(ax)
    ax.set_title(
        f"Accuracy by setup and marker type (mean ± std across runs)\n{scope}; "
        "answers in the shown image's frame",
        fontsize=10,
    )
    legend_below(fig, ax, len(by) + 1)
    return _png(fig)


# ---------------------------------------------------------------- 2. rotation heatmap


def _cmap(name: str) -> Any:
    from matplotlib import colormaps

    return colormaps[name].with_extremes(bad="0.85")  # grey: no items


def _ink(cmap: Any, value: float) -> str:
    """Black or white text, whichever reads better on the cell colour."""
    if math.isnan(value):
        return "black"
    r, g, b, _ = cmap(value / 100)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _variant_tick(code: str) -> str:
    flip = "flip " if code.startswith("A") else ""
    return f"{code}\n{flip}{90 * (int(code[1]) - 1)}°" if len(code) == 2 else code


def draw_rotation_heatmap(s: Summary) -> bytes | str:
    """Per question-type family against chance (``rotation``); runs without
    results.jsonl: every type pooled, as metrics.json has it."""
    if s.get("rotation"):
        from radspatial.reports.rotation import draw_rotation_families

        return draw_rotation_families(s)
    cols = s["transforms"]
    panels = [(t, by) for t, by in (("RQ1", s["by_transform_rq1"]), ("All setups",
              s["by_transform"])) if by]  # fmt: skip
    if not cols or not panels:
        return "no rotation/flip codes in the runs, e.g. MIRP data without them or AS items only"
    import numpy as np

    models = list(panels[0][1])
    cmap = _cmap("RdBu")
    label_w = 0.09 * max(len(m) for m in models)
    fig = _figure(label_w + 0.75 * len(cols) * len(panels) + 1.4, 0.5 * len(models) + 3.0)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    image = None
    for ax, (title, by) in zip(axes, panels, strict=True):
        typed = _groups(by, cols)
        grid = np.array([[pct_of(typed[m][c], "accuracy_mean") for c in cols] for m in models])
        # diverging around chance: white = 50%, blue above, red below (systematic errors)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100)
        for (r, c), v in np.ndenumerate(grid):
            text = "–" if math.isnan(v) else f"{v:.1f}"
            text = "abst." if abstains(typed[models[r]][cols[c]]) else text
            ax.text(c, r, text, ha="center", va="center", fontsize=8, color=_ink(cmap, v))
        ax.set_xticks(range(len(cols)), [_variant_tick(c) for c in cols], fontsize=8)
        ax.set_yticks(range(len(models)), [fig_text(m) for m in models])
        ax.set_title(title)
    cbar = fig.colorbar(image, ax=list(axes), shrink=0.9, pad=0.02)
    cbar.set_label("Accuracy (%)")
    # the key goes under the title: as a supxlabel it collided with the two-line ticks
    fig.suptitle(
        "Accuracy per rotation/flip variant of the shown image (every question type pooled; "
        "answers in the shown image's frame)\n"
        "A = horizontally flipped, B = not flipped; 1-4 = rotated 0°, 90°, 180°, 270° "
        "counter-clockwise (B1 = standard view)",
        fontsize=9,
    )
    return _png(fig)


# ---------------------------------------------------------------- 4. question types


def draw_question_types(s: Summary) -> bytes | None:
    """Accuracy per question type (MIRP relative position and the SPAR-VQA types); None (not
    applicable, not listed) when the runs hold one question type only."""
    cols, by = s.get("question_types", []), type_groups(s.get("by_question_type", {}))
    if len(cols) < 2 or not by:
        return None
    levels = _type_chances(by, cols)
    typed: Groups = {m: {c: g.get(c) or TypeGroup() for c in cols} for m, g in by.items()}
    fig, ax = _accuracy_figure(typed, cols, 8.5, values=True, chance=levels)
    ticks = [_type_tick(c, lv) for c, lv in zip(cols, levels, strict=True)]
    ax.set_xticks(range(len(cols)), ticks, fontsize=8)
    style_axes(ax)
    ax.set_title(
        "Accuracy by question type, all setups (mean ± std across runs), shown image's frame\n"
        'yes/no: "is ... exactly N?" (count) and relations; open: a word or number '
        '(counting: "how many?")',
        fontsize=9,
    )
    legend_below(fig, ax, len(by) + 1)
    return _png(fig)


def _type_chances(by: dict[str, dict[str, TypeGroup]], cols: Sequence[str]) -> list[float]:
    """Each type's own chance level (%), as its metrics record it (nan: none recorded)."""
    out = []
    for c in cols:
        levels = [chance for g in by.values() if c in g and (chance := g[c].chance)]
        out.append(100 * float(levels[0]) if levels else math.nan)
    return out


def _type_tick(name: str, chance: float) -> str:
    """The type's name and its answer kind: yes/no, 1 of k (multiple choice) or open."""
    from radspatial.reports.families import answer_kind

    kind = answer_kind(name, None if math.isnan(chance) else chance / 100)
    return f"{name.replace('_', chr(10))}\n({kind})"


# ---------------------------------------------------------------- all


def draw_consistency(s: dict[str, Any]) -> bytes | None:
    """Stacked bars: each model's groups by class (all setups pooled); None without groups."""

    groups = consistency_groups(s.get("consistency") or {})
    data: dict[str, Consistency] = {m: c["all"] for m, c in groups.items() if "all" in c}
    if not data:
        return None
    # wide enough for the title and the legend whatever the number of models (one model made
    # a 2.7-inch figure: clipped title, a bar squeezed beside the legend)
    fig = _figure(max(5.5, 1.6 + 1.0 * len(data)), 4.2)
    ax = fig.add_subplot()
    bottoms = [0.0] * len(data)
    for colour, cls in zip(PALETTE, CLASSES, strict=False):
        shares = [100 * (g.classes[cls].share or 0.0) for g in data.values()]
        ax.bar(range(len(data)), shares, 0.6, bottom=bottoms, color=colour, label=TITLES[cls])
        bottoms = [b + v for b, v in zip(bottoms, shares, strict=True)]
    overall = {m["label"]: group_of(m.get("overall")) for m in s.get("models", [])}
    for x, m in enumerate(data):  # no answer at all reads "constant": say it abstains
        if abstains(overall.get(m)):
            ax.text(x, 50, "abst.", ha="center", va="center", fontsize=8, color="white")
    pad = max(0.0, (3 - len(data)) / 2)  # one or two bars: centred, bar-wide, not page-wide
    ax.set_xlim(-0.7 - pad, len(data) - 0.3 + pad)
    tilt = 20 if len(data) > 3 else 0
    ticks = [fig_text(m) for m in data]
    ax.set_xticks(range(len(data)), ticks, rotation=tilt, ha="right" if tilt else "center",
                  fontsize=7)  # fmt: skip
    ax.set_ylim(0, 100)
    ax.set_ylabel("Groups (%)")
    ax.set_title("Consistency over the 8 variants of one slice and pair\n(all setups pooled)",
                 fontsize=9)  # fmt: skip
    fig.legend(loc="outside lower center", ncols=2, fontsize=7, frameon=False)
    return _png(fig)


FIGURES: dict[str, Callable[[Summary], bytes | str | None]] = {
    "accuracy_by_setup.png": draw_accuracy_by_setup,
    "rotation_heatmap.png": draw_rotation_heatmap,
    "frames.png": draw_frames,
    **{f"frames_{x}.png": partial(draw_frames, setup=x) for x in SETUP_ORDER},
    # coronal/sagittal items: their own frame figures (their axes mean other directions)
    **{f"frames_{p}.png": partial(draw_plane_frames, plane=p) for p in PLANES[1:]},
    "question_types.png": draw_question_types,
    "consistency.png": draw_consistency,  # consistency groups only (eval/consistency.py)
}


def write_all(s: Summary, out: Path) -> dict[str, str | None]:
    """Write every figure into ``out``: name -> None when written, else why it was skipped.

    A skipped figure's file from an earlier report is removed so it cannot be mistaken for
    this one's. A figure that does not apply to the runs (``draw`` returns None) is not listed.
    """
    made: dict[str, str | None] = {}
    for name, draw in FIGURES.items():
        result = draw(s)
        if result is None:
            (out / name).unlink(missing_ok=True)
        elif isinstance(result, bytes):
            atomic_write_bytes(out / name, result)
            made[name] = None
        else:
            (out / name).unlink(missing_ok=True)
            made[name] = result
    return made


__all__ = ["FIGURES", "short_label", "write_all"]
