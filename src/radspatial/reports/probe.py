"""The report's section for ``probe vlm`` folders found inside the run folders.

A run folder's immediate subfolder whose ``summary.json`` says ``"kind":
"radspatial-probe-vlm"`` (``probe vlm`` writes ``RUN/probe_vlm`` by default) gets a table
(per stage and read-out: accuracy with its Wilson 95% CI, the 2x2 counts of stage knows /
model right and McNemar's p), the step where the information is lost, and its figure, copied
into the report folder as ``probe_vlm_<k>.png``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.textsafe import md_table, md_text

KIND = "radspatial-probe-vlm"


def find_probes(run_dirs: Sequence[Path]) -> list[tuple[Path, Path, dict[str, Any]]]:
    """(run, probe folder, its summary) for every probe vlm folder inside the runs."""
    found = []
    for run in run_dirs:
        for sub in sorted(p for p in Path(run).iterdir() if p.is_dir() and not p.is_symlink()):
            path = sub / "summary.json"
            if not path.is_file():
                continue
            try:
                summary = read_json(path, want=dict)
            except DataFileError:
                continue
            if isinstance(summary, dict) and summary.get("kind") == KIND:
                found.append((Path(run), sub, summary))
    return found


def _pct(row: dict[str, Any]) -> str:
    lo, hi = row["ci95"]
    return f"{100 * row['accuracy']:.1f}% [{100 * lo:.0f}, {100 * hi:.0f}]"


def _rows(s: dict[str, Any]) -> list[list[str]]:
    rows = []
    for stage in s["stage_order"]:
        for readout, r in s["stages"][stage].items():
            t = r["vs_answer"]
            counts = f"{t['knows_right']} / {t['knows_wrong']} / {t['not_knows_right']} / "
            counts += str(t["not_knows_wrong"])
            rows.append([stage, readout, _pct(r), counts, f"{t['mcnemar_p']:.3g}"])
    rows.append(["answer", "model", _pct(s["answer"]), "", ""])
    if "majority" in s:
        rows.append(["majority", "rule", _pct(s["majority"]), "", ""])
    rows.append(["chance", "", f"{100 * s['chance']:.0f}%", "", ""])
    return rows


def probe_markdown(run_dirs: Sequence[Path], folder: Path) -> str:
    """The section (empty when no run holds a probe); copies each figure into ``folder``."""
    from radspatial.core.io import atomic_write_bytes

    found = find_probes(run_dirs)
    if not found:
        return ""
    out = ["", "## Where the model loses the relation (probe vlm)", ""]
    head = ["stage", "read-out", "accuracy [95% CI]", "knows&right / knows&wrong / "
            "not&right / not&wrong", "McNemar p"]  # fmt: skip
    for k, (run, sub, s) in enumerate(found):
        out += [f"{md_text(run.name)}: {md_text(s.get('model'))}, {s.get('n_items')} items, "
                f"split by {md_text(s.get('split_by'))} ({md_text(sub.name)}).", ""]  # fmt: skip
        try:
            rows = _rows(s)
            lost = {r: w.get("lost_at") or "no significant drop" for r, w in s["chain"].items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            out += [f"{md_text(sub / 'summary.json')}: unreadable probe summary, skipped.", ""]
            continue
        out += [md_table(head, rows), ""]
        out += ["Information lost: " + "; ".join(f"{r}: {md_text(v)}" for r, v in lost.items())]
        figure = sub / "stages.png"
        if figure.is_file() and not figure.is_symlink():
            name = f"probe_vlm_{k}.png"
            atomic_write_bytes(folder / name, figure.read_bytes())
            out += ["", f"![{name}]({name})"]
        out.append("")
    return "\n".join(out)
