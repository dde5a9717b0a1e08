"""formats/imported_run: the run.json both importers (inspect, lmms-eval) write."""

from __future__ import annotations

from radspatial.formats.imported_run import run_info


def test_run_info_counts_items_and_errors_after_the_source_keys():
    rows = [
        {"id": "a", "error": None},
        {"id": "a", "error": "timeout"},  # run 1 of the same item
        {"id": "b", "error": None},
    ]
    source = {"source": "inspect", "data": "/d", "logs": ["x.eval"], "model": "m"}
    info = run_info(source, rows, runs=2, usage={"n_calls": 3})
    assert list(info)[:5] == ["source", "data", "logs", "model", "runs"]
    assert (info["n_items"], info["n_errors"], info["status"]) == (2, 1, "incomplete")
    assert info["usage"] == {"n_calls": 3} and "radspatial" in info["versions"]


def test_run_info_complete_without_error_rows():
    info = run_info({"source": "lmms-eval", "model": "m"}, [{"id": "a"}], runs=1, usage={})
    assert (info["n_items"], info["n_errors"], info["status"]) == (1, 0, "complete")
