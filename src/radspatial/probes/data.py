"""Reading probe datasets (docs/probes.md): ``probe_info`` and ``load_probe_task``.

Small and stable on purpose: the probe trainer imports only this module.

Example::

    info = probe_info(Path("probes"))
    train = load_probe_task(Path("probes"), "relpos", "train")
    x = PIL.Image.open(train[0].image); y = train[0].target  # class index into
    info["tasks"]["relpos"]["classes"]
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "radspatial-probes"
FORMAT_VERSION = 1
SPLIT_NAMES: tuple[str, ...] = ("train", "val", "test")


@dataclass(frozen=True)
class ProbeSample:
    id: str
    case_id: str
    split: str  # train | val | test
    image: Path  # absolute: the dataset folder joined with the row's relative path
    target: Any  # [x, y] (localize), list of 16 ints (permutation), class index (others)
    meta: dict


@dataclass(frozen=True)
class TaskInfo:
    """One task's entry in probes.json ``tasks`` (the keys of docs/probes.md, then extras)."""

    level: int
    kind: str  # regression | classification | permutation
    n_classes: int | None
    classes: list[str] | None
    chance: float | None  # of ``metric``; None when the task has no samples
    metric: str
    reference_size_px: int | None
    counts: dict[str, int]  # samples per split
    description: str
    chance_by_metric: dict[str, float] = field(default_factory=dict)  # every reported metric
    class_counts: dict[str, list[int]] | None = None  # split -> samples per class
    stats_from: str | None = None  # split the data-derived statistics come from
    quartile_edges: list[float] | None = None  # size: area-fraction edges q1|q2|q3|q4
    mean_target: list[float] | None = None  # localize: the mean-centre predictor

    def to_json(self) -> dict:
        """The docs/probes.md keys always (null where not applicable), extras when set."""
        core = ("level", "kind", "n_classes", "classes", "chance", "metric")
        core += ("reference_size_px", "counts", "description", "chance_by_metric")
        return {k: v for k, v in asdict(self).items() if k in core or v is not None}


def probe_info(folder: Path) -> dict:
    """probes.json of a finished probe dataset (ValueError naming the file if it is not one)."""
    path = Path(folder) / "probes.json"
    if not path.is_file():
        raise ValueError(f"{path}: no probes.json (not a finished probe dataset)")
    try:
        info = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    fmt = (info.get("format"), info.get("format_version")) if isinstance(info, dict) else None
    if fmt != (FORMAT, FORMAT_VERSION):
        raise ValueError(f"{path}: format {fmt}, expected ({FORMAT!r}, {FORMAT_VERSION})")
    return info


def load_probe_task(folder: Path, task: str, split: str | None = None) -> list[ProbeSample]:
    """Samples of one task, in file order (sorted by id); ``split=None`` gives all splits."""
    folder = Path(folder)
    tasks = probe_info(folder)["tasks"]
    if task not in tasks:
        raise ValueError(f"{folder}: no task {task!r}; this dataset has {', '.join(tasks)}")
    if split is not None and split not in SPLIT_NAMES:
        raise ValueError(f"split must be one of {SPLIT_NAMES} or None, got {split!r}")
    path = folder / "tasks" / f"{task}.jsonl"
    out: list[ProbeSample] = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            sample = ProbeSample(
                row["id"],
                row["case_id"],
                row["split"],
                folder / row["image"],
                row["target"],
                row["meta"],
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: line {n}: bad probe row ({exc!r})") from None
        if split is None or sample.split == split:
            out.append(sample)
    return out
