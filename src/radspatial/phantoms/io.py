"""Write phantoms to disk: NIfTI pairs, ``cases.csv`` for the generator, label table, manifest.

Every file is written to a temporary name and renamed (``radspatial.core.io.atomic_write_bytes``);
``cases.csv`` is written last, so a folder with a ``cases.csv`` is complete. Output is
byte-identical for the same arguments (gzip without timestamps), whatever ``workers`` is.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Sequence
from pathlib import Path

import nibabel as nib
import numpy as np

from radspatial.bench.counterfactual import EXTENSION_NAMES
from radspatial.core.executor import Spread, run_all, sigterm_as_interrupt
from radspatial.core.io import atomic_write_bytes, atomic_write_json
from radspatial.core.jobspec import ParamError
from radspatial.phantoms.build import DEFAULT_SHAPE, VARIANTS, Phantom, make_phantom

LABELS_FILE = "labels.json"
CASES_FILE = "cases.csv"
MANIFEST_FILE = "phantoms.json"
_TS_MAX_ID = 117  # highest TotalSegmentator v2 "total" id


def nifti_bytes(data: np.ndarray, affine: np.ndarray) -> bytes:
    """A gzip-compressed NIfTI-1 file (no timestamp in the gzip header: reproducible)."""
    img = nib.Nifti1Image(data, affine)
    img.header.set_xyzt_units("mm")
    img.header.set_qform(affine, code=1)
    img.header.set_sform(affine, code=1)
    return gzip.compress(img.to_bytes(), compresslevel=1, mtime=0)


def _variants(variant: str | Sequence[str], n: int) -> list[str]:
    """One variant per case: a name, "mixed" (cycle through all), or a sequence cycled."""
    seq = (
        list(VARIANTS)
        if variant == "mixed"
        else [variant]
        if isinstance(variant, str)
        else list(variant)
    )
    bad = sorted(set(seq) - set(VARIANTS))
    if bad or not seq:
        raise ValueError(f"unknown phantom variant(s) {bad}; expected {VARIANTS} or 'mixed'")
    return [seq[i % len(seq)] for i in range(n)]


def case_ids(index: int, variant: str) -> tuple[str, str]:
    """(anatomy key, case id): variants of one index share the same patient."""
    base = f"phantom_{index:03d}"
    return base, base if variant == "normal" else f"{base}_{variant}"


def _write_one(args: tuple) -> dict:
    out, index, seed, shape, spacing, variant = args
    base, case_id = case_ids(index, variant)
    ph: Phantom = make_phantom(base, seed=seed, shape=shape, spacing=spacing, variant=variant)
    ct_name, seg_name = f"{case_id}_ct.nii.gz", f"{case_id}_seg.nii.gz"
    atomic_write_bytes(out / ct_name, nifti_bytes(ph.ct, ph.affine))
    atomic_write_bytes(out / seg_name, nifti_bytes(ph.seg, ph.affine))
    extended = any(int(i) > _TS_MAX_ID for i in ph.meta["label_voxels"])
    return {
        "case_id": case_id,
        "ct": ct_name,
        "seg": seg_name,
        # the generator's built-in table keeps MIRP grouping; only masks with extension ids
        # (the displaced variant's mass) need the JSON table (see docs/phantoms.md)
        "labels": LABELS_FILE if extended else "totalsegmentator",
        "variant": variant,
        "meta": {**ph.meta, "anatomy_key": base},
    }


def write_phantoms(
    out: Path,
    *,
    n: int,
    seed: int,
    shape: tuple[int, int, int] = DEFAULT_SHAPE,
    spacing: tuple[float, float, float] | None = None,
    variant: str | Sequence[str] = "normal",
    workers: int = 1,
    progress: bool = True,
    executor: str = "local",
    address: str | None = None,
) -> Path:
    """Write ``n`` phantoms into folder ``out``; returns the path of ``out/cases.csv``.

    Files: ``<case_id>_ct.nii.gz`` (int16 HU), ``<case_id>_seg.nii.gz`` (uint8 ids),
    ``labels.json`` (TotalSegmentator v2 + 200 "mass" + 201), ``phantoms.json`` (per-case
    habitus and variant details) and ``cases.csv`` (case_id, ct, seg, labels, variant; paths
    relative to ``out``). Case i is ``phantom_<i>`` (+ ``_<variant>`` unless normal) and
    depends only on (seed, i, variant, shape, spacing). ``executor="ray"`` runs one phantom per
    Ray task (``address`` or RAY_ADDRESS, else a local Ray); the files are the same.
    """
    if n < 1:
        raise ParamError("n", f"{{param}} must be >= 1, got {n}")
    out = Path(out)
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST_FILE).is_file():
        raise ValueError(f"{out}: not empty and not a phantom folder; choose a new or empty --out")
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(out, i, seed, tuple(shape), spacing, v) for i, v in enumerate(_variants(variant, n))]
    with sigterm_as_interrupt():
        rows = run_all(
            _write_one,
            jobs,
            desc="phantoms",
            failed=lambda i, message: f"{out}: phantom {i} failed: {message}",
            progress=progress,
            spread=Spread(workers, executor, address),
        )
    # extends the built-in table, so MIRP's vertebra/rib grouping still applies to these cases
    atomic_write_json(
        out / LABELS_FILE,
        {"extends": "totalsegmentator", **{str(k): v for k, v in sorted(EXTENSION_NAMES.items())}},
    )
    atomic_write_json(out / MANIFEST_FILE, {"seed": seed, "cases": [r["meta"] for r in rows]})
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=["case_id", "ct", "seg", "labels", "variant"], lineterminator="\n"
    )
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row[k] for k in writer.fieldnames})
    path = out / CASES_FILE
    atomic_write_bytes(path, buf.getvalue().encode())
    return path
