"""The report's frame figures: accuracy in the image, standard-view and anatomical frames, all
items and those where image and anatomy disagree, per axis (``frames.png``, one per setup).

A relation's axes mean other directions in other planes: on an axial or coronal slice
left/right is the patient's left/right, on a sagittal slice it is anterior/posterior; above/
below is anterior/posterior on axial slices and superior/inferior on coronal and sagittal ones.
So the planes are never pooled: ``frames.png`` (and ``frames_rq2.png``, ...) are the axial
items when the runs hold other planes, and ``frames_coronal.png`` / ``frames_sagittal.png``
draw those planes with their own axis titles (``docs/planes.md``).
"""

from __future__ import annotations

from typing import Any

from radspatial.core.metrics_blocks import FrameMetrics, GroupMetrics
from radspatial.imaging.planes import DEFAULT_PLANE, PLANE
from radspatial.reports.common import AXES, Frames, frame_groups
from radspatial.reports.plotting import (
    PALETTE,
    abstains,
    chance_line,
    grouped_bars,
    legend_below,
    new_figure,
    pct_of,
    png_bytes,
    style_axes,
    wrap_label,
)

SETUP_ORDER = ("rq1", "rq2", "rq3")
# axis -> its title per plane (the axial ones are the tables' titles)
# (MIRP's plane, axial, keeps the tables' titles; the others' say what their axes mean)
PLANE_AXES = {p: AXES if p == DEFAULT_PLANE else v.axis_titles for p, v in PLANE.items()}
Summary = dict[str, Any]


def _plane(s: Summary, plane: str) -> Summary | None:
    """The summary of ``plane``'s items: the whole summary when it holds no other plane."""
    by_plane = s.get("by_plane") or {}
    if not by_plane:
        return s if plane == "axial" else None
    return by_plane.get(plane)


def _frames(sub: Summary | None) -> Frames:
    """``sub``'s frames as records (none: no plane, or no frame data)."""
    return frame_groups((sub or {}).get("frames") or {})


def _first_setup(frames: Frames) -> str | None:
    for setup in SETUP_ORDER:
        if any(f.get(setup) for f in frames.values()):  # {} when no standard-view answer
            return setup
    return None


def draw_frames(s: Summary, setup: str | None = None) -> bytes | str | None:
    """``frames.png``: the axial items of the first setup with frame data (RQ1 when present);
    with ``setup`` (``frames_rq2.png``, ...), that setup when it has data and is not the first
    (None: not applicable, so each setup is drawn once)."""
    frames = _frames(_plane(s, "axial"))
    first = _first_setup(frames)
    if setup is not None and (setup == first or not any(f.get(setup) for f in frames.values())):
        return None
    setup = setup or first
    if setup is None:
        return "no axial RQ1-RQ3 items with a known standard-view answer"
    return _draw(frames, setup, "axial", other_planes=bool(s.get("by_plane")))


def draw_plane_frames(s: Summary, plane: str) -> bytes | None:
    """``frames_coronal.png`` / ``frames_sagittal.png``: that plane's first setup with frame
    data, its axes titled as they read there; None when the runs hold no such items."""
    frames = _frames(_plane(s, plane) if s.get("by_plane") else None)
    setup = _first_setup(frames)
    return None if setup is None else _draw(frames, setup, plane, other_planes=True)


def _view(axis: FrameMetrics | None, view: str) -> GroupMetrics | None:
    return None if axis is None else axis.get(view)


def _draw(by_model: Frames, setup: str, plane: str, *, other_planes: bool) -> bytes:
    models = list(by_model)
    frames = {m: by_model[m].get(setup, {}) for m in models}
    fig = new_figure(min(max(9.0, 2.4 * len(models) + 2.0), 16.0), 7.0)
    axes = fig.subplots(2, 2, sharey=True)
    colours = {"image": PALETTE[0], "standard": PALETTE[1], "anatomical": PALETTE[2]}
    panels = (("", "all items"), ("conflict_", "image ≠ anatomical"))
    for row, (axis, axis_title) in enumerate(PLANE_AXES[plane].items()):
        for col, (prefix, which) in enumerate(panels):
            ax = axes[row][col]
            groups = [frames[m].get(axis) for m in models]
            ns = [(_view(g, f"{prefix}image") or GroupMetrics()).n_items for g in groups]
            shown = [f for f in colours if any(_view(g, prefix + f) is not None for g in groups)]
            views = {f: [_view(g, prefix + f) for g in groups] for f in shown}
            series = [
                (f"{frame} frame", [pct_of(v, "accuracy_mean") for v in views[frame]],
                 [pct_of(v, "accuracy_std") for v in views[frame]], colours[frame])
                for frame in shown
            ]  # fmt: skip
            none = [[abstains(v) for v in views[frame]] for frame in shown]
            grouped_bars(ax, len(models), series, values=True, abstained=none)
            chance_line(ax)
            style_axes(ax, "Accuracy (%)" if col == 0 else "")
            n_set = set(ns) - {0}
            n_text = f" (n={n_set.pop()})" if len(n_set) == 1 else ""
            ax.set_title(f"{axis_title}\n{which}{n_text}", fontsize=9)  # two lines: no overlap
            tilt = 30 if len(models) > 6 else 0
            ax.set_xticks(range(len(models)), [wrap_label(m) for m in models], rotation=tilt,
                          fontsize=7.5, ha="right" if tilt else "center",
                          rotation_mode="anchor")  # fmt: skip
            if not any(ns):
                ax.text(0.5, 0.5, "no items", transform=ax.transAxes, ha="center", color="0.4")
    legend_below(fig, axes[0][0], 3)
    where = f"{plane} slices only, " if other_planes else ""
    fig.suptitle(
        f"Image vs standard view vs anatomical (patient) frame, {setup.upper()}, {where}"
        "relative-position questions\nreciting anatomy: anatomical high, image low where they "
        "disagree",
        fontsize=10,
    )
    return png_bytes(fig)
