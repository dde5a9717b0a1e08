"""``radspatial import inspect``: inspect_ai logs of a radspatial task as a run folder.

The logs are read with inspect's own reader (``.eval`` and ``.json`` logs; a folder is searched
for them), and trusted for nothing but the replies: each sample's id must be an item of the
``--data`` dataset (with the task's recorded filters), its prompt must be the prompt radspatial
builds for that item, and its reply is scored again by ``eval.results.result_row``, so the run
folder holds what ``radspatial eval`` would have written for the same replies. An epoch is a
run (epoch 1 is run 0); a sample logged twice (a task run again) keeps the one of the log file
whose name sorts last (inspect's names start with the date and time). A sample whose call
failed is an error row, left out of every metric as in ``eval``.

The usage block (``eval.usage``) sums each sample's ``model_usage`` and takes its
``working_time`` as the call's latency.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radspatial.core.datafiles import DataFileError, max_json_bytes
from radspatial.core.gates import model_name
from radspatial.core.textsafe import log_text
from radspatial.eval.inspect_items import TaskSpec, task_items
from radspatial.formats.imported_run import ImportedRun, ImportTarget, write_imported_run

LOG_SUFFIXES = (".eval", ".json")
TASKS = {"radspatial/bench": "radspatial", "radspatial/mirp": "mirp"}


InspectImport = ImportedRun  # what ``import_inspect`` returns


def log_files(log: Path) -> list[Path]:
    """The inspect logs at ``log``: the file itself, or every log under the folder."""
    log = Path(log)
    if log.is_symlink() or (log.exists() and not (log.is_file() or log.is_dir())):
        raise DataFileError(f"{log}: not a regular file or folder")
    if log.is_file():
        return [log]
    if not log.is_dir():
        raise DataFileError(f"{log}: no such file or folder")
    files = [
        p
        for p in log.rglob("*")
        if p.suffix in LOG_SUFFIXES and p.is_file() and not p.is_symlink() and p.name != "logs.json"
    ]
    if not files:
        raise DataFileError(f"{log}: no inspect logs (*.eval, *.json)")
    return sorted(files, key=lambda p: (p.name, str(p)))


def _read_log(path: Path) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ValueError(
            "import inspect needs inspect_ai: pip install 'radspatial[inspect]'"
        ) from None
    _check_size(path)
    try:
        return read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - any unreadable log is one line naming the file
        raise DataFileError(f"{path}: not an inspect log ({type(exc).__name__})") from None


def _check_size(path: Path) -> None:
    """Refuse a log over the JSON size cap (``RADSPATIAL_MAX_JSON_MB``) before inspect reads
    it whole: the file itself, or for an ``.eval`` (a zip) what its members inflate to."""
    import zipfile

    cap = max_json_bytes()
    size = path.stat().st_size
    if path.suffix == ".eval" and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            size = sum(i.file_size for i in z.infolist())
    if size > cap:
        raise DataFileError(
            f"{path}: inspect log of {size} bytes is over the cap of {cap} (RADSPATIAL_MAX_JSON_MB)"
        )


def _prompt_text(sample: Any) -> str:
    """The text of the sample's user turn (what the task sent besides the image)."""
    messages = sample.input if isinstance(sample.input, list) else []
    parts = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [c.text for c in content if getattr(c, "type", None) == "text"]
    return "".join(parts) if messages else str(sample.input)


def _images(sample: Any) -> list[str]:
    """The images of the sample's user turn as logged: data URIs (inspect inlines a local
    file), an ``attachment://`` one resolved from the sample's attachments."""
    out = []
    for message in sample.input if isinstance(sample.input, list) else []:
        content = message.content if isinstance(message.content, list) else []
        for part in content:
            if getattr(part, "type", None) == "image":
                image = str(part.image)
                if image.startswith("attachment://"):
                    image = str((sample.attachments or {}).get(image.removeprefix("attachment://")))
                out.append(image)
    return out


def _check_image(where: str, sample: Any, item: Any) -> None:
    """The sample's one image is the item's (its bytes, or its path where the log kept a
    path): a sample id naming another item whose prompt is the same is refused, never scored
    against the other item's answer."""
    import base64
    import binascii

    images = _images(sample)
    if len(images) != 1:
        raise DataFileError(f"{where}: {len(images)} images in its prompt, not the item's one")
    image, same = images[0], False
    if image.startswith("data:") and "," in image:
        try:
            same = (
                base64.b64decode(image.split(",", 1)[1], validate=True) == item.image.read_bytes()
            )
        except (binascii.Error, ValueError):
            same = False
    else:
        same = image == str(item.image)
    if not same:
        raise DataFileError(f"{where}: its image is not the item's ({item.image})")


def _usage(sample: Any) -> dict[str, Any]:
    """A sample as a ``calls.jsonl``-like row for ``usage_block``."""
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "reasoning": 0}
    for usage in (sample.model_usage or {}).values():
        totals["prompt_tokens"] += int(usage.input_tokens or 0)
        totals["completion_tokens"] += int(usage.output_tokens or 0)
        totals["reasoning"] += int(usage.reasoning_tokens or 0)
    reasoning = {"reasoning_tokens": totals.pop("reasoning")}
    meta = (
        {"usage": {**totals, "completion_tokens_details": reasoning}} if sample.model_usage else {}
    )
    return {"latency_s": sample.working_time, "meta": meta, "error": None}


def _check_numbers(where: str, sample: Any) -> None:
    """The number gate on what a sample says it cost: ``working_time`` 0..a week, token counts
    0..10^12 (a forged count would reach the usage block and the cost)."""
    from radspatial.core.gates import number_from_file
    from radspatial.eval.usage import MAX_LATENCY_S

    gate = {"source": where, "low": 0, "error": DataFileError}
    if sample.working_time is not None:
        number_from_file(sample.working_time, field="working_time", high=MAX_LATENCY_S, **gate)
    for name, usage in (sample.model_usage or {}).items():
        for key in ("input_tokens", "output_tokens", "reasoning_tokens", "total_tokens"):
            if (value := getattr(usage, key, None)) is not None:
                field = f"model_usage[{str(name)[:40]!r}].{key}"
                number_from_file(value, field=field, high=1e12, integer=True, **gate)


def _samples(path: Path, log: Any, data: Path) -> Iterator[tuple[int, dict, Any, dict]]:
    """(run, result row, the log, usage) of each sample of one log, checked against ``data``."""
    from radspatial.eval.results import result_row

    name = log.eval.task
    if name not in TASKS:
        raise DataFileError(f"{path}: task {name!r} is not a radspatial task ({', '.join(TASKS)})")
    spec = TaskSpec.from_args({**(log.eval.task_args or {}), "protocol": TASKS[name]}, data)
    items, prompt = task_items(spec)
    by_id, seen = {i.id: i for i in items}, set()
    for sample in log.samples or []:
        where = f"{path}: sample {log_text(repr(str(sample.id)))[:200]}"
        item = by_id.get(str(sample.id))
        if item is None:
            raise DataFileError(f"{where} is not an item of {data} (with the task's filters)")
        if _prompt_text(sample) != prompt(item):
            raise DataFileError(f"{where}: its prompt is not the one radspatial asks the item with")
        _check_image(where, sample, item)
        epoch = sample.epoch
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise DataFileError(f"{where}: epoch must be an integer >= 1, got {epoch!r}")
        if (item.id, epoch) in seen:
            raise DataFileError(f"{where}: epoch {epoch} is logged twice in one log")
        seen.add((item.id, epoch))
        error = sample.error.message if sample.error is not None else None
        reply = sample.output.completion if error is None and sample.output else None
        if error is None and not isinstance(reply, str):
            error = "no reply in the log"
        _check_numbers(where, sample)
        call = {"reply": reply, "error": error, "latency_s": sample.working_time}
        row = result_row(item, epoch - 1, call, prompt(item), spec.protocol).to_json()
        yield epoch - 1, row, spec, {**_usage(sample), "error": error}


def import_inspect(log: Path, target: ImportTarget) -> InspectImport:
    """Write the run folder ``target.out`` from the inspect logs at ``log`` of a task on
    ``target.data``.

    ``target.model``: the name in ``metrics.json`` (default: the log's model); ``target.price``:
    as ``eval --price``. ``DataFileError`` on a bad log, one not of the dataset's items, or of
    several models.
    """
    import os

    from radspatial.core.staging import staged

    data, files = Path(os.path.abspath(target.data)), log_files(log)
    rows: dict[tuple[str, int], dict] = {}
    calls: dict[tuple[str, int], dict] = {}
    models, specs = set(), set()
    for path in files:
        parsed = _read_log(path)
        models.add(
            model_name(parsed.eval.model, source=path, field="eval.model", error=DataFileError)
        )
        for run, row, spec, call in _samples(path, parsed, data):
            rows[(row["id"], run)] = row
            calls[(row["id"], run)] = call
            specs.add(spec)
    if not rows:
        raise DataFileError(f"{files[0]}: no samples")
    if len(models) > 1 or len(specs) > 1:
        raise DataFileError(f"{log}: logs of several models or tasks; import one at a time")
    model = target.model or models.pop()
    runs = 1 + max(run for _, run in rows)
    order = {item.id: k for k, item in enumerate(task_items(specs.pop())[0])}
    ordered = [rows[k] for k in sorted(rows, key=lambda k: (k[1], order[k[0]]))]
    source = {"source": "inspect", "data": str(data), "logs": [str(p) for p in files]}
    with staged(target.out, target.overwrite, {"--log": Path(log), "--data": data}) as stage:
        n_errors = write_imported_run(
            stage, ordered, {**source, "model": model}, runs=runs, calls=calls.values(),
            price=target.price, where=f"{log}: usage",
        )  # fmt: skip
    return InspectImport(target.out, tuple(files), len(ordered), n_errors, model)
