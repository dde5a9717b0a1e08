"""Training one probe task's model (see :mod:`radspatial.probes.train` for the choices).

``train_task`` builds the encoder + head from the task's seed, caches frozen features when they
fit ``CACHE_BUDGET_BYTES``, runs the optimisation loop, scores every split and saves the model.
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from radspatial.probes.encoders import Encoder, Features, create_encoder, save_encoder
from radspatial.probes.evaluate import (
    SPLITS,
    ProbeModel,
    chance_of,
    encode_targets,
    load_images,
    out_shape,
    predict,
    save_task_model,
    task_metrics,
    tile_groups,
)
from radspatial.probes.heads import create_head

if TYPE_CHECKING:
    from radspatial.probes.train_config import TrainConfig

CACHE_BUDGET_BYTES = 2 << 30  # frozen features above this are recomputed per batch instead


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


def slot_options(cfg: TrainConfig, info: dict[str, Any]) -> dict[str, Any]:
    """The permutation's heads read each tile's own region (``MLPOptions.per_slot``,
    ``TransformerOptions.per_slot``: tile tokens that attend to each other)."""
    if info["kind"] != "permutation" or not cfg.per_tile:
        return {}
    both = {"mlp_per_slot": True, "transformer_per_slot": True}
    return {"mlp": {"per_slot": True}, "transformer": {"per_slot": True}, "both": both}.get(
        cfg.head, {}
    )


def reshuffle_tiles(
    images: torch.Tensor,
    targets: torch.Tensor,
    gen: torch.Generator,
    grid: int = 4,
    dihedral: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shuffled crops (B, C, S, S) with their targets (B, grid * grid) -> the same crops in a
    fresh random tile order each, and the new targets (``perm[i]`` = original position of the
    tile shown at i, as ``render.shuffle_tiles``). S must be a multiple of ``grid``.
    ``dihedral``: each restored crop is first turned by a random one of the 8 rotations and
    mirror images of the square (a new organ shape; the targets follow the new crop)."""
    b, c, size, _ = images.shape
    t, k = size // grid, grid * grid
    tiles = images.reshape(b, c, grid, t, grid, t).permute(0, 2, 4, 1, 3, 5).reshape(b, k, c, t, t)
    rows = torch.arange(b)[:, None]
    original = torch.empty_like(tiles)
    original[rows, targets] = tiles  # shown tile i came from position targets[i]
    if dihedral:
        crops = original.reshape(b, grid, grid, c, t, t).permute(0, 3, 1, 4, 2, 5)
        crops = dihedral_views(crops.reshape(b, c, size, size), gen)
        original = crops.reshape(b, c, grid, t, grid, t).permute(0, 2, 4, 1, 3, 5)
        original = original.reshape(b, k, c, t, t)
    new = torch.argsort(torch.rand(b, k, generator=gen), dim=1)
    shown = original[rows, new].reshape(b, grid, grid, c, t, t).permute(0, 3, 1, 4, 2, 5)
    return shown.reshape(b, c, size, size), new


def dihedral_views(images: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """(B, C, S, S) -> each image turned by a random multiple of 90 degrees, then mirrored
    left-right with probability 1/2 (the 8 symmetries of the square, uniformly)."""
    view = torch.randint(0, 8, (len(images),), generator=gen)
    out = images.clone()
    for v in range(1, 8):
        sel = view == v
        if sel.any():
            x = torch.rot90(images[sel], v % 4, dims=(2, 3))
            out[sel] = x.flip(3) if v >= 4 else x
    return out


def task_seed(seed: int, task: str) -> int:
    return seed * 1000 + zlib.crc32(task.encode()) % 1000


def train_task(
    cfg: TrainConfig,
    task: str,
    info: dict[str, Any],
    samples: dict[str, list],
    shared: Encoder | None,
    out: Path,
    progress: bool,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    seed = task_seed(cfg.seed, task)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    enc = shared if shared is not None else create_encoder(cfg.encoder, **cfg.encoder_options())
    enc = enc.to(cfg.device)
    head = create_head(
        cfg.head, dim=enc.dim, grid=enc.grid, out_shape=out_shape(info), **slot_options(cfg, info)
    ).to(cfg.device)
    model = ProbeModel(enc, head, info["kind"])
    images = {sp: load_images(samples[sp], enc.image_size) for sp in SPLITS}
    targets = {sp: encode_targets(samples[sp], info)[0] for sp in SPLITS}
    t_feat = time.perf_counter()
    feats = _cached_features(enc, images, cfg.device) if shared is not None else {}
    feature_s = time.perf_counter() - t_feat
    fresh = info["kind"] == "permutation" and cfg.reshuffle and not feats  # needs the pixels
    inputs = _Inputs(model, images, feats, shared is not None, cfg.jitter, gen, cfg.device, fresh)
    inputs = replace(inputs, dihedral=fresh and cfg.dihedral)
    fit = _fit(cfg, task, info["kind"], inputs, targets["train"], rng, progress)

    model.eval()
    result: dict[str, Any] = {
        "level": info["level"],
        "kind": info["kind"],
        "metric": info["metric"],
        "chance": chance_of(task, info),
        "classes": info.get("classes"),
    }
    for sp in SPLITS:
        outputs = inputs.outputs(sp, len(targets[sp]))
        groups = tile_groups(samples[sp]) if info["kind"] == "permutation" else None
        result[sp] = task_metrics(task, info, outputs, targets[sp].numpy(), groups)
    folder = out / "models" / task
    if shared is None:
        save_encoder(enc, folder)
    rel = "." if shared is None else "../../encoder"
    save_task_model(
        folder, task=task, info=info, head=head, encoder_dir=rel, image_size=enc.image_size
    )
    result["training"] = {
        **fit.report(feature_s if feats else None),
        "wall_s": round(time.perf_counter() - t0, 2),
        "params": {
            "encoder": sum(p.numel() for p in enc.parameters()),
            "head": sum(p.numel() for p in head.parameters()),
            "trainable": fit.trainable,
        },
        "image_size": enc.image_size,
    }
    return result


def _cached_features(
    enc: Encoder, images: dict[str, torch.Tensor], device: str
) -> dict[str, Features]:
    """A frozen encoder's features of every split, or {} when they exceed the cache budget."""
    per_image = (enc.grid[0] * enc.grid[1] + 1) * enc.dim * 2
    if per_image * sum(len(v) for v in images.values()) <= CACHE_BUDGET_BYTES:
        return {sp: extract(enc, images[sp], 64, device) for sp in SPLITS}
    return {}


@dataclass(frozen=True, eq=False)
class _Inputs:
    """One task's model and its inputs per split: uint8 images, or cached frozen features."""

    model: ProbeModel
    images: dict[str, torch.Tensor]
    feats: dict[str, Features]
    frozen: bool
    jitter: float  # finetuning only, see TrainConfig
    gen: torch.Generator
    device: str
    reshuffle: bool = False  # permutation: a fresh tile order per training crop and step
    dihedral: bool = False  # with reshuffle: each crop also turned / mirrored at random

    def batch(self, idx: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A training step's outputs and targets (the targets of the tiles as reshuffled)."""
        if not self.reshuffle:
            return self.forward("train", idx, True), y[idx]
        x, y_new = reshuffle_tiles(
            self.images["train"][idx], y[idx], self.gen, dihedral=self.dihedral
        )
        return self._run(x, True), y_new

    def forward(self, sp: str, idx: torch.Tensor, train: bool) -> torch.Tensor:
        if self.feats:
            f = self.feats[sp]
            dev = self.device
            return self.model.readout(
                Features(f.pooled[idx].float().to(dev), f.tokens[idx].float().to(dev))
            )
        return self._run(self.images[sp][idx], train)

    def _run(self, images: torch.Tensor, train: bool) -> torch.Tensor:
        x = images.float() / 255
        if train and not self.frozen and self.jitter > 0:
            j = self.jitter
            gain = 1 + (torch.rand(len(x), 1, 1, 1, generator=self.gen) * 2 - 1) * j
            offset = (torch.rand(len(x), 1, 1, 1, generator=self.gen) - 0.5) * j
            x = (x * gain + offset).clamp(0, 1)
        x = x.to(self.device)
        if self.frozen:
            with torch.no_grad():
                f = self.model.encoder(x)
            return self.model.readout(f)
        return self.model(x)

    def outputs(self, sp: str, m: int) -> np.ndarray:
        """The (eval mode) model's outputs on the ``m`` samples of split ``sp``."""
        if self.feats and m:
            with torch.no_grad():
                chunks = [
                    self.forward(sp, torch.arange(i, min(i + 256, m)), False)
                    for i in range(0, m, 256)
                ]
            return torch.cat(chunks).cpu().numpy()
        return predict(self.model, self.images[sp], 64, self.device)


@dataclass(frozen=True)
class _Fit:
    n: int
    batch_size: int
    steps: int  # per epoch
    epochs: int
    losses: list[float]
    train_s: float
    trainable: int

    def report(self, feature_s: float | None) -> dict[str, Any]:
        """The ``training`` entry's counts, speed and losses (``feature_s``: frozen features)."""
        total, bs, train_s = self.epochs * self.steps, self.batch_size, self.train_s
        losses, k = self.losses, max(1, self.steps)
        return {
            "n": self.n,
            "epochs": self.epochs,
            "steps": total,
            "batch_size": bs,
            "images_per_s": round(total * bs / train_s, 2) if train_s > 0 else None,
            "train_s": round(train_s, 2),
            "feature_s": None if feature_s is None else round(feature_s, 2),
            "first_loss": round(float(np.mean(losses[:k])), 5) if losses else None,
            "final_loss": round(float(np.mean(losses[-k:])), 5) if losses else None,
        }


def _fit(
    cfg: TrainConfig,
    task: str,
    kind: str,
    inputs: _Inputs,
    y: torch.Tensor,
    rng: np.random.Generator,
    progress: bool,
) -> _Fit:
    """Train ``inputs.model`` on the training split's targets ``y``; the loss of every step."""
    from radspatial.core.progress import Progress

    model = inputs.model
    n = len(y)
    bs = min(cfg.batch_size, n)
    steps = n // bs  # drop the last partial batch (batch norm and a steady step size)
    epochs = cfg.epochs_for(task)
    total = epochs * steps
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(total, cfg.warmup, cfg.schedule))
    # a bar on a terminal, plain lines every few seconds when piped (no \r floods in logs)
    bar = Progress(total, f"{task} {cfg.encoder}+{cfg.head}", "step", enabled=progress)
    t_train, losses = time.perf_counter(), []
    for _ in range(epochs):
        model.train()
        if inputs.frozen:
            model.encoder.eval()
        order = torch.from_numpy(rng.permutation(n))
        for s in range(steps):
            idx = order[s * bs : (s + 1) * bs]
            out, target = inputs.batch(idx, y)
            loss = loss_fn(kind, out, target.to(cfg.device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            bar.note = f"loss {losses[-1]:.3f}"
            bar.update(1)
    bar.close()
    train_s = time.perf_counter() - t_train
    trainable = sum(p.numel() for p in params)
    return _Fit(n, bs, steps, epochs, losses, train_s, trainable)
