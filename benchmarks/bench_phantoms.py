"""Phantom throughput: write full-size phantoms, then run the generator's pipeline over them.

Prints, measured in the same run (each phase in its own process, so peak memory is per phase):
- creation: ``write_phantoms`` of N phantoms (512 x 512 x 200 by default, normal / situs
  inversus / displaced in turn) with W workers -> phantoms/s, seconds per phantom, MB on disk;
- generation: ``build_dataset`` over the written ``cases.csv`` (RQ1-RQ3, 7 PNGs per slice)
  with W workers -> slices/s, images/s, peak RSS (main process and largest worker);
- for reference, the existing ``bench_generate.py`` on its synthetic volume.

Usage: python benchmarks/bench_phantoms.py [--n 20] [--workers 2] [--shape 512,512,200]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _peak_mb() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"peak_rss_main_mb": round(own, 1), "peak_rss_worker_mb": round(kids, 1)}


def phase_create(out: Path, n: int, workers: int, shape: tuple[int, int, int]) -> dict:
    from radspatial.phantoms import write_phantoms

    t0 = time.perf_counter()
    write_phantoms(out, n=n, seed=0, shape=shape, variant="mixed", workers=workers)
    seconds = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in out.glob("*.nii.gz")) / 1e6
    return {"seconds": round(seconds, 2), "n": n, "disk_mb": round(size, 1), **_peak_mb()}


def phase_generate(out: Path, ds: Path, workers: int) -> dict:
    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.imaging.volumes import read_cases_csv

    cases = read_cases_csv(out / "cases.csv")
    config = GenerateConfig(setups=("rq1", "rq2", "rq3"))
    t0 = time.perf_counter()
    summary = build_dataset(cases, config, ds, workers=workers, log=lambda _: None)
    seconds = time.perf_counter() - t0
    slices = sum(c["n_selected"] for c in summary.cases)
    images = sum(1 for _ in ds.rglob("*.png"))
    return {
        "seconds": round(seconds, 2),
        "slices": slices,
        "slices_total": sum(c["n_slices"] for c in summary.cases),
        "images": images,
        "questions": summary.n_questions,
        **_peak_mb(),
    }


def _child(args: list[str]) -> dict:
    """Run one phase in a fresh interpreter; its last stdout line is the JSON result."""
    proc = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shape", default="512,512,200")
    ap.add_argument("--phase", choices=["create", "generate"], help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    if args.phase == "create":
        print(json.dumps(phase_create(args.dir / "phantoms", args.n, args.workers, shape)))
        return
    if args.phase == "generate":
        print(json.dumps(phase_generate(args.dir / "phantoms", args.dir / "ds", args.workers)))
        return

    common = ["--n", str(args.n), "--workers", str(args.workers), "--shape", args.shape]
    with tempfile.TemporaryDirectory() as tmp:
        c = _child([*common, "--phase", "create", "--dir", tmp])
        g = _child([*common, "--phase", "generate", "--dir", tmp])
    shape_txt = " x ".join(str(v) for v in shape)
    print(f"phantoms: {c['n']} x {shape_txt} (normal/situs_inversus/displaced), "
          f"workers={args.workers}")  # fmt: skip
    print(f"{'stage':<30}{'seconds':>9}{'rate':>22}{'peak RSS main/worker MB':>26}")
    print(
        f"{'create (write_phantoms)':<30}{c['seconds']:>9.1f}"
        f"{c['n'] / c['seconds']:>13.3f} phant/s"
        f"{c['peak_rss_main_mb']:>16.0f} / {c['peak_rss_worker_mb']:.0f}"
    )
    print(
        f"{'generate (build_dataset)':<30}{g['seconds']:>9.1f}"
        f"{g['slices'] / g['seconds']:>13.2f} slices/s"
        f"{g['peak_rss_main_mb']:>15.0f} / {g['peak_rss_worker_mb']:.0f}"
    )
    print(f"seconds per phantom (wall, {args.workers} workers): {c['seconds'] / c['n']:.2f}; "
          f"on disk: {c['disk_mb']:.0f} MB")  # fmt: skip
    print(f"slices used: {g['slices']} of {g['slices_total']}, PNG files: {g['images']}, "
          f"questions: {g['questions']}, images/s: {g['images'] / g['seconds']:.1f}")  # fmt: skip
    sys.stdout.flush()
    print("\nreference: benchmarks/bench_generate.py")
    sys.stdout.flush()
    ref = Path(__file__).with_name("bench_generate.py")
    subprocess.run([sys.executable, str(ref), "--workers", str(args.workers)], check=True)


if __name__ == "__main__":
    main()
