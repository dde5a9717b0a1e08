"""What every figure shares: the palette, a headless matplotlib figure and its PNG bytes,
and the grouped bars with value labels, chance line, axis style and legend of the report's bar
figures (``figures.py``, ``figures_frames.py`` and the consistency figure in ``figures.py``)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from radspatial.core.metrics_blocks import GroupMetrics
from radspatial.core.textsafe import fig_text

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
DPI = 150


def new_figure(width: float, height: float) -> Any:
    """A matplotlib figure (inches) on the Agg canvas: no display, no pyplot state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    return buf.getvalue()


def pct_of(group: GroupMetrics | None, value: str) -> float:
    """A group's ``value`` (``accuracy_mean``, ``accuracy_std``) in % (NaN: no items)."""
    v = getattr(group, value) if group is not None and group.n_items else None
    return math.nan if v is None else 100 * float(v)


def abstains(group: GroupMetrics | None) -> bool:
    """Every answer of the group an abstention or invalid: drawn "abst.", never a 0 bar that
    would read as always wrong (the tables' *abstains*)."""
    return group is not None and bool(group.n_items) and group.invalid_rate == 1.0


def chance_line(ax: Any, levels: Sequence[float] | None = None) -> None:
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


def style_axes(ax: Any, ylabel: str = "Accuracy (%)") -> None:
    top = 105 if ax.get_autoscaley_on() else max(105, ax.get_ylim()[1])  # room set for labels
    ax.set_ylim(0, top)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(ylabel)
    ax.yaxis.grid(True, color="0.9", lw=0.8)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def grouped_bars(
    ax: Any,
    n_groups: int,
    series: Sequence[tuple[str, list[float], list[float], str]],
    *,
    values: bool = False,
    abstained: Sequence[Sequence[bool]],
) -> None:
    """Bars of ``series`` (name, means, stds, colour) side by side within each of the groups.

    ``values`` writes each mean under its bar's top (so 0% and missing, "n/a", are visible);
    a bar whose answers were all abstentions or invalid (``abstained[series][group]``) is
    written "abst." instead of a 0 that would read as always wrong; every caller says which
    (``abstains``), so no figure can draw an abstaining model as 0.
    """
    width = 0.8 / max(len(series), 1)
    ax.set_xlim(-0.6, n_groups - 0.4)  # nan bars (no items) set no limits of their own
    # more than 3 bars a group: labels stand upright, or neighbours run into one ("9797")
    upright = values and len(series) > 3
    if upright:
        ax.set_ylim(0, 118)  # room for an upright "100" over a full bar (``style_axes`` keeps it)
    for i, (name, means, stds, colour) in enumerate(series):
        xs = [g - 0.4 + width * (i + 0.5) for g in range(n_groups)]
        ax.bar(xs, means, width * 0.92, color=colour, label=name, zorder=2)
        for x, m, e, a in zip(xs, means, stds, abstained[i], strict=True):
            top = m + (e if e > 0 else 0.0) + 1.0  # above the error bar
            text, y = ("n/a", 1.0) if math.isnan(m) else (f"{m:.0f}", top)
            text = "abst." if a else text
            if not values and not a:
                continue
            ax.text(x, y, text, ha="center", va="bottom", fontsize=6 if upright else 6.5,
                    color="0.25", zorder=3, rotation=90 if upright else 0)  # fmt: skip
        spread = [(x, m, e) for x, m, e in zip(xs, means, stds, strict=True) if e > 0]
        if spread:  # no caps drawn for a std of 0 (or nan: one run, missing data)
            x, m, e = zip(*spread, strict=True)
            ax.errorbar(x, m, yerr=e, fmt="none", ecolor="0.15", elinewidth=1, capsize=2.5)


def legend_below(fig: Any, ax: Any, n: int) -> None:
    """One legend under the plot, the chance line last."""
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i].startswith("chance"))
    fig.legend([handles[i] for i in order], [short_label(labels[i]) for i in order],
               loc="outside lower center", ncols=min(n, 5), frameon=False)  # fmt: skip


def short_label(label: str, width: int = 40) -> str:
    """A model label for a legend: no endpoint URL, the last path part of a model path, and
    the middle elided past ``width`` characters (the tables keep the full label)."""
    spec, sep, rest = fig_text(label).partition(" (")
    prefix, colon, name = spec.partition(":")
    if colon:
        name = name.split("@http", 1)[0].rstrip("/").rsplit("/", 1)[-1] or name
        spec = f"{prefix}:{name}"
    text = spec + (f" ({rest}" if sep else "")
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep - keep // 3] + "…" + text[len(text) - keep // 3 :]


def wrap_label(label: str, width: int = 20) -> str:
    """Model labels on two or more lines: the spec, then the disambiguating run folder."""
    import textwrap

    spec, sep, rest = fig_text(label).partition(" (")
    parts = [spec, "(" + rest] if sep else [spec]
    return "\n".join(line for part in parts for line in textwrap.wrap(part, width))
