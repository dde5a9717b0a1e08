"""SPAR-VQA on both real volumes: generation cost per question type, and who answers what.

    .venv/bin/python benchmarks/bench_spar_vqa.py [--out /tmp/spar_bench] [--runs 3]

1. Generation: for each real volume (the bundled NIfTI CT and the DICOM series in
   ../shared/data/totalseg_example), build relative position alone and then every type; prints
   questions per type and the time ratio all-types / relative-position-only, measured in the same
   run (the SPAR-VQA types render their own images, so the cost grows with the question count).
2. Evaluation through ``radspatial eval`` machinery: agent:mask (oracle on exported label images),
   agent:markers (reads the drawn markers only), baseline:anatomy-prior (built-in atlas, learned
   from the bundled CT: on that volume it is in-sample) and baseline:random; accuracy per
   question type with chance, per volume, and agent latency per question (ms, mean).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.core.runtime import bundled_example
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.questions import SPAR_VQA

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "totalseg_example"
MODELS = ("agent:mask", "agent:markers", "baseline:anatomy-prior", "baseline:random")
TYPES = ("relative_position", *SPAR_VQA)


def cases() -> list[Case]:
    ct, seg = bundled_example()
    out = [Case("example_ct_sm", ct, seg, "totalsegmentator")]
    dicom = SHARED / "ct_dicom"
    if dicom.is_dir():
        out.append(Case("ct_dicom", dicom, SHARED / "example_seg_dicom.nii.gz", "totalsegmentator"))
    else:
        print(f"skipping the DICOM volume: {dicom} not found")
    return out


def generate(case: Case, out: Path, types: tuple[str, ...]) -> tuple[float, dict]:
    config = GenerateConfig(seed=0, question_types=types, export_masks=True, as_count=0,
                            setups=("rq1", "rq2", "rq3"))  # fmt: skip
    t0 = time.perf_counter()
    build_dataset([case], config, out, overwrite=True, log=lambda m: None)
    seconds = time.perf_counter() - t0
    meta = json.loads((out / "dataset.json").read_text())
    return seconds, meta["question_types"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/spar_bench"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    table: dict[str, dict[str, dict]] = {}
    for case in cases():
        base = args.out / case.case_id
        t_rel, _ = generate(case, base / "relpos", ("relative_position",))
        t_all, counts = generate(case, base / "all", TYPES)
        n = {k: v["n"] for k, v in counts.items()}
        print(f"\n== {case.case_id}: questions per type {n}")
        print(f"generation: relative position {t_rel:.1f} s, all types {t_all:.1f} s "
              f"(ratio {t_all / t_rel:.2f}x for {sum(n.values()) / n['relative_position']:.2f}x "
              "the questions)")  # fmt: skip
        table[case.case_id] = {}
        for model in MODELS:
            runs = 1 if model.startswith("agent") else args.runs
            run_dir = base / "eval" / model.replace(":", "_")
            shutil.rmtree(run_dir, ignore_errors=True)  # timed from scratch, not resumed
            t0 = time.perf_counter()
            rows = run_eval(base / "all", run_dir, EvalConfig(model=model, runs=runs),
                            progress=False)  # fmt: skip
            wall = time.perf_counter() - t0
            metrics = json.loads((run_dir / "metrics.json").read_text())
            table[case.case_id][model] = metrics["by_question_type"]
            per = 1000 * wall / len(rows)
            print(f"{model}: {len(rows)} answers in {wall:.1f} s ({per:.1f} ms per answer, "
                  "agents on 8 threads)")  # fmt: skip
    for case_id, by_model in table.items():
        print(f"\n### {case_id}: accuracy % per question type (mean over runs; chance 50)")
        print("| model | " + " | ".join(TYPES) + " |")
        print("|---" * (len(TYPES) + 1) + "|")
        for model, by in by_model.items():
            cells = []
            for t in TYPES:
                g = by.get(t, {})
                acc = g.get("accuracy_mean")
                inv = g.get("invalid_rate") or 0.0
                cells.append("-" if acc is None else f"{100 * acc:.1f}"
                             + (f" ({100 * inv:.0f}% abst.)" if inv else ""))  # fmt: skip
            print(f"| {model} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
