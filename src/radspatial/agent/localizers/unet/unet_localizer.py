"""The ``unet`` localizer: a U-Net trained by ``radspatial train unet`` (its folder:
``config.json`` + ``model.safetensors``), loaded on first use (:mod:`radspatial.nets.unet`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from radspatial.agent.pipeline.types import Context, Found, Ref, register_localizer
from radspatial.nets.unet import (
    UNetModel,
    load_model,
    locate_refs,
    modality_refusal,
    resolve_label,
)
from radspatial.nets.unet_config import read_config


@register_localizer("unet")
class UNetLocalizer:
    """``create_localizer("unet", model_dir="runs/unet")``; the model loads on first use."""

    name = "unet"
    thread_safe = True  # inference holds the loaded model's lock (UNetModel)

    def __init__(self, model_dir: str | Path, device: str = "cpu") -> None:
        self.model_dir = Path(model_dir)
        self.device = device
        self.config = read_config(self.model_dir)  # fail early, without torch; read once

    @property
    def model(self) -> UNetModel:
        return load_model(self.model_dir, self.device)

    def refuses(self, refs: Sequence[Ref], context: Context) -> str | None:
        return modality_refusal(self.config, context)

    def locate(
        self, image: np.ndarray, refs: Sequence[Ref], context: Context
    ) -> list[Found | None]:
        model = self.model
        if not any(resolve_label(r, model)[0] is not None for r in refs):
            return [None] * len(refs)
        return locate_refs(model, model.predict(image), refs)
