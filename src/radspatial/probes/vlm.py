"""``radspatial probe vlm``: where a vision-language model loses the spatial relation.

From an ``eval`` run of an ``hf:`` model: the run's relative-position items (RQ1-RQ3 and the
blank AS pages) are sent through the model again, one forward pass each with the prompt the run
sent (``vlm_extract``); probes are cross-fitted on each stage (``vlm_fit``) and joined with the
run's answers item by item (``vlm_join``). Writes ``OUT/items.jsonl`` (one row per item and
stage), ``OUT/summary.json`` and ``OUT/stages.png`` (encoder -> projector -> language model ->
answer); ``report`` shows the figure and table of every such folder inside a run folder (the
default ``OUT`` is ``RUN/probe_vlm``). The features are kept in ``OUT/features.npz`` with a key
of everything that determines them (model, dataset manifest, items, prompts, layers, pixels): a
rerun into the same ``OUT`` (other ``--epochs``, ``--split-by``) fits again without loading the
model.

Example::

    probe_vlm(Path("runs/llava"), Path("runs/llava/probe_vlm"), layers=(8, -1))
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.core.datafiles import read_json
from radspatial.core.errors import InputError
from radspatial.core.records import read_results
from radspatial.imaging.planes import DEFAULT_PLANE
from radspatial.probes.vlm_fit import READOUTS, SEEDS, FitOptions, ProbeItem, n_folds
from radspatial.questions.manifest import ManifestRow, ObjectRow, read_manifest

KIND = "radspatial-probe-vlm"
FEATURES = "features.npz"  # the stages' features, reused by a rerun that would read the same
RELATIONS = {"left_of": 0, "right_of": 0, "above": 1, "below": 1}
FIGURE = "stages.png"


@dataclass(frozen=True)
class VlmProbeConfig:
    model: str | None = None  # None: the run's
    data: Path | None = None  # None: the run's
    layers: tuple[int, ...] = ()
    split_by: str = "patient"  # or "slice"
    device: str = "auto"
    dtype: str = "auto"
    fit: FitOptions = FitOptions()


def _run_inputs(run: Path, config: VlmProbeConfig) -> tuple[str, Path]:
    info = read_json(run / "run.json", want=dict) if (run / "run.json").is_file() else {}
    if not (run / "results.jsonl").is_file():
        raise InputError(f"{run}: no results.jsonl (not an eval run folder)")
    model = config.model or _model_of_run(run, info.get("model"))
    data = config.data or (Path(info["data"]) if info.get("data") else None)
    if not model or not str(model).startswith("hf:"):
        raise InputError(
            f"{run}: probe vlm reads hf: models only (the run's model is {model!r}); "
            "pass --model hf:PATH"
        )
    if data is None or not (Path(data) / "manifest.jsonl").is_file():
        raise InputError(f"{run}: dataset {data} has no manifest.jsonl (pass --data DATASET)")
    return str(model), Path(data)


def _model_of_run(run: Path, model: object) -> str | None:
    """The model run.json names, through the text gate (``core.textsafe.model_name``); a
    remote URL is refused (nothing is fetched), and a path on this machine must be a model
    folder (``config.json`` inside), so a run folder cannot point the loader at ``/etc``."""
    if model is None:
        return None
    from radspatial.core.gates import model_name
    from radspatial.core.textsafe import log_text

    where = f"{run / 'run.json'}: 'model' {log_text(repr(str(model)))[:120]}"
    name = model_name(model, source=run / "run.json", field="'model'")
    target = name.removeprefix("hf:")
    if "://" in target:
        raise InputError(f"{where} is a URL; nothing is fetched (pass --model hf:PATH)")
    parts = Path(target).expanduser().parts
    if target.startswith(("/", "~", ".")) or ".." in parts:
        folder = Path(target).expanduser()
        if not (folder.is_dir() and (folder / "config.json").is_file()):
            raise InputError(f"{where} is not a model folder (no config.json there)")
    return name


def _run_backend(run: Path) -> dict[str, Any]:
    """The eval's own image handling (``max_pixels``), so the model sees the same pixels."""
    info = read_json(run / "run.json", want=dict) if (run / "run.json").is_file() else {}
    backend = info.get("backend") if isinstance(info.get("backend"), dict) else {}
    pixels = backend.get("max_pixels")
    return {"max_pixels": pixels} if isinstance(pixels, int) and pixels > 0 else {}


def _ordered(row: ManifestRow) -> tuple[ObjectRow, ObjectRow]:
    """The pair in a fixed order: label id, then marker text (the target is the image's)."""
    pair = [row.object1, row.object2]
    return tuple(sorted(pair, key=lambda o: (o.label_id or 1 << 30, o.marker_text or "")))


def _point(o: ObjectRow, marked: bool) -> tuple[float, float]:
    """Where an object is in the shown image: its marker where one is drawn, else its centre."""
    return tuple((o.marker_xy if marked and o.marker_xy else o.center_xy) or (0.0, 0.0))


def _group(row: ManifestRow, split_by: str) -> str:
    src = row.source
    if src is None or src.case_id is None:  # an AS page: its image in every marker style
        return "as:" + Path(row.image).name
    if split_by == "patient":
        return src.case_id
    return f"{src.case_id}:{row.plane or DEFAULT_PLANE}:{src.slice_index}"


def answered(run: Path, data: Path) -> tuple[list[tuple[str, ManifestRow]], dict[str, Any]]:
    """The dataset's manifest rows and the run's answered rows by id (run 0, calls that failed
    left out: eval counts them in no accuracy either). The two must be of one dataset: an item
    id twice in either file, a result naming an id the manifest lacks or asking another question
    of it (another dataset, an edited file), or a score its answer does not give, is refused,
    naming the file, before any model is loaded."""
    from radspatial.core.datafiles import check_unique_ids

    manifest = read_manifest(data / "manifest.jsonl")
    check_unique_ids([row.id for _, row in manifest], data / "manifest.jsonl")
    path, items = run / "results.jsonl", {row.id: row for _, row in manifest}
    rows, seen = read_results(path), set()
    for r in rows:
        if (r.id, r.run) in seen:
            raise InputError(f"{path}: item {_shown(r.id)} run {r.run} appears twice")
        seen.add((r.id, r.run))
        _agrees(path, r, items.get(r.id), data / "manifest.jsonl")
    results = {r.id: r for r in rows if r.run == 0 and r.error is None and r.reply is not None}
    return manifest, results


def _shown(text: str) -> str:
    from radspatial.core.textsafe import log_text

    return log_text(repr(text))[:120]


def _agrees(path: Path, r: Any, row: ManifestRow | None, manifest: Path) -> None:
    """A result row is of the manifest's item and (a yes/no relation, what the probe joins
    with) its score is what its parsed answer gives (eval's ``parsed == expected``)."""
    if row is None:
        raise InputError(
            f"{path}: item {_shown(r.id)} is not in {manifest}: the run is not of this dataset "
            "(pass --data)"
        )
    ran = (r.question, r.expected, r.setup, r.marker)
    if ran != (row.question, row.answer, row.setup, row.marker):
        raise InputError(
            f"{path}: item {_shown(r.id)} asks another question or expects another answer than "
            f"{manifest}'s: the run is not of this dataset (pass --data)"
        )
    if row.relation in RELATIONS and bool(r.correct) != (r.parsed == r.expected):
        raise InputError(
            f"{path}: item {_shown(r.id)} run {r.run} is scored correct={r.correct} but its "
            f"answer {_shown(str(r.parsed))} against {_shown(str(r.expected))} says otherwise "
            "(an edited row)"
        )


def select_items(
    data: Path, manifest: list[tuple[str, ManifestRow]], results: dict[str, Any], split_by: str
) -> list[tuple]:
    """(row, probe item, meta, image path) of each relative-position item the run answered
    (``answered``'s rows)."""
    from radspatial.core.safepath import inside

    out = []
    for where, row in manifest:
        if row.relation not in RELATIONS or row.id not in results or not row.object2:
            continue
        image = inside(data, row.image, where=where, what="image")
        if not image.is_file():
            raise InputError(f"{where}: image {image} missing")
        a, b = _ordered(row)
        axis = RELATIONS[row.relation]
        target = int(a.center_xy[axis] < b.center_xy[axis])
        item = ProbeItem(row.id, _group(row, split_by), axis, target)
        view = row.transform or "none"
        meta = {"id": row.id, "setup": row.setup, "marker": row.marker, "view": view}
        meta["relation"] = row.relation
        out.append((row, item, meta, image))
    return out


def _extract(reader, chosen, results, log) -> dict[str, dict[str, np.ndarray]]:
    """Per stage: pooled (N, D) and tokens (N, 2D) of every chosen item."""
    feats: dict[str, dict[str, list]] = {s: {"pooled": [], "tokens": []} for s in reader.stages}
    for n, (row, _, _, image) in enumerate(chosen):
        png = image.read_bytes()
        marked = row.marker != "none"
        points = [_point(o, marked) for o in _ordered(row)]
        prompt = results[row.id].prompt or row.question
        for stage, f in reader.read(prompt, png, points).items():
            feats[stage]["pooled"].append(f.pooled)
            feats[stage]["tokens"].append(np.concatenate(f.at_points))
        if (n + 1) % 50 == 0 or n + 1 == len(chosen):
            log(f"features: {n + 1}/{len(chosen)} items")
    return {s: {k: np.stack(v) for k, v in d.items()} for s, d in feats.items()}


def probe_vlm(
    run: Path,
    out: Path,
    config: VlmProbeConfig = VlmProbeConfig(),
    *,
    overwrite: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Probe every stage of the run's model and join with its answers; returns summary.json."""
    from radspatial.probes.vlm_fit import fit_stage
    from radspatial.probes.vlm_join import item_rows, summarize

    run, out = Path(run), Path(out)
    model, data = _run_inputs(run, config)
    _check_out(out, run, data)
    manifest, results = answered(run, data)
    chosen = select_items(data, manifest, results, config.split_by)
    if len(chosen) < 4:
        raise InputError(f"{run}: {len(chosen)} relative-position items answered; need 4 or more")
    options = {"device": config.device, "dtype": config.dtype, **_run_backend(run)}
    key = _features_key(model, data, chosen, results, config.layers, options)
    kind, feats, device = _features(model, options, config.layers, chosen, results, out, key, log)
    items = [c[1] for c in chosen]
    meta = [c[2] for c in chosen]
    targets = np.array([i.target for i in items])
    answer = np.array([bool(results[i.id].correct) for i in items])
    fit = config.fit
    if fit.device == "auto":
        fit = replace(fit, device=device)
    stages = {}
    for stage, f in feats.items():
        log(f"fitting the probes of {stage}")
        stages[stage] = fit_stage(f["pooled"], f["tokens"], items, fit)
    summary = {
        "kind": KIND,
        "run": str(run),
        "model": model,
        "data": str(data),
        "architecture": kind,
        "model_type": _model_type(model),
        "stage_order": list(feats),  # summary.json sorts its keys
        "readouts": list(READOUTS),
        "seeds": list(SEEDS),
        "split_by": config.split_by,
        "n_folds": n_folds(len(items), len({i.group for i in items})),
        "n_items": len(items),
        "n_groups": len({i.group for i in items}),
        **summarize(stages, targets, answer, meta),
    }
    _write(out, overwrite, item_rows(meta, stages, targets, answer), summary)
    _save_features(out, key, kind, feats, str(device))
    return summary


def _features(model, options, layers, chosen, results, out, key, log):  # noqa: ANN001, ANN202
    """(architecture, per-stage features, device): from ``OUT/features.npz`` when its key
    matches, else read from the model (loaded only then)."""
    from radspatial.models.base import Decoding, create_backend
    from radspatial.probes.vlm_extract import StageReader

    cached = _cached(out, key, len(chosen))
    if cached is not None:
        log(f"features: {len(chosen)} items from {out / FEATURES} (same model, items, layers)")
        return cached
    log(f"loading {model}")
    backend = create_backend(model, decoding=Decoding(), **options)
    reader = StageReader(backend, layers)
    return reader.kind, _extract(reader, chosen, results, log), backend.device


def _model_type(model: str) -> str | None:
    """The model folder's ``config.json`` ``model_type`` (None where it cannot be read)."""
    import json

    config = Path(model.removeprefix("hf:").split("@", 1)[0]) / "config.json"
    try:
        value = json.loads(config.read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _features_key(model, data, chosen, results, layers, options) -> str:  # noqa: ANN001
    """A hash of everything the features depend on (the model's files by size and time)."""
    import hashlib
    import json

    spec = model.removeprefix("hf:").split("@", 1)[0]
    files = sorted(Path(spec).glob("*")) if Path(spec).is_dir() else []
    stamp = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()]
    manifest = (data / "manifest.jsonl").stat()
    ids = [(c[0].id, results[c[0].id].prompt) for c in chosen]
    what = [model, stamp, manifest.st_size, manifest.st_mtime_ns, ids, list(layers), options]
    return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()


def _cached(out: Path, key: str, n_items: int) -> tuple[str, dict, str] | None:
    """(architecture, features, device) from ``OUT/features.npz`` when its key is ``key``
    (None: no file, or one of other items, model or layers: read them again). A file that is
    not one we wrote (not a regular file, not an npz of stored arrays, its arrays not one
    finite row per item) is refused in one line naming it, never waited on or fitted."""
    import zipfile

    path = out / FEATURES
    if not path.exists() and not path.is_symlink():
        return None
    fix = "delete it to read the features from the model again"
    if path.is_symlink() or not path.is_file():
        raise InputError(f"{path}: not a regular file (a link, FIFO or folder); {fix}")
    try:
        with zipfile.ZipFile(path) as archive:  # stored arrays: memory bounded by the file
            if any(i.compress_type != zipfile.ZIP_STORED for i in archive.infolist()):
                raise ValueError("compressed members")
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return None
            stages = [str(s) for s in z["stages"]]
            feats = {s: {r: z[f"{s}|{r}"] for r in READOUTS} for s in stages}
            kind, device = str(z["kind"]), str(z["device"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a probe vlm features file ({exc}); {fix}") from None
    for stage, arrays in feats.items():
        for readout, a in arrays.items():
            numeric = a.dtype.kind in "fiu"
            if a.ndim != 2 or a.shape[0] != n_items or not numeric or not np.isfinite(a).all():
                raise InputError(
                    f"{path}: {stage}|{readout} holds {a.shape} values, not one finite row for "
                    f"each of the {n_items} items; {fix}"
                )
    if not stages:
        raise InputError(f"{path}: no stages; {fix}")
    return kind, feats, device


def _save_features(out: Path, key: str, kind: str, feats: dict, device: str) -> None:
    """Written whole or not at all (a crash mid-write leaves no torn file to refuse)."""
    import os

    arrays = {f"{s}|{r}": v for s, d in feats.items() for r, v in d.items()}
    part = out / (FEATURES + ".partial")
    with part.open("wb") as f:  # OUT is ours now: written after the swap
        np.savez(f, key=key, kind=kind, device=device, stages=np.array(list(feats)), **arrays)
    os.replace(part, out / FEATURES)


def _write(out: Path, overwrite: bool, rows: list[dict], summary: dict[str, Any]) -> None:
    """items.jsonl, summary.json and the figure, staged in ``OUT.partial`` (none or all)."""
    from radspatial.core.io import atomic_write_bytes, atomic_write_json, atomic_write_jsonl
    from radspatial.core.staging import prepare_out, swap_in
    from radspatial.probes.vlm_figure import stages_figure

    stage_dir = prepare_out(out, overwrite)
    try:
        atomic_write_jsonl(stage_dir / "items.jsonl", rows)
        atomic_write_json(stage_dir / "summary.json", summary)
        atomic_write_bytes(stage_dir / FIGURE, stages_figure(summary))
        swap_in(stage_dir, out)
    except BaseException:
        shutil.rmtree(stage_dir, ignore_errors=True)
        raise


def _check_out(out: Path, run: Path, data: Path) -> None:
    """``out`` may lie inside the run folder (report finds it there), never be or hold it."""
    from radspatial.core.safepath import check_disjoint

    check_disjoint(out, {"--data": data})
    real_out, real_run = out.resolve(), run.resolve()
    if real_out == real_run or real_out in real_run.parents:
        raise InputError(f"--out {out}: is or holds the run folder {run}; choose another --out")
