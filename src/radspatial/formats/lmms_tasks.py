"""The hooks an lmms-eval task written by ``radspatial export lmms-eval`` calls.

lmms-eval loads the task's ``utils.py``, which builds one ``TaskHooks`` for its folder; the YAML
names its members with ``!function utils.<name>``. Every number is radspatial's: the prompt is
``eval.prompts`` (our protocol, or MIRP's with the per-item examples the export drew with
``runner.mirp_examples``), a reply becomes a ``results.jsonl`` row through ``eval.results``
(radspatial's parser, or MIRP's under ``mirp``), and the aggregations are
``aggregate.group_metrics`` on those rows, as ``metrics.json`` computes them.

``process_results`` logs the whole result row under ``accuracy`` (and its scored fields under
the other metrics), so lmms-eval's ``--log_samples`` file holds the rows ``radspatial import
lmms-eval`` turns back into a run folder. Each logged dict also carries ``cluster`` (the item's
consistency group, else its slice: ``eval.clusters.cluster_of``) and ``score`` (that metric's
0/1 for the item, absent where it does not count it), which the task YAML names as lmms-eval's
``cluster_key`` and ``score_key``: lmms-eval's ``*_stderr_clustered`` uses them.

Yes/no question types only: the open types are graded by ``grading`` (and its judge), which
lmms-eval's per-metric aggregation does not run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial import __version__
from radspatial.core.records import ResultRow
from radspatial.eval.items import EvalItem, manifest_item
from radspatial.questions import answer_kind, metric_hooks_of
from radspatial.questions.manifest import ManifestRow

TASK_FILE = "radspatial_task.json"  # protocol, version pin, MIRP examples
FAILED = ("[LMMS_EVAL_REQUEST_FAILED", "[LMMS_EVAL_BUDGET_EXCEEDED]")  # lmms-eval's failed calls
Row = dict[str, Any]
# metric name -> the answer it scores against; per-marker accuracies are added per setup
FRAME_METRICS = {
    "accuracy": "expected",
    "accuracy_standard": "expected_standard",
    "accuracy_anatomical": "expected_anatomical",
}
OTHER_METRICS = ("f1", "invalid_rate")
ROW_METRIC = "accuracy"  # its logged value is the whole row (lmms_import reads it)
# what the aggregations read of a row (the other metrics log only these)
TASK_HOOKS = ("yes_no",)  # the metric hooks (eval/metric_hooks) a task's F1 comes from


def scored_here(question_type: str | None) -> bool:
    """Whether an lmms-eval task holds questions of this type: the type declares the metrics a
    task reports (``TASK_HOOKS`` among its ``metric_hooks``: F1 and the yes rate)."""
    hooks = metric_hooks_of(question_type or "", answer_kind(question_type))
    return set(TASK_HOOKS) <= set(hooks)


SCORE_FIELDS = ("id", "run", "setup", "marker", "error", "parsed", *FRAME_METRICS.values())


def _metric_score(name: str, row: Row) -> float | None:
    """The 0/1 a metric counts for one row (lmms-eval's ``score_key``), None where it counts
    none: a failed call, a frame without a truth, another marker; F1 is not a mean."""
    if row.get("error") or name == "f1":
        return None
    if name == "invalid_rate":
        return float(row.get("parsed") is None)
    target = FRAME_METRICS.get(name, "expected")
    if name not in FRAME_METRICS and row.get("marker") != name.removeprefix("accuracy_"):
        return None
    if row.get(target) is None:
        return None
    return float(row.get("parsed") == row[target])


def metric_names(markers: Sequence[str], setup: str | None = None) -> list[str]:
    """The metrics of a setup's task: accuracy in three frames, F1, invalid rate, and accuracy
    per marker when the setup has more than one. The blank-image ablation (``as``) has no
    standard view and no patient: it reports neither frame. lmms-eval 0.7.3 pools into the
    group row every subtask metric whose name holds "accuracy" (``consolidate_group_results``
    matches by substring), over the subtasks that report it: a NaN from AS made the group's
    ``accuracy_standard`` NaN; now it is pooled over the setups whose items have one."""
    frames = ["accuracy"] if setup == "as" else list(FRAME_METRICS)
    names = [*frames, *OTHER_METRICS]
    if len(markers) > 1:
        names += [f"accuracy_{m}" for m in markers]
    return names


def _strip_none(value: Any) -> Any:
    """A parquet row has every column of every row; a field another row had is None here."""
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    return value


def doc_item(doc: dict[str, Any], folder: Path) -> EvalItem:
    """The ``EvalItem`` of a task document (a manifest row; ``image_path`` the image's path in
    the dataset, kept relative: ``import lmms-eval --data`` puts the dataset folder before it)."""
    row = {k: v for k, v in doc.items() if k not in ("image", "image_path", "mask")}
    row = _strip_none({**row, "image": doc["image_path"]})
    where = f"{folder}: item {doc.get('id')!r}"
    return manifest_item(Path(), where, ManifestRow.from_json(row, where))


def _score(
    rows: Sequence[Row],
    *,
    value: str = "accuracy_mean",
    target: str = "expected",
    marker: str | None = None,
) -> float:
    """``value`` of ``group_metrics`` (as in ``metrics.json``) on the answered rows, scored
    against ``target``, of one marker or all."""
    from radspatial.eval.aggregate import group_metrics

    rows = [r for r in rows if not r.get("error") and (marker is None or r["marker"] == marker)]
    # a logged row holds the scored fields (SCORE_FIELDS) of a yes/no result row; its grade is
    # the reading of ``parsed`` (the other frames: compared with their answers)
    typed = [
        ResultRow(
            question="",
            correct=r.get("parsed") == r.get("expected"),
            **{k: r.get(k) for k in SCORE_FIELDS},
        )
        for r in rows
    ]
    got = getattr(group_metrics(typed, 1, target=target), value)
    return float("nan") if got is None else float(got)


@dataclass(frozen=True)
class TaskHooks:
    """The hooks of one exported task folder (``folder/radspatial_task.json``)."""

    folder: Path
    protocol: str
    markers: dict[str, tuple[str, ...]]  # setup -> its markers in the dataset
    examples: dict[str, tuple[str, int]]  # item id -> MIRP's example (protocol "mirp")

    def process_docs_for(self, setup: str) -> Callable[[Any], Any]:
        """``process_docs`` of a setup's task: its yes/no rows, with ``image_path`` added."""

        def process_docs(dataset: Any) -> Any:
            from datasets import Image

            def keep(doc: dict[str, Any]) -> bool:
                return doc["setup"] == setup and scored_here(doc.get("question_type"))

            kept = dataset.filter(keep)
            raw = kept.cast_column("image", Image(decode=False))
            paths = [im["path"] for im in raw["image"]]
            return kept.add_column("image_path", paths)

        return process_docs

    def prompt(self, item: EvalItem) -> str:
        from radspatial.eval.prompts import MIRP, MIRP_PROTOCOL

        if self.protocol == "mirp":
            return MIRP_PROTOCOL.render(item, self.examples[item.id])
        return MIRP.render(item)

    def doc_to_visual(self, doc: dict[str, Any]) -> list[Any]:
        return [doc["image"].convert("RGB")]

    def doc_to_text(self, doc: dict[str, Any], lmms_eval_specific_kwargs: Any = None) -> str:
        return self.prompt(doc_item(doc, self.folder))

    def doc_to_messages(self, doc: dict[str, Any], lmms_eval_specific_kwargs: Any = None) -> list:
        """One user turn: image then text (radspatial's order), text first under ``mirp``."""
        text = {"type": "text", "text": self.doc_to_text(doc)}
        image = {"type": "image", "url": self.doc_to_visual(doc)[0]}
        content = [text, image] if self.protocol == "mirp" else [image, text]
        return [{"role": "user", "content": content}]

    def result(self, doc: dict[str, Any], results: Sequence[Any]) -> Row:
        """The reply's ``results.jsonl`` row (``eval.results.result_row``); a failed call is an
        error row, left out of every metric as in ``eval``."""
        from radspatial.eval.results import result_row

        item = doc_item(doc, self.folder)
        reply = results[0] if results else None
        failed = not isinstance(reply, str) or reply.startswith(FAILED)
        call = {"reply": None, "error": str(reply)} if failed else {"reply": reply, "error": None}
        return result_row(item, 0, call, self.prompt(item), self.protocol).to_json()

    def process_results_for(self, setup: str) -> Callable[[dict, Sequence[Any]], dict[str, Row]]:
        """``process_results`` of a setup's task: the whole result row under ``accuracy`` (what
        the sample log keeps for ``import lmms-eval``), what scoring reads under the others."""
        names = metric_names(self.markers[setup], setup)

        def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, Row]:
            from radspatial.eval.clusters import cluster_of

            row = self.result(doc, results)
            row["cluster"] = cluster_of(row)
            scores = {k: row.get(k) for k in (*SCORE_FIELDS, "cluster")}
            out = {}
            for n in names:
                logged = dict(row if n == ROW_METRIC else scores)
                score = _metric_score(n, row)
                if score is not None:
                    logged["score"] = score
                out[n] = logged
            return out

        return process_results

    def aggregation(self, metric: str) -> Callable[[Sequence[Row]], float]:
        """The aggregation of a metric name (``metric_names``) over its rows."""
        if metric in FRAME_METRICS:
            return lambda rows: _score(rows, target=FRAME_METRICS[metric])
        if metric == "f1":
            return lambda rows: _score(rows, value="f1_mean")
        if metric == "invalid_rate":
            return lambda rows: _score(rows, value="invalid_rate")
        marker = metric.removeprefix("accuracy_")
        return lambda rows: _score(rows, marker=marker)


def task_hooks(folder: Path, needs: str) -> TaskHooks:
    """The hooks of an exported task folder; ``needs`` is the radspatial version it pins."""
    if needs != __version__:
        raise RuntimeError(
            f"{folder}: exported for radspatial {needs}, this is {__version__} "
            f"(pip install radspatial=={needs}, or export the task again)"
        )
    info = json.loads((Path(folder) / TASK_FILE).read_text())
    examples = {k: (q, a) for k, (q, a) in info.get("examples", {}).items()}
    markers = {s: tuple(m) for s, m in info["markers"].items()}
    return TaskHooks(Path(folder), info["protocol"], markers, examples)
