"""The report's section on what the image decides (``questions/decidability.py``): each model's
accuracy on the items the image decides and on those it does not, with n and Wilson 95 %
intervals (``metrics.json``'s ``by_decidable``), and the dataset's decidable share by body
level (RQ1 items, by each slice's position along the body: ``decidable_by_level.png``).

On an undecidable item the image shows the same picture for both answers (a mirrored view of a
slice without a handedness landmark), so an honest reader scores 50 % there; a model far above
it answers from typical anatomy, not from the image.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.io import atomic_write_bytes
from radspatial.core.metrics_blocks import GroupMetrics
from radspatial.core.safepath import recorded_root
from radspatial.core.textsafe import md_table
from radspatial.questions.manifest import ManifestRow, read_manifest

FIGURE = "decidable_by_level.png"
BIN_MM = 30.0  # slice positions binned into 3 cm of body length
_DASH = "-"


def _cell(group: GroupMetrics | None) -> str:
    if group is None or group.accuracy_mean is None:
        return _DASH
    lo, hi = group.ci_low, group.ci_high
    ci = f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else ""
    return f"{100 * group.accuracy_mean:.1f}%{ci} (n {group.n_items})"


def decidable_table(runs: Sequence[Any]) -> str:
    """One row per model: overall, decidable, undecidable ("" when no run has the split)."""
    rows = []
    for r in runs:
        by = r.metrics.by_decidable
        if not by:
            continue
        parts = [by.get("decidable"), by.get("undecidable")]
        rows.append([r.label, _cell(r.metrics.overall), *(_cell(g) for g in parts)])
    if not rows:
        return ""
    header = ["Model", "All items", "Decidable from the image", "Undecidable"]
    return (
        "\n## What the image decides\n\n"
        "An item is *decidable* when its answer is the same under every reading of the image the "
        "image itself cannot rule out: it names no structure with a side, or its answer survives "
        "reading every left/right structure as its partner (a mirrored view), or the slice shows "
        "a handedness landmark (liver, spleen, stomach, heart, aorta, inferior vena cava, ...). "
        "On undecidable items an honest reader scores 50 % (a coin); well above that, a model "
        "answers from typical anatomy. Accuracy with Wilson 95 % intervals, all runs pooled; n "
        "items (docs/benchmark_validity.md).\n\n" + md_table(header, rows) + "\n"
    )


def share_by_level(rows: Sequence[ManifestRow]) -> dict[str, list[tuple[float, int, int]]]:
    """Case -> [(bin centre mm, RQ1 items, decidable)] over the slices' positions."""
    bins: dict[str, dict[float, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for row in rows:
        src = row.source
        if row.setup != "rq1" or row.decidable is None or src is None or src.z_mm is None:
            continue
        centre = (src.z_mm // BIN_MM + 0.5) * BIN_MM
        cell = bins[f"{src.case_id or '?'}{'' if not row.plane else ' ' + row.plane}"][centre]
        cell[0] += 1
        cell[1] += int(row.decidable)
    out = {}
    for case, cells in sorted(bins.items()):
        out[case] = [(z, n, k) for z, (n, k) in sorted(cells.items())]
    return out


def draw_share_by_level(levels: dict[str, list[tuple[float, int, int]]]) -> bytes | None:
    """Decidable share of RQ1 items per 3 cm of body length, one line per case."""
    if not levels:
        return None
    from radspatial.core.textsafe import fig_text
    from radspatial.reports.plotting import PALETTE, new_figure, png_bytes

    fig = new_figure(7.0, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    for k, (case, points) in enumerate(levels.items()):
        z = [p[0] for p in points]
        share = [100 * p[2] / p[1] for p in points]
        colour = PALETTE[k % len(PALETTE)]
        ax.plot(z, share, marker="o", color=colour, label=fig_text(case)[:40])
        for x, y, (_, n, _) in zip(z, share, points, strict=True):
            ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(0, 5), fontsize=7,
                        ha="center", color=colour)  # fmt: skip
    ax.axhline(100, ls=":", lw=1, color="0.6")
    ax.set_ylim(-5, 112)
    ax.set_xlabel("slice position along the body, mm (head is larger); numbers: RQ1 items")
    ax.set_ylabel("decidable from the image (%)")
    ax.set_title("RQ1 items the image decides, by body level")
    ax.legend(fontsize=7, loc="lower left")
    return png_bytes(fig)


def decidable_markdown(runs: Sequence[Any], folder: Path) -> tuple[str, bool]:
    """The section, and whether the figure was written into the report ``folder`` (from the
    first run's dataset, where its manifest can be read)."""
    text = decidable_table(runs)
    levels: dict[str, list[tuple[float, int, int]]] = {}
    for r in (r for r in runs if "rq1" in r.metrics.by_setup):  # the figure is of RQ1 items
        root = recorded_root(r.path, r.info.get("data"))
        manifest = root / "manifest.jsonl" if root else None
        if manifest is not None and manifest.is_file():
            try:
                levels = share_by_level([row for _, row in read_manifest(manifest)])
            except (OSError, ValueError):  # the run's own checks name a bad manifest
                levels = {}
            break
    png = draw_share_by_level(levels)
    if png is None:
        return text, False
    atomic_write_bytes(folder / FIGURE, png)
    total = sum(n for points in levels.values() for _, n, _ in points)
    decided = sum(k for points in levels.values() for _, _, k in points)
    if not text:
        text = "\n## What the image decides\n\n"
    return text + (
        f"\nThe dataset's RQ1 items: {decided} of {total} decidable from the image "
        f"({100 * decided / total:.0f} %); by body level: `{FIGURE}` (Figures).\n"
    ), True
