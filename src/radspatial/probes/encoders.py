"""Vision encoders for the SPAR probes: one registry, one factory, pooled + token outputs.

Every encoder takes RGB images scaled to [0, 1], shape (B, 3, S, S) with ``S = image_size``,
normalises them itself and returns :class:`Features`: a pooled vector (B, D) and a token
sequence (B, N, D) with ``N = grid[0] * grid[1]`` in row-major order.

- ResNets (MONAI): tokens = the last feature map flattened, plus a fixed 2D sin-cos position
  code (the map itself has no notion of where it is); pooled = its spatial mean.
- ViTs (MONAI): tokens = the patch tokens after the final norm; pooled = their mean (MONAI's
  ViT has a class token only together with its classifier).
- ``hf:<local path>``: a Hugging Face vision model (DINOv2 / RAD-DINO-style, CLIP /
  BiomedCLIP-style vision tower) through ``transformers.AutoModel``; tokens = the patch tokens
  (class and register tokens dropped), pooled = ``pooler_output`` (CLS).

Example::

    enc = create_encoder("resnet-small")
    feats = enc(torch.rand(2, 3, enc.image_size, enc.image_size))
    feats.pooled.shape, feats.tokens.shape  # (2, 256), (2, 16, 256)

Checkpoints are ``encoder.json`` (name, kwargs, HF config) + ``encoder.safetensors``; loading
never unpickles (safetensors, or ``torch.load(weights_only=True)`` for ``.pt`` state dicts).
"""

from __future__ import annotations

import abc
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from radspatial.core.io import atomic_write_bytes, atomic_write_json
from radspatial.core.registry import Registry

FORMAT = "radspatial-encoder"
SCRATCH_MEAN = (0.5, 0.5, 0.5)
SCRATCH_STD = (0.25, 0.25, 0.25)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

ENCODERS: Registry[Callable[..., Encoder]] = Registry("encoder")


class Features(NamedTuple):
    pooled: torch.Tensor  # (B, D)
    tokens: torch.Tensor  # (B, N, D), row-major over `grid`


class Encoder(nn.Module, abc.ABC):
    """Base class: input normalisation, the spec that rebuilds it, and the output geometry."""

    def __init__(
        self,
        *,
        name: str,
        kwargs: dict[str, Any],
        dim: int,
        grid: tuple[int, int],
        image_size: int,
        mean: tuple[float, ...] = SCRATCH_MEAN,
        std: tuple[float, ...] = SCRATCH_STD,
    ) -> None:
        super().__init__()
        self.name, self.kwargs = name, dict(kwargs)
        self.dim, self.grid, self.image_size = (
            int(dim),
            (int(grid[0]), int(grid[1])),
            int(image_size),
        )
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def forward(self, images: torch.Tensor) -> Features:
        return self.features((images - self.mean) / self.std)

    @abc.abstractmethod
    def features(self, x: torch.Tensor) -> Features:
        """Pooled vector and token sequence of normalised images (each encoder implements it)."""

    def spec(self) -> dict[str, Any]:
        """JSON that :func:`build_from_spec` turns back into this architecture."""
        return {"name": self.name, "kwargs": self.kwargs}


def register_encoder(name: str) -> Callable[[Callable[..., Encoder]], Callable[..., Encoder]]:
    return ENCODERS.register(name)


def list_encoders() -> list[str]:
    """Registered names; ``hf:<path>`` is accepted on top of these."""
    return ENCODERS.names()


def create_encoder(name: str, **kwargs: Any) -> Encoder:
    """A randomly initialised encoder by name (seed torch first), or ``hf:<path>`` weights."""
    if name.startswith("hf:"):
        return _hf_encoder(name[3:], **kwargs)
    if name not in ENCODERS:
        raise ValueError(
            f"unknown encoder {name!r}; known: {', '.join(list_encoders())}, hf:<path>"
        )
    return ENCODERS.get(name)(**kwargs)


def sincos_2d(h: int, w: int, dim: int) -> torch.Tensor:
    """Fixed 2D sin-cos position code (h * w, dim), row-major; zero-padded when 4 does not
    divide dim."""
    q = dim // 4
    freq = 1.0 / (10000 ** (torch.arange(q, dtype=torch.float32) / max(q, 1)))
    ys, xs = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij"
    )
    parts = []
    for coord in (xs.reshape(-1), ys.reshape(-1)):
        ang = coord[:, None] * freq[None]
        parts += [ang.sin(), ang.cos()]
    code = torch.cat(parts, dim=1)
    return nn.functional.pad(code, (0, dim - code.shape[1]))


# --- ResNet (MONAI) ----------------------------------------------------------------------------


class ResNetEncoder(Encoder):
    def __init__(self, net: nn.Module, **base: Any) -> None:
        super().__init__(**base)
        self.net = net
        code = sincos_2d(*self.grid, self.dim)
        self.register_buffer("pos", code[None], persistent=False)

    def features(self, x: torch.Tensor) -> Features:
        n = self.net
        x = n.act(n.bn1(n.conv1(x)))
        if not n.no_max_pool:
            x = n.maxpool(x)
        x = n.layer4(n.layer3(n.layer2(n.layer1(x))))
        tokens = x.flatten(2).transpose(1, 2)
        pos = self.pos if tokens.shape[1] == self.pos.shape[1] else None
        if pos is None:  # another input size than image_size: recompute the code
            pos = sincos_2d(x.shape[2], x.shape[3], self.dim)[None].to(x)
        return Features(x.mean(dim=(2, 3)), tokens + pos)


def _resnet_grid(size: int) -> tuple[int, int]:
    g = size
    for _ in range(5):  # stride-2 conv1, max pool, layers 2-4: each ceil(g / 2) with padding
        g = math.ceil(g / 2)
    return g, g


@register_encoder("resnet50")
def resnet50(*, image_size: int = 224) -> Encoder:
    """ResNet-50 (MONAI, 2D, bottleneck [3, 4, 6, 3]), the standard stride-2 stem: D = 2048."""
    from monai.networks.nets import ResNet

    net = ResNet(
        "bottleneck", [3, 4, 6, 3], [64, 128, 256, 512], spatial_dims=2, n_input_channels=3,
        conv1_t_size=7, conv1_t_stride=2, feed_forward=False,
    )  # fmt: skip
    kw = {"image_size": image_size}
    return ResNetEncoder(
        net,
        name="resnet50",
        kwargs=kw,
        dim=2048,
        grid=_resnet_grid(image_size),
        image_size=image_size,
    )


@register_encoder("resnet-small")
def resnet_small(*, image_size: int = 128, width: int = 32) -> Encoder:
    """A narrow ResNet-10 (basic blocks [1, 1, 1, 1], widths w..8w) for tests and CPU runs."""
    from monai.networks.nets import ResNet

    widths = [width, 2 * width, 4 * width, 8 * width]
    net = ResNet(
        "basic", [1, 1, 1, 1], widths, spatial_dims=2, n_input_channels=3,
        conv1_t_size=7, conv1_t_stride=2, feed_forward=False,
    )  # fmt: skip
    kw = {"image_size": image_size, "width": width}
    grid = _resnet_grid(image_size)
    return ResNetEncoder(
        net, name="resnet-small", kwargs=kw, dim=widths[-1], grid=grid, image_size=image_size
    )


# --- ViT (MONAI) -------------------------------------------------------------------------------


class ViTEncoder(Encoder):
    def __init__(self, net: nn.Module, **base: Any) -> None:
        super().__init__(**base)
        self.net = net

    def features(self, x: torch.Tensor) -> Features:
        tokens, _ = self.net(x)
        return Features(tokens.mean(dim=1), tokens)


def _vit(
    name: str, *, image_size: int, patch: int, hidden: int, layers: int, heads: int, mlp: int
) -> Encoder:
    from monai.networks.nets import ViT

    if image_size % patch:
        raise ValueError(
            f"{name}: image_size {image_size} is not a multiple of the patch size {patch}"
        )
    net = ViT(
        in_channels=3, img_size=image_size, patch_size=patch, hidden_size=hidden, mlp_dim=mlp,
        num_layers=layers, num_heads=heads, spatial_dims=2, classification=False, qkv_bias=True,
    )  # fmt: skip
    kw = {"image_size": image_size}
    g = image_size // patch
    return ViTEncoder(net, name=name, kwargs=kw, dim=hidden, grid=(g, g), image_size=image_size)


@register_encoder("vit-b32")
def vit_b32(*, image_size: int = 224) -> Encoder:
    """ViT-B/32 (MONAI): 12 layers, hidden 768, 12 heads, MLP 3072, patch 32: D = 768."""
    return _vit(
        "vit-b32", image_size=image_size, patch=32, hidden=768, layers=12, heads=12, mlp=3072
    )


@register_encoder("vit-tiny")
def vit_tiny(*, image_size: int = 128) -> Encoder:
    """A 3-layer ViT (hidden 128, 4 heads, patch 16) for tests and CPU runs: D = 128."""
    return _vit("vit-tiny", image_size=image_size, patch=16, hidden=128, layers=3, heads=4, mlp=256)


# --- Hugging Face vision models from a local folder --------------------------------------------


class HFEncoder(Encoder):
    def __init__(self, model: nn.Module, *, path: str, interpolate: bool, **base: Any) -> None:
        super().__init__(name=f"hf:{path}", **base)
        self.model, self.interpolate = model, interpolate

    def features(self, x: torch.Tensor) -> Features:
        kw = {"interpolate_pos_encoding": True} if self.interpolate else {}
        out = self.model(pixel_values=x, **kw)
        hidden = out.last_hidden_state
        n = self.grid[0] * self.grid[1]
        if hidden.shape[1] < n:
            raise ValueError(f"{self.name}: {hidden.shape[1]} tokens < the {n} patches expected")
        tokens = hidden[:, hidden.shape[1] - n :]  # class / register tokens come first
        pooled = getattr(out, "pooler_output", None)
        if pooled is None or pooled.dim() != 2:
            pooled = hidden[:, 0] if hidden.shape[1] > n else tokens.mean(dim=1)
        return Features(pooled, tokens)

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "kwargs": self.kwargs, "hf_config": self.model.config.to_dict()}


def _preprocessor(path: Path) -> dict[str, Any]:
    pp = path / "preprocessor_config.json"
    return json.loads(pp.read_text()) if pp.is_file() else {}


def _hf_encoder(
    path: str,
    *,
    image_size: int | None = None,
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    pretrained: bool = True,
    hf_config: dict[str, Any] | None = None,
) -> Encoder:
    """Load ``path`` (a local folder) with AutoModel, or build it from ``hf_config`` (random
    init, for checkpoints that carry their own weights). A full CLIP model is cut to its
    vision tower."""
    from transformers import AutoConfig, AutoModel

    if hf_config is not None:
        cfg = dict(hf_config)
        model = AutoModel.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg))
    else:
        root = Path(path)
        if not (root / "config.json").is_file():
            raise ValueError(f"hf:{path}: no config.json there (a local Hugging Face model folder)")
        if pretrained:
            model = AutoModel.from_pretrained(root, local_files_only=True)
        else:
            model = AutoModel.from_config(AutoConfig.from_pretrained(root, local_files_only=True))
        vision_cfg = getattr(model.config, "vision_config", None)
        if vision_cfg is not None and hasattr(model, "vision_model"):
            tower = AutoModel.from_config(vision_cfg)
            tower.vision_model.load_state_dict(model.vision_model.state_dict())
            model = tower
        pp = _preprocessor(root)
        crop = pp.get("crop_size") or pp.get("size")
        if image_size is None and isinstance(crop, dict):
            image_size = crop.get("height") or crop.get("shortest_edge")
        elif image_size is None and isinstance(crop, int):
            image_size = crop
        mean = mean or tuple(pp.get("image_mean", IMAGENET_MEAN))
        std = std or tuple(pp.get("image_std", IMAGENET_STD))
    cfg = model.config
    native = int(cfg.image_size)
    size = int(image_size or native)
    patch = int(cfg.patch_size)
    if size % patch:
        raise ValueError(
            f"hf:{path}: image_size {size} is not a multiple of the patch size {patch}"
        )
    dim = int(cfg.hidden_size)
    mean, std = tuple(mean or IMAGENET_MEAN), tuple(std or IMAGENET_STD)
    kw = {"image_size": size, "mean": list(mean), "std": list(std)}
    g = size // patch
    return HFEncoder(
        model, path=path, interpolate=size != native, kwargs=kw, dim=dim, grid=(g, g),
        image_size=size, mean=mean, std=std,
    )  # fmt: skip


# --- checkpoints -------------------------------------------------------------------------------


def build_from_spec(spec: dict[str, Any]) -> Encoder:
    """The architecture of a saved encoder, randomly initialised (weights come separately)."""
    name, kwargs = spec["name"], dict(spec.get("kwargs", {}))
    if name.startswith("hf:"):
        return _hf_encoder(name[3:], hf_config=spec.get("hf_config"), **kwargs)
    return create_encoder(name, **kwargs)


def save_encoder(encoder: Encoder, folder: Path) -> Path:
    """Write ``encoder.json`` + ``encoder.safetensors`` into ``folder``; returns the folder."""
    from safetensors.torch import save

    folder = Path(folder)
    state = {k: v.detach().cpu().contiguous() for k, v in encoder.state_dict().items()}
    atomic_write_bytes(folder / "encoder.safetensors", save(state))
    meta = {
        "format": FORMAT,
        "version": 1,
        **encoder.spec(),
        "dim": encoder.dim,
        "grid": list(encoder.grid),
    }
    atomic_write_json(folder / "encoder.json", meta)
    return folder


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """safetensors, or a plain state dict loaded with ``weights_only=True`` (no pickled code)."""
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: not a state dict of tensors")
    return state


def load_encoder(path: str | Path, device: str = "cpu") -> Encoder:
    """An encoder from a checkpoint folder (or its ``.safetensors`` / ``.pt`` file, with the
    ``encoder.json`` beside it), or ``hf:<path>``."""
    if str(path).startswith("hf:"):
        return create_encoder(str(path)).to(device)
    path = Path(path)
    if path.is_dir():
        meta_path, weights = path / "encoder.json", path / "encoder.safetensors"
    else:
        meta_path, weights = path.parent / "encoder.json", path
    if not meta_path.is_file() or not weights.is_file():
        raise ValueError(f"{path}: not an encoder checkpoint (need encoder.json + weights)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: format {meta.get('format')!r} is not {FORMAT!r}")
    encoder = build_from_spec(meta)
    encoder.load_state_dict(read_state_dict(weights))
    return encoder.to(device)
