"""``radspatial generate``: a benchmark dataset from CT cases; its options are the job spec's
(``bench/job.GenerateJob``), the run is ``bench/job.run_generate``, as in
``radspatial.generate``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import radspatial.cli.common as common
from radspatial.bench.job import GenerateJob
from radspatial.cli.common import run_job, spec_arguments


def cmd_generate(args: argparse.Namespace) -> int:
    from radspatial.bench.job import run_generate
    from radspatial.questions import tally_text

    _, (summary, config) = run_job(GenerateJob, args, run_generate, log=_stderr, note=_stderr)
    print(f"dataset: {summary.out.resolve()}")
    print(f"questions: {summary.n_questions} from {len(summary.cases)} case(s)")
    for case in summary.cases:
        print(f"  {case['case_id']}: {case['n_selected']} of {case['n_slices']} slices used")
    for key, c in {**summary.counts, **summary.question_types}.items():
        print(f"  {key:<17} {tally_text(c)}")
    if line := decidable_line(summary.decidability):
        print(line)
    print(f"manifest: {summary.out / 'manifest.jsonl'}")
    _warn_missing_types(config, summary.question_types, len(summary.cases))
    if summary.failures:
        print(f"skipped {len(summary.failures)} failing case(s): {summary.out / 'failures.jsonl'}")
    return 0


def decidable_line(block: dict[str, Any]) -> str | None:
    """How many RQ1 items the image decides, and whether their answers stay balanced."""
    c = block.get("by_setup", {}).get("rq1/none")
    if not c:
        return None
    line = f"decidable from the image: rq1 {c['decidable']} of {c['n']}"
    if c["undecidable"]:
        line += f" ({c['undecidable']} side-dependent without a landmark: a coin for any reader)"
    if "decidable_yes" in c:
        yes = c["decidable_yes"]
        balance = "balanced" if c.get("decidable_balanced") else "not balanced"
        line += f"; among them {yes} yes / {c['decidable'] - yes} no ({balance})"
    return line


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _warn_missing_types(config: Any, counts: dict[str, Any], n_cases: int) -> None:
    """A type asked for that no slice could ask is said, not just left out of the counts."""
    from radspatial.questions import get_question_type

    for name in config.question_types:
        if set(get_question_type(name).setups) & set(config.setups) and name not in counts:
            print(f"warning: no {name} question in {n_cases} case(s): no slice met its rules "
                  "(structures, distances and margins; docs/spar_vqa.md, docs/open_questions.md)",
                  file=sys.stderr)  # fmt: skip


COMMANDS = (
    common.Command(
        "generate",
        "generate a MIRP-style spatial QA benchmark from CT volumes and organ masks",
        "With no --ct/--cases, uses the bundled real example CT and its mask.",
        spec_arguments(GenerateJob),
        cmd_generate,
    ),
)
