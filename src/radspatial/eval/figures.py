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
from radspatial.eval.consistency import draw_consistency
from radspatial.eval.plotting import PALETTE
from radspatial.eval.plotting import new_figure as _figure
from radspatial.eval.plotting import png_bytes as _png
from radspatial.eval.report_common import AXES as AXIS_TITLES

SETUP_ORDER = ("rq1", "rq2", "rq3")
RELPOS = "relative_position"
Summary = dict[str, Any]


def _pct(group: dict[str, Any] | None, key: str) -> float:
    v = (group or {}).get(key) if (group or {}).get("n_items") else None
    return math.nan if v is None else 100 * float(v)


def _chance(ax: Any, levels: Sequence[float] | None = None) -> None:
    """The chance line: 50% across, or each group's own level (``levels``, %) over its bars."""
    if levels is None:
        ax.axhline(50, ls="--", lw=1, color="0.3", zorder=1, label="chance (50%)")
        return
    label = "chance (each type's own)"
    for g, level in enumerate(levels):
        if not math.isnan(level):
            ax.hlines(level, g - 0.45, g + 0.45, ls="--", lw=1.2, color="0.3", zorder=4,
                      label=label)  # fmt: skip
            label = "_nolegend_"


def _style(ax: Any, ylabel: str = "Accuracy (%)") -> None:
    top = 105 if ax.get_autoscaley_on() else max(105, ax.get_ylim()[1])  # room set for labels
    ax.set_ylim(0, top)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(ylabel)
    ax.yaxis.grid(True, color="0.9", lw=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def _grouped_bars(
    ax: Any,
    n_groups: int,
    series: Sequence[tuple[str, list[float], list[float], str]],
    *,
    values: bool = False,
    abstained: Sequence[Sequence[bool]] = (),
) -> None:
    """Bars of ``series`` (name, means, stds, colour) side by side within each of the groups.

    ``values`` writes each mean under its bar's top (so 0% and missing, "n/a", are visible);
    a bar whose answers were all abstentions or invalid (``abstained[series][group]``) is
    written "abst." instead of a 0 that would read as always wrong.
    """
    width = 0.8 / max(len(series), 1)
    ax.set_xlim(-0.6, n_groups - 0.4)  # nan bars (no items) set no limits of their own
    # more than 3 bars a group: labels stand upright, or neighbours run into one ("9797")
    upright = values and len(series) > 3
    if upright:
        ax.set_ylim(0, 118)  # room for an upright "100" over a full bar (``_style`` keeps it)
    for i, (name, means, stds, colour) in enumerate(series):
        xs = [g - 0.4 + width * (i + 0.5) for g in range(n_groups)]
        ax.bar(xs, means, width * 0.92, color=colour, label=name, zorder=2)
        none = abstained[i] if i < len(abstained) else [False] * n_groups
        for x, m, e, a in zip(xs, means, stds, none, strict=True) if values else ():
            top = m + (e if e > 0 else 0.0) + 1.0  # above the error bar
            text, y = ("n/a", 1.0) if math.isnan(m) else (f"{m:.0f}", top)
            text = "abst." if a else text
            ax.text(x, y, text, ha="center", va="bottom", fontsize=6 if upright else 6.5,
                    color="0.25", zorder=3, rotation=90 if upright else 0)  # fmt: skip
        spread = [(x, m, e) for x, m, e in zip(xs, means, stds, strict=True) if e > 0]
        if spread:  # no caps drawn for a std of 0 (or nan: one run, missing data)
            x, m, e = zip(*spread, strict=True)
            ax.errorbar(x, m, yerr=e, fmt="none", ecolor="0.15", elinewidth=1, capsize=2.5)


def _legend(fig: Any, ax: Any, n: int) -> None:
    """One legend under the plot, the chance line last."""
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("chance"))
    fig.legend([handles[i] for i in order], [short_label(labels[i]) for i in order],
               loc="outside lower center", ncols=min(n, 5), frameon=False)  # fmt: skip


def short_label(label: str, width: int = 40) -> str:
    """A model label for a legend: no endpoint URL, the last path part of a model path, and
    the middle elided past ``width`` characters (the tables keep the full label)."""
    spec, sep, rest = label.partition(" (")
    prefix, colon, name = spec.partition(":")
    if colon:
        name = name.split("@http", 1)[0].rstrip("/").rsplit("/", 1)[-1] or name
        spec = f"{prefix}:{name}"
    text = spec + (f" ({rest}" if sep else "")
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep - keep // 3] + "…" + text[len(text) - keep // 3 :]


def _wrap(label: str, width: int = 20) -> str:
    """Model labels on two or more lines: the spec, then the disambiguating run folder."""
    import textwrap

    spec, sep, rest = label.partition(" (")
    parts = [spec, "(" + rest] if sep else [spec]
    return "\n".join(line for part in parts for line in textwrap.wrap(part, width))


def _tick(key: str) -> str:
    setup, _, marker = key.partition("/")
    return setup.upper() if marker in ("", "none") else f"{setup.upper()}\n{marker}"


# ---------------------------------------------------------------- 1. accuracy by setup


def _accuracy_figure(
    by: dict[str, dict[str, Any]],
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
        (m, [_pct(by[m][c], "accuracy_mean") for c in cols],
         [_pct(by[m][c], "accuracy_std") for c in cols], PALETTE[i % len(PALETTE)])
        for i, m in enumerate(models)
    ]  # fmt: skip
    _grouped_bars(ax, len(cols), series, values=values, abstained=_abstained(by, cols))
    _chance(ax, chance)
    return fig, ax


def _abstained(by: dict[str, dict[str, Any]], cols: Sequence[str]) -> list[list[bool]]:
    """Per model and column: every answer invalid or an abstention (drawn "abst.", not 0)."""
    return [
        [bool((g.get(c) or {}).get("n_items")) and (g.get(c) or {}).get("invalid_rate") == 1.0
         for c in cols]
        for g in by.values()
    ]  # fmt: skip


def _setup_scope(s: Summary) -> tuple[list[str], dict[str, dict[str, Any]], str]:
    """Columns, numbers and the scope of the setup figure: relative position (the questions of
    MIRP's Table 1, as in the report's table beside it) when the runs mix types, else the one
    type there is."""
    cols, by, types = s["setup_markers"], s["by_setup_marker"], s.get("question_types", [])
    per_type = s.get("by_question_type_setup_marker") or {}
    if len(types) > 1 and RELPOS in types and per_type:
        by = {
            m: {c: g.get(f"{RELPOS}|{c}", {"n_items": 0}) for c in cols}
            for m, g in per_type.items()
        }
        cols = [c for c in cols if any((by[m][c] or {}).get("n_items") for m in by)]
        return cols, by, "relative-position questions only (MIRP's)"
    name = types[0].replace("_", " ") if len(types) == 1 else "every question type pooled"
    return cols, by, f"{name} questions" if len(types) == 1 else name


def draw_accuracy_by_setup(s: Summary) -> bytes | str:
    cols, by, scope = _setup_scope(s)
    if not cols:
        return "no setup/marker breakdown in the runs"
    fig, ax = _accuracy_figure(by, cols, 6.5, values=True)
    for i in range(1, len(cols)):  # thin separators between setups
        if cols[i].split("/")[0] != cols[i - 1].split("/")[0]:
            ax.axvline(i - 0.5, color="0.75", lw=0.8)
    ax.set_xticks(range(len(cols)), [_tick(c) for c in cols])
    _style(ax)
    ax.set_title(
        f"Accuracy by setup and marker type (mean ± std across runs)\n{scope}; "
        "answers in the shown image's frame",
        fontsize=10,
    )
    _legend(fig, ax, len(by) + 1)
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
    """Per question-type family against chance (``report_rotation``); runs without
    results.jsonl: every type pooled, as metrics.json has it."""
    if s.get("rotation"):
        from radspatial.eval.report_rotation import draw_rotation_families

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
        grid = np.array([[_pct(by[m].get(c), "accuracy_mean") for c in cols] for m in models])
        # diverging around chance: white = 50%, blue above, red below (systematic errors)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100)
        for (r, c), v in np.ndenumerate(grid):
            text = "–" if math.isnan(v) else f"{v:.1f}"
            ax.text(c, r, text, ha="center", va="center", fontsize=8, color=_ink(cmap, v))
        ax.set_xticks(range(len(cols)), [_variant_tick(c) for c in cols], fontsize=8)
        ax.set_yticks(range(len(models)), models)
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


# ---------------------------------------------------------------- 3. frames


def _frames_setup(s: Summary) -> str | None:
    for setup in SETUP_ORDER:
        if any(f.get(setup) for f in s["frames"].values()):  # {} when no standard-view answer
            return setup
    return None


def draw_frames(s: Summary, setup: str | None = None) -> bytes | str | None:
    """``frames.png``: the first setup with frame data (RQ1 when present); with ``setup``
    (``frames_rq2.png``, ...), that setup when it has data and is not the first (None: not
    applicable, so each setup is drawn once)."""
    first = _frames_setup(s)
    if setup is not None and (
        setup == first or not any(f.get(setup) for f in s["frames"].values())
    ):
        return None
    setup = setup or first
    if setup is None:
        return "no RQ1-RQ3 items with a known standard-view answer"
    models = list(s["frames"])
    frames = {m: s["frames"][m].get(setup, {}) for m in models}
    fig = _figure(min(max(7.0, 2.4 * len(models) + 1.0), 16.0), 6.6)
    axes = fig.subplots(2, 2, sharey=True)
    colours = {"image": PALETTE[0], "standard": PALETTE[1], "anatomical": PALETTE[2]}
    panels = (("", "all items"), ("conflict_", "image ≠ anatomical"))
    for row, (axis, axis_title) in enumerate(AXIS_TITLES.items()):
        for col, (prefix, which) in enumerate(panels):
            ax = axes[row][col]
            groups = [frames[m].get(axis, {}) for m in models]
            ns = [g.get(f"{prefix}image", {}).get("n_items", 0) for g in groups]
            shown = [f for f in colours if any(g.get(prefix + f) for g in groups)]
            series = [
                (f"{frame} frame", [_pct(g.get(prefix + frame), "accuracy_mean") for g in groups],
                 [_pct(g.get(prefix + frame), "accuracy_std") for g in groups], colours[frame])
                for frame in shown
            ]  # fmt: skip
            _grouped_bars(ax, len(models), series, values=True)
            _chance(ax)
            _style(ax, "Accuracy (%)" if col == 0 else "")
            n_set = set(ns) - {0}
            n_text = f" (n={n_set.pop()})" if len(n_set) == 1 else ""
            ax.set_title(f"{axis_title}: {which}{n_text}", fontsize=10)
            tilt = 30 if len(models) > 6 else 0
            ax.set_xticks(range(len(models)), [_wrap(m) for m in models], rotation=tilt,
                          fontsize=7.5, ha="right" if tilt else "center",
                          rotation_mode="anchor")  # fmt: skip
            if not any(ns):
                ax.text(0.5, 0.5, "no items", transform=ax.transAxes, ha="center", color="0.4")
    _legend(fig, axes[0][0], 3)
    fig.suptitle(
        f"Image vs standard view vs anatomical (patient) frame, {setup.upper()}, "
        "relative-position questions\n"
        "reciting anatomy: anatomical high, image low where they disagree",
        fontsize=11,
    )
    return _png(fig)


# ---------------------------------------------------------------- 4. question types


def draw_question_types(s: Summary) -> bytes | None:
    """Accuracy per question type (MIRP relative position and the SPAR-VQA types); None (not
    applicable, not listed) when the runs hold one question type only."""
    cols, by = s.get("question_types", []), s.get("by_question_type", {})
    if len(cols) < 2 or not by:
        return None
    fig, ax = _accuracy_figure(by, cols, 8.5, values=True, chance=_type_chances(by, cols))
    ax.set_xticks(range(len(cols)), [_type_tick(c) for c in cols], fontsize=8)
    _style(ax)
    ax.set_title(
        "Accuracy by question type, all setups (mean ± std across runs), shown image's frame\n"
        'yes/no: "is ... exactly N?" (count) and relations; open: a word or number '
        '(counting: "how many?")',
        fontsize=9,
    )
    _legend(fig, ax, len(by) + 1)
    return _png(fig)


def _type_chances(by: dict[str, dict[str, Any]], cols: Sequence[str]) -> list[float]:
    """Each type's own chance level (%), as its metrics record it (nan: none recorded)."""
    out = []
    for c in cols:
        levels = [g[c].get("chance") for g in by.values() if (g.get(c) or {}).get("chance")]
        out.append(100 * float(levels[0]) if levels else math.nan)
    return out


def _type_tick(name: str) -> str:
    from radspatial.questions.open_common import is_open

    kind = "open" if is_open(name) else "yes/no"
    return f"{name.replace('_', chr(10))}\n({kind})"


# ---------------------------------------------------------------- all


FIGURES: dict[str, Callable[[Summary], bytes | str | None]] = {
    "accuracy_by_setup.png": draw_accuracy_by_setup,
    "rotation_heatmap.png": draw_rotation_heatmap,
    "frames.png": draw_frames,
    **{f"frames_{x}.png": partial(draw_frames, setup=x) for x in SETUP_ORDER},
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
