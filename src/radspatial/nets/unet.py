"""The U-Net the ``unet`` and ``organs`` localizers run: a small 2D U-Net (MONAI) segments the
shown slice, refs -> centroids (the ``unet`` localizer itself: agent/localizers/unet/).

A model folder (written by :func:`radspatial.training.unet_train.train_unet`) holds
``model.safetensors`` (a plain state dict), ``config.json`` (architecture, class map, input size,
training config, data source) and ``metrics.json``. Inference: grayscale -> resize to ``size``
-> softmax -> bilinear back to the original pixels -> argmax. A ref's label id comes from its
marker text (numbers, letters) or its name; a dot's colour names no structure, so dots -> None.
The answer is the centroid of the largest 8-connected component of that class (None when the
class is absent or only specks under :data:`MIN_AREA_PX` pixels remain), with
score = mean softmax probability of the class in the component (``organs``: over its core,
``organs_checks.core_prob``) x ``min(1, area / tiny)``, ``tiny`` = :data:`TINY_AREA_FRACTION` of
the image area but at least :data:`TINY_MIN_PX`, so a speck cannot carry a confident answer.
torch and monai are imported inside functions; inference runs :mod:`radspatial.nets.unet_torch`.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from radspatial.core.errors import first_line
from radspatial.core.io import read_jsonl
from radspatial.core.labels import BUILTIN_TABLES, composite_ids, load_table, normalize_name
from radspatial.core.modality import DEFAULT_MODALITY, modality_of
from radspatial.core.safepath import inside
from radspatial.imaging.markers import marker_label
from radspatial.nets.unet_config import CONFIG, WEIGHTS, read_config, read_pixels
from radspatial.questions.records import Context, Found, Ref

if TYPE_CHECKING:
    import torch

METRICS = "metrics.json"
TINY_AREA_FRACTION = 3e-4
TINY_MIN_PX = 16
MIN_AREA_PX = 8  # smaller components are argmax noise, not a structure
_EIGHT = np.ones((3, 3), bool)


def architecture(n_classes: int, channels: Sequence[int], num_res_units: int) -> dict[str, Any]:
    """The JSON description of the network that :func:`build_model` turns into a module."""
    if len(channels) < 2:
        raise ValueError(f"channels needs >= 2 levels, got {tuple(channels)}")
    return {
        "name": "monai.networks.nets.UNet",
        "spatial_dims": 2,
        "in_channels": 1,
        "out_channels": int(n_classes),
        "channels": [int(c) for c in channels],
        "strides": [2] * (len(channels) - 1),
        "num_res_units": int(num_res_units),
    }


def build_model(arch: dict[str, Any]) -> torch.nn.Module:
    """A randomly initialised MONAI UNet (seed torch before calling for a reproducible init)."""
    from monai.networks.nets import UNet

    if arch.get("name") != "monai.networks.nets.UNet":
        raise ValueError(f"unknown architecture {arch.get('name')!r}")
    return UNet(
        spatial_dims=arch["spatial_dims"],
        in_channels=arch["in_channels"],
        out_channels=arch["out_channels"],
        channels=tuple(arch["channels"]),
        strides=tuple(arch["strides"]),
        num_res_units=arch["num_res_units"],
    )


def to_gray(image: np.ndarray) -> np.ndarray:
    """RGB or gray uint8 image -> float32 (H, W) in [0, 1] (channel mean)."""
    arr = np.asarray(image)
    if arr.ndim == 3:
        arr = arr[:, :, :3].mean(axis=2)
    if arr.ndim != 2:
        raise ValueError(f"expected an (H, W) or (H, W, C) image, got shape {arr.shape}")
    return (arr.astype(np.float32) / 255.0).astype(np.float32)


def network_input(gray: torch.Tensor, size: int) -> torch.Tensor:
    """(N, 1, H, W) gray in [0, 1] -> (N, 1, size, size) in [-1, 1]; the one path for train
    and inference, so both see identically resampled pixels."""
    import torch.nn.functional as F

    if tuple(gray.shape[-2:]) != (size, size):
        gray = F.interpolate(
            gray, size=(size, size), mode="bilinear", align_corners=False, antialias=True
        )
    return gray * 2.0 - 1.0


def resize_labels(labels: torch.Tensor, size: int) -> torch.Tensor:
    """(N, 1, H, W) integer class map -> (N, 1, size, size), nearest neighbour."""
    import torch.nn.functional as F

    if tuple(labels.shape[-2:]) == (size, size):
        return labels
    out = F.interpolate(labels.float(), size=(size, size), mode="nearest-exact")
    return out.round().long()


@dataclass(frozen=True)
class Prediction:
    probs: np.ndarray  # (C, H, W) float32 softmax, original image pixels
    labels: np.ndarray  # (H, W) class index (argmax)


class UNetModel:
    """A loaded model folder: network, class map, a lock for thread-safe inference."""

    def __init__(self, model_dir: Path, device: str = "cpu") -> None:
        from safetensors.torch import load_file

        from radspatial.nets.unet_torch import torch_unet  # answering imports no MONAI

        self.model_dir = Path(model_dir)
        self.config = read_config(self.model_dir)
        self.size = int(self.config["size"])
        self.classes: list[tuple[int, str]] = [
            (int(c["label_id"]), str(c["name"])) for c in self.config["classes"]
        ]
        self.device = device
        net = torch_unet(self.config["architecture"]) or build_model(self.config["architecture"])
        weights = self.model_dir / WEIGHTS
        try:
            net.load_state_dict(load_file(str(weights), device="cpu"))
        except Exception as exc:  # not safetensors, or tensors that do not fit config.json
            raise ValueError(f"{weights}: does not fit {CONFIG} ({first_line(exc)})") from None
        self.net = net.to(device).eval()
        self._lock = threading.Lock()
        real = (self.config.get("data") or {}).get("real") or {}
        self.plausibility: dict[int, dict] = {  # organs: training ranges per label id
            int(k): v for k, v in (real.get("plausibility") or {}).items()
        }
        self.composites = composites_of(self.classes)  # whole's label id -> parts' classes
        self.levels: dict | None = real.get("levels")  # what the real training images covered
        # every name an answer may carry: the classes and the wholes known by their parts
        self._names = dict(self.classes) | {w[0]: n for n, w in composite_ids().items()}

    def class_of(self, label_id: int) -> int | None:
        for index, (lid, _) in enumerate(self.classes):
            if lid == label_id and index > 0:
                return index
        return None

    def id_of_name(self, name: str) -> int | None:
        key = normalize_name(name)
        ids = [lid for lid, n in self.classes[1:] if n == key]
        return ids[0] if ids else None

    def unseen_in_real(self, label_id: int) -> str | None:
        """Why a structure this model learned only from drawn slices (label maps, phantoms)
        is not answered, or None: a model folder that records its levels
        (``data.real.levels``) answers only what its real training images showed."""
        if not self.levels or "structures_real" not in self.levels:
            return None
        name = self._names.get(label_id)
        if name is None or name in self.levels["structures_real"]:
            return None
        span = self.levels.get("span") or ["?", "?"]
        return (
            f"not seen in real texture: {name} is only in drawn training slices "
            f"(real training levels {span[0]}-{span[1]})"
        )

    def composite_id(self, name: str) -> int | None:
        """The label id of a structure this model knows only as its parts (``heart`` for a
        network trained on TotalSegmentator v1's five heart structures), else None."""
        whole = composite_ids().get(normalize_name(name))
        return whole[0] if whole and whole[0] in self.composites else None

    def predict(self, image: np.ndarray) -> Prediction:
        import torch
        import torch.nn.functional as F

        gray = to_gray(image)
        h, w = gray.shape
        with self._lock, torch.inference_mode():
            x = network_input(torch.from_numpy(gray)[None, None], self.size).to(self.device)
            logits = self.net(x).float()
            logits = F.interpolate(logits, size=(h, w), mode="bilinear", align_corners=False)
            probs = torch.softmax(logits, dim=1)[0].cpu().numpy()
        return Prediction(probs, probs.argmax(axis=0))


def composites_of(classes: list[tuple[int, str]]) -> dict[int, tuple[int, ...]]:
    """label id of a whole the classes lack -> the class indices of its parts (at least two
    of them present): :data:`radspatial.core.labels.COMPOSITES`."""
    from radspatial.core.labels import COMPOSITES, composite_ids

    names = {n: i for i, (_, n) in enumerate(classes) if i > 0}
    out: dict[int, tuple[int, ...]] = {}
    for whole, (label_id, _) in composite_ids().items():
        parts = tuple(names[p] for p in COMPOSITES[whole] if p in names)
        if whole not in names and len(parts) >= 2:
            out[label_id] = parts
    return out


def config_head(
    fmt: str, arch: dict[str, Any], classes: Sequence[tuple[int, str]], config: Any
) -> dict[str, Any]:
    """The fields every trained model's config.json starts with (unet and organs training):
    format, architecture, classes, input size and preprocessing, the training config."""
    return {
        "format": fmt,
        "format_version": 1,
        "architecture": arch,
        "classes": [{"index": k, "label_id": i, "name": n} for k, (i, n) in enumerate(classes)],
        "size": config.size,
        "input": "mean(RGB)/255, bilinear (antialiased) to size x size, scaled to [-1, 1]",
        "train_config": config.to_json(),
        "seed": config.seed,
    }


def save_weights(net: Any, out: Path, *, half: bool = False) -> None:
    """``out/model.safetensors`` (written aside, then renamed): the state dict on the CPU, as
    float16 when ``half`` (organs: half the package size; loading casts back to float32)."""
    from safetensors.torch import save_file

    tmp = out / f".{WEIGHTS}.tmp"
    state = {k: v.detach().cpu() for k, v in net.state_dict().items()}
    state = {k: (v.half() if half else v).contiguous() for k, v in state.items()}
    save_file(state, str(tmp))
    os.replace(tmp, out / WEIGHTS)


def trained_modalities(config: dict[str, Any]) -> tuple[str, ...]:
    """The modalities a model folder was trained on (``modalities`` in config.json; models
    written before MR existed, the shipped organs model included, were trained on CT)."""
    return tuple(config.get("modalities") or (DEFAULT_MODALITY,))


def modality_refusal(config: dict[str, Any], context: Context) -> str | None:
    """Why a model must not look at this image ("trained on CT", on an MR item), else None."""
    modality = str(modality_of(context.extra.get("modality"))).upper()
    trained = trained_modalities(config)
    return (
        None if modality in trained else f"localizer trained on {'/'.join(trained)}, not {modality}"
    )


@dataclass(frozen=True)
class SliceItem:
    case_id: str
    slice_index: int
    base_name: str
    image: Path  # relative to the dataset folder
    mask: Path
    rows: tuple[dict, ...] = field(default=(), compare=False, hash=False)  # its RQ1 questions


def read_slices(data: Path) -> list[SliceItem]:
    """One item per RQ1 slice (image + mask), in manifest order."""
    manifest = Path(data) / "manifest.jsonl"
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: not a radspatial dataset (no manifest.jsonl)")
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in read_jsonl(manifest):
        if row.get("setup") != "rq1":
            continue
        if not row.get("mask"):
            raise ValueError(
                f"{manifest}: row {row.get('id')} has no 'mask' (generate with --export-masks)"
            )
        groups[row["mask"]].append(row)
    if not groups:
        raise ValueError(f"{manifest}: no rq1 rows (generate with the rq1 setup)")
    items = []
    for mask, rows in groups.items():
        where = f"{manifest}: row {rows[0].get('id')}"
        inside(data, mask, where=where, what="mask")  # refuse paths leading out of the dataset
        inside(data, rows[0]["image"], where=where, what="image")
        src = rows[0].get("source") or {}
        items.append(
            SliceItem(
                case_id=str(src.get("case_id", "case")),
                slice_index=int(src.get("slice_index", len(items))),
                base_name=Path(mask).stem,
                image=Path(rows[0]["image"]),
                mask=Path(mask),
                rows=tuple(rows),
            )
        )
    return items


def load_pair(data: Path, item: SliceItem) -> tuple[np.ndarray, np.ndarray]:
    """(RGB uint8 image, uint16 label image), checked to share one shape."""
    image = read_pixels(Path(data) / item.image, "image", "RGB")
    mask = read_pixels(Path(data) / item.mask, "mask").astype(np.int64)
    if mask.shape != image.shape[:2]:
        raise ValueError(f"{Path(data) / item.mask}: shape {mask.shape} != image {image.shape}")
    return image, mask


def dataset_cases(data: Path) -> list[dict]:
    meta_path = Path(data) / "dataset.json"
    return json.loads(meta_path.read_text()).get("cases", []) if meta_path.is_file() else []


def label_names(data: Path, items: list[SliceItem]) -> dict[int, str]:
    """Label table(s) named in dataset.json (TotalSegmentator if none), then manifest names."""
    cases = dataset_cases(data)
    names: dict[int, str] = {}
    for case in cases or [{}]:
        if isinstance(case.get("label_names"), dict):  # the mask file's own (DICOM SEG)
            names = {**{int(k): str(v) for k, v in case["label_names"].items()}, **names}
            continue
        grouped = case.get("grouping") == "mirp" or not case
        table = load_table(_contained(data, case.get("labels")), group=grouped)
        names = {**table.names, **names}
    for item in items:
        for row in item.rows:
            for obj in (row.get("object1"), row.get("object2")):
                if obj and obj.get("label_id") is not None and obj.get("name"):
                    names[int(obj["label_id"])] = obj["name"]
    return names


def _contained(data: Path, labels: object) -> str | None:
    """A case's label table: a built-in name, or a file inside the dataset (generate's copy)."""
    if labels is None or labels in BUILTIN_TABLES:
        return labels  # type: ignore[return-value]
    return str(inside(Path(data), labels, where=f"{Path(data)}/dataset.json", what="labels"))


_CACHE: dict[tuple[str, str, int, int], UNetModel] = {}
_CACHE_LOCK = threading.Lock()


def load_model(model_dir: str | Path, device: str = "cpu") -> UNetModel:
    """One loaded model per (folder, device, weights file version); retraining reloads."""
    path = Path(model_dir).resolve()
    stat = (path / WEIGHTS).stat()
    key = (str(path), device, stat.st_mtime_ns, stat.st_size)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = UNetModel(path, device)
        return _CACHE[key]


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def resolve_label(ref: Ref, model: UNetModel) -> tuple[int | None, str]:
    """(label id, how): marker text first (exact), then the name; dots name no structure."""
    by_text = marker_label(ref.marker, ref.text)
    if by_text and by_text[0] is not None:
        return by_text
    if ref.name:
        return model.id_of_name(ref.name), "name"
    if ref.marker:
        return None, "marker-names-no-structure"
    return None, "no-reference"


def found_for_class(
    pred: Prediction, cls: int, label_id: int, via: str, prob_of: Callable = np.mean
) -> Found | None:
    """Centroid of the largest 8-connected component of class ``cls``; None if absent or specks.
    The score's probability term is ``prob_of`` the component's class probabilities."""
    from scipy import ndimage

    comp, n = ndimage.label(pred.labels == cls, structure=_EIGHT)
    if n == 0:
        return None
    sizes = np.bincount(comp.ravel())[1:]
    if sizes.max() < MIN_AREA_PX:
        return None
    keep = comp == int(np.argmax(sizes)) + 1
    ys, xs = np.nonzero(keep)
    probs = pred.probs[cls][keep]
    mean_prob, prob = float(probs.mean()), float(prob_of(probs))
    tiny = max(TINY_AREA_FRACTION * pred.labels.size, TINY_MIN_PX)
    score = prob * min(1.0, xs.size / tiny)
    return Found(
        xy=(float(xs.mean()), float(ys.mean())),
        score=float(np.clip(score, 0.0, 1.0)),
        method="unet",
        details={
            "label_id": int(label_id),
            "class": int(cls),
            "via": via,
            "area_px": int(xs.size),
            "n_components": int(n),
            "mean_prob": round(mean_prob, 4),
            "score_prob": round(prob, 4),
        },
    )


def locate_refs(model: UNetModel, pred: Prediction, refs: Sequence[Ref]) -> list[Found | None]:
    out: list[Found | None] = []
    for ref in refs:
        label_id, via = resolve_label(ref, model)
        cls = None if label_id is None else model.class_of(label_id)
        out.append(None if cls is None else found_for_class(pred, cls, label_id, via))
    return out
