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
  crops: they would change orient/relpos/symmetry/localize targets and the permutation.
- Losses: cross-entropy (classification; per tile for the permutation), mean Euclidean
  distance (localize, in normalised coordinates).

Layout of ``out``: ``results.json`` (rewritten after every task), ``encoder/`` (the frozen
encoder, once), ``models/<task>/`` (see :mod:`radspatial.probes.evaluate`).
"""

from __future__ import annotations

import contextlib
import math
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from radspatial.core.io import atomic_write_json
from radspatial.probes.data import load_probe_task, probe_info
from radspatial.probes.encoders import Encoder, Features, create_encoder, load_encoder, save_encoder
from radspatial.probes.evaluate import (
    RESULTS_FORMAT,
    SPLITS,
    ProbeModel,
    chance_of,
    encode_targets,
    load_images,
    out_shape,
    predict,
    save_task_model,
    task_metrics,
)
from radspatial.probes.heads import create_head

CACHE_BUDGET_BYTES = 2 << 30  # frozen features above this are recomputed per batch instead


@dataclass(frozen=True)
class TrainConfig:
    encoder: str
    head: str
    frozen: str | None = None
    epochs: int = 30
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.05
    schedule: str = "cosine"  # cosine | constant
    warmup: float = 0.05  # fraction of the steps
    jitter: float = 0.1  # finetuning only: gain 1 +- jitter, offset +- jitter / 2
    seed: int = 0
    device: str = "cpu"
    image_size: int | None = None  # None: the encoder's default
    encoder_kwargs: dict[str, Any] | None = None  # more create_encoder options (e.g. width)
    threads: int | None = None  # torch CPU threads while training (None: leave as is)
    task_epochs: dict[str, int] | None = None  # task -> epochs, overriding ``epochs``

    def epochs_for(self, task: str) -> int:
        return (self.task_epochs or {}).get(task, self.epochs)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError("epochs and batch_size must be >= 1 and lr > 0")
        if any(int(e) < 1 for e in (self.task_epochs or {}).values()):
            raise ValueError(f"task_epochs must be >= 1, got {self.task_epochs}")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule must be cosine or constant, got {self.schedule!r}")

    def encoder_options(self) -> dict[str, Any]:
        kw = dict(self.encoder_kwargs or {})
        if self.image_size:
            kw["image_size"] = self.image_size
        return kw


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
    results: dict[str, Any] = {
        "format": RESULTS_FORMAT,
        "version": 1,
        "kind": "train",
        "data": str(data),
        "data_name": data.name,
        "encoder": encoder,
        "head": head,
        "frozen": cfg.frozen,
        "mode": "finetuned" if cfg.frozen is None else "frozen",
        "seed": seed,
        "config": asdict(cfg),
        "versions": _versions(),
        "tasks": {},
        "skipped": {},
    }
    for task in names:
        samples = {sp: load_probe_task(data, task, sp) for sp in SPLITS}
        if not samples["train"]:
            results["skipped"][task] = "no training samples"
        else:
            with _threads(cfg.threads):
                entry = _train_task(cfg, task, all_tasks[task], samples, shared, out, progress)
            results["tasks"][task] = entry
        results["wall_s"] = round(time.perf_counter() - t0, 2)
        atomic_write_json(out / "results.json", results)
    return results


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    # On a shared, loaded CPU, OpenMP with as many threads as cores was 30x slower than one
    # thread (docs/probes_results.md), hence the option.
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


@torch.no_grad()
def extract(encoder: Encoder, images: torch.Tensor, batch_size: int, device: str) -> Features:
    """Frozen features of uint8 images, stored as float16 on the CPU."""
    pooled, tokens = [], []
    for i in range(0, len(images), batch_size):
        f = encoder(images[i : i + batch_size].to(device).float() / 255)
        pooled.append(f.pooled.half().cpu())
        tokens.append(f.tokens.half().cpu())
    return Features(torch.cat(pooled), torch.cat(tokens))


def loss_fn(kind: str, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if kind == "regression":
        return ((outputs - targets).pow(2).sum(-1) + 1e-8).sqrt().mean()
    if kind == "permutation":
        return nn.functional.cross_entropy(
            outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1)
        )
    return nn.functional.cross_entropy(outputs, targets)


def lr_lambda(total: int, warmup: float, schedule: str):
    warm = max(1, round(total * warmup))

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        if schedule == "constant":
            return 1.0
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    return f


def task_seed(seed: int, task: str) -> int:
    return seed * 1000 + zlib.crc32(task.encode()) % 1000


def _train_task(
    cfg: TrainConfig,
    task: str,
    info: dict[str, Any],
    samples: dict[str, list],
    shared: Encoder | None,
    out: Path,
    progress: bool,
) -> dict[str, Any]:
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    seed = task_seed(cfg.seed, task)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    enc = shared if shared is not None else create_encoder(cfg.encoder, **cfg.encoder_options())
    enc = enc.to(cfg.device)
    head = create_head(cfg.head, dim=enc.dim, grid=enc.grid, out_shape=out_shape(info)).to(
        cfg.device
    )
    model = ProbeModel(enc, head, info["kind"])
    images = {sp: load_images(samples[sp], enc.image_size) for sp in SPLITS}
    targets = {sp: encode_targets(samples[sp], info)[0] for sp in SPLITS}
    feats: dict[str, Features] = {}
    t_feat = time.perf_counter()
    if shared is not None:
        per_image = (enc.grid[0] * enc.grid[1] + 1) * enc.dim * 2
        if per_image * sum(len(v) for v in images.values()) <= CACHE_BUDGET_BYTES:
            feats = {sp: extract(enc, images[sp], 64, cfg.device) for sp in SPLITS}
    feature_s = time.perf_counter() - t_feat

    def forward(sp: str, idx: torch.Tensor, train: bool) -> torch.Tensor:
        if feats:
            f = feats[sp]
            dev = cfg.device
            return model.readout(
                Features(f.pooled[idx].float().to(dev), f.tokens[idx].float().to(dev))
            )
        x = images[sp][idx].float() / 255
        if train and shared is None and cfg.jitter > 0:
            j = cfg.jitter
            gain = 1 + (torch.rand(len(x), 1, 1, 1, generator=gen) * 2 - 1) * j
            offset = (torch.rand(len(x), 1, 1, 1, generator=gen) - 0.5) * j
            x = (x * gain + offset).clamp(0, 1)
        x = x.to(cfg.device)
        if shared is not None:
            with torch.no_grad():
                f = enc(x)
            return model.readout(f)
        return model(x)

    n = len(targets["train"])
    bs = min(cfg.batch_size, n)
    steps = n // bs  # drop the last partial batch (batch norm and a steady step size)
    epochs = cfg.epochs_for(task)
    total = epochs * steps
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(total, cfg.warmup, cfg.schedule))
    bar = tqdm(
        total=total, desc=f"{task} {cfg.encoder}+{cfg.head}", unit="step", disable=not progress
    )
    t_train, losses = time.perf_counter(), []
    for _ in range(epochs):
        model.train()
        if shared is not None:
            enc.eval()
        order = torch.from_numpy(rng.permutation(n))
        for s in range(steps):
            idx = order[s * bs : (s + 1) * bs]
            loss = loss_fn(
                info["kind"], forward("train", idx, True), targets["train"][idx].to(cfg.device)
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    bar.close()
    train_s = time.perf_counter() - t_train

    model.eval()
    result: dict[str, Any] = {
        "level": info["level"],
        "kind": info["kind"],
        "metric": info["metric"],
        "chance": chance_of(task, info),
        "classes": info.get("classes"),
    }
    for sp in SPLITS:
        m = len(targets[sp])
        if feats and m:
            with torch.no_grad():
                chunks = [
                    forward(sp, torch.arange(i, min(i + 256, m)), False) for i in range(0, m, 256)
                ]
            outputs = torch.cat(chunks).cpu().numpy()
        else:
            outputs = predict(model, images[sp], 64, cfg.device)
        result[sp] = task_metrics(task, info, outputs, targets[sp].numpy())
    folder = out / "models" / task
    if shared is None:
        save_encoder(enc, folder)
    rel = "." if shared is None else "../../encoder"
    save_task_model(
        folder, task=task, info=info, head=head, encoder_dir=rel, image_size=enc.image_size
    )
    result["training"] = {
        "n": n,
        "epochs": epochs,
        "steps": total,
        "batch_size": bs,
        "images_per_s": round(total * bs / train_s, 2) if train_s > 0 else None,
        "train_s": round(train_s, 2),
        "feature_s": round(feature_s, 2) if feats else None,
        "first_loss": round(float(np.mean(losses[: max(1, steps)])), 5) if losses else None,
        "final_loss": round(float(np.mean(losses[-max(1, steps) :])), 5) if losses else None,
        "wall_s": round(time.perf_counter() - t0, 2),
        "params": {
            "encoder": sum(p.numel() for p in enc.parameters()),
            "head": sum(p.numel() for p in head.parameters()),
            "trainable": sum(p.numel() for p in params),
        },
        "image_size": enc.image_size,
    }
    return result


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    from radspatial.core.runtime import software_versions

    out = software_versions()
    for pkg in ("torch", "monai", "einops", "transformers", "safetensors"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    return out
