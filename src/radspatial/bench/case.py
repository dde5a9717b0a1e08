"""One case's benchmark: load the volume, plan each plane's questions, render and write the
images into a staging folder and return the rows (``bench/generate.py`` plans and renders;
this is its I/O edge, called by ``bench/stage.py`` per shard, locally or on a cluster worker).
"""

from __future__ import annotations

import os
from pathlib import Path

from radspatial.bench.config import CT_WINDOW, GenerateConfig
from radspatial.bench.decidable import PlanJudge
from radspatial.bench.generate import (
    CaseOutput,
    SlicePlan,
    centres_entry,
    combos_for,
    display_window,
    manifest_row,
    plan_case,
    render_plan,
)
from radspatial.core.modality import DEFAULT_MODALITY, check_hounsfield
from radspatial.core.progress import step
from radspatial.imaging.planes import DEFAULT_PLANE, reformat, slice_position_mm
from radspatial.imaging.volumes import Case, Volume, load_case
from radspatial.questions.decidability import reading_of
from radspatial.questions.manifest import ManifestRow


def generate_case(case: Case, config: GenerateConfig, stage: Path) -> CaseOutput:
    """Load, plan, render and write one case's images under ``stage``; return its rows."""
    step(f"{case.case_id}: loading CT and mask")
    # uneven DICOM slice spacing is accepted only when every plane is axial (imaging/dicom.py)
    loaded = load_case(case, group=config.group, uneven=config.planes == (DEFAULT_PLANE,))
    rows: list[ManifestRow] = []
    centres: list[dict] = []
    n_used = 0
    if (
        config.modality == DEFAULT_MODALITY and config.window == CT_WINDOW
    ):  # no air: not HU (an MR?)
        check_hounsfield(loaded.ct, str(case.ct))
    window = display_window(loaded, config)  # one for the whole volume, every plane
    for plane in config.planes:
        vol = reformat(loaded, plane)
        plans = plan_case(vol, config, plane)
        _write_plans(vol, plans, config, stage, rows, centres, window)
        n_used += len({p.z for p in plans})
    n_slices = int(sum(reformat(loaded, p).seg.shape[2] for p in config.planes))
    source = loaded.source if config.window else {**loaded.source, "window": window}
    return CaseOutput(loaded.case_id, source, rows, n_slices, n_used, centres)


def _write_plans(
    vol: Volume,
    plans: list[SlicePlan],
    config: GenerateConfig,
    stage: Path,
    rows: list[ManifestRow],
    centres: list[dict],
    window: tuple[float, float],
) -> None:
    """Render one plane's plans, write their images (a twin's are links) and collect rows."""
    z_mm = slice_position_mm(vol, plans[0].plane) if plans else None
    judge = PlanJudge(vol, config, plans[0].plane) if plans else None
    rendered: dict[tuple, dict[str, bytes]] = {}  # consistency twins show the same image
    for k, plan in enumerate(plans, start=1):
        step(f"{vol.case_id}: rendering {k}/{len(plans)} {plan.plane} question slices")
        marked = frozenset(zip(plan.spec.objects, plan.dots, strict=True))
        same = (plan.z, plan.variant.code, marked)
        if same not in rendered:  # kept for one slice (the twins of its groups)
            if plan.group is None or any(k[0] != plan.z for k in rendered):
                rendered = {}
            rendered[same] = render_plan(vol, plan, config, window)
        images = rendered[same]
        filename = f"{plan.base_name}.png"
        centres.append(centres_entry(filename, plan.stats, vol.table.names))
        if "mask" in images:
            _write(stage / "masks" / filename, images["mask"])
        written: dict[str, Path] = {}  # RQ2 and RQ3 show the same image: one file, two links
        assert judge is not None
        decided = judge.judge_plan(plan)
        for setup, marker in combos_for(config, plan):
            at = float(z_mm[plan.z])
            row = manifest_row(vol, plan, setup, marker, config, at, decided[reading_of(setup)])
            if marker in written:
                _link(written[marker], stage / row.image, images[marker])
            else:
                _write(stage / row.image, images[marker])
                written[marker] = stage / row.image
            rows.append(row)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _link(existing: Path, path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(existing, path)
    except OSError:  # no hard links on this file system: write the bytes again
        path.write_bytes(data)
