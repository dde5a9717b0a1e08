"""SPAR-VQA across dataset seeds, in the shape of SPAR-Bench's Table 2.

The paper reports each model as mean +- std over three seeds with the phrasing resampled per
seed: here, one ``radspatial generate --questions spar --seed S`` dataset per seed (other
slices' questions, other variants, other paraphrases) and one eval run of the model on each.
``seed_table`` reads the runs' ``metrics.json``, groups them by model, takes each run's
accuracy per type (the mean over that run's repeats), and reports per type the mean and the
sample standard deviation over the seeds, and the **macro** average: the mean over the types
within each seed, then its mean +- std over the seeds (Table 2's "Macro"). ``n`` is the items
per type summed over the seeds; chance comes from the datasets (``dataset.json``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.io import atomic_write_bytes, atomic_write_json, sha256_file
from radspatial.core.metrics_record import METRICS_FILE, Metrics, read_metrics
from radspatial.core.safepath import check_disjoint, recorded_root
from radspatial.core.stats import mean_std
from radspatial.core.textsafe import md_text

SPAR_TYPES = ("spar_relpos", "spar_orient", "spar_symm", "spar_size", "spar_dist")
_HEAD = {
    "spar_relpos": "RelPos",
    "spar_orient": "Orient",
    "spar_symm": "Symm",
    "spar_size": "Size",
    "spar_dist": "Dist",
}


def _fraction(value: Any, path: Path, key: str) -> None:
    ok = value is None or (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    )
    if not ok or (value is not None and not 0 <= value <= 1):
        raise DataFileError(f"{path}: {key} must be a fraction 0-1 or null, got {value!r}")


def _read(run: Path) -> Metrics:
    """A run's metrics.json (``core.metrics_record``: types checked), with the per-type
    accuracies and chance levels fractions: every problem names the file and field."""
    path = Path(run) / METRICS_FILE
    m = read_metrics(path)
    if not m.by_question_type:
        raise DataFileError(f"{path}: 'by_question_type' is missing or empty (eval metrics)")
    for t, g in m.by_question_type.items():
        for key in ("accuracy_mean", "chance"):
            _fraction(getattr(g, key), path, f"by_question_type.{t}.{key}")
        if g.n_items < 0:
            raise DataFileError(f"{path}: by_question_type.{t}.n_items must be a count")
    if m.model is not None and not m.model.strip():
        raise DataFileError(f"{path}: 'model' must be a non-empty string, got {m.model!r}")
    return m


def _model(run: Path, m: Metrics) -> str:
    return m.model if m.model is not None else Path(run).name


def _one_per_seed(runs: Sequence[Path], metrics: Sequence[Metrics]) -> None:
    """Refuse a run counted twice: the same folder, a copy of it (same results.jsonl), or two
    runs of one model on the same dataset folder (repeats of one seed, not seeds)."""
    seen: dict[tuple, Path] = {}
    for run, m in zip(runs, metrics, strict=True):
        keys = [("folder", Path(run).resolve())]
        results = Path(run) / "results.jsonl"
        if results.is_file() and results.stat().st_size:
            keys.append(("results", sha256_file(results)))
        info_path = Path(run) / "run.json"
        info = read_json(info_path, want=dict) if info_path.is_file() else {}
        data = recorded_root(Path(run), info.get("data"))
        if data is not None:
            keys.append(("dataset", str(m.model), data.resolve()))
        for key in keys:
            if key in seen:
                why = {
                    "folder": f"the run folder {seen[key]} given twice",
                    "results": f"a copy of {seen[key]} (the same results.jsonl)",
                    "dataset": f"model {m.model} on {data} again, as {seen[key]}",
                }[key[0]]
                raise DataFileError(
                    f"{run}: {why}; spar-table wants one run per dataset seed (generate "
                    "--seed S, one eval each), so no seed is counted twice"
                )
            seen[key] = Path(run)


def seed_table(runs: Sequence[Path], types: Sequence[str] = SPAR_TYPES) -> dict[str, Any]:
    """{"types", "chance", "models": {model: {"seeds", type: {mean, std, n}, "macro"}}}."""
    by_model: dict[str, list[Metrics]] = {}
    metrics = [_read(run) for run in runs]
    _one_per_seed(runs, metrics)
    for run, m in zip(runs, metrics, strict=True):
        by_model.setdefault(_model(run, m), []).append(m)
    present = [
        t for t in types if any(t in m.by_question_type for ms in by_model.values() for m in ms)
    ]
    chance: dict[str, float | None] = {}
    models: dict[str, Any] = {}
    for model, metrics in by_model.items():
        row: dict[str, Any] = {"seeds": len(metrics)}
        per_seed_macro: list[list[float]] = [[] for _ in metrics]
        for t in present:
            accs, n = [], 0
            for k, m in enumerate(metrics):
                g = m.by_question_type.get(t)
                if g is None or g.accuracy_mean is None:
                    continue
                accs.append(g.accuracy_mean)
                per_seed_macro[k].append(g.accuracy_mean)
                n += g.n_items
                chance.setdefault(t, g.chance)
            mean, std = mean_std(accs)
            row[t] = {"mean": mean if accs else None, "std": std if accs else None, "n": n}
        complete = [sum(v) / len(v) for v in per_seed_macro if len(v) == len(present) and v]
        mean, std = mean_std(complete)
        row["macro"] = {"mean": mean if complete else None, "std": std if complete else None}
        models[model] = row
    return {"types": present, "chance": chance, "models": models}


def _cell(c: dict[str, Any] | None) -> str:
    if not c or c.get("mean") is None:
        return "–"
    return f"{100 * c['mean']:.1f} ± {100 * c['std']:.1f}"


def seed_table_md(table: dict[str, Any]) -> str:
    """Table 2's layout: Model | Macro | one column per type (n summed over the seeds)."""
    types = table["types"]
    first = next(iter(table["models"].values()), {})
    heads = [f"{_HEAD.get(t, t)} (n={first.get(t, {}).get('n', 0)})" for t in types]
    lines = [
        "| Model | seeds | Macro | " + " | ".join(heads) + " |",
        "|---" * (len(types) + 3) + "|",
    ]
    ch = [table["chance"].get(t) for t in types]
    macro_ch = sum(ch) / len(ch) if ch and all(c is not None for c in ch) else None
    cells = [f"{100 * c:.1f}" if c is not None else "–" for c in ch]
    macro = f"{100 * macro_ch:.1f}" if macro_ch is not None else "–"
    lines.append(f"| Chance | | {macro} | " + " | ".join(cells) + " |")
    for model, row in table["models"].items():
        vals = " | ".join(_cell(row.get(t)) for t in types)
        name = md_text(model)  # a run's own text: no escapes, no table breaks
        lines.append(f"| {name} | {row['seeds']} | {_cell(row['macro'])} | {vals} |")
    lines.append("")
    lines.append(
        "Accuracy %, mean ± sample std over the seeds (one dataset per seed, phrasing resampled"
        " per seed); Macro: the mean over the types within a seed, then over the seeds. n: items"
        " per type, all seeds (the first model's runs)."
    )
    return "\n".join(lines) + "\n"


def write_seed_table(runs: Sequence[Path], out: Path) -> Path:
    """``out``.md and ``out``.json (atomic); neither may lie in (or be) a run folder read."""
    out = Path(out)
    for written in (out.with_suffix(".json"), out.with_suffix(".md")):
        check_disjoint(written, {f"run #{i + 1}": Path(r) for i, r in enumerate(runs)})
    table = seed_table(runs)
    atomic_write_json(out.with_suffix(".json"), table)
    atomic_write_bytes(out.with_suffix(".md"), seed_table_md(table).encode())
    return out.with_suffix(".md")
