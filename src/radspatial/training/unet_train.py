"""Training of the ``unet`` localizer on a dataset made with ``--export-masks`` (evaluation:
:mod:`radspatial.training.unet_eval`).

Data: the RQ1 plain images (their PNG is the shown frame) and ``masks/<base_name>.png``.
Split: by case when the dataset has several cases; with one case, by slice, as one contiguous
block of slices (seeded start), so the held-out slices are not interleaved with nearly identical
training neighbours; a slice is never in both parts. Classes: background 0 + every label id in the
training masks (optionally the ``max_classes`` most frequent); other ids count as background.
Augmentation: one of the 8 rotation/flip variants per sample (the dihedral group MIRP draws its
views from), identically on image and mask, plus a mild gain/offset jitter. Loss: MONAI
DiceCELoss. The last epoch's weights are kept: the validation split is never used to select.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.core.io import atomic_write_json, sha256_file
from radspatial.core.modality import modality_of
from radspatial.core.runtime import keyed_rng
from radspatial.core.safepath import check_disjoint
from radspatial.nets import unet
from radspatial.nets.unet_config import MAX_SIZE
from radspatial.training.unet_eval import evaluate_unet

FORMAT = "radspatial-unet"


@dataclass(frozen=True)
class TrainConfig:
    """Defaults measured on the bundled CT (docs/unet.md): 150 epochs at 128 px train in ~8 min
    on 2 busy cores; 60 epochs at 256 px took 17 min and stayed far from converged."""

    epochs: int = 150
    size: int = 128  # network input; predictions are resampled back to the image's pixels
    batch_size: int = 8
    lr: float = 2e-3
    seed: int = 0
    channels: tuple[int, ...] = (16, 32, 64, 128)
    num_res_units: int = 1
    val_fraction: float = 0.2
    device: str = "cpu"
    max_classes: int | None = None
    jitter: float = 0.1  # gain in 1 +- jitter, offset in +- jitter (input scaled to [-1, 1])
    threads: int | None = None  # torch CPU threads while training; None: torch's default

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch_size must be >= 1")
        if not 16 <= self.size <= MAX_SIZE or self.size % 2 ** (len(self.channels) - 1):
            raise ValueError(
                f"--size {self.size} must be in 16..{MAX_SIZE} px and divisible by the U-Net "
                f"strides ({2 ** (len(self.channels) - 1)})"
            )
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.max_classes is not None and self.max_classes < 1:
            raise ValueError("max_classes must be >= 1 (foreground classes) or None")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["channels"] = list(self.channels)
        return d


def class_map(
    masks: list[np.ndarray], names: dict[int, str], max_classes: int | None
) -> list[tuple[int, str]]:
    """[(0, "background"), (label id, name), ...]: ids by slice frequency, capped, then sorted."""
    slices, pixels = Counter(), Counter()
    for m in masks:
        ids, counts = np.unique(m, return_counts=True)
        for i, c in zip(ids.tolist(), counts.tolist(), strict=True):
            if i:
                slices[i] += 1
                pixels[i] += c
    ranked = sorted(slices, key=lambda i: (-slices[i], -pixels[i], i))
    kept = sorted(ranked[:max_classes] if max_classes else ranked)
    return [(0, "background")] + [(i, names.get(i, f"label_{i}")) for i in kept]


def check_mask_ids(
    data: Path, items: list[unet.SliceItem], masks: list[np.ndarray], names: dict[int, str]
) -> None:
    """ValueError naming the mask file whose label id no table of the dataset names (65535 in
    a mask of 1..117): a class would be trained on it under a made-up name."""
    for item, mask in zip(items, masks, strict=True):
        unknown = sorted(set(np.unique(mask).tolist()) - set(names) - {0})
        if unknown:
            shown = ", ".join(map(str, unknown[:5])) + (" ..." if len(unknown) > 5 else "")
            raise ValueError(
                f"{Path(data) / item.mask}: label id(s) {shown} have no name in the dataset's "
                "label table (dataset.json); not a structure to train on"
            )


def class_lut(classes: list[tuple[int, str]], max_id: int) -> np.ndarray:
    lut = np.zeros(max(max_id, max(i for i, _ in classes)) + 1, np.int64)
    for index, (label_id, _) in enumerate(classes):
        lut[label_id] = index
    return lut


def split_items(
    items: list[unet.SliceItem], val_fraction: float, seed: int
) -> tuple[list[unet.SliceItem], list[unet.SliceItem], dict[str, Any]]:
    """By case when there are several cases, else one contiguous block of slices (see module)."""
    rng = keyed_rng(seed, "unet-split")
    cases = sorted({it.case_id for it in items})
    if val_fraction <= 0:
        return list(items), [], {"by": "none"} | _names(list(items), [])
    if len(cases) > 1:
        n_val = min(max(round(val_fraction * len(cases)), 1), len(cases) - 1)
        val_cases = {cases[i] for i in rng.permutation(len(cases))[:n_val]}
        val = [it for it in items if it.case_id in val_cases]
        train = [it for it in items if it.case_id not in val_cases]
        return train, val, {"by": "case", "val_cases": sorted(val_cases)} | _names(train, val)
    ordered = sorted(items, key=lambda it: it.slice_index)
    n_val = min(max(round(val_fraction * len(ordered)), 1), len(ordered) - 1)
    start = int(rng.integers(0, len(ordered) - n_val + 1))
    val = ordered[start : start + n_val]
    train = ordered[:start] + ordered[start + n_val :]
    block = [val[0].slice_index, val[-1].slice_index] if val else []
    return train, val, {"by": "slice-block", "val_slice_range": block} | _names(train, val)


def _names(train: list[unet.SliceItem], val: list[unet.SliceItem]) -> dict[str, list[str]]:
    return {"train": [it.base_name for it in train], "val": [it.base_name for it in val]}


@dataclass(frozen=True)
class AugParams:
    quarter_turns: int  # 0..3 counter-clockwise
    flip: bool  # horizontal flip before the turn (with the turns: all 8 variants)
    gain: float
    offset: float


def make_params(rng: np.random.Generator, jitter: float) -> AugParams:
    return AugParams(
        quarter_turns=int(rng.integers(4)),
        flip=bool(rng.integers(2)),
        gain=float(1.0 + rng.uniform(-jitter, jitter)),
        offset=float(rng.uniform(-jitter, jitter)),
    )


def apply_aug(x: Any, y: Any, p: AugParams) -> tuple[Any, Any]:
    """The deterministic half: same geometry on image (1, S, S) and class map (1, S, S)."""
    import torch

    if p.flip:
        x, y = torch.flip(x, dims=(-1,)), torch.flip(y, dims=(-1,))
    x = torch.rot90(x, p.quarter_turns, dims=(-2, -1))
    y = torch.rot90(y, p.quarter_turns, dims=(-2, -1))
    return x * p.gain + p.offset, y


def _tensors(
    data: Path, items: list[unet.SliceItem], lut: np.ndarray, size: int
) -> tuple[Any, Any]:
    import torch

    xs, ys = [], []
    for item in items:
        image, mask = unet.load_pair(data, item)
        xs.append(torch.from_numpy(unet.to_gray(image))[None, None])
        ys.append(torch.from_numpy(lut[mask])[None, None])  # lut covers every training id
    x = torch.cat([unet.network_input(t, size) for t in xs])
    y = torch.cat([unet.resize_labels(t, size) for t in ys])
    return x, y


def _fit(net: Any, x: Any, y: Any, config: TrainConfig, progress: bool) -> list[float]:
    import torch
    from monai.losses import DiceCELoss

    from radspatial.core.progress import Progress

    rng = keyed_rng(config.seed, "unet-train")
    steps = math.ceil(len(x) / config.batch_size)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=config.epochs * steps)
    loss_fn = DiceCELoss(to_onehot_y=True, softmax=True, batch=True)
    net.train()
    history: list[float] = []
    bar = Progress(config.epochs, "agent train", "epoch", enabled=progress)
    for _ in range(config.epochs):
        order, total = rng.permutation(len(x)), 0.0
        for start in range(0, len(x), config.batch_size):
            pairs = [
                apply_aug(x[i], y[i], make_params(rng, config.jitter))
                for i in order[start : start + config.batch_size]
            ]
            xb = torch.stack([p[0] for p in pairs]).to(config.device)
            yb = torch.stack([p[1] for p in pairs]).to(config.device)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(pairs)
        history.append(total / len(x))
        bar.note = f"loss {history[-1]:.4f}"
        bar.update()
    bar.close()
    net.eval()
    return history


def _data_source(data: Path) -> dict[str, Any]:
    cases = unet.dataset_cases(data)
    keys = ("case_id", "ct", "seg", "ct_sha256", "seg_sha256", "labels", "grouping", "modality")
    return {
        "path": str(Path(data).resolve()),
        "manifest_sha256": sha256_file(Path(data) / "manifest.jsonl"),
        "cases": [{k: c.get(k) for k in keys} for c in cases],
    }


def train_unet(
    data: Path, out: Path, config: TrainConfig = TrainConfig(), *, progress: bool = True
) -> dict[str, Any]:
    """Train on ``data`` into ``out``; return the validation metrics (also out/metrics.json).

    Example: ``train_unet(Path("ds"), Path("runs/unet"), TrainConfig(epochs=40))``.
    """
    import monai
    import torch

    data, out = Path(data), Path(out)
    check_disjoint(out, {"--data": data})  # the model folder must not land in the dataset
    items = unet.read_slices(data)
    train, val, split = split_items(items, config.val_fraction, config.seed)
    masks = [unet.load_pair(data, it)[1] for it in train]
    names = unet.label_names(data, items)
    check_mask_ids(data, train, masks, names)
    classes = class_map(masks, names, config.max_classes)
    lut = class_lut(classes, max(int(m.max()) for m in masks))
    x, y = _tensors(data, train, lut, config.size)
    arch = unet.architecture(len(classes), config.channels, config.num_res_units)
    deterministic, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    started = time.perf_counter()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_num_threads(config.threads or threads)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            net = unet.build_model(arch).to(config.device)
        history = _fit(net, x, y, config, progress)
        used_threads = torch.get_num_threads()
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    unet.save_weights(net, out)
    atomic_write_json(
        out / unet.CONFIG,
        {
            **unet.config_head(FORMAT, arch, classes, config),
            "data": _data_source(data),
            "modalities": sorted(
                {modality_of(c.get("modality")) for c in unet.dataset_cases(data)}
            ),
            "split": split,
            "weights": {"file": unet.WEIGHTS, "sha256": sha256_file(out / unet.WEIGHTS)},
            "training": {
                "seconds": round(seconds, 1),
                "threads": used_threads,
                "loss_per_epoch": [round(v, 5) for v in history],
            },
            "versions": {"torch": torch.__version__, "monai": monai.__version__},
        },
    )
    metrics = evaluate_unet(out, data, split="val", device=config.device)
    atomic_write_json(out / unet.METRICS, metrics)
    return metrics
