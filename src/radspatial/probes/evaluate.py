"""Probe models on probe datasets: inputs, targets, metrics, the model folder, and transfer.

A trained run folder (``train.train_probe``) holds ``results.json`` and one model per task under
``models/<task>/``: ``model.json`` (task info, class names, head spec, input size, where the
encoder is), ``head.safetensors`` and, when finetuned, ``encoder.json`` +
``encoder.safetensors`` (a frozen encoder is stored once, in ``encoder/``).

``evaluate_probe(model, data, out)`` runs those models on another probe dataset without any
retraining (zero-shot transfer): tasks are matched by name, classes by name (samples whose class
the model never saw are counted in ``n_unmapped`` and left out), and the metrics are those of
training: ``accuracy`` (``flip_accuracy`` for orient), ``permutation_accuracy`` (the Hungarian
assignment of the 16 x 16 tile logits equals the shuffle) and ``tile_accuracy`` (tiles placed
right by that assignment), ``mean_euclidean_distance_px`` (at the reference slice size, 512 px).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from radspatial.core.errors import first_line
from radspatial.core.io import atomic_write_bytes, atomic_write_json, atomic_write_jsonl
from radspatial.core.safepath import check_disjoint
from radspatial.probes.data import ProbeSample, load_probe_task, probe_info
from radspatial.probes.encoders import Encoder, Features, load_encoder, read_state_dict
from radspatial.probes.heads import create_head
from radspatial.probes.model_meta import read_task_meta

MODEL_FORMAT = "radspatial-probe-model"
RESULTS_FORMAT = "radspatial-probe-results"
SPLITS = ("train", "val", "test")


class ProbeModel(nn.Module):
    """Encoder + head: [0, 1] RGB images (B, 3, S, S) -> task outputs.

    Regression outputs go through a sigmoid: targets are normalised image coordinates in
    [0, 1], and an untrained model then starts at the image centre rather than anywhere.
    """

    def __init__(self, encoder: Encoder, head: nn.Module, kind: str = "classification") -> None:
        super().__init__()
        self.encoder, self.head, self.kind = encoder, head, kind

    def readout(self, feats: Features) -> torch.Tensor:
        out = self.head(feats)
        return torch.sigmoid(out) if self.kind == "regression" else out

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.readout(self.encoder(images))


# --- inputs and targets ------------------------------------------------------------------------


def load_images(samples: Sequence[ProbeSample], size: int) -> torch.Tensor:
    """uint8 (N, 3, size, size): each PNG as RGB, resized (bilinear) when it is not size px."""
    from PIL import Image

    out = torch.empty((len(samples), 3, size, size), dtype=torch.uint8)
    for i, s in enumerate(samples):
        with Image.open(s.image) as im:
            im = im.convert("RGB")
            if im.size != (size, size):
                im = im.resize((size, size), Image.Resampling.BILINEAR)
            out[i] = torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1)
    return out


def out_shape(info: dict[str, Any]) -> tuple[int, ...]:
    kind = info["kind"]
    if kind == "regression":
        return (2,)
    if kind == "classification":
        return (int(info["n_classes"]),)
    if kind == "permutation":
        return (16, 16)
    raise ValueError(f"unknown task kind {kind!r}")


def encode_targets(
    samples: Sequence[ProbeSample], info: dict[str, Any], classes: Sequence[str] | None = None
) -> tuple[torch.Tensor, np.ndarray]:
    """Targets as a tensor, plus a mask of the samples that have one.

    Classification targets are indices into the data's ``info["classes"]``; with ``classes``
    (the model's class names) they are re-indexed by name, and a class the model lacks is masked.
    """
    keep = np.ones(len(samples), bool)
    if info["kind"] == "regression":
        return torch.tensor([s.target for s in samples], dtype=torch.float32).view(-1, 2), keep
    if info["kind"] == "permutation":
        return torch.tensor([s.target for s in samples], dtype=torch.long).view(-1, 16), keep
    names = info["classes"]
    index = {c: i for i, c in enumerate(classes if classes is not None else names)}
    ids = []
    for j, s in enumerate(samples):
        k = index.get(names[int(s.target)])
        keep[j] = k is not None
        ids.append(-1 if k is None else k)
    return torch.tensor(ids, dtype=torch.long), keep


# --- metrics -----------------------------------------------------------------------------------


def hungarian(logits: np.ndarray) -> np.ndarray:
    """(B, T, T) tile logits -> (B, T): the assignment of shown tiles to original positions
    with the highest total log-probability (each position used once)."""
    from scipy.optimize import linear_sum_assignment

    logp = torch.log_softmax(torch.as_tensor(logits, dtype=torch.float64), dim=-1).numpy()
    out = np.empty(logp.shape[:2], dtype=np.int64)
    for b in range(logp.shape[0]):
        rows, cols = linear_sum_assignment(-logp[b])
        out[b, rows] = cols
    return out


def tile_groups(samples: Sequence[ProbeSample], grid: int = 4) -> np.ndarray:
    """(N, grid * grid): for each shown tile of each permutation sample, the index of the first
    shown tile with the same pixels (the PNG as stored). Blank tiles of a context-free crop
    are identical, and no read-out can tell them apart."""
    from PIL import Image

    out = np.empty((len(samples), grid * grid), np.int64)
    for n, s in enumerate(samples):
        with Image.open(s.image) as im:
            a = np.asarray(im.convert("RGB"))
        t = a.shape[0] // grid
        seen: dict[bytes, int] = {}
        for i in range(grid * grid):
            r, c = divmod(i, grid)
            out[n, i] = seen.setdefault(a[r * t : (r + 1) * t, c * t : (c + 1) * t].tobytes(), i)
    return out


def restored(assign: np.ndarray, targets: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(N, T) bool: shown tile i placed at ``assign[i]`` looks like the tile that belongs there
    (the restored crop is pixel-identical there; identical tiles are interchangeable)."""
    inv = np.argsort(targets, axis=1)  # inv[b, p]: the shown tile that came from position p
    rows = np.arange(len(assign))[:, None]
    return groups == groups[rows, inv[rows, assign]]


def task_metrics(
    task: str,
    info: dict[str, Any],
    outputs: np.ndarray,
    targets: np.ndarray,
    groups: np.ndarray | None = None,
) -> dict[str, Any]:
    """The task's metrics on one split; ``n`` samples (None values when n is 0).

    Permutation with ``groups`` (``tile_groups``): also ``restored_accuracy`` (the whole crop
    restored pixel for pixel: identical tiles interchangeable) and ``restored_tile_accuracy``.
    """
    n = len(targets)
    kind = info["kind"]
    if kind == "regression":
        ref = info.get("reference_size_px") or 512
        d = np.linalg.norm(outputs - targets, axis=1) * ref if n else np.zeros(0)
        return {"mean_euclidean_distance_px": float(d.mean()) if n else None, "n": n}
    if kind == "permutation":
        assign = hungarian(outputs) if n else np.zeros((0, 16), np.int64)
        full = float((assign == targets).all(axis=1).mean()) if n else None
        tile = float((assign == targets).mean()) if n else None
        argmax = float((outputs.argmax(-1) == targets).mean()) if n else None
        m = {
            "permutation_accuracy": full,
            "tile_accuracy": tile,
            "tile_accuracy_argmax": argmax,
            "n": n,
        }
        if groups is not None:
            ok = restored(assign, targets, groups) if n else np.zeros((0, 16), bool)
            m["restored_accuracy"] = float(ok.all(axis=1).mean()) if n else None
            m["restored_tile_accuracy"] = float(ok.mean()) if n else None
        return m
    pred = outputs.argmax(-1) if n else np.zeros(0, np.int64)
    m: dict[str, Any] = {"accuracy": float((pred == targets).mean()) if n else None, "n": n}
    if task == "orient":
        flipped = np.array([c.startswith("A") for c in info["classes"]])  # MIRP: A = flipped
        m["flip_accuracy"] = float((flipped[pred] == flipped[targets]).mean()) if n else None
    return m


def chance_of(task: str, info: dict[str, Any]) -> dict[str, float]:
    """Chance per metric, from the dataset's TaskInfo (``chance_by_metric``), with fall-backs."""
    chance = dict(info.get("chance_by_metric") or {})
    if info.get("chance") is not None:
        chance.setdefault(info["metric"], info["chance"])
    if info["kind"] == "permutation":
        chance.setdefault("permutation_accuracy", 1 / math.factorial(16))
        chance.setdefault("tile_accuracy", 1 / 16)
        chance.setdefault("restored_accuracy", 1 / math.factorial(16))  # more where tiles repeat
    if task == "orient":
        chance.setdefault("flip_accuracy", 0.5)
    return chance


@torch.no_grad()
def predict(
    model: nn.Module, images: torch.Tensor, batch_size: int = 64, device: str = "cpu"
) -> np.ndarray:
    """Model outputs (float32 numpy) for uint8 images, in eval mode."""
    model.eval()
    outs = [
        model(images[i : i + batch_size].to(device).float() / 255).float().cpu()
        for i in range(0, len(images), batch_size)
    ]
    return torch.cat(outs).numpy() if outs else np.zeros((0,))


# --- the model folder --------------------------------------------------------------------------


def save_task_model(
    folder: Path,
    *,
    task: str,
    info: dict[str, Any],
    head: nn.Module,
    encoder_dir: str,
    image_size: int,
) -> None:
    """``head.safetensors`` + ``model.json``; ``encoder_dir`` is relative to ``folder``."""
    from safetensors.torch import save

    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    atomic_write_bytes(folder / "head.safetensors", save(state))
    meta = {
        "format": MODEL_FORMAT,
        "version": 1,
        "task": task,
        "task_info": info,
        "head": head.spec(),
        "encoder": encoder_dir,
        "image_size": image_size,
    }
    atomic_write_json(folder / "model.json", meta)


def load_task_model(folder: Path, device: str = "cpu") -> tuple[ProbeModel, dict[str, Any]]:
    """A saved task model (encoder + head, eval mode) and its model.json."""
    folder = Path(folder)
    meta, encoder_dir = read_task_meta(folder, MODEL_FORMAT)  # checked: no traceback, no escape
    encoder = load_encoder(encoder_dir, device)
    spec = meta["head"]
    try:
        head = create_head(spec["name"], **spec["kwargs"])
        head.load_state_dict(read_state_dict(folder / "head.safetensors"))
    except (TypeError, KeyError, RuntimeError) as exc:  # unknown head/options, tensors unfit
        raise ValueError(
            f"{folder / 'model.json'}: head does not load ({first_line(exc)})"
        ) from None
    kind = meta["task_info"]["kind"]
    return ProbeModel(encoder, head, kind).to(device).eval(), meta


# --- transfer ----------------------------------------------------------------------------------


def _check_out(out: Path | None, model: Path, data: Path) -> None:
    """``out``'s results.json must not replace the model's own (nor land in the dataset)."""
    if out is not None:
        check_disjoint(Path(out), {"--model": model, "--data": data})


def evaluate_probe(
    model: Path,
    data: Path,
    out: Path | None = None,
    *,
    split: str = "test",
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, Any]:
    """Zero-shot transfer: the run folder ``model``'s task models on dataset ``data``.

    ``split`` is ``train``/``val``/``test`` or ``all``. Writes ``results.json`` and
    ``predictions/<task>.jsonl`` into ``out`` when given; returns the results.
    """
    model, data = Path(model), Path(data)
    _check_out(out, model, data)
    run = _read_run(model)
    splits = list(SPLITS) if split == "all" else [split]
    if not set(splits) <= set(SPLITS):
        raise ValueError(f"split must be train, val, test or all, got {split!r}")
    data_tasks = probe_info(data)["tasks"]
    res: dict[str, Any] = {
        "format": RESULTS_FORMAT,
        "version": 1,
        "kind": "transfer",
        "model": str(model),
        "source_data": run.get("data"),
        "data": str(data),
        "data_name": data.name,
        "splits": splits,
        **{k: run.get(k) for k in ("encoder", "head", "frozen", "mode", "seed")},
        "tasks": {},
        "skipped": {},
    }
    preds: dict[str, list[dict]] = {}
    for task_dir in sorted(p for p in (model / "models").glob("*") if (p / "model.json").is_file()):
        task = task_dir.name
        if task not in data_tasks:
            res["skipped"][task] = "not in the target dataset"
            continue
        net, meta = load_task_model(task_dir, device)
        src, dst = meta["task_info"], data_tasks[task]
        if src["kind"] != dst["kind"]:
            res["skipped"][task] = f"kind {src['kind']} != {dst['kind']}"
            continue
        entry: dict[str, Any] = {
            "level": dst["level"],
            "kind": dst["kind"],
            "chance": chance_of(task, dst),
        }
        rows = preds.setdefault(task, [])
        for sp in splits:
            entry[sp], split_rows = _transfer_split(
                net, meta, dst, data, task, sp, batch_size, device
            )
            rows += split_rows
        res["tasks"][task] = entry
    if out is not None:
        _write_transfer(Path(out), res, preds)
    return res


def _write_transfer(out: Path, res: dict[str, Any], preds: dict[str, list[dict]]) -> None:
    for task, rows in preds.items():
        atomic_write_jsonl(out / "predictions" / f"{task}.jsonl", rows)
    atomic_write_json(out / "results.json", res)


def _read_run(model: Path) -> dict[str, Any]:
    run_path = model / "results.json"
    if not run_path.is_file():
        raise ValueError(f"{model}: no results.json (not a probe training run)")
    return json.loads(run_path.read_text())


def _transfer_split(
    net: ProbeModel,
    meta: dict[str, Any],
    dst: dict[str, Any],
    data: Path,
    task: str,
    sp: str,
    batch_size: int,
    device: str,
) -> tuple[dict[str, Any], list[dict]]:
    """A task model's metrics on one split of ``data`` (task info ``dst``), its prediction rows."""
    src = meta["task_info"]
    samples = load_probe_task(data, task, sp)
    targets, keep = encode_targets(samples, dst, src.get("classes"))
    kept = [s for s, k in zip(samples, keep, strict=True) if k]
    outputs = predict(net, load_images(kept, meta["image_size"]), batch_size, device)
    y = targets[torch.from_numpy(keep)].numpy()
    groups = tile_groups(kept) if src["kind"] == "permutation" else None
    metrics = {**task_metrics(task, src, outputs, y, groups), "n_unmapped": int((~keep).sum())}
    rows = [
        {"id": s.id, "split": sp, "target": t.tolist(), "output": o.tolist()}
        for s, t, o in zip(kept, y, outputs, strict=True)
    ]
    return metrics, rows
