"""The figure of ``probe vlm``: accuracy along encoder -> projector -> language model -> answer.

One line per read-out (pooled, tokens) over the stages, each point with its Wilson 95% CI, the
model's own answer accuracy as the last point, chance (0.5) and the majority rule as lines.
"""

from __future__ import annotations

from typing import Any

from radspatial.reports.plotting import PALETTE, new_figure, png_bytes

_LABELS = {"vision": "encoder", "projector": "projector"}


def stage_label(stage: str) -> str:
    """'vision' -> 'encoder', 'lm12' -> 'LM layer 12'."""
    return _LABELS.get(stage, f"LM layer {stage[2:]}" if stage.startswith("lm") else stage)


def stages_figure(summary: dict[str, Any]) -> bytes:
    stages = list(summary["stage_order"])
    names = [stage_label(s) for s in stages] + ["answer"]
    fig = new_figure(max(4.0, 1.2 * len(names) + 1.5), 3.2)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(names)))
    for k, readout in enumerate(summary["readouts"]):
        rows = [summary["stages"][s][readout] for s in stages]
        acc = [r["accuracy"] for r in rows]
        lo = [a - r["ci95"][0] for a, r in zip(acc, rows, strict=True)]
        hi = [r["ci95"][1] - a for a, r in zip(acc, rows, strict=True)]
        shift = (k - 0.5) * 0.08
        ax.errorbar([x + shift for x in xs[:-1]], acc, yerr=[lo, hi], marker="o", capsize=3,
                    color=PALETTE[k], label=f"probe: {readout}")  # fmt: skip
    ans = summary["answer"]
    ax.errorbar([xs[-1]], [ans["accuracy"]], capsize=3, marker="s", color=PALETTE[7],
                yerr=[[ans["accuracy"] - ans["ci95"][0]], [ans["ci95"][1] - ans["accuracy"]]],
                label="model's answer")  # fmt: skip
    ax.axhline(summary["chance"], color="grey", linestyle=":", label="chance")
    if "majority" in summary:
        ax.axhline(summary["majority"]["accuracy"], color="grey", linestyle="--", label="majority")
    ax.set_xticks(xs, names)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_title("encoder -> projector -> language model -> answer", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    return png_bytes(fig)
