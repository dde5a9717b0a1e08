"""What a vision-language model holds at each stage, per benchmark item: vision tower output,
projector output, and the language model's hidden states at the image tokens.

One forward pass per item through the ``hf:`` backend's own model and processor
(``models/hf.HFBackend``: the same loading, chat template and prompt order as ``eval``), with
the item's prompt as the run sent it. Stages, each a token grid in row-major order:

- ``vision``: the tokens the projector reads (LLaVA-style: the vision tower's selected layer,
  class token dropped; PaliGemma and Gemma 3 alike, Gemma 3's pooled 4x to fewer tokens by its
  projector; Qwen2-VL: the patch tokens before the patch merger, put back in row-major
  order from the merger's 2x2 windows; Qwen2.5-VL also from its attention windows);
- ``projector``: the projector's output, which is what the language model sees: its input
  embeddings at the image tokens (read there, so every architecture gives the same thing);
- ``lm<L>``: the language model's hidden state after layer ``L`` at the image tokens
  (``--layers``; negative counts from the last layer).

Per stage and item: the mean of the tokens (``pooled``) and the token under each object's point
(``tokens``: the grid cell its centre falls in). Other architectures are refused in one line.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# model_type -> how its image tokens come out: LLaVA-style (a square grid of tokens into the
# ``multi_modal_projector``, a square grid of image tokens out) or Qwen2-VL-style
SUPPORTED = {
    "llava": "llava",
    "paligemma": "llava",
    "gemma3": "llava",
    "qwen2_vl": "qwen2_vl",
    "qwen2_5_vl": "qwen2_vl",
}


@dataclass(frozen=True)
class StageFeatures:
    """One item at one stage: the tokens' mean and the token at each asked object's point."""

    pooled: np.ndarray  # (D,)
    at_points: tuple[np.ndarray, ...]  # (D,) per object


def architecture(model: Any, spec: str) -> str:
    """'llava' or 'qwen2_vl' for a supported model; a one-line ValueError otherwise."""
    kind = getattr(model.config, "model_type", "?")
    if kind not in SUPPORTED:
        names = ", ".join(sorted(SUPPORTED))
        raise ValueError(
            f"{spec}: probe vlm reads LLaVA-style and Qwen2-VL-style models"
            f" (model_type {names}), not {kind!r}"
        )
    return SUPPORTED[kind]


def _module(model: Any, suffixes: Sequence[str]) -> Any:
    for name, module in model.named_modules():
        if any(name == s or name.endswith("." + s) for s in suffixes):
            return module
    raise ValueError(f"{type(model).__name__}: no module named {' or '.join(suffixes)}")


def _image_token_id(model: Any) -> int:
    config = model.config
    for key in ("image_token_id", "image_token_index"):
        value = getattr(config, key, None)
        if value is not None:
            return int(value)
    raise ValueError(f"{type(model).__name__}: its config names no image token")


class StageReader:
    """Hooks on one loaded ``hf:`` backend that read every stage of one item per call."""

    def __init__(self, backend: Any, layers: Sequence[int] = ()) -> None:
        self.backend = backend
        self.model = backend.model
        self.kind = architecture(self.model, backend.spec)
        self.model_type = str(self.model.config.model_type)
        projector = ("multi_modal_projector",) if self.kind == "llava" else ("visual.merger",)
        self._projector = _module(self.model, projector)
        self._visual = None if self.kind == "llava" else _module(self.model, ("visual",))
        self.image_token = _image_token_id(self.model)
        n_layers = int(self.model.config.get_text_config().num_hidden_layers)
        self.layers = tuple(_layer(k, n_layers) for k in layers)

    @property
    def stages(self) -> tuple[str, ...]:
        return ("vision", "projector", *(f"lm{k}" for k in self.layers))

    def read(
        self, prompt: str, png: bytes, points: Sequence[tuple[float, float]]
    ) -> dict[str, StageFeatures]:
        """Every stage's features of one item (``points``: its objects, shown-frame px)."""
        import torch

        from radspatial.models.base import Request

        seen: dict[str, Any] = {}
        hook = self._projector.register_forward_pre_hook(
            lambda _m, args: seen.setdefault("vision", args[0].detach())
        )
        try:
            inputs = self.backend._encode([Request("probe", prompt, png)]).to(self.backend.device)
            dtype = getattr(torch, self.backend.dtype)
            for name, value in inputs.items():
                if torch.is_floating_point(value):
                    inputs[name] = value.to(dtype)
            with torch.inference_mode():
                out = self.model(**inputs, output_hidden_states=True, return_dict=True)
        finally:
            hook.remove()
        where = inputs["input_ids"][0] == self.image_token
        hidden = out.hidden_states
        grids = self._grids(inputs, int(where.sum()), seen["vision"])
        size = image_size(png)
        stages = {"vision": self._vision(seen["vision"], inputs, grids["vision"])}
        stages["projector"] = hidden[0][0, where]
        for k in self.layers:
            stages[f"lm{k}"] = hidden[k][0, where]
        return {
            name: _features(tokens, grids["vision" if name == "vision" else "merged"], points, size)
            for name, tokens in stages.items()
        }

    def _grids(self, inputs: Any, n_image_tokens: int, vision: Any) -> dict[str, tuple[int, int]]:
        if self.kind == "llava":
            side = _side(n_image_tokens, f"{self.backend.spec}: {n_image_tokens} image tokens")
            n = vision.reshape(-1, vision.shape[-1]).shape[0]
            what = f"{self.backend.spec}: {n} vision tokens"
            v = _side(n, what) if _square(n) else _side(n - 1, what)  # a CLS token first
            return {"vision": (v, v), "merged": (side, side)}
        _, h, w = (int(v) for v in inputs["image_grid_thw"][0])
        m = int(self._visual.spatial_merge_size)
        return {"vision": (h, w), "merged": (h // m, w // m)}

    def _vision(self, tokens: Any, inputs: Any, grid: tuple[int, int]) -> Any:
        """The projector's input as (N, D) in row-major order."""
        if self.kind == "llava":
            flat = tokens.reshape(-1, tokens.shape[-1])
            return flat[1:] if len(flat) == grid[0] * grid[1] + 1 else flat  # "full": CLS first
        h, w = grid
        m = int(self._visual.spatial_merge_size)
        units = tokens.reshape(-1, m * m, tokens.shape[-1])[: (h // m) * (w // m)]
        window = _window_order(self._visual, inputs["image_grid_thw"], m)
        if window is not None:  # Qwen2.5-VL: merged units in attention-window order
            import torch

            units = units[torch.argsort(window)]
        units = units.reshape(h // m, w // m, m, m, -1).permute(0, 2, 1, 3, 4)
        return units.reshape(h * w, -1)


def _window_order(visual: Any, grid_thw: Any, m: int) -> Any:
    """Qwen2.5-VL's window index of the merged units (None: no windows, Qwen2-VL)."""
    window_size = getattr(visual, "window_size", None)
    if window_size is None:
        return None
    import importlib

    module = importlib.import_module(type(visual).__module__)
    index, _ = module.get_vision_window_index(
        grid_thw,
        spatial_merge_size=m,
        window_size=window_size,
        patch_size=visual.patch_size,
        kwargs={},
    )
    return index


def _square(n: int) -> bool:
    return n > 0 and round(n**0.5) ** 2 == n


def _side(n: int, what: str) -> int:
    """The side of a square grid of ``n`` tokens; ValueError (``what``, no square) otherwise."""
    if not _square(n):
        raise ValueError(f"{what}, no square grid")
    return round(n**0.5)


def _layer(k: int, n_layers: int) -> int:
    """A hidden-state index 1..n_layers (after that layer); negative counts from the end."""
    resolved = k if k > 0 else n_layers + 1 + k
    if not 1 <= resolved <= n_layers:
        raise ValueError(f"--layers {k}: the language model has layers 1..{n_layers} (or -1..)")
    return resolved


def _features(
    tokens: Any,
    grid: tuple[int, int],
    points: Sequence[tuple[float, float]],
    size: tuple[int, int],
) -> StageFeatures:
    """Mean token and the token under each point (grid cell of the shown-frame px point)."""
    flat = tokens.float().cpu().numpy().reshape(-1, tokens.shape[-1])
    gh, gw = grid
    if flat.shape[0] != gh * gw:
        raise ValueError(f"{flat.shape[0]} tokens do not fill a {gh}x{gw} grid")
    cells = []
    for x, y in points:
        row = min(gh - 1, max(0, int(y / size[1] * gh)))
        col = min(gw - 1, max(0, int(x / size[0] * gw)))
        cells.append(flat[row * gw + col])
    return StageFeatures(flat.mean(axis=0), tuple(cells))


def image_size(png: bytes) -> tuple[int, int]:
    """The shown image's (width, height) in px."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return int(im.width), int(im.height)
