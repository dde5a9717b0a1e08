"""``radspatial import lmms-eval``: lmms-eval's ``--log_samples`` files as a radspatial run folder.

A task written by ``radspatial export lmms-eval`` scores every reply into a ``results.jsonl``
row (``formats.lmms_tasks``) and lmms-eval logs it with the sample (under each metric name; we read
``accuracy``). This reads every ``*_samples_<task>.jsonl`` under ``--samples`` (a file or a
folder) and trusts nothing in them but the reply: each row must name an item of ``--data``
(the dataset the task was exported from), its image must be that item's image, its prompt the
prompt the task asks (our protocol or MIRP's, which tells which one the task used), its reply
the sample's ``filtered_resps``; the row is then scored again by ``eval.results.result_row``
against the dataset's answers, and every field must equal what the log holds (a forged
``correct: true`` is refused, naming the file, line and field). ``results.jsonl``,
``metrics.json`` (``aggregate.compute_metrics``) and ``run.json`` are written into ``OUT``,
staged, so ``report`` and ``export mirp`` read it as any run.

An item logged twice (a task run again into the same folder) keeps the row of the file whose
name sorts last: lmms-eval's names start with the run's date and time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radspatial.core.datafiles import DataFileError, read_json_lines
from radspatial.core.records import ResultRow
from radspatial.core.safepath import inside
from radspatial.core.textsafe import log_text
from radspatial.eval.items import EvalItem, manifest_item
from radspatial.formats.imported_run import ImportedRun, ImportTarget, write_imported_run
from radspatial.formats.lmms_tasks import ROW_METRIC, scored_here
from radspatial.questions.manifest import ManifestRow

SAMPLES_GLOB = "*_samples_*.jsonl"


LmmsImport = ImportedRun  # what ``import_lmms`` returns


def sample_files(samples: Path) -> list[Path]:
    """The sample logs at ``samples``: the file itself, or every log under the folder."""
    samples = Path(samples)
    if samples.is_file():
        return [samples]
    if not samples.is_dir():
        raise DataFileError(f"{samples}: no such file or folder")
    files = sorted(samples.rglob(SAMPLES_GLOB), key=lambda p: (p.name, str(p)))
    if not files:
        raise DataFileError(f"{samples}: no lmms-eval sample logs ({SAMPLES_GLOB})")
    return files


@dataclass(frozen=True)
class Truth:
    """What the dataset says of each yes/no item: the item as the task's hooks build it (what
    a logged row is checked against), as ``eval`` loads it (what the imported row is made
    from: the dataset's label tables add the subgroup fields), and the prompts the task may
    have asked (protocol -> prompt)."""

    data: Path
    items: dict[str, EvalItem]
    eval_items: dict[str, EvalItem]
    prompts: dict[str, dict[str, str]]


def dataset_truth(data: Path) -> Truth:
    """The yes/no items of ``data`` (a ``radspatial generate`` folder), built as the exported
    task's hooks build them, with both protocols' prompts (MIRP's examples drawn as the export
    drew them)."""
    from radspatial.eval.items import load_items
    from radspatial.eval.prompts import MIRP, MIRP_PROTOCOL
    from radspatial.eval.runner import mirp_examples

    data = Path(os.path.abspath(data))  # the rows name images from any working folder, as eval's
    manifest = data / "manifest.jsonl"
    if not manifest.is_file():
        raise DataFileError(f"--data {data}: not a radspatial dataset (no manifest.jsonl)")
    loaded = [i for i in load_items(data) if scored_here(i.question_type)]
    examples = mirp_examples(loaded, 1)
    items, prompts = {}, {}
    for where, raw in read_json_lines(manifest):
        item = manifest_item(Path(), where, ManifestRow.from_json(raw, where))
        if not scored_here(item.question_type):
            continue
        items[item.id] = item
        prompts[item.id] = {
            "radspatial": MIRP.render(item),
            "mirp": MIRP_PROTOCOL.render(item, examples[(item.id, 0)]),
        }
    return Truth(data, items, {i.id: i for i in loaded}, prompts)


@dataclass(frozen=True)
class Logged:
    """One sample's checked row: where it is, its record, its item and the protocols whose
    prompt it carries (both, where the two prompts of an item are the same text)."""

    where: str
    record: ResultRow
    item: EvalItem
    protocols: frozenset[str]


def _sample_row(where: str, sample: dict[str, Any], truth: Truth) -> Logged:
    """The sample's result row, checked against ``truth`` (item, image, prompt, reply)."""
    row = sample.get(ROW_METRIC)
    if not isinstance(row, dict) or "id" not in row:
        raise DataFileError(
            f"{where}: no radspatial result row under {ROW_METRIC!r} (not a task written by "
            "radspatial export lmms-eval?)"
        )
    record = ResultRow.from_json(row, where)  # a bad row is refused, naming its line and field
    reply = sample.get("filtered_resps")
    if isinstance(reply, list) and len(reply) == 1:
        reply = reply[0]
    if record.error is None and reply != record.reply:
        raise DataFileError(f"{where}: the row's reply differs from the sample's filtered_resps")
    item = truth.items.get(record.id)
    if item is None:
        raise DataFileError(
            f"{where}: item {record.id!r} is not a yes/no item of --data {truth.data}"
        )
    if record.image is not None:
        inside(truth.data, record.image, where=where, what="image")
    if record.image != str(item.image):
        raise DataFileError(f"{where}: 'image' {record.image!r} is not the item's image in --data")
    protocols = frozenset(k for k, v in truth.prompts[record.id].items() if v == record.prompt)
    if not protocols:
        raise DataFileError(f"{where}: 'prompt' is not the prompt the task asks for this item")
    return Logged(where, record, item, protocols)


def _rescored(logged: Logged, protocol: str, truth: Truth) -> dict[str, Any]:
    """The logged row scored again from its reply; refused where a logged field differs.
    Returns the row ``eval`` writes for that reply."""
    from radspatial.eval.results import result_row

    record = logged.record
    call = {"reply": record.reply, "error": record.error}
    prompt = record.prompt or ""
    ours = result_row(logged.item, 0, call, prompt, protocol).to_json()
    as_logged = record.to_json()
    for key, value in ours.items():
        if key not in ("image", "latency_s") and as_logged.get(key) != value:
            raise DataFileError(
                f"{logged.where}: {key!r} is {as_logged.get(key)!r} in the log, but radspatial "
                f"scores the reply against --data {truth.data} as {value!r}"
            )
    return result_row(truth.eval_items[record.id], 0, call, prompt, protocol).to_json()


def _protocols(logged: list[Logged]) -> list[str]:
    """The protocols every row's prompt allows (one task, one protocol), ours first."""
    common = {"radspatial", "mirp"}
    for entry in logged:
        common &= entry.protocols
        if not common:
            raise DataFileError(
                f"{entry.where}: asked with another protocol than the rows before it "
                "(one exported task asks with one)"
            )
    return [p for p in ("radspatial", "mirp") if p in common]


def read_samples(files: list[Path], truth: Truth) -> tuple[list[dict[str, Any]], str]:
    """The result rows of the sample logs, one per item (the last file's, if logged twice),
    each scored again against ``truth``, sorted by item id as ``eval`` writes them, and the
    protocol the task used."""
    by_id: dict[str, Logged] = {}
    for path in files:
        for where, sample in read_json_lines(path):
            entry = _sample_row(where, sample, truth)
            by_id[entry.record.id] = entry
    if not by_id:
        raise DataFileError(f"{files[0]}: no samples")
    logged = [by_id[k] for k in sorted(by_id)]
    first_error = None
    for protocol in _protocols(logged):  # both only where every prompt reads the same
        try:
            return [_rescored(entry, protocol, truth) for entry in logged], protocol
        except DataFileError as exc:
            first_error = first_error or exc
    raise first_error  # type: ignore[misc]


def import_lmms(samples: Path, target: ImportTarget) -> LmmsImport:
    """Write the run folder ``target.out`` from lmms-eval sample logs at ``samples``.

    ``target.data``: the dataset the task was exported from: the truth every row is scored
    against, recorded in ``run.json`` as ``eval`` does (``export mirp`` reads MIRP's centres
    file there); ``target.model``: the name in ``metrics.json`` (default: the folder holding the
    first log, which lmms-eval names after the model; control characters shown as escapes);
    ``target.price``: as ``eval --price``. The usage block counts the logged replies as calls;
    the sample logs hold no token counts or latencies, so those (and the cost) stay unknown.
    Raises ``DataFileError`` (a ValueError) on a bad log.
    """
    from radspatial.core.staging import staged

    files = sample_files(samples)
    inputs = {"--samples": Path(samples), "--data": target.data}
    made = ("run.json", "a run folder")
    with staged(target.out, target.overwrite, inputs, made) as stage:
        rows, protocol = read_samples(files, dataset_truth(target.data))
        model = log_text(target.model or files[0].resolve().parent.name)
        source = {
            "source": "lmms-eval",
            "data": os.path.abspath(target.data),
            "samples": [os.path.abspath(p) for p in files],  # any working folder, as data
            "model": model,
            "protocol": protocol,
        }
        calls = ({"error": r.get("error")} for r in rows)
        where = f"{samples}: usage"
        n_errors = write_imported_run(
            stage, rows, source, runs=1, calls=calls, price=target.price, where=where
        )
    return LmmsImport(target.out, tuple(files), len(rows), n_errors, model)
