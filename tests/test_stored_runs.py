"""Run folders written before results rows had one graded record (issue 51) still read and
report identically: a yes/no run, an open-question run graded by the rules and an LLM judge, and
a mixed run, stored in tests/data/runs as main's code wrote them (tests/data/runs/README.md).

The report's text outputs (summary.md, summary.json, index.html; the folders' temporary paths
replaced by ``<TMP>``, the report's version by ``<VERSION>``) hash to what main's code made of
the same folders, the metrics recomputed from results.jsonl equal the stored metrics.json, and
every stored row read and written again keeps its keys and values (new keys are only added)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from radspatial import __version__
from radspatial.core.io import read_jsonl
from radspatial.core.records import ResultRow, read_results
from radspatial.eval.aggregate import compute_metrics
from radspatial.reports.build import build_report

RUNS = Path(__file__).parent / "data" / "runs"
REPORT_FILES = ("summary.md", "summary.json", "index.html")
# sha256 of each report file, as main's code (before the graded record) wrote it
FINGERPRINTS = {
    "mixed": {
        "summary.md": "60773243c49b460b8d1d2c3ca4b34a2dd5c09c5ed7a42f77f39f6f1a09074d1b",
        "summary.json": "fb4e3238033db3f649be74448875830c77ed51b2e6bcf10d1318b30ff204c714",
        "index.html": "bea97cb8fa36b3313772c416ac7d0a97156423769bd09d8732b47772b72b1f92",
    },
    "open_judged": {
        "summary.md": "8417254ff2627e89ba74f109c1b5b218a957e788e517ef258b0d032f0f47b134",
        "summary.json": "ef87403d6cf87c307881b57ce3b2c88997e37d3dde6fbe82ac2b6e8386bc0b65",
        "index.html": "254ee9c5b229609b403eb6b9272d8a398a282d0e58f8651d17c5620be3da4067",
    },
    "yesno": {
        "summary.md": "d6f8594ac927ca76a60081140eb173d9c5a04d0c378031f835f1f5315e64d6ab",
        "summary.json": "eb5735110c87ea493ff572ec3785128ac531ef3c078c9a47b9248a94c4076292",
        "index.html": "21f0d7491b98e2ea99bac404ab622c011d11a7e0a15a793d6e27be9807fb0674",
    },
}


def _report(kind: str, tmp: Path) -> dict[str, str]:
    run = tmp / kind
    shutil.copytree(RUNS / kind, run)
    report = build_report([run], tmp / "report")
    out = {}
    for name in REPORT_FILES:
        text = (report.out / name).read_text(encoding="utf-8").replace(str(tmp), "<TMP>")
        text = text.replace(__version__, "<VERSION>")
        out[name] = hashlib.sha256(text.encode()).hexdigest()
    return out


@pytest.mark.parametrize("kind", sorted(FINGERPRINTS))
def test_stored_run_reports_identically(kind, tmp_path):
    assert _report(kind, tmp_path) == FINGERPRINTS[kind]


@pytest.mark.parametrize("kind", sorted(FINGERPRINTS))
def test_stored_run_metrics_recompute_equal(kind):
    stored = json.loads((RUNS / kind / "metrics.json").read_text())
    rows = read_results(RUNS / kind / "results.jsonl")
    again = compute_metrics(rows, model=stored["model"], runs=stored["runs"]).to_json()
    kept = {k: v for k, v in stored.items() if k not in ("usage", "judge")}  # not from rows
    assert again == kept


@pytest.mark.parametrize("kind", sorted(FINGERPRINTS))
def test_stored_rows_keep_their_keys(kind):
    for row in read_jsonl(RUNS / kind / "results.jsonl"):
        again = ResultRow.from_json(row).to_json()
        assert {k: again.get(k) for k in row} == row
