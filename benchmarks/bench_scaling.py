"""Many cases: 1 vs 2 workers, local pool vs local Ray, and kill -9 + rerun.

On ``--n`` small phantoms (``--shape``), measured in one run:
- wall time and cases/s for local x1, local x2, Ray x2 (the speed-up, and Ray's overhead per
  case = (Ray x2 - local x2) / n); peak RSS of one local worker;
- a projection, from the measured per-slice cost, of a 1,228-case cohort (200 slices a case)
  on N nodes of 16 cores, assuming the 2-worker efficiency holds;
- kill -9 of ``radspatial generate --workers 2`` once a third of the cases are done, then the
  same command again: cases recomputed (= not reused) and whether the dataset is identical
  to the uninterrupted run.

Usage: python benchmarks/bench_scaling.py [--n 10] [--shape 160,160,48] [--no-ray]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.imaging.volumes import read_cases_csv
from radspatial.phantoms import write_phantoms


def tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(root)}\0".encode() + p.read_bytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--shape", default="160,160,48")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    config = GenerateConfig(as_count=0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        csv = write_phantoms(tmp / "ph", n=args.n, seed=0, shape=shape, progress=False)
        cases = read_cases_csv(csv)
        runs = [("local", 1), ("local", 2)] + ([] if args.no_ray else [("ray", 2)])
        times, hashes = {}, {}
        for executor, workers in runs:
            out = tmp / f"{executor}{workers}"
            t0 = time.perf_counter()
            summary = build_dataset(
                cases, config, out, workers=workers, executor=executor, log=lambda _: None
            )
            times[(executor, workers)] = time.perf_counter() - t0
            hashes[(executor, workers)] = tree(out)
        slices = sum(c["n_selected"] for c in summary.cases)
        worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

        print(f"{args.n} phantoms {args.shape}, {slices} slices used, 512 px, 7 PNG per slice")
        print(f"{'run':<12}{'seconds':>9}{'cases/s':>9}{'slices/s':>10}{'speed-up':>10}")
        t1 = times[("local", 1)]
        for (executor, workers), t in times.items():
            name = f"{executor} x{workers}"
            print(f"{name:<12}{t:>9.2f}{args.n / t:>9.2f}{slices / t:>10.1f}{t1 / t:>9.2f}x")
        identical = len(set(hashes.values())) == 1
        print(f"all runs byte-identical: {identical}")
        if ("ray", 2) in times:
            overhead = (times[("ray", 2)] - times[("local", 2)]) / args.n
            print(f"Ray overhead per case (incl. its start-up): {overhead * 1000:+.0f} ms")
        print(f"peak RSS of one local worker: {worker_rss:.0f} MB")
        per_slice = t1 / slices  # one core
        eff = t1 / times[("local", 2)] / 2
        cohort = 1228 * 200 * per_slice
        print(f"1 core: {per_slice * 1000:.0f} ms per slice; 2-worker efficiency {eff:.0%}")
        for nodes in (1, 4, 16):
            minutes = cohort / (nodes * 16 * eff) / 60
            print(f"1,228 cases x 200 slices on {nodes:>2} x 16 cores: {minutes:.0f} min")

        out = tmp / "killed"
        cmd = [sys.executable, "-m", "radspatial.cli", "generate", "--cases", str(csv),
               "--out", str(out), "--as-count", "0", "--workers", "2"]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shards = tmp / "killed.partial" / "shards"
        while proc.poll() is None:
            done = [p for p in shards.glob("[!.]*")] if shards.is_dir() else []
            if len(done) >= args.n // 3:
                break
            time.sleep(0.02)
        proc.kill()
        proc.wait()
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rerun = time.perf_counter() - t0
        m = re.search(r"resuming: (\d+) of (\d+)", res.stderr)
        reused = int(m.group(1)) if m else 0
        same = tree(out) == hashes[("local", 1)]
        print(
            f"kill -9 after {reused} of {args.n} cases, rerun {rerun:.2f} s: "
            f"{args.n - reused} recomputed, {reused} reused, identical to uninterrupted: {same}"
        )


if __name__ == "__main__":
    main()
