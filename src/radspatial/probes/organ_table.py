"""Per-organ tables in the shape of SPAR-Bench's Tables 3 and 4: localization error (MED, px at
512) and permutation per-tile accuracy per organ, one row per run, WORD's 12 columns.

A column is WORD's organ, matched by name to the structures of our data (TotalSegmentator's
names through ``core.labels.WORD_TO_TOTALSEG``: WORD's intestine is the small bowel, its adrenal
gland both sides). Each cell pools the test samples of that organ from an evaluation folder's
``predictions/<task>.jsonl`` (``probe eval --out``), joined by sample id with the probe
dataset's rows (``meta.names[0]``: the cropped structure). Per-tile accuracy counts identical
tiles as interchangeable (``restored_tile_accuracy``: blank tiles of context-free crops).
Chance rows: MED of always answering the training mean (per organ), per-tile accuracy 1/16.
``n`` per organ is printed under the header (the organs of one patient are few; cells with
n = 0 are a dash).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.core.labels import totalseg_names
from radspatial.probes.data import ProbeSample
from radspatial.probes.evaluate import hungarian, restored, tile_groups

WORD_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Liver", "liver"), ("Spln", "spleen"), ("K-L", "kidney_left"), ("K-R", "kidney_right"),
    ("Stom", "stomach"), ("GB", "gallbladder"), ("Esph", "esophagus"), ("Panc", "pancreas"),
    ("Duod", "duodenum"), ("Colon", "colon"), ("Intes", "intestine"), ("Adrn", "adrenal_gland"),
)  # fmt: skip
_REF = 512


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _organ_of(data: Path, task: str) -> dict[str, str]:
    """sample id -> WORD column key of its structure (samples of other structures left out)."""
    to_word = {ts: word for _, word in WORD_COLUMNS for ts in totalseg_names(word)}
    out = {}
    for r in _rows(Path(data) / "tasks" / f"{task}.jsonl"):
        names = r.get("meta", {}).get("names") or []
        if names and names[0] in to_word:
            out[r["id"]] = to_word[names[0]]
    return out


def organ_metrics(eval_dir: Path, data: Path, task: str) -> dict[str, dict[str, float]]:
    """WORD column key -> {"value", "n"}: MED (px @512) for localize, per-tile % for permutation."""
    organ = _organ_of(data, task)
    images = {
        r["id"]: Path(data) / r["image"] for r in _rows(Path(data) / "tasks" / f"{task}.jsonl")
    }
    groups: dict[str, list[dict]] = {}
    for p in _rows(Path(eval_dir) / "predictions" / f"{task}.jsonl"):
        if p.get("split") == "test" and p["id"] in organ:
            groups.setdefault(organ[p["id"]], []).append(p)
    out = {}
    for key, preds in groups.items():
        target, output = (
            np.array([p["target"] for p in preds]),
            np.array([p["output"] for p in preds]),
        )
        if task == "localize":
            value = float(np.linalg.norm(output - target, axis=1).mean() * _REF)
        else:  # identical (blank) tiles interchangeable, as restored_tile_accuracy
            same = tile_groups([ProbeSample(p["id"], "", "test", images[p["id"]], None, {})
                                for p in preds])  # fmt: skip
            value = float(restored(hungarian(output), target, same).mean() * 100)
        out[key] = {"value": value, "n": len(preds)}
    return out


def organ_table_md(
    runs: Sequence[tuple[str, Path]], data: Path, task: str, chance: dict[str, float] | None = None
) -> str:
    """One markdown table: a row per (label, evaluation folder) plus the chance row."""
    cols = [h for h, _ in WORD_COLUMNS]
    per_run = [(label, organ_metrics(d, data, task)) for label, d in runs]
    counts = {k: max((m.get(k, {}).get("n", 0) for _, m in per_run), default=0)
              for _, k in WORD_COLUMNS}  # fmt: skip
    head = "| Model | " + " | ".join(f"{h} (n={counts[k]})" for h, (_, k) in
                                      zip(cols, WORD_COLUMNS, strict=True)) + " |"  # fmt: skip
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    if chance:
        vals = [f"{chance[k]:.1f}" if k in chance else "–" for _, k in WORD_COLUMNS]
        lines.append("| Chance | " + " | ".join(vals) + " |")
    for label, m in per_run:
        vals = [f"{m[k]['value']:.1f}" if k in m else "–" for _, k in WORD_COLUMNS]
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def localize_chance(data: Path) -> dict[str, float]:
    """Per organ: MED (px @512) of always answering the training split's mean centre."""
    rows = _rows(Path(data) / "tasks" / "localize.jsonl")
    train = [r["target"] for r in rows if r["split"] == "train"]
    if not train:
        return {}
    mean = np.mean(train, axis=0)
    organ = _organ_of(data, "localize")
    groups: dict[str, list] = {}
    for r in rows:
        if r["split"] == "test" and r["id"] in organ:
            groups.setdefault(organ[r["id"]], []).append(r["target"])
    return {k: float(np.linalg.norm(np.array(v) - mean, axis=1).mean() * _REF)
            for k, v in groups.items()}  # fmt: skip
