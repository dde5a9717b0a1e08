"""Cold start of plain ``radspatial agent`` (a fresh process answering one plain question) with the
plain-torch U-Net against the MONAI one it replaced, interleaved in one run.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/bench_cold_start.py --repeats 5

Each try is a new Python process that runs the CLI's ``agent`` (``radspatial.cli.main``: parse,
load the shipped network and atlas, the re-oriented copies, checks, verify) on a 512 px slice of
the bundled CT with "Is the liver to the left of the spleen?"; "this" is the shipped path
(:mod:`radspatial.nets.unet_torch`, no MONAI import), "monai" the same process with the network
built by MONAI (``unet_torch.torch_unet`` patched to decline, as before this change). The two
alternate, so both see the same machine load. Prints per path the median and best wall time
and process CPU time (user + system of the child) and the ratio of the medians (this / monai),
the monai modules each path imported, and whether both printed the same answer; the last line
is the JSON report (``--json`` writes it too).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "Is the liver to the left of the spleen?"
CHILD = """
import json, sys
if {reference!r}:
    from radspatial.nets import unet_torch
    unet_torch.torch_unet = lambda arch: None  # the network built by MONAI, as before
from radspatial.cli import main
rc = main(["agent", "--image", {image!r}, "--question", {question!r}])
monai = sorted(m for m in sys.modules if m.split(".")[0] == "monai")
print(json.dumps({{"rc": rc, "monai": monai}}))
"""


def write_slice(folder: Path) -> Path:
    """The middle axial slice of the bundled CT at 512 px (W400/L40) as an RGB PNG."""
    import numpy as np
    from PIL import Image

    from radspatial.core.runtime import bundled_example
    from radspatial.imaging.slices import Geometry, render_gray, to_display
    from radspatial.imaging.volumes import Case, load_case

    ct, seg = bundled_example()
    volume = load_case(Case("example_ct_sm", ct, seg, "totalsegmentator"))
    geom = Geometry.for_slice(volume.ct.shape[:2], volume.spacing[:2], 512)
    gray = render_gray(to_display(volume.ct[:, :, volume.ct.shape[2] // 2]), geom, (400.0, 40.0))
    path = folder / "slice.png"
    Image.fromarray(np.repeat(gray[:, :, None], 3, axis=2)).save(path)
    return path


def one_start(image: Path, reference: bool, env: dict) -> dict:
    """Wall and CPU seconds of one fresh process answering, its answer and monai modules."""
    code = CHILD.format(reference=reference, image=str(image), question=QUESTION)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"the {'monai' if reference else 'this'} child failed:\n{res.stderr}")
    lines = res.stdout.strip().splitlines()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "answer": lines[0], **json.loads(lines[-1])}


def summary(tries: list[dict]) -> dict:
    walls, cpus = [t["wall_s"] for t in tries], [t["cpu_s"] for t in tries]
    return {
        "wall_median_s": round(statistics.median(walls), 2),
        "wall_best_s": round(min(walls), 2),
        "cpu_median_s": round(statistics.median(cpus), 2),
        "cpu_best_s": round(min(cpus), 2),
        "monai_modules": len(tries[-1]["monai"]),
        "answer": tries[-1]["answer"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per path")
    ap.add_argument("--threads", type=int, default=1, help="OMP threads of each process")
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": "1"}
    tries: dict[str, list[dict]] = {"this": [], "monai": []}
    with tempfile.TemporaryDirectory() as tmp:
        image = write_slice(Path(tmp))
        for _ in range(args.repeats):
            for name in tries:
                tries[name].append(one_start(image, name == "monai", env))
    report = {name: summary(t) for name, t in tries.items()}
    for key in ("wall", "cpu"):
        this, ref = report["this"][f"{key}_median_s"], report["monai"][f"{key}_median_s"]
        report[f"ratio_{key}_median"] = round(this / ref, 3)
    report["same_answers"] = len({t["answer"] for v in tries.values() for t in v}) == 1
    report.update(repeats=args.repeats, threads=args.threads, load_1min=os.getloadavg()[0])
    for name in tries:
        r = report[name]
        print(
            f"{name:>5}: wall median {r['wall_median_s']:.2f} s (best {r['wall_best_s']:.2f}), "
            f"CPU median {r['cpu_median_s']:.2f} s (best {r['cpu_best_s']:.2f}), "
            f"{r['monai_modules']} monai modules; {r['answer']}"
        )
    ratios = f"wall {report['ratio_wall_median']:.2f}, CPU {report['ratio_cpu_median']:.2f}"
    print(
        f"this / monai: {ratios}"
        f" (load {report['load_1min']:.1f}); same answers: {report['same_answers']}"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
