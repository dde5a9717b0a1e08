"""Building probe datasets (docs/probes.md): ``build_probes(cases, out, ...)``.

``probe_case`` is the per-case work (load, plan, render, write PNGs into the staging folder,
return rows); it reads no global state, so it runs unchanged in a process pool. Each task of a
case draws from its own generator keyed by (seed, "<case id>/<task>") (crops: "<case id>/crops"),
so adding a case or dropping a task leaves every other case's samples byte-identical.

More samples per slice: ``slice_samples={"relpos": 8}`` plans a whole-slice task that many
times per case, each draw from its own generator keyed "<case id>/<task>/<k>" (draw 0 is the
usual one, so its samples are unchanged), and keeps the distinct samples (another pair of
structures, dots or rotation/flip variant of the same slice). Their ids and images get a
``_d<k>`` suffix and ``meta["draw"] = k``. ``symmetry`` (one standard view per slice) and the
crop tasks (every structure already) take no extra draws.

Splits are by case (``probes.splits``). Output is staged in ``OUT.partial/`` and renamed to
``OUT`` when complete, probes.json last (as ``radspatial.bench.dataset``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from radspatial.bench.generate import encode_png
from radspatial.core.executor import Spread, run_all
from radspatial.core.io import atomic_write_json, atomic_write_jsonl
from radspatial.core.jobspec import ParamError
from radspatial.core.runtime import keyed_rng, software_versions
from radspatial.core.staging import staged
from radspatial.imaging.slices import (
    Geometry,
    render_gray,
    render_labels,
    structure_stats,
    to_display,
)
from radspatial.imaging.volumes import Case, load_case
from radspatial.probes.data import FORMAT, FORMAT_VERSION, SPLIT_NAMES, TaskInfo
from radspatial.probes.planning import cap, crop_plans, plan_task
from radspatial.probes.render import CONTEXTS, render_plan
from radspatial.probes.splits import assign_splits, finalize_task
from radspatial.probes.tasks import (
    ALL_TASKS,
    CROP_TASKS,
    DERIVED,
    GRID,
    MASKED,
    TASK_NAMES,
    Plan,
    Rules,
    SliceView,
    derive_rows,
)

MULTI_DRAW_TASKS: tuple[str, ...] = (
    "relpos",
    "orient",
    "size",
    "distance",
    "count",
    "relpos_organ",
)
_FOLDERS = {"localize": "crops", "permutation": "perm"}
PNG_LEVEL = 1  # zlib level 1 is ~3x faster than Pillow's default at about the same size here


@dataclass(frozen=True)
class ProbeConfig:
    seed: int = 0
    size: int = 224
    crop: int = 96
    splits: tuple[float, float, float] = (0.7, 0.15, 0.15)
    tasks: tuple[str, ...] = TASK_NAMES
    max_per_case: int | None = None
    window: tuple[float, float] = (400.0, 40.0)  # width, level (HU)
    slice_samples: dict[str, int] = field(default_factory=dict)  # task -> draws per case
    context: str = "keep"  # crop tasks: "remove" blacks out all but the organ (SPAR-Bench)

    def __post_init__(self) -> None:
        bad = sorted(set(self.tasks) - set(ALL_TASKS))
        if bad or not self.tasks:
            raise ParamError(
                "tasks", f"{{param}}: unknown probe task(s) {bad}; expected a subset of {ALL_TASKS}"
            )
        # Task order never depends on how they were asked for: output stays byte-identical.
        object.__setattr__(self, "tasks", tuple(t for t in ALL_TASKS if t in self.tasks))
        splits = tuple(float(f) for f in self.splits)
        if len(splits) != 3 or min(splits) < 0 or not sum(splits) > 0:
            raise ParamError(
                "splits", f"{{param}} must be 3 fractions >= 0 (train, val, test), got {splits}"
            )
        object.__setattr__(self, "splits", splits)
        if self.size < 64:
            raise ParamError("size", f"{{param}} must be >= 64 px, got {self.size}")
        if self.crop < 4 * GRID or self.crop % GRID:
            raise ParamError(
                "crop", f"{{param}} must be a multiple of {GRID} and >= {4 * GRID}, got {self.crop}"
            )
        if self.max_per_case is not None and self.max_per_case < 1:
            raise ParamError(
                "max_per_case", f"{{param}} must be >= 1 or None, got {self.max_per_case}"
            )
        draws = {str(t): int(k) for t, k in dict(self.slice_samples).items()}
        bad = sorted(t for t, k in draws.items() if t not in MULTI_DRAW_TASKS or k < 1)
        if bad:
            raise ValueError(
                f"slice_samples: {bad}: expected tasks of {MULTI_DRAW_TASKS} with counts >= 1"
            )
        object.__setattr__(self, "slice_samples", {t: draws[t] for t in sorted(draws)})

        if self.context not in CONTEXTS:
            raise ParamError(
                "context", f"{{param}} must be one of {CONTEXTS}, got {self.context!r}"
            )

    def draws(self, task: str) -> int:
        return self.slice_samples.get(task, 1)

    @property
    def rules(self) -> Rules:
        return Rules(self.size, self.crop, context=self.context)

    def to_json(self) -> dict:
        r = self.rules
        return {
            "seed": self.seed,
            "size": self.size,
            "crop": self.crop,
            "splits": list(self.splits),
            "tasks": list(self.tasks),
            "max_per_case": self.max_per_case,
            "window": list(self.window),
            "slice_samples": dict(self.slice_samples),
            **({"context": self.context} if self.context != "keep" else {}),
            "reference_size_px": r.reference,
            "rules": {
                "min_area_px": r.min_area,
                "min_distance_px": r.min_distance,
                "relpos_margin_px": r.margin,
                "relpos_dominance": r.dominance,
                "min_component_px": r.min_component,
                "equal_tolerance": r.equal_tolerance,
                "dot_radius_px": r.dot_radius,
                "grid": GRID,
            },
        }


@dataclass(frozen=True)
class CaseProbes:
    case_id: str
    source: dict
    variant: str  # anatomy variant tag of the case
    n_slices: int
    labels: dict  # the case's label table (LabelTable.to_json)
    rows: dict[str, list[dict]]  # task -> rows without "split"


def _folder_name(case_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", case_id)
    if safe != case_id or safe in ("", ".", ".."):
        safe += "-" + hashlib.sha256(case_id.encode()).hexdigest()[:8]
    return safe


def _row(case_id: str, folder: str, plan: Plan, names: dict[int, str]) -> dict:
    sub = _FOLDERS.get(plan.task, f"images/{plan.task}")
    key = f"{plan.key}_d{plan.info['draw']}" if plan.info.get("draw") else plan.key
    meta = {
        "names": [names[i] for i in plan.label_ids],
        "label_ids": list(plan.label_ids),
        "slice_index": plan.z,
        "slice_id": f"{case_id}/z{plan.z:03d}",
        "variant": plan.variant,
        **plan.info,
    }
    if plan.dots:
        meta["dots"] = [
            {
                "colour": d.colour,
                "xy": list(d.xy),
                "name": names[d.label_id],
                "label_id": d.label_id,
            }
            for d in plan.dots
        ]
    return {
        "id": f"{case_id}/{plan.task}/{key}",
        "case_id": case_id,
        "image": f"{sub}/{folder}/{key}.png",
        "target": plan.target,
        "meta": meta,
    }


def probe_case(case: Case, config: ProbeConfig, stage: Path) -> CaseProbes:
    """Load, plan, render and write one case's probe images under ``stage``; return its rows."""
    vol = load_case(case)
    rules, names = config.rules, vol.table.names
    geom = Geometry.for_slice(vol.seg.shape[:2], vol.spacing[:2], config.size)
    views = []
    for z in range(vol.seg.shape[2]):
        lab = to_display(vol.seg[:, :, z])
        if lab.any():
            px_area = geom.px_per_col * geom.px_per_row
            views.append(SliceView(z, lab, structure_stats(lab, geom), px_area, names))
    crop_rng = keyed_rng(config.seed, f"{case.case_id}/crops")
    crops = cap(crop_plans(views, rules), crop_rng, config.max_per_case)
    by_z: dict[int, list[Plan]] = {}
    sources = {DERIVED[t][0] for t in config.tasks if t in DERIVED}
    planned = [t for t in (*TASK_NAMES, *MASKED) if t in config.tasks or t in sources]
    for task in planned:
        rng = keyed_rng(config.seed, f"{case.case_id}/{task}")
        plans = plan_task(task, views, rng, rules, crops)
        if config.draws(task) > 1:
            plans = _more_draws(task, plans, views, rules, config, case.case_id)
        for plan in plans if task in CROP_TASKS else cap(plans, rng, config.max_per_case):
            by_z.setdefault(plan.z, []).append(plan)
    folder, rows = _folder_name(case.case_id), {t: [] for t in planned}
    for z, plans in sorted(by_z.items()):  # one slice rendered at a time bounds memory
        lab = to_display(vol.seg[:, :, z])
        gray = render_gray(to_display(vol.ct[:, :, z]), geom, config.window)
        needs = any(p.task in CROP_TASKS or p.task in MASKED for p in plans)
        labels = render_labels(lab, geom) if needs else None
        for plan in plans:
            row = _row(case.case_id, folder, plan, names)
            path = stage / row["image"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode_png(render_plan(plan, gray, labels, rules), PNG_LEVEL))
            rows[plan.task].append(row)
    rows.update({t: derive_rows(t, rows[DERIVED[t][0]]) for t in config.tasks if t in DERIVED})
    rows = {t: rows[t] for t in config.tasks}
    n_slices = int(vol.seg.shape[2])
    return CaseProbes(vol.case_id, vol.source, vol.variant, n_slices, vol.table.to_json(), rows)


def _more_draws(task, plans, views, rules, config, case_id) -> list[Plan]:
    """Draw 0's plans plus draws 1..k-1 (own generators), duplicates of a sample dropped."""

    def sig(p: Plan) -> tuple:
        return p.z, p.variant, p.label_ids, p.dots

    seen, out = {sig(p) for p in plans}, list(plans)
    for k in range(1, config.draws(task)):
        rng = keyed_rng(config.seed, f"{case_id}/{task}/{k}")
        for plan in plan_task(task, views, rng, rules):
            if sig(plan) not in seen:
                seen.add(sig(plan))
                out.append(replace(plan, info={**plan.info, "draw": k}))
    return sorted(out, key=lambda p: (p.z, p.info.get("draw", 0)))


def _probe_job(job: tuple) -> CaseProbes | ValueError:
    try:
        return probe_case(*job)
    except ValueError as exc:  # bad input: returned, not retried, raised by the caller
        return exc


def build_probes(
    cases: Sequence[Case],
    out: Path,
    *,
    seed: int = 0,
    size: int = 224,
    crop: int = 96,
    splits: Sequence[float] = (0.7, 0.15, 0.15),
    tasks: Sequence[str] | None = None,
    max_per_case: int | None = None,
    slice_samples: Mapping[str, int] | None = None,
    context: str = "keep",
    workers: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    executor: str = "local",
    address: str | None = None,
) -> dict:
    """Build the probe datasets for ``cases`` into ``out``; returns probes.json's content.

    ``size``: whole-slice image side (px); ``crop``: localize/permutation crop side (a multiple
    of 4); ``splits``: train/val/test fractions of the *cases*; ``tasks``: a subset of
    ``TASK_NAMES`` (default all); ``max_per_case``: at most this many samples per task per case;
    ``slice_samples``: draws per case for whole-slice tasks (e.g. ``{"relpos": 8}``, default 1;
    see the module docstring); ``context="remove"`` blacks out all but the organ in the crop
    tasks (SPAR-Bench's context-free tiles); ``workers`` > 1 runs cases in a process pool,
    ``executor="ray"`` one case per Ray task (same bytes as serial); ``overwrite`` replaces a
    non-empty ``out`` (otherwise FileExistsError).

    Example: ``build_probes(read_cases_csv(Path("cases.csv")), Path("probes"), seed=0)``.
    """
    config = ProbeConfig(seed, size, crop, tuple(splits), tuple(tasks or TASK_NAMES), max_per_case,
                         slice_samples=dict(slice_samples or {}), context=context)  # fmt: skip
    ids = _case_ids(cases)
    out = Path(out)
    inputs = {f"{c.case_id} {k}": p for c in cases for k, p in (("ct", c.ct), ("seg", c.seg))}
    with staged(out, overwrite, inputs, ("probes.json", "a probe dataset")) as stage:
        outputs = run_all(
            _probe_job,
            [(case, config, stage) for case in cases],
            desc="probe cases",
            failed=lambda i, message: f"{cases[i].ct}: probe case {cases[i].case_id}: {message}",
            progress=progress,
            spread=Spread(workers, executor, address),
        )
        split_of = assign_splits(ids, seed, config.splits)
        infos = {}
        for task in config.tasks:
            rows = [{**r, "split": split_of[o.case_id]} for o in outputs for r in o.rows[task]]
            rows, infos[task] = finalize_task(task, sorted(rows, key=lambda r: r["id"]))
            atomic_write_jsonl(stage / "tasks" / f"{task}.jsonl", rows)
        meta = _probes_json(config, ids, split_of, outputs, infos)
        atomic_write_json(stage / "probes.json", meta)
    return meta


def _case_ids(cases: Sequence[Case]) -> list[str]:
    """The cases' ids; ValueError when there is none or one repeats."""
    ids = [c.case_id for c in cases]
    if len(set(ids)) != len(ids) or not ids:
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate case ids: {', '.join(dup)}" if dup else "no cases")
    return ids


def _probes_json(
    config: ProbeConfig,
    ids: list[str],
    split_of: dict[str, str],
    outputs: list[CaseProbes],
    infos: dict[str, TaskInfo],
) -> dict:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": config.to_json(),
        "seed": config.seed,
        "splits": {s: sorted(c for c in ids if split_of[c] == s) for s in SPLIT_NAMES},
        "cases": [
            {
                **o.source,
                "split": split_of[o.case_id],
                "variant": o.variant,
                "n_slices": o.n_slices,
                "n_samples": {t: len(o.rows[t]) for t in config.tasks},
            }
            for o in outputs
        ],
        "tasks": {t: info.to_json() for t, info in infos.items()},
        "labels": {o.labels["name"]: o.labels for o in outputs},
        "versions": software_versions(),
    }
