"""Training SPAR probes: one model (encoder + head) per task, seeded, with a results.json.

Choices:

- **One model per task.** Each task gets its own head and, when finetuned, its own encoder,
  initialised from the same per-task seed (``seed`` and the task name), so tasks never share
  gradients and a task's numbers do not depend on which other tasks ran.
- **Finetuned** (``frozen=None``): the encoder (random init; local weights for ``hf:``) is
  trained end to end with the head. **Frozen**: ``frozen`` is an encoder checkpoint folder or
  file written by :func:`encoders.save_encoder` (e.g. ``RUN/models/orient`` of a finetuned
  run), ``hf:<path>`` (the same string as ``encoder``), ``"pretrained"`` (the weights
  ``encoder`` comes with; ``hf:`` only) or ``"random"`` (the random init, a baseline). The
  encoder is put in eval mode with gradients off; its features are computed once per image and
  cached (float16) so only the head trains.
- ``task_epochs``: per-task epochs overriding ``epochs`` (e.g. ``{"relpos": 8}`` when relpos
  has several samples per slice and would otherwise dominate a run's time). The epochs a task
  ran are in its ``training`` entry.
- AdamW (weight decay 0.05), linear warm-up over the first 5% of steps then cosine decay (or
  constant); the last epoch's weights are kept (validation is reported, never used to select).
- Augmentation: only a mild per-image gain/offset jitter when finetuning. No flips, rotations or
  crops: they would change orient/relpos/symmetry/localize targets. The permutation alone
  can turn / mirror its restored crops (``dihedral``, opt-in; the targets follow the tiles).
- Losses: cross-entropy (classification; per tile for the permutation), mean Euclidean
  distance (localize, in normalised coordinates).

Layout of ``out``: ``results.json`` (rewritten after every task), ``encoder/`` (the frozen
encoder, once), ``models/<task>/`` (see :mod:`radspatial.probes.evaluate`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from radspatial.core.datafiles import DataFileError, read_json
from radspatial.core.errors import InputError
from radspatial.core.io import atomic_write_json
from radspatial.core.safepath import check_disjoint
from radspatial.probes.data import load_probe_task, probe_info
from radspatial.probes.encoders import Encoder, create_encoder, load_encoder, save_encoder
from radspatial.probes.evaluate import RESULTS_FORMAT, SPLITS
from radspatial.probes.fitting import train_task
from radspatial.probes.train_config import TrainConfig


def train_probe(
    data: Path,
    out: Path,
    *,
    encoder: str,
    head: str,
    frozen: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    epochs: int = 30,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """Train one probe per task of the dataset ``data`` into ``out``; returns results.json.

    ``options``: the other :class:`TrainConfig` fields (``image_size``, ``schedule``, ...).

    Example: ``train_probe(Path("probes"), Path("runs/rs-mlp"), encoder="resnet-small",
    head="mlp", tasks=["orient"], epochs=10)``.
    """
    frozen_s = None if frozen is None else str(frozen)
    cfg = TrainConfig(
        encoder, head, frozen_s, epochs, batch_size, lr, seed=seed, device=device, **options
    )
    data, out = Path(data), Path(out)
    frozen_dir = Path(frozen_s) if frozen_s and Path(frozen_s).exists() else None
    check_disjoint(out, {"--data": data, "--frozen": frozen_dir})  # out never in an input
    all_tasks = probe_info(data)["tasks"]
    names = list(tasks) if tasks else list(all_tasks)
    missing = [t for t in names if t not in all_tasks]
    if missing:
        raise ValueError(f"{data}: no task {', '.join(missing)}; it has {', '.join(all_tasks)}")
    t0 = time.perf_counter()
    shared = None
    if cfg.frozen is not None:
        torch.manual_seed(cfg.seed)
        shared = freeze(resolve_frozen(cfg)).to(cfg.device)
        save_encoder(shared, out / "encoder")
    results = _resumed(_results_head(cfg, data), out / "results.json")
    try:
        _train_tasks(cfg, data, out, names, all_tasks, shared, results, progress, t0)
    except BaseException:
        atomic_write_json(out / "results.json", {**results, "status": "interrupted"})
        raise
    results["status"] = "complete"
    atomic_write_json(out / "results.json", results)
    return results


def _resumed(head: dict[str, Any], path: Path) -> dict[str, Any]:
    """The results to extend: an earlier results.json of the same data and config keeps its
    tasks (a task trained again is replaced); one of another config is refused, not dropped."""
    if not path.exists():
        return head
    old = read_json(path, want=dict)
    same = all(old.get(k) == head[k] for k in ("data", "config", "encoder", "head", "frozen"))
    if not same:
        raise InputError(
            f"{path}: holds results of another probe training (data or config differ); "
            "choose another --out"
        )
    if not isinstance(old.get("tasks"), dict) or not isinstance(old.get("skipped"), dict):
        raise DataFileError(f"{path}: 'tasks' and 'skipped' must be objects")
    return {**head, "tasks": old["tasks"], "skipped": old["skipped"]}


def _train_tasks(cfg, data, out, names, all_tasks, shared, results, progress, t0) -> None:
    """Each task in turn; results.json is rewritten (status running) after every one."""
    results["status"] = "running"
    atomic_write_json(out / "results.json", results)
    for task in names:
        samples = {sp: load_probe_task(data, task, sp) for sp in SPLITS}
        if not samples["train"]:
            results["skipped"][task] = "no training samples"
        else:
            with _threads(cfg.threads):
                entry = train_task(cfg, task, all_tasks[task], samples, shared, out, progress)
            results["tasks"][task] = entry
        results["wall_s"] = round(time.perf_counter() - t0, 2)
        atomic_write_json(out / "results.json", results)


def _results_head(cfg: TrainConfig, data: Path) -> dict[str, Any]:
    """results.json before any task: the run's data, model, config and software versions."""
    return {
        "format": RESULTS_FORMAT,
        "version": 1,
        "kind": "train",
        "data": str(data),
        "data_name": data.name,
        "encoder": cfg.encoder,
        "head": cfg.head,
        "frozen": cfg.frozen,
        "mode": "finetuned" if cfg.frozen is None else "frozen",
        "seed": cfg.seed,
        "config": asdict(cfg),
        "versions": _versions(),
        "tasks": {},
        "skipped": {},
    }


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    # On a shared, loaded CPU, OpenMP with as many threads as cores was 30x slower than one
    # thread (benchmarks/RESULTS.md, SPAR probes), hence the option.
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resolve_frozen(cfg: TrainConfig) -> Encoder:
    """The encoder named by ``cfg.frozen`` (see the module docstring), not yet frozen."""
    spec, name = str(cfg.frozen), cfg.encoder
    kw = cfg.encoder_options()
    if spec == "random":
        return (
            create_encoder(name, pretrained=False, **kw)
            if name.startswith("hf:")
            else create_encoder(name, **kw)
        )
    if spec == "pretrained" or spec.startswith("hf:"):
        if not name.startswith("hf:") or spec not in ("pretrained", name):
            raise ValueError(
                f"frozen={spec!r} needs encoder to be the same hf:<path> (got {name!r})"
            )
        return create_encoder(name, **kw)
    enc = load_encoder(spec)
    if enc.name != name:
        raise ValueError(f"{spec}: the checkpoint is a {enc.name!r} encoder, not {name!r}")
    if cfg.image_size and cfg.image_size != enc.image_size:
        raise ValueError(
            f"{spec}: the checkpoint takes {enc.image_size} px, not image_size {cfg.image_size}"
        )
    return enc


def freeze(encoder: Encoder) -> Encoder:
    encoder.requires_grad_(False)
    return encoder.eval()


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    from radspatial.core.runtime import software_versions

    out = software_versions()
    for pkg in ("torch", "monai", "einops", "transformers", "safetensors"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    return out
