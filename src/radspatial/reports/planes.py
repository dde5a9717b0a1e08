"""The report's sections for coronal/sagittal items and consistency groups (``summary.md``).

``planes_markdown``: for runs with items of more than the axial plane, the accuracy, frame,
rotation/flip and question-type tables again, one set per plane, with what each frame means
there (``docs/planes.md``). ``groups_markdown``: the consistency table per model
(``eval/consistency.py``), shares with Wilson 95% intervals, all setups pooled and per setup,
all planes pooled and per plane.
"""

from __future__ import annotations

from typing import Any

from radspatial.core.metrics_blocks import Consistency
from radspatial.eval.consistency import CLASSES, TITLES
from radspatial.imaging.planes import PLANE
from radspatial.reports.common import DASH, consistency_groups
from radspatial.reports.md import (
    _frames_tables,
    _question_type_table,
    _table1,
    _transform_tables,
    column_name,
    pct,
    table,
)

MEANING = {name: plane.meaning for name, plane in PLANE.items()}  # imaging/planes.py


def _demote(md: str) -> str:
    """One heading level down, so a plane's tables sit under its heading."""
    return "\n".join(
        "#" + line if line.startswith("## ") or line.startswith("### ") else line
        for line in md.split("\n")
    )


def planes_markdown(s: dict[str, Any]) -> str:
    if not s.get("by_plane"):
        return ""
    parts = [
        "\n## By plane\n\nEvery table above, again for the items of each slice plane. The "
        "anatomical frame per plane: "
        + "; ".join(f"{p}: {m}" for p, m in MEANING.items() if p in s["planes"])
        + ".\n"
    ]
    for plane in s["planes"]:
        sub = s["by_plane"][plane]
        parts.append(f"### Plane: {plane}\n")
        for section in (_table1, _frames_tables, _transform_tables, _question_type_table):
            text = section(sub)
            if text:
                parts.append(_demote(_demote(text)))
    return "\n".join(parts)


def _cell(group: Consistency, cls: str) -> str:
    c = group.classes.get(cls)
    if c is None or c.share is None:
        return DASH
    return f"{pct(c.share)} [{pct(c.ci_low)}, {pct(c.ci_high)}]"


def groups_markdown(s: dict[str, Any]) -> str:
    if not s.get("consistency"):
        return ""
    # all planes pooled, and each plane's groups apart where there are planes
    planes = {"all": consistency_groups(s["consistency"])}
    for plane in s.get("planes", []):
        sub = s["by_plane"][plane].get("consistency") or {}
        if sub and len(s["planes"]) > 1:
            planes[plane] = consistency_groups(sub)
    header = ["Model", "Plane", "Setup", "Groups", *(TITLES[c] for c in CLASSES)]
    rows: list[list[Any]] = []
    for plane, models in planes.items():
        for label, by in models.items():
            for key, group in by.items():
                setup = "all" if key == "all" else column_name(key)
                cells = [_cell(group, c) for c in CLASSES]
                rows.append([label, plane, setup, group.n_groups, *cells])
    return (
        "\n## Consistency over the 8 variants (consistency groups)\n\n"
        "One slice, one pair, the same words, all 8 rotation/flip variants: a group, per run "
        "and setup/marker. Each group in the first class it fits: right in all 8 (reads the "
        "image); anatomy-consistent (follows the patient-frame answer in >= 7 of 8, and so does "
        "its twin, the pair asked the other way round: recites anatomy); constant (the same "
        "answer 8 times); mixed. % of groups, Wilson 95% interval, runs pooled; plane 'all': "
        "every plane's groups. Figure: "
        "`consistency.png`.\n\n" + table(header, rows)
    )
