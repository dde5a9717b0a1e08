"""A model folder's ``config.json`` read as untrusted input: every field the loader uses is
checked for type and bounds before a network is built or a tensor allocated.

A hostile or damaged config (``size`` 1e6, 65,536 channels, ``classes`` an int, ``out_channels``
that disagrees with the classes) would otherwise end in a traceback or a 40-155 GB allocation;
here it is a ``ValueError`` naming the file and the field (the CLI prints it as one line, exit
2). The bounds are far above any model we train (128 px, channels 16-128, 1-120 classes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
MAX_SIZE = 1024  # network input, px
MAX_CHANNELS = 512
MAX_LEVELS = 8
MAX_CLASSES = 1024
MAX_RES_UNITS = 8
MAX_ACTIVATION_BYTES = 2 << 30  # first level's float32 activations at the input size
UNET = "monai.networks.nets.UNet"


def read_config(model_dir: Path) -> dict[str, Any]:
    """The checked ``config.json`` of a model folder (FileNotFoundError: not a model folder)."""
    path = Path(model_dir) / CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no unet model here (train one with train_unet)")
    if not (Path(model_dir) / WEIGHTS).is_file():
        raise FileNotFoundError(f"{Path(model_dir) / WEIGHTS}: weights file missing")
    from radspatial.core.datafiles import read_json

    config = read_json(path, want=dict)
    check_config(path, config)
    return config


def _int(path: Path, value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{path}: {field} must be an integer in {low}..{high}, got {value!r:.60}")
    return value


def check_config(path: Path, config: dict[str, Any]) -> None:
    """ValueError naming ``path`` and the field unless every field the loader reads is sane."""
    size = _int(path, config.get("size"), "size", 16, MAX_SIZE)
    classes = config.get("classes")
    if not isinstance(classes, list) or not 2 <= len(classes) <= MAX_CLASSES:
        raise ValueError(f"{path}: classes must be a list of 2..{MAX_CLASSES} {{label_id, name}}")
    seen: set[int] = set()
    for k, c in enumerate(classes):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise ValueError(f"{path}: classes[{k}] must be an object with label_id and name")
        label = _int(path, c.get("label_id"), f"classes[{k}].label_id", 0, 65535)
        if label in seen:
            raise ValueError(f"{path}: classes[{k}].label_id {label} is given twice")
        seen.add(label)
    arch = config.get("architecture")
    if not isinstance(arch, dict) or arch.get("name") != UNET:
        raise ValueError(f"{path}: architecture must be an object naming {UNET}")
    _check_arch(path, arch, len(classes), size)
    modalities = config.get("modalities")
    if modalities is not None and (
        not isinstance(modalities, list) or not all(isinstance(m, str) for m in modalities)
    ):
        raise ValueError(f"{path}: modalities must be a list of names like 'CT'")
    data = config.get("data")
    real = data.get("real") if isinstance(data, dict) else None
    plaus = real.get("plausibility") if isinstance(real, dict) else None
    if plaus is not None and not (
        isinstance(plaus, dict) and all(k.strip().isdigit() for k in plaus)
    ):
        raise ValueError(f"{path}: data.real.plausibility must map label ids to ranges")


def _check_arch(path: Path, arch: dict[str, Any], n_classes: int, size: int) -> None:
    _int(path, arch.get("spatial_dims"), "architecture.spatial_dims", 2, 2)
    _int(path, arch.get("in_channels"), "architecture.in_channels", 1, 1)
    out = _int(path, arch.get("out_channels"), "architecture.out_channels", 2, MAX_CLASSES)
    if out != n_classes:
        raise ValueError(
            f"{path}: architecture.out_channels {out} != {n_classes} classes listed in classes"
        )
    channels, strides = arch.get("channels"), arch.get("strides")
    if not isinstance(channels, list) or not 2 <= len(channels) <= MAX_LEVELS:
        raise ValueError(f"{path}: architecture.channels must be a list of 2..{MAX_LEVELS}")
    for k, c in enumerate(channels):
        _int(path, c, f"architecture.channels[{k}]", 1, MAX_CHANNELS)
    if not isinstance(strides, list) or len(strides) != len(channels) - 1:
        raise ValueError(f"{path}: architecture.strides must list {len(channels) - 1} strides")
    for k, s in enumerate(strides):
        _int(path, s, f"architecture.strides[{k}]", 1, 2)
    _int(path, arch.get("num_res_units"), "architecture.num_res_units", 0, MAX_RES_UNITS)
    if size % 2 ** (len(channels) - 1):
        raise ValueError(f"{path}: size {size} is not divisible by the U-Net's strides")
    if size * size * max(channels) * 4 > MAX_ACTIVATION_BYTES:
        raise ValueError(f"{path}: size {size} x channels {max(channels)} is too large to run")


MAX_PIXELS = 4096 * 4096  # a training slice or mask (as agent.core's limit on images)


def read_pixels(path: Path, what: str, mode: str | None = None):
    """A dataset image or mask as an array, its size checked before it is decoded; ValueError
    naming the file (a 30,000 px PNG, a truncated file, not an image)."""
    import numpy as np
    from PIL import Image

    try:
        with Image.open(path) as img:
            if img.width * img.height > MAX_PIXELS:
                raise ValueError(
                    f"{path}: {what} of {img.width} x {img.height} px is over the limit"
                )
            return np.asarray(img.convert(mode) if mode else img)
    except Image.DecompressionBombError:
        raise ValueError(f"{path}: {what} is over the pixel limit (a decompression bomb)") from None
    except (OSError, SyntaxError) as exc:
        raise ValueError(f"{path}: {what} is not a readable image ({exc})") from None
