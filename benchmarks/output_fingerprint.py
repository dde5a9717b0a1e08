"""Fingerprint of everything radspatial writes, to prove a refactor changes no output.

Generates the bundled CT with every question type, setup and marker (masks exported), and
evaluates the baselines and the agents on it; prints one sha256 per written file (dataset and
each run's results.jsonl/metrics.json; run.json is left out: it records versions and paths).
Run before and after a change and diff the two listings:

    python benchmarks/output_fingerprint.py --out /tmp/fp_before > before.txt
    ... change ...
    python benchmarks/output_fingerprint.py --out /tmp/fp_after > after.txt
    diff before.txt after.txt && echo identical

``--rules strict`` generates with the strict profile: the output made before rule profiles
existed (the default became ``mirp``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli.demo import DEMO_MODELS, DEMO_SETUPS
from radspatial.core.rules import RULE_PROFILES, QuestionRules
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.questions import list_question_types

DATA = Path(__file__).resolve().parents[1] / "src" / "radspatial" / "data"
# the demo's models with the marker reader in the plain agent's place, then the plain agent:
# the same models in the same order as before the demo ran the plain agent
MODELS = (*("agent:markers" if m == "agent" else m for m in DEMO_MODELS), "agent")
SETUPS = DEMO_SETUPS


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--rules",
        choices=RULE_PROFILES,
        default=QuestionRules().profile,
        help="generation rule profile (strict: the output made before profiles existed)",
    )
    args = ap.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    data = args.out / "dataset"
    case = Case("example", DATA / "example_ct_sm.nii.gz", DATA / "example_seg.nii.gz")
    config = GenerateConfig(
        seed=args.seed,
        question_types=tuple(list_question_types()),
        export_masks=True,
        as_count=20,
        rules=QuestionRules(profile=args.rules),
    )
    build_dataset([case], config, data, log=lambda _: None)
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        if path.name == "dataset.json":  # versions inside; its counts are in the manifest
            continue
        print(f"{_digest(path)}  dataset/{path.relative_to(data)}")
    for model in MODELS:
        run = args.out / model.replace(":", "_")
        config = EvalConfig(model=model, runs=2, setups=SETUPS.get(model))
        run_eval(data, run, config, progress=False)
        rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
        for row in rows:
            row.pop("latency_s", None)  # wall time: differs between any two runs
        texts = {
            "results.jsonl": "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows),
            "metrics.json": (run / "metrics.json").read_text(),
        }
        for name, text in texts.items():
            text = text.replace(str(args.out), "<OUT>")
            print(f"{hashlib.sha256(text.encode()).hexdigest()}  {run.name}/{name}")


if __name__ == "__main__":
    main()
