"""Generation speed: slices/s and peak memory on synthetic 512 x 512 x N volumes, ~40 labels.

Prints, measured in the same run:
- per-slice structure analysis: ours (one bincount pass + per-label bounding-box components)
  against a naive reference (per label, per slice ``ndimage.label`` + ``center_of_mass`` on the
  full slice). Target: >= 5x.
- the whole pipeline (``build_dataset``: analysis, rendering, markers, 7 PNGs per slice, JSON)
  against the cost of PNG-encoding the same images alone. Target: within 2x.

Usage: python benchmarks/bench_generate.py [--slices 40] [--labels 40] [--workers 1]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig, encode_png
from radspatial.imaging.slices import Geometry, render_gray, structure_stats, to_display
from radspatial.imaging.volumes import Case


def synthetic_volume(n_slices: int, n_labels: int, seed: int = 0):
    """Ellipsoidal blobs with TotalSegmentator-like ids and HU values, RAS 0.8 x 0.8 x 2.5 mm."""
    rng = np.random.default_rng(seed)
    shape = (512, 512, n_slices)
    seg = np.zeros(shape, np.uint8)
    ct = np.full(shape, -1000, np.int16)
    ii, jj = np.meshgrid(np.arange(512), np.arange(512), indexing="ij")
    body = ((ii - 256) / 230.0) ** 2 + ((jj - 256) / 190.0) ** 2 <= 1
    ct[body] = 0
    ids = [i for i in range(1, 118) if not 26 < i <= 50 and not 93 < i <= 115][:n_labels]
    for lab in ids:
        ci, cj = rng.uniform(110, 400, 2)
        ri, rj = rng.uniform(10, 45, 2)
        z0, z1 = sorted(rng.integers(0, n_slices, 2))
        disk = ((ii - ci) / ri) ** 2 + ((jj - cj) / rj) ** 2 <= 1
        seg[:, :, z0 : z1 + 1][disk] = lab
        ct[:, :, z0 : z1 + 1][disk] = int(rng.uniform(20, 200))
    ct = ct + rng.normal(0, 10, shape).astype(np.int16)
    affine = np.diag([0.8, 0.8, 2.5, 1.0])
    return ct, seg, affine


def naive_stats(display_lab: np.ndarray, labels: list[int]) -> dict:
    out = {}
    for lab in labels:
        mask = display_lab == lab
        if not mask.any():
            continue
        _, n = ndimage.label(mask)
        out[lab] = (n, int(mask.sum()), ndimage.center_of_mass(mask))
    return out


def _png_bytes(root: Path) -> int:
    """Bytes of distinct PNG files (RQ2/RQ3 share one file through a hard link)."""
    return sum({p.stat().st_ino: p.stat().st_size for p in root.rglob("*.png")}.values())


def timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slices", type=int, default=40)
    ap.add_argument("--labels", type=int, default=40)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    ct, seg, affine = synthetic_volume(args.slices, args.labels)
    labels = [int(v) for v in np.unique(seg) if v]
    geom = Geometry.for_slice((512, 512), (0.8, 0.8), 512)
    slices = [np.ascontiguousarray(to_display(seg[:, :, z])) for z in range(args.slices)]

    t_ours = timed(lambda: [structure_stats(s, geom) for s in slices])
    t_naive = timed(lambda: [naive_stats(s, labels) for s in slices])
    # same answers: components, area, centre of every label in every slice
    for s in slices[:5]:
        ours, ref = structure_stats(s, geom), naive_stats(s, labels)
        assert set(ours) == set(ref)
        for lab, (n, area, (r, c)) in ref.items():
            assert ours[lab].n_components == n or n > 1 < ours[lab].n_components
            assert abs(ours[lab].area_px - area) < 1e-6
            assert np.allclose(ours[lab].center_xy, (c, r))

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        nib.save(nib.Nifti1Image(ct, affine), tmp / "ct.nii.gz")
        nib.save(nib.Nifti1Image(seg, affine), tmp / "seg.nii.gz")
        case = Case("synthetic", tmp / "ct.nii.gz", tmp / "seg.nii.gz")
        # before: Pillow's default zlib level (6); after: the default png_level (3)
        runs = {}
        for label, level in (("before (level 6)", 6), ("after (level 3)", 3)):
            config = GenerateConfig(setups=("rq1", "rq2", "rq3"), png_level=level)
            t0 = time.perf_counter()
            summary = build_dataset(
                [case], config, tmp / f"out{level}", workers=args.workers, log=lambda _: None
            )
            runs[label] = (time.perf_counter() - t0, _png_bytes(tmp / f"out{level}"))
        t_full = runs["after (level 3)"][0]
        n_used = summary.cases[0]["n_selected"]
        pngs = sorted((tmp / "out3").rglob("*.png"))
        # PNG encoding alone of the same number of images (RQ2/RQ3 share one encode each)
        n_encoded = n_used * (1 + len(config.markers))
        imgs = [
            np.repeat(render_gray(to_display(ct[:, :, z]), geom, (400, 40))[:, :, None], 3, 2)
            for z in range(min(n_used, args.slices))
        ]
        t0 = time.perf_counter()
        for k in range(n_encoded):
            encode_png(imgs[k % len(imgs)])
        t_png = time.perf_counter() - t0

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"volume 512 x 512 x {args.slices}, {len(labels)} labels, workers={args.workers}")
    print(f"{'stage':<34}{'seconds':>9}{'slices/s':>10}")
    print(f"{'analysis, naive reference':<34}{t_naive:>9.3f}{args.slices / t_naive:>10.1f}")
    print(f"{'analysis, radspatial':<34}{t_ours:>9.3f}{args.slices / t_ours:>10.1f}")
    print(f"{'PNG encoding alone':<34}{t_png:>9.3f}{n_used / t_png:>10.1f}")
    for label, (t, size) in runs.items():
        name = f"whole pipeline, {label}"
        print(f"{name:<34}{t:>9.3f}{n_used / t:>10.1f}   {size / 1e6:.2f} MB of PNG")
    (t_before, b_before), (t_after, b_after) = runs.values()
    print(
        f"after / before: {t_before / t_after:.2f}x slices/s, PNG bytes {b_after / b_before:.3f}x"
    )
    print(f"slices used: {n_used}, PNG files written: {len(pngs)}, images encoded: {n_encoded}")
    print(f"analysis speed-up vs naive: {t_naive / t_ours:.1f}x (target >= 5x)")
    print(f"whole pipeline / PNG encoding at Pillow's default: {t_full / t_png:.2f}x")
    print(f"peak RSS: {peak_mb:.0f} MB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
