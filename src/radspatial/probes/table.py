"""Table 1 of the probes (the SPAR paper's layout): markdown + a PNG rendering of it.

Columns: MED (Level 1, mean Euclidean distance in px at a 512 px reference slice, lower is
better), Perm (Level 2, full-permutation accuracy with the per-tile accuracy in parentheses),
RelPos, Orient, Symm (Level 3, accuracy) and the extra Level 3 tasks Size, Dist, Count and
RelOrg (``relpos_organ``: relative position of named organs, no markers; its column is shown
only when a result has it). Rows:
encoder x head x frozen/finetuned, in blocks: one per in-domain dataset and one per transfer
(source -> target dataset), each with its chance row and its test-set sizes.

Torch-free: it reads ``results.json`` files only (from ``train_probe`` or ``evaluate_probe``).

Example: ``write_table([Path("runs/rs-mlp"), Path("runs/rs-mlp-to-ct")], Path("table"))``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.io import atomic_write_bytes
from radspatial.core.safepath import check_disjoint

COLUMNS: tuple[tuple[str, str], ...] = (
    ("localize", "MED ↓ (px @512)"),
    ("permutation", "Perm ↑ (tile)"),
    ("relpos", "RelPos ↑"),
    ("orient", "Orient ↑"),
    ("symmetry", "Symm ↑"),
    ("size", "Size ↑"),
    ("distance", "Dist ↑"),
    ("count", "Count ↑"),
    ("relpos_organ", "RelOrg ↑"),
    ("relpos2", "RelPos-2 ↑"),
    ("orient5", "Orient-5 ↑"),
    ("symmetry_mask", "Symm+mask ↑"),
)
# shown only when some run has it (relpos2 / orient5: SPAR's class sets, docs/probes.md)
OPTIONAL_COLUMNS: frozenset[str] = frozenset(
    {"relpos_organ", "relpos2", "orient5", "symmetry_mask"}
)
HEAD_ORDER = {"mlp": 0, "transformer": 1, "both": 2}
DASH = "–"


def _pct(v: Any) -> str:
    return DASH if v is None else f"{100 * float(v):.1f}"


def cell(task: str, metrics: dict[str, Any] | None) -> str:
    """One table cell from a split's metrics (or a chance dict)."""
    if not metrics:
        return DASH
    if task == "localize":
        v = metrics.get("mean_euclidean_distance_px")
        return DASH if v is None else f"{float(v):.1f}"
    if task == "permutation":  # restored: identical (blank) tiles interchangeable, if scored
        full = metrics.get("restored_accuracy", metrics.get("permutation_accuracy"))
        if full is None:
            return DASH
        tile = metrics.get("restored_tile_accuracy", metrics.get("tile_accuracy"))
        return f"{_pct(full)} ({_pct(tile)})" if tile is not None else _pct(full)
    return _pct(metrics.get("accuracy"))


def _features(res: dict[str, Any]) -> str:
    if res.get("mode") != "frozen":
        return "finetuned"
    src = str(res.get("frozen"))
    short = src if src in ("random", "pretrained") or src.startswith("hf:") else Path(src).name
    return f"frozen ({short})"


def _block_key(res: dict[str, Any]) -> tuple[int, str]:
    if res.get("kind") == "transfer":
        src = Path(str(res.get("source_data"))).name
        return 1, f"Transfer: {src} → {res.get('data_name')}"
    return 0, f"In domain: {res.get('data_name')}"


def load_results(result_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for d in result_dirs:
        path = Path(d) / "results.json" if Path(d).is_dir() else Path(d)
        if not path.is_file():
            raise ValueError(f"{d}: no results.json")
        res = read_json(path, want=dict)
        if res.get("status") not in (None, "complete"):  # None: written before the status
            raise DataFileError(
                f"{path}: probe training did not finish (status {res.get('status')!r}); "
                "rerun the same probe train command"
            )
        if not isinstance(res.get("tasks", {}), dict):
            raise DataFileError(f"{path}: 'tasks' must be an object")
        out.append(res)
    return out


def _class_counts(data: Any) -> dict[str, Any]:
    path = Path(str(data)) / "probes.json"
    try:
        tasks = read_json(path, want=dict)["tasks"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {t: (v.get("classes"), v.get("class_counts")) for t, v in tasks.items()}


def majority(res: dict[str, Any], task: str, split: str) -> float | None:
    """Accuracy of always answering the training split's most frequent class (of the source
    dataset under transfer, matched by name), from the datasets' probes.json class counts."""
    src = _class_counts(
        res.get("source_data") if res.get("kind") == "transfer" else res.get("data")
    )
    dst = _class_counts(res.get("data"))
    (src_names, src_counts), (dst_names, dst_counts) = (
        src.get(task, (None, None)),
        dst.get(task, (None, None)),
    )
    if not (src_names and src_counts and dst_names and dst_counts) or not sum(
        src_counts.get("train", [])
    ):
        return None
    train = src_counts["train"]
    name = src_names[max(range(len(train)), key=train.__getitem__)]
    counts = dst_counts.get(split, [])
    if name not in dst_names or not sum(counts):
        return None
    return counts[dst_names.index(name)] / sum(counts)


def _chance_cell(task: str, entry: dict[str, Any]) -> str:
    """The chance row's cell: a classification task whose chance comes from the data (count:
    the training majority-class rate, not 1/k) is marked so."""
    from radspatial.probes.tasks import TASKS

    text = cell(task, entry.get("chance"))
    spec = TASKS.get(task)
    if spec is not None and spec.chance is None and spec.kind == "classification":
        return f"{text} (maj.)"
    return text


def table_rows(results: Sequence[dict[str, Any]], split: str = "test") -> list[list[str]]:
    """Header, then per block: a block title row, chance, majority class and n rows, the models."""
    columns = [
        (t, title)
        for t, title in COLUMNS
        if t not in OPTIONAL_COLUMNS or any(t in r.get("tasks", {}) for r in results)
    ]
    header = ["Encoder", "Head", "Features", *(title for _, title in columns)]
    blocks: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in results:
        blocks.setdefault(_block_key(r), []).append(r)
    rows = [header]
    for key in sorted(blocks):
        group = sorted(
            blocks[key],
            key=lambda r: (
                str(r.get("encoder")),
                r.get("mode") != "frozen",
                HEAD_ORDER.get(str(r.get("head")), 9),
            ),
        )
        rows.append([f"**{key[1]}**", "", "", *([""] * len(columns))])
        chance, major, n = [], [], []
        for task, _ in columns:
            owner = next((r for r in group if task in r.get("tasks", {})), None)
            entry = owner["tasks"][task] if owner else None
            chance.append(_chance_cell(task, entry) if entry else DASH)
            major.append(_pct(majority(owner, task, split)) if owner else DASH)
            n.append(str(entry.get(split, {}).get("n", DASH)) if entry else DASH)
        rows.append(["Chance", "", "", *chance])
        rows.append(["Majority class (train)", "", "", *major])
        rows.append([f"n ({split})", "", "", *n])
        for r in group:
            tasks = r.get("tasks", {})
            cells = [cell(t, tasks.get(t, {}).get(split)) for t, _ in columns]
            rows.append([str(r.get("encoder")), str(r.get("head")), _features(r), *cells])
    return rows


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"


def draw_table(rows: list[list[str]], title: str = "Probe results (Table 1)") -> bytes:
    """The table as a PNG (Agg canvas, no pyplot) with ``title`` above it, cropped to the
    table and title (no empty margins)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

    fig = Figure(figsize=(1.1 * len(rows[0]) + 1.5, 0.32 * len(rows) + 0.6), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(111)
    ax.axis("off")
    body = [[c.replace("**", "") for c in r] for r in rows[1:]]
    tab = ax.table(cellText=body, colLabels=rows[0], loc="center", cellLoc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(7)
    for (i, _), c in tab.get_celld().items():
        if i == 0:
            c.set_facecolor("#d9d9d9")
        elif rows[i][0].startswith("**"):
            c.set_facecolor("#eef3fb")
        elif rows[i][0] in ("Chance", "Majority class (train)") or rows[i][0].startswith("n ("):
            c.set_facecolor("#f7f7f7")
    tab.auto_set_column_width(list(range(len(rows[0]))))
    renderer = fig.canvas.get_renderer()
    box = tab.get_window_extent(renderer)
    width, height = fig.bbox.width, fig.bbox.height
    heading = fig.text(
        box.x0 / width, (box.y1 + 6) / height, title, ha="left", va="bottom", fontsize=9,
        weight="bold",
    )  # fmt: skip
    both = Bbox.union([box, heading.get_window_extent(renderer)]).padded(8)  # px
    buf = io.BytesIO()
    fig.savefig(
        buf,
        format="png",
        dpi=150,
        facecolor="white",
        bbox_inches=both.transformed(fig.dpi_scale_trans.inverted()),
    )
    return buf.getvalue()


def write_table(result_dirs: Sequence[Path], out: Path, *, split: str = "test") -> Path:
    """Write ``table1.md`` and ``table1.png`` into ``out``; returns the markdown's path."""
    for i, d in enumerate(result_dirs):  # the table's files never land in a folder it reads
        check_disjoint(Path(out) / "table1.md", {f"results #{i + 1}": Path(d)})
    results = load_results(result_dirs)
    if not results:
        raise ValueError("no result folders given")
    rows = table_rows(results, split)
    note = (
        f"Split: {split}. MED: mean Euclidean distance of the predicted organ centre, px at a "
        "512 px reference slice (lower is better). Perm: full-permutation accuracy % (per-tile "
        "accuracy % after Hungarian assignment). Others: accuracy %. Majority class: always "
        "answering the training split's most frequent class (a stronger baseline than chance "
        "where classes are unbalanced). Chance: a uniform guess (1/k); localize: always the "
        "training mean; *(maj.)*: a task whose chance is its training majority-class rate "
        "(count), not 1/k. A uniform guess can exceed the majority class: the "
        "class most frequent in training can be rarer in this split (splits are by case), and "
        "then always answering it scores below 1/k. "
        f"{DASH}: task not run or no samples.\n\n"
    )
    out = Path(out)
    md = out / "table1.md"
    atomic_write_bytes(md, ("# Probe results (Table 1)\n\n" + note + markdown(rows)).encode())
    title = f"Probe results (Table 1), {split} split"
    atomic_write_bytes(out / "table1.png", draw_table(rows, title))
    return md
